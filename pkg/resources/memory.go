package resources

// Memory sizing for the memcached container.
//
// memcached allocates at most -m MiB for items, but the process needs more
// than that: the hash table and slab bookkeeping grow with the number of
// items, and every open connection holds read and write buffers. A container
// limit equal to -m gets the cache OOM-killed exactly when it fills up, so
// the limit adds those overheads on top:
//
//	limitMiB = memoryMiB                      item memory (-m)
//	         + ceil(memoryMiB / 8)            hash table and slab overhead, 12.5%
//	         + ceil(maxConnections * 16 / 1024)   16 KiB of buffers per connection
//	         + 32                            binary, threads and stacks
//
// Worked example with the defaults (memoryMiB 64, maxConnections 1024):
//
//	64 + 8 + 16 + 32 = 120 MiB
//
// and with memoryMiB 1024, maxConnections 4096:
//
//	1024 + 128 + 64 + 32 = 1248 MiB
const (
	slabOverheadDivisor    = 8
	connectionBufferKiB    = 16
	baseProcessOverheadMiB = 32
)

// MemoryLimitMiB returns the container memory limit, in MiB, for a memcached
// that stores memoryMiB of items and accepts maxConnections connections.
func MemoryLimitMiB(memoryMiB, maxConnections int32) int64 {
	m := int64(memoryMiB)
	c := int64(maxConnections)
	return m + ceilDiv(m, slabOverheadDivisor) + ceilDiv(c*connectionBufferKiB, 1024) + baseProcessOverheadMiB
}

func ceilDiv(a, b int64) int64 {
	return (a + b - 1) / b
}
