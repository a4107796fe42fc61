//go:build memcached

package resources

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
)

// TestMemcachedExtstore runs memcached with the arguments the builders
// render for spec.extstore, the volume a directory of this host, and
// stores four times as many values as its memory holds. memcached must
// accept the arguments, write values to the file, and serve more of them
// than its memory could hold, some read back from the file, each intact;
// its own stats count the items written to and read from extstore.
func TestMemcachedExtstore(t *testing.T) {
	const memoryMiB = 16
	spec := func(s *cachev1beta1.MemcachedSpec) {
		s.Memory = ptr.To(resource.MustParse(strconv.Itoa(memoryMiB) + "Mi"))
		s.Extstore = &cachev1beta1.Extstore{Size: resource.MustParse("1Gi")}
	}
	volume := t.TempDir()
	// memcached drops to another user when the test runs as root.
	if err := os.Chmod(volume, 0o777); err != nil {
		t.Fatal(err)
	}
	p := onFreePorts(t, func(ports hostPorts) *sidecarPod {
		return prepareExtstorePod(t, spec, volume, ports)
	}, func(t *testing.T, p *sidecarPod) bool { return p.startMemcached(t) })
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(p.port))
	c := dialPlain(t, addr)

	// 16 KiB values, 4 times -m in all: well above extstore's minimum
	// item size, and far more than memory keeps.
	const valueBytes = 16 << 10
	const values = 4 * (memoryMiB << 20) / valueBytes
	value := func(i int) string {
		return strings.Repeat(fmt.Sprintf("%08d", i), valueBytes/8)
	}
	// Once memory is full, every 64 values wait for memcached's storage
	// thread to have written more to the file: a writer far ahead of it
	// would have values evicted before they could be written, on a
	// loaded machine.
	const inMemory, batch = memoryMiB << 20 / valueBytes, 64
	written := 0
	for i := range values {
		if reply := c.do(t, fmt.Sprintf("set key-%d 0 0 %d\r\n%s\r\n", i, valueBytes, value(i))); reply != "STORED" {
			t.Fatalf("set key-%d: %q", i, reply)
		}
		if i < inMemory || (i+1)%batch != 0 {
			continue
		}
		waitFor(t, "memcached writes more values to extstore", func() (bool, string) {
			n := atoi(t, c.stats(t)["extstore_objects_written"])
			grew := n > written
			if grew {
				written = n
			}
			return grew, fmt.Sprintf("extstore_objects_written %d", n)
		})
	}
	if _, err := os.Stat(filepath.Join(volume, ExtstoreFileName)); err != nil {
		t.Fatalf("memcached made no extstore file in the volume: %v", err)
	}

	// Read every key back: a hit must hold its own value.
	var hits int
	for i := range values {
		got, ok := getValue(t, c, fmt.Sprintf("key-%d", i))
		if !ok {
			continue
		}
		if got != value(i) {
			t.Fatalf("key-%d came back with another value (%d bytes)", i, len(got))
		}
		hits++
	}
	stats := c.stats(t)
	written, read := atoi(t, stats["extstore_objects_written"]), atoi(t, stats["get_extstore"])
	t.Logf("%d of %d values of %d KiB read back (%d MiB, -m %d); extstore_objects_written %d, get_extstore %d",
		hits, values, valueBytes>>10, hits*valueBytes>>20, memoryMiB, written, read)
	if hits*valueBytes <= memoryMiB<<20 {
		t.Errorf("%d values read back, %d MiB: no more than memory holds, so extstore served none", hits, hits*valueBytes>>20)
	}
	if written == 0 || read == 0 {
		t.Errorf("memcached's stats: extstore_objects_written %d, get_extstore %d; want both above 0", written, read)
	}
}

// prepareExtstorePod renders spec, which must have extstore and neither
// TLS nor auth, with spec.port on ports.port, and prepares memcached with
// the builder's arguments, its volume the directory volume.
func prepareExtstorePod(t *testing.T, spec func(*cachev1beta1.MemcachedSpec), volume string, ports hostPorts) *sidecarPod {
	t.Helper()
	r := renderOnHost(t, spec, ports)
	mcd := container(t, r.pod, MemcachedContainerName)
	p := &sidecarPod{portFile: newPortFile(t), port: ports.port, listens: r.listens}
	var args []string
	for _, a := range mcd.Args {
		args = append(args, strings.ReplaceAll(a, ExtstoreMountPath, volume))
	}
	if os.Geteuid() == 0 {
		// memcached refuses to run as root; in the Pod it runs as 11211.
		args = append(args, "-u", "nobody")
	}
	p.memcachedCmd = exec.Command(r.bin, args...)
	return p
}

// getValue gets key on c and returns its value and whether it was a hit.
func getValue(t *testing.T, c *memcachedConn, key string) (string, bool) {
	t.Helper()
	header := c.do(t, "get "+key+"\r\n")
	if header == "END" {
		return "", false
	}
	f := strings.Fields(header)
	if len(f) != 4 || f[0] != "VALUE" || f[1] != key {
		t.Fatalf("get %s: unexpected reply %q", key, header)
	}
	data := make([]byte, atoi(t, f[3])+2)
	if _, err := io.ReadFull(c.r, data); err != nil {
		t.Fatalf("get %s: reading the value: %v", key, err)
	}
	if end := c.do(t, ""); end != "END" {
		t.Fatalf("get %s: %q after the value, want END", key, end)
	}
	return string(bytes.TrimSuffix(data, []byte("\r\n"))), true
}
