package resources

// Memory sizing for the memcached container.
//
// memcached allocates at most -m MiB for items, but the process needs more
// than that: the hash table and slab bookkeeping grow with the number of
// items, and every open connection holds read and write buffers. A container
// limit equal to -m gets the cache OOM-killed exactly when it fills up, so
// the limit adds those overheads on top:
//
//	limitMiB = memoryMB                      item memory (-m)
//	         + ceil(memoryMB / 8)            hash table and slab overhead, 12.5%
//	         + ceil(maxConnections * 16 / 1024)   16 KiB of buffers per connection
//	         + 32                            binary, threads and stacks
//
// Worked example with the defaults (memoryMB 64, maxConnections 1024):
//
//	64 + 8 + 16 + 32 = 120 MiB
//
// and with memoryMB 1024, maxConnections 4096:
//
//	1024 + 128 + 64 + 32 = 1248 MiB
const (
	slabOverheadDivisor    = 8
	connectionBufferKiB    = 16
	baseProcessOverheadMiB = 32
)

// MemoryLimitMiB returns the container memory limit, in MiB, for a memcached
// that stores memoryMB of items and accepts maxConnections connections.
func MemoryLimitMiB(memoryMB, maxConnections int32) int64 {
	m := int64(memoryMB)
	c := int64(maxConnections)
	return m + ceilDiv(m, slabOverheadDivisor) + ceilDiv(c*connectionBufferKiB, 1024) + baseProcessOverheadMiB
}

func ceilDiv(a, b int64) int64 {
	return (a + b - 1) / b
}
