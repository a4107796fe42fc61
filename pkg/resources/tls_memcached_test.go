//go:build memcached

package resources

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
)

// TestMemcachedTLSRotation runs a real memcached (MEMCACHED_BIN, installed
// by make test-memcached) with the arguments the builder gives it, and the
// reloader sidecar's script with bash, on a directory laid out the way the
// kubelet lays out a Secret volume. It renews the certificate the way the
// kubelet does and checks that memcached serves the new one without a
// restart and with its items kept.
func TestMemcachedTLSRotation(t *testing.T) {
	spec := func(s *cachev1beta1.MemcachedSpec) { s.TLS = &cachev1beta1.TLS{SecretName: "cache-tls"} }
	d, err := Deployment(Default(memcached(spec)))
	if err != nil {
		t.Fatal(err)
	}
	if reloader := container(t, d.Spec.Template.Spec, TLSReloaderContainerName); reloader.Args[1] != strconv.Itoa(int(LoopbackPort(Default(memcached(spec)).Spec))) {
		t.Fatalf("the reloader reaches memcached on %s, want the loopback port", reloader.Args[1])
	}

	dir := t.TempDir()
	volume := newSecretVolume(t, dir)
	volume.write(t, "first")
	// A dual-stack Pod's status.podIPs, as the kubelet puts it in the
	// variable: comma separated, IPv6 without brackets.
	const podIPv6 = "::1"
	p := startTLSPod(t, spec, dir, podIP+","+podIPv6)

	port := strconv.Itoa(p.port)
	tlsAddr, podAddr := net.JoinHostPort("127.0.0.1", port), net.JoinHostPort(podIP, port)
	waitFor(t, "memcached serves the first certificate on the Pod's address", func() (bool, string) {
		cn, err := servedCommonName(podAddr)
		return cn == "first", fmt.Sprintf("CN %q, error %v", cn, err)
	})
	if reply := plainCommand(t, p.loopback, "set k 0 0 5\r\nhello\r\n"); reply != "STORED" {
		t.Fatalf("set on the loopback port: %q", reply)
	}

	volume.write(t, "second")
	waitFor(t, "memcached serves the renewed certificate", func() (bool, string) {
		cn, err := servedCommonName(tlsAddr)
		return cn == "second", fmt.Sprintf("CN %q, error %v", cn, err)
	})

	// A Secret whose certificate and key do not match: memcached refuses
	// the key, and (1.6.18 at least) keeps the new certificate with the old
	// key, so handshakes fail until the Secret is fixed. The reloader keeps
	// trying, and the fixed Secret is loaded in place like any renewal.
	volume.writeMismatched(t, "third")
	waitFor(t, "the reloader reports memcached's refusal", func() (bool, string) {
		return strings.Contains(p.stderr.String(), "refresh_certs: Error"), p.stderr.String()
	})
	cn, err := servedCommonName(tlsAddr)
	t.Logf("with a mismatched pair memcached serves CN %q (handshake error: %v)", cn, err)
	volume.write(t, "fourth")
	waitFor(t, "memcached serves the certificate after a failed reload", func() (bool, string) {
		cn, err := servedCommonName(tlsAddr)
		return cn == "fourth", fmt.Sprintf("CN %q, error %v", cn, err)
	})

	if p.memcached.ProcessState != nil {
		t.Fatalf("memcached exited: %v", p.memcached.ProcessState)
	}
	if reply := tlsCommand(t, podAddr, "get k\r\n"); reply != "VALUE k 0 5" {
		t.Errorf("get over TLS after three renewals = %q, want the item stored before them", reply)
	}
	if cn, err := servedCommonName(net.JoinHostPort(podIPv6, port)); cn != "fourth" {
		t.Errorf("on the Pod's IPv6 address memcached serves CN %q (error %v), want fourth", cn, err)
	}
}

// secretVolume writes files the way the kubelet's atomic writer does: into
// a fresh timestamped directory, then one rename of the ..data symlink,
// with tls.crt, tls.key and ca.crt symlinks through it. ca.crt is written
// only once ca is set, as a projected volume with a client CA has it.
type secretVolume struct {
	dir string
	n   int
	key *ecdsa.PrivateKey
	// cert is the certificate last written, ca the client CA bundle.
	cert, ca []byte
}

func newSecretVolume(t *testing.T, dir string) *secretVolume {
	t.Helper()
	// memcached drops to another user when the test runs as root, and
	// t.TempDir makes its directories private.
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"tls.crt", "tls.key", "ca.crt"} {
		if err := os.Symlink(filepath.Join("..data", name), filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	return &secretVolume{dir: dir}
}

func (v *secretVolume) write(t *testing.T, commonName string) {
	t.Helper()
	key := newKey(t)
	v.swap(t, selfSigned(t, commonName, key), key)
}

// writeMismatched writes a certificate with the key of the previous one.
func (v *secretVolume) writeMismatched(t *testing.T, commonName string) {
	t.Helper()
	v.swap(t, selfSigned(t, commonName, newKey(t)), v.key)
}

func (v *secretVolume) swap(t *testing.T, certPEM []byte, key *ecdsa.PrivateKey) {
	t.Helper()
	v.n++
	v.key, v.cert = key, certPEM
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{
		"tls.crt": certPEM,
		"tls.key": pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}),
	}
	if v.ca != nil {
		files["ca.crt"] = v.ca
	}
	swapVolume(t, v.dir, v.n, files)
}

// swapVolume writes the n-th version of a Secret volume's files the way
// the kubelet's atomic writer does: into a fresh directory, then one
// rename of the ..data symlink. The files' own symlinks point through it.
func swapVolume(t *testing.T, dir string, n int, files map[string][]byte) {
	t.Helper()
	ts := fmt.Sprintf("..%d", n)
	if err := os.Mkdir(filepath.Join(dir, ts), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, ts, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tmp := filepath.Join(dir, "..data_tmp")
	if err := os.Symlink(ts, tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
}

func newKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func selfSigned(t *testing.T, commonName string, key *ecdsa.PrivateKey) []byte {
	t.Helper()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: commonName},
		NotBefore:    time.Now().Add(-time.Minute),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// TestMemcachedReloaderStopsOnSIGTERM runs each reloader as the first
// process of a PID namespace, as it is in its container, where the kernel
// ignores a signal the process has no handler for: without its trap,
// SIGTERM would not stop it and every Pod would wait out its grace period.
func TestMemcachedReloaderStopsOnSIGTERM(t *testing.T) {
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Fatalf("unshare (util-linux) runs the reloader as PID 1: %v", err)
	}
	tests := []struct {
		name      string
		spec      func(*cachev1beta1.MemcachedSpec)
		container string
		// args are the reloader's, with port 1 for memcached's, where
		// no memcached answers, no files to load and an interval of
		// 30 s: it sleeps.
		args func(dir string) []string
	}{
		{
			name:      "TLS",
			spec:      func(s *cachev1beta1.MemcachedSpec) { s.TLS = &cachev1beta1.TLS{SecretName: "cache-tls"} },
			container: TLSReloaderContainerName,
			args:      func(dir string) []string { return []string{dir, "1", "30", filepath.Join(dir, "refused")} },
		},
		{
			name:      "auth",
			spec:      func(s *cachev1beta1.MemcachedSpec) { s.Auth = &cachev1beta1.Auth{SecretName: "cache-auth"} },
			container: ReloaderContainerName,
			args: func(dir string) []string {
				return []string{"1", "30", filepath.Join(dir, "auth"), filepath.Join(dir, "normalized"), "", ""}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := Deployment(Default(memcached(tt.spec)))
			if err != nil {
				t.Fatal(err)
			}
			reloader := container(t, d.Spec.Template.Spec, tt.container)
			args := append([]string{"--pid", "--fork", "--kill-child"}, reloader.Command...)
			cmd, done := start(t, "reloader", exec.Command(unshare, append(args, tt.args(t.TempDir())...)...))

			var pid int
			waitFor(t, "the reloader runs in its PID namespace", func() (bool, string) {
				data, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", cmd.Process.Pid, cmd.Process.Pid))
				if err != nil {
					return false, err.Error()
				}
				pid, err = strconv.Atoi(strings.TrimSpace(string(data)))
				return err == nil, fmt.Sprintf("children %q", data)
			})
			waitSleeping(t, pid)
			if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				t.Fatal("the reloader, as PID 1, is still running 5 s after SIGTERM")
			}
		})
	}
}

// start runs cmd until the test ends, logging its output (and writing it
// to cmd.Stdout and cmd.Stderr, if set), and returns a channel closed when
// it has exited.
func start(t *testing.T, name string, cmd *exec.Cmd) (*exec.Cmd, <-chan struct{}) {
	t.Helper()
	for _, w := range []*io.Writer{&cmd.Stdout, &cmd.Stderr} {
		if *w == nil {
			*w = testWriter{t, name}
		} else {
			*w = io.MultiWriter(*w, testWriter{t, name})
		}
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
	})
	return cmd, done
}

type testWriter struct {
	t    *testing.T
	name string
}

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Logf("%s: %s", w.name, strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func waitFor(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s: %s", what, state)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// servedCommonName is the subject CN of the certificate memcached presents.
func servedCommonName(addr string) (string, error) {
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", addr, &tls.Config{InsecureSkipVerify: true})
	if err != nil {
		return "", err
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].Subject.CommonName, nil
}

func plainCommand(t *testing.T, addr, command string) string {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	return roundTrip(t, conn, command)
}

func tlsCommand(t *testing.T, addr, command string) string {
	t.Helper()
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", addr, &tls.Config{InsecureSkipVerify: true})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	return roundTrip(t, conn, command)
}

// roundTrip sends a command and returns the first line of the reply.
func roundTrip(t *testing.T, conn net.Conn, command string) string {
	t.Helper()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := conn.Write([]byte(command)); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		t.Fatalf("reading the reply to %q: %v", command, err)
	}
	return strings.TrimRight(line, "\r\n")
}

// sidecarPod is memcached and its reloader sidecar as a test runs them on
// this host: their commands, what the reloader prints, the file it keeps
// memcached's refusal of the TLS files in (TLSRefusedPath in the Pod) and
// the reloader container's readiness probe.
type sidecarPod struct {
	memcachedCmd, reloaderCmd *exec.Cmd
	// memcached is memcachedCmd once started.
	memcached                   *exec.Cmd
	memcachedDone, reloaderDone <-chan struct{}
	stdout, stderr              *syncBuffer
	refused                     string
	probe                       *corev1ac.ProbeApplyConfiguration
	// port is spec.port on this host.
	port int
	// loopback is memcached's plain loopback listener, with TLS, on this
	// host.
	loopback string
	// listens are the ports memcached is to listen on, and portFile
	// where it says it does (startMemcached).
	listens  []int
	portFile string
}

func newSidecarPod(t *testing.T, reloader *corev1ac.ContainerApplyConfiguration) sidecarPod {
	t.Helper()
	return sidecarPod{
		stdout:   &syncBuffer{},
		stderr:   &syncBuffer{},
		refused:  filepath.Join(t.TempDir(), "refused"),
		probe:    reloader.ReadinessProbe,
		portFile: newPortFile(t),
	}
}

func (p *sidecarPod) startReloader(t *testing.T) {
	t.Helper()
	p.reloaderCmd.Stdout, p.reloaderCmd.Stderr = p.stdout, p.stderr
	_, p.reloaderDone = start(t, "reloader", p.reloaderCmd)
}

// stop kills the reloader and memcached, those of them started, and waits
// until they have exited. Kill's error is dropped: it only says that the
// process had exited already.
func (p *sidecarPod) stop() {
	if p.reloaderDone != nil {
		_ = p.reloaderCmd.Process.Kill()
		<-p.reloaderDone
	}
	if p.memcachedDone != nil {
		_ = p.memcached.Process.Kill()
		<-p.memcachedDone
	}
}

// ready runs the reloader container's readiness probe as the kubelet
// would, and returns whether it passed and what it printed.
func (p *sidecarPod) ready(t *testing.T) (bool, string) {
	t.Helper()
	if p.probe == nil || p.probe.Exec == nil {
		t.Fatal("the reloader container has no exec readiness probe")
	}
	var command []string
	for _, a := range p.probe.Exec.Command {
		command = append(command, strings.ReplaceAll(a, TLSRefusedPath, p.refused))
	}
	out, err := exec.Command(command[0], command[1:]...).CombinedOutput()
	return err == nil, fmt.Sprintf("probe: %v, output %q", err, out)
}

// startTLSPod starts, with memcachedFirst, the Pod prepareTLSPod prepares,
// on free ports of this host.
func startTLSPod(t *testing.T, spec func(*cachev1beta1.MemcachedSpec), dir, podIPs string) *sidecarPod {
	t.Helper()
	return onFreePorts(t, func(ports hostPorts) *sidecarPod {
		return prepareTLSPod(t, spec, dir, podIPs, ports)
	}, memcachedFirst)
}

// prepareTLSPod renders spec, which must have TLS and no auth, with
// spec.port on ports.port, and prepares memcached with the builder's
// arguments and the reloader with its command, on the Secret volume in dir,
// with a one-second interval and the loopback listener moved to
// ports.loopback. podIPs is what the kubelet would put in PodIPsEnv.
func prepareTLSPod(t *testing.T, spec func(*cachev1beta1.MemcachedSpec), dir, podIPs string, ports hostPorts) *sidecarPod {
	t.Helper()
	r := renderOnHost(t, spec, ports)
	mc := r.mc
	mcd, reloader := container(t, r.pod, MemcachedContainerName), container(t, r.pod, TLSReloaderContainerName)
	p := newSidecarPod(t, reloader)
	p.port, p.loopback = ports.port, "127.0.0.1:"+strconv.Itoa(ports.loopback)
	p.listens = append(r.listens, ports.loopback)
	mcdArgs, reloaderArgs := hostLoopbackArgs(t, mc.Spec, mcd.Args, reloader.Args, ports.loopback)
	localize := func(a string) string {
		a = strings.ReplaceAll(a, "$("+PodIPsEnv+")", podIPs)
		a = strings.ReplaceAll(a, TLSRefusedPath, p.refused)
		return strings.ReplaceAll(a, TLSMountPath, dir)
	}
	var args []string
	for _, a := range mcdArgs {
		args = append(args, localize(a))
	}
	if os.Geteuid() == 0 {
		// memcached refuses to run as root; in the Pod it runs as 11211.
		args = append(args, "-u", "nobody")
	}
	p.memcachedCmd = exec.Command(r.bin, args...)
	args = nil
	for _, a := range reloaderArgs {
		args = append(args, localize(a))
	}
	args[2] = "1"
	p.reloaderCmd = exec.Command(reloader.Command[0], append(reloader.Command[1:], args...)...)
	return &p
}

// waitSleeping waits until the reloader of process pid sleeps between two
// rounds: it has gone through a round.
func waitSleeping(t *testing.T, pid int) {
	t.Helper()
	waitFor(t, "the reloader sleeps", func() (bool, string) {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
		if err != nil {
			return false, err.Error()
		}
		for _, child := range strings.Fields(string(data)) {
			if comm, _ := os.ReadFile("/proc/" + child + "/comm"); strings.TrimSpace(string(comm)) == "sleep" {
				return true, ""
			}
		}
		return false, fmt.Sprintf("children %q", data)
	})
}

// syncBuffer collects a process's output for a test to read while it runs.
type syncBuffer struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestMemcachedTLSRefusedPairPutBack puts a Secret with a mismatched pair
// in place of a good one, then the good one back, as an owner fixing a bad
// renewal would. memcached refuses the mismatched pair, and 1.6.18 then
// serves no TLS at all: the reloader container must turn unready, and
// once the good pair is back (the very files memcached had loaded before)
// the reloader must load it again, and turn ready.
func TestMemcachedTLSRefusedPairPutBack(t *testing.T) {
	for _, auth := range []bool{false, true} {
		t.Run(map[bool]string{false: "TLS", true: "auth and TLS"}[auth], func(t *testing.T) {
			tlsDir := t.TempDir()
			certs := newSecretVolume(t, tlsDir)
			certs.write(t, "good")
			goodCert, goodKey := certs.cert, certs.key
			spec := func(s *cachev1beta1.MemcachedSpec) {
				s.TLS = &cachev1beta1.TLS{SecretName: "cache-tls"}
				if auth {
					s.Auth = &cachev1beta1.Auth{SecretName: "cache-auth"}
				}
			}
			var p *sidecarPod
			if auth {
				p = &startAuthPod(t, spec, "app:pw\n", tlsDir).sidecarPod
			} else {
				p = startTLSPod(t, spec, tlsDir, podIP)
			}
			addr := net.JoinHostPort(podIP, strconv.Itoa(p.port))
			waitFor(t, "memcached serves the good certificate", func() (bool, string) {
				cn, err := servedCommonName(addr)
				return cn == "good", fmt.Sprintf("CN %q, error %v", cn, err)
			})
			waitFor(t, "the reloader loads the files at its start", func() (bool, string) {
				return strings.Contains(p.stdout.String(), "memcached loaded the certificate"), p.stdout.String()
			})
			probed := p.probe != nil && p.probe.Exec != nil
			if !probed {
				t.Error("the reloader container has no exec readiness probe: the Pod stays ready while memcached serves no TLS")
			} else if ok, out := p.ready(t); !ok {
				t.Errorf("the reloader container is not ready with the good pair loaded: %s", out)
			}

			certs.writeMismatched(t, "bad")
			waitFor(t, "the reloader reports memcached's refusal", func() (bool, string) {
				return strings.Contains(p.stderr.String(), "refresh_certs: Error"), p.stderr.String()
			})
			if probed {
				waitFor(t, "the reloader container is not ready while memcached refuses the pair", func() (bool, string) {
					ok, out := p.ready(t)
					return !ok, out
				})
				if _, out := p.ready(t); !strings.Contains(out, "memcached refused the certificate in the volume") {
					t.Errorf("the probe does not say why it fails: %s", out)
				}
			}
			cn, err := servedCommonName(addr)
			t.Logf("with the mismatched pair memcached serves CN %q (handshake error: %v)", cn, err)

			certs.swap(t, goodCert, goodKey)
			waitFor(t, "memcached serves the good certificate put back", func() (bool, string) {
				cn, err := servedCommonName(addr)
				return cn == "good", fmt.Sprintf("CN %q, error %v", cn, err)
			})
			if probed {
				waitFor(t, "the reloader container is ready again", func() (bool, string) {
					return p.ready(t)
				})
			}
		})
	}
}

// TestMemcachedReloaderQuietStart starts each reloader before memcached
// listens, as it is in every Pod: it must wait without a word, and then
// load what it has to, with nothing on its standard error.
func TestMemcachedReloaderQuietStart(t *testing.T) {
	for _, auth := range []bool{false, true} {
		t.Run(map[bool]string{false: "TLS", true: "auth and TLS"}[auth], func(t *testing.T) {
			tlsDir := t.TempDir()
			newSecretVolume(t, tlsDir).write(t, "cert")
			spec := func(s *cachev1beta1.MemcachedSpec) {
				s.TLS = &cachev1beta1.TLS{SecretName: "cache-tls"}
				if auth {
					s.Auth = &cachev1beta1.Auth{SecretName: "cache-auth"}
				}
			}
			var p *sidecarPod
			if auth {
				p = &onFreePorts(t, func(ports hostPorts) *authPod {
					return prepareAuthPod(t, spec, "app:pw\n", tlsDir, ports)
				}, reloaderFirst).sidecarPod
			} else {
				p = onFreePorts(t, func(ports hostPorts) *sidecarPod {
					return prepareTLSPod(t, spec, tlsDir, podIP, ports)
				}, reloaderFirst)
			}
			want := "memcached loaded the certificate"
			waitFor(t, "the reloader loads the certificate", func() (bool, string) {
				return strings.Contains(p.stdout.String(), want), p.stdout.String()
			})
			if auth && !strings.Contains(p.stdout.String(), "loaded the credentials") {
				t.Errorf("the reloader did not load the credentials: %q", p.stdout.String())
			}
			if got := p.stderr.String(); got != "" {
				t.Errorf("the reloader printed on a clean start:\n%s", got)
			}
		})
	}
}
