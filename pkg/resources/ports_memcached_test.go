//go:build memcached

package resources

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
)

// podIP stands for the Pod's address, status.podIPs, in memcached's
// listeners: a loopback address other than 127.0.0.1, so that a test tells
// the Pod's listener from the loopback ones.
const podIP = "127.0.0.2"

// maxPortAttempts bounds how often onFreePorts starts a Pod again on other
// ports. Each retry means that another process bound a port in the moment
// between its pick and memcached's bind; five in a row mean something
// else is wrong.
const maxPortAttempts = 5

// hostPorts are the ports of this host one Pod of a test listens on. A
// test never uses the ports the Pod has (11211, LoopbackPort): a second
// run beside it, or a memcached of the developer's, may hold them.
type hostPorts struct {
	// port is spec.port, which the builders render into every argument
	// that names it.
	port int
	// loopback takes the place of LoopbackPort, memcached's plain listener
	// at 127.0.0.1 with TLS, which the Pod fixes; hostLoopbackArgs moves
	// it here.
	loopback int
	// plaintext is spec.tls.plaintextPort, when the spec sets one
	// (withHostPorts).
	plaintext int
}

// withHostPorts sets the ports of spec that a test's Pod takes on this
// host: spec.port, and spec.tls.plaintextPort if the spec sets one. It
// returns the ports memcached then listens on, the loopback one aside.
func withHostPorts(s *cachev1beta1.MemcachedSpec, ports hostPorts) []int {
	s.Port = int32(ports.port)
	if s.TLS != nil && s.TLS.PlaintextPort != 0 {
		s.TLS.PlaintextPort = int32(ports.plaintext)
		return []int{ports.port, ports.plaintext}
	}
	return []int{ports.port}
}

// hostRender is what the builders render for a spec whose ports are
// moved to this host's (withHostPorts), with the memcached a test runs.
type hostRender struct {
	// bin is memcached, from MEMCACHED_BIN.
	bin string
	mc  Defaulted
	pod *corev1ac.PodSpecApplyConfiguration
	// listens are the ports memcached is to listen on, the loopback one
	// aside.
	listens []int
}

// renderOnHost renders spec with its ports on ports, and fails the test
// without MEMCACHED_BIN.
func renderOnHost(t *testing.T, spec func(*cachev1beta1.MemcachedSpec), ports hostPorts) hostRender {
	t.Helper()
	bin := os.Getenv("MEMCACHED_BIN")
	if bin == "" {
		t.Fatal("MEMCACHED_BIN is not set: run make test-memcached, which installs memcached and sets it")
	}
	var listens []int
	mc := Default(memcached(func(s *cachev1beta1.MemcachedSpec) {
		spec(s)
		listens = withHostPorts(s, ports)
	}))
	d, err := Deployment(mc)
	if err != nil {
		t.Fatal(err)
	}
	return hostRender{bin: bin, mc: mc, pod: d.Spec.Template.Spec, listens: listens}
}

// freePorts returns n distinct ports on which nothing listened at
// 127.0.0.1 a moment ago. Its listeners are all open until the last port
// is picked, so that the kernel cannot hand out one port twice; once they
// are closed another process may take a port, which onFreePorts handles.
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	ports := make([]int, n)
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		ports[i] = l.Addr().(*net.TCPAddr).Port
	}
	return ports
}

// testPod is a Pod a test runs on this host: memcached and its reloader.
type testPod interface {
	sidecar() *sidecarPod
}

func (p *sidecarPod) sidecar() *sidecarPod { return p }

// onFreePorts prepares a Pod on free ports of this host and starts it with
// run, which reports whether memcached listens on them (startMemcached).
// Between the pick of a port and memcached's bind another process, a test
// run beside this one say, may take it: then onFreePorts stops what run
// started and does both again on other ports. It returns the Pod whose
// memcached listens.
func onFreePorts[P testPod](t *testing.T, prepare func(hostPorts) P, run func(*testing.T, *sidecarPod) bool) P {
	t.Helper()
	for attempt := 1; ; attempt++ {
		ports := freePorts(t, 3)
		p := prepare(hostPorts{port: ports[0], loopback: ports[1], plaintext: ports[2]})
		if run(t, p.sidecar()) {
			return p
		}
		p.sidecar().stop()
		if attempt == maxPortAttempts {
			t.Fatalf("memcached found one of its ports taken %d times in a row", attempt)
		}
		t.Logf("memcached found one of ports %v taken; starting the Pod again on other ports", ports)
	}
}

// memcachedFirst starts memcached, then, once it listens, the reloader.
func memcachedFirst(t *testing.T, p *sidecarPod) bool {
	t.Helper()
	if !p.startMemcached(t) {
		return false
	}
	p.startReloader(t)
	return true
}

// reloaderFirst starts the reloader and, once it sleeps, memcached: the
// order of every Pod's start, where the reloader has tried memcached's
// port, on which nothing listens yet, before memcached starts.
func reloaderFirst(t *testing.T, p *sidecarPod) bool {
	t.Helper()
	p.startReloader(t)
	waitSleeping(t, p.reloaderCmd.Process.Pid)
	return p.startMemcached(t)
}

// startMemcached starts memcached and waits until it listens on each of
// its ports: memcached binds every listener before it renames its port
// file (MEMCACHED_PORT_FILENAME) into place. It returns false if another
// process holds one of the ports, and fails the test if memcached exited
// for any other reason or listens on a port that is not the Pod's.
//
// memcached tells a port held by another process in two ways. When its
// arguments list addresses (-l, as with TLS), it exits, and says why only
// in words on its standard error. With -p alone it skips each address of
// the wildcard whose port is taken, and listens on the others: then its
// port file lacks the IPv4 listener the tests dial.
func (p *sidecarPod) startMemcached(t *testing.T) bool {
	t.Helper()
	if p.memcachedCmd.Env == nil {
		p.memcachedCmd.Env = os.Environ()
	}
	p.memcachedCmd.Env = append(p.memcachedCmd.Env, "MEMCACHED_PORT_FILENAME="+p.portFile)
	stderr := &syncBuffer{}
	p.memcachedCmd.Stderr = stderr
	p.memcached, p.memcachedDone = start(t, "memcached", p.memcachedCmd)

	exited := false
	waitFor(t, "memcached listens or exits", func() (bool, string) {
		select {
		case <-p.memcachedDone:
			exited = true
			return true, ""
		default:
		}
		_, err := os.Stat(p.portFile)
		return err == nil, fmt.Sprint(err)
	})
	if exited {
		if !strings.Contains(stderr.String(), "Address already in use") {
			t.Fatalf("memcached exited: %s", stderr)
		}
		return false
	}

	got, want := listenedPorts(t, p.portFile), sortedUnique(p.listens)
	for _, port := range got {
		if !slices.Contains(want, port) {
			t.Fatalf("memcached listens on port %d, which is not one of the Pod's %v", port, want)
		}
	}
	if len(got) < len(want) {
		t.Logf("memcached listens over IPv4 on ports %v of %v: another process holds the others", got, want)
		return false
	}
	return true
}

// listenedPorts reads memcached's port file, a line such as
// "TCP INET: 11211" or "TCP INET6: 11211" for each listener, and returns
// the ports of its IPv4 listeners, sorted, each once.
func listenedPorts(t *testing.T, file string) []int {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var ports []int
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		family, port, ok := strings.Cut(line, ": ")
		if !ok {
			t.Fatalf("memcached's port file %s: unexpected line %q", file, line)
		}
		if family == "TCP INET" {
			ports = append(ports, atoi(t, port))
		}
	}
	return sortedUnique(ports)
}

func sortedUnique(ports []int) []int {
	ports = slices.Clone(ports)
	slices.Sort(ports)
	return slices.Compact(ports)
}

// newPortFile returns where memcached is to write its port file, in a
// directory of its own that memcached can write to when it drops to
// another user (the test runs as root).
func newPortFile(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "ports")
}

// hostLoopbackArgs returns memcached's and the reloader's arguments as the
// builders render them for spec, but for one word each: the port of
// memcached's plain loopback listener, which the Pod fixes (LoopbackPort),
// becomes port, in the -l listener list and in the reloader's port
// argument. It fails the test unless it finds the fixed port in exactly
// one word of each, so that the rest reaches memcached and the reloader as
// rendered, and a builder that moved the port elsewhere cannot leave a
// test listening on the fixed port.
func hostLoopbackArgs(t *testing.T, spec cachev1beta1.MemcachedSpec, memcachedArgs, reloaderArgs []string, port int) ([]string, []string) {
	t.Helper()
	fixed, moved := strconv.Itoa(int(LoopbackPort(spec))), strconv.Itoa(port)
	listener := "notls:127.0.0.1:" + fixed + ","
	mcd, found := slices.Clone(memcachedArgs), 0
	for i := 1; i < len(mcd); i++ {
		if rest, ok := strings.CutPrefix(mcd[i], listener); ok && mcd[i-1] == "-l" {
			mcd[i] = "notls:127.0.0.1:" + moved + "," + rest
			found++
		}
	}
	if found != 1 {
		t.Fatalf("memcached's arguments %q have %d listener lists that start with %s, want 1", memcachedArgs, found, listener)
	}
	reloader, found := slices.Clone(reloaderArgs), 0
	for i, a := range reloader {
		if a == fixed {
			reloader[i] = moved
			found++
		}
	}
	if found != 1 {
		t.Fatalf("the reloader's arguments %q name the loopback port %s %d times, want once", reloaderArgs, fixed, found)
	}
	return mcd, reloader
}
