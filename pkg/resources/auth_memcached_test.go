//go:build memcached

package resources

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
)

// authPod is a Pod with spec.auth run on this host: memcached through its
// container's command (the wrapper), and the reloader's script, both as
// children of the test, so that the reloader finds memcached in /proc as
// it does in the Pod's shared process namespace. The Secret volume is a
// directory the test swaps the way the kubelet does.
type authPod struct {
	sidecarPod
	secretDir, authDir string
	secret             int
}

// startAuthPod renders spec, writes the first Secret and starts memcached
// and the reloader (with a one-second interval), on free ports of this
// host. tlsDir, when TLS is on, stands for the certificate volume.
func startAuthPod(t *testing.T, spec func(*cachev1beta1.MemcachedSpec), firstSecret, tlsDir string) *authPod {
	t.Helper()
	return onFreePorts(t, func(ports hostPorts) *authPod {
		return prepareAuthPod(t, spec, firstSecret, tlsDir, ports)
	}, memcachedFirst)
}

// prepareAuthPod is startAuthPod on ports, without the start: spec.port is
// ports.port, and with TLS the loopback listener is on ports.loopback.
func prepareAuthPod(t *testing.T, spec func(*cachev1beta1.MemcachedSpec), firstSecret, tlsDir string, ports hostPorts) *authPod {
	t.Helper()
	r := renderOnHost(t, spec, ports)
	mc, bin := r.mc, r.bin
	pod := r.pod
	if pod.ShareProcessNamespace == nil || !*pod.ShareProcessNamespace {
		t.Fatal("the Pod does not share its process namespace: the reloader could not signal memcached")
	}
	mcd, reloader := container(t, pod, MemcachedContainerName), container(t, pod, ReloaderContainerName)

	p := &authPod{secretDir: t.TempDir(), authDir: t.TempDir()}
	p.sidecarPod = newSidecarPod(t, reloader)
	p.port, p.listens = ports.port, r.listens
	// memcached drops to another user when the test runs as root, and
	// t.TempDir makes its directories private.
	for _, dir := range []string{filepath.Dir(p.secretDir), p.secretDir, filepath.Dir(p.authDir), p.authDir} {
		if err := os.Chmod(dir, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join("..data", AuthSecretKey), filepath.Join(p.secretDir, AuthSecretKey)); err != nil {
		t.Fatal(err)
	}
	p.write(t, firstSecret)

	// What the kubelet does with the command and arguments, bash and
	// memcached taken from this host's PATH and MEMCACHED_BIN, with the
	// loopback listener on a port of this host.
	mcdArgs, reloaderArgs := mcd.Args, reloader.Args
	if tlsDir != "" {
		mcdArgs, reloaderArgs = hostLoopbackArgs(t, mc.Spec, mcd.Args, reloader.Args, ports.loopback)
		p.loopback = "127.0.0.1:" + strconv.Itoa(ports.loopback)
		p.listens = append(p.listens, ports.loopback)
	}
	localize := func(a string) string {
		a = strings.ReplaceAll(a, AuthSecretMountPath, p.secretDir)
		a = strings.ReplaceAll(a, AuthMountPath, p.authDir)
		a = strings.ReplaceAll(a, "$("+PodIPsEnv+")", podIP)
		a = strings.ReplaceAll(a, TLSRefusedPath, p.refused)
		if tlsDir != "" {
			a = strings.ReplaceAll(a, TLSMountPath, tlsDir)
		}
		return a
	}
	var command []string
	for _, a := range slices.Concat(mcd.Command, mcdArgs) {
		command = append(command, localize(a))
	}
	if os.Geteuid() == 0 {
		// memcached refuses to run as root; in the Pod it runs as 11211.
		command = append(command, "-u", "nobody")
	}
	p.memcachedCmd = exec.Command(command[0], command[1:]...)
	// The wrapper execs memcached from PATH, as in the image.
	p.memcachedCmd.Env = append(os.Environ(), "PATH="+filepath.Dir(bin)+":"+os.Getenv("PATH"))

	var args []string
	for _, a := range reloaderArgs {
		args = append(args, localize(a))
	}
	args[1] = "1"
	p.reloaderCmd = exec.Command(reloader.Command[0], append(reloader.Command[1:], args...)...)
	return p
}

// write swaps in a new version of the Secret's auth key.
func (p *authPod) write(t *testing.T, auth string) {
	t.Helper()
	p.secret++
	swapVolume(t, p.secretDir, p.secret, map[string][]byte{AuthSecretKey: []byte(auth)})
}

// memcachedConn is a connection to memcached with a reader that outlives
// one reply.
type memcachedConn struct {
	net.Conn
	r *bufio.Reader
}

func dialPlain(t *testing.T, addr string) *memcachedConn {
	t.Helper()
	var conn net.Conn
	waitFor(t, "memcached accepts connections on "+addr, func() (bool, string) {
		var err error
		conn, err = net.DialTimeout("tcp", addr, time.Second)
		return err == nil, fmt.Sprint(err)
	})
	t.Cleanup(func() { conn.Close() })
	return &memcachedConn{Conn: conn, r: bufio.NewReader(conn)}
}

func dialTLS(t *testing.T, addr string) *memcachedConn {
	t.Helper()
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", addr, &tls.Config{InsecureSkipVerify: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &memcachedConn{Conn: conn, r: bufio.NewReader(conn)}
}

// do sends command and returns the first line of the reply.
func (c *memcachedConn) do(t *testing.T, command string) string {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte(command)); err != nil {
		t.Fatal(err)
	}
	line, err := c.r.ReadString('\n')
	if err != nil {
		t.Fatalf("reading the reply to %q: %v", command, err)
	}
	return strings.TrimRight(line, "\r\n")
}

// login authenticates the connection the way memcached's ASCII
// authentication wants: a set whose value is "user password".
func (c *memcachedConn) login(t *testing.T, user, password string) string {
	t.Helper()
	value := user + " " + password
	return c.do(t, fmt.Sprintf("set auth 0 0 %d\r\n%s\r\n", len(value), value))
}

// stats returns memcached's general statistics; the connection must be
// authenticated.
func (c *memcachedConn) stats(t *testing.T) map[string]string {
	t.Helper()
	first := c.do(t, "stats\r\n")
	stats := map[string]string{}
	for line := first; line != "END"; {
		f := strings.Fields(line)
		if len(f) != 3 || f[0] != "STAT" {
			t.Fatalf("stats: unexpected line %q", line)
		}
		stats[f[1]] = f[2]
		l, err := c.r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		line = strings.TrimRight(l, "\r\n")
	}
	return stats
}

// loginReply is what a fresh connection to addr is told when it logs in.
func loginReply(t *testing.T, addr, user, password string) string {
	t.Helper()
	c := dialPlain(t, addr)
	defer c.Close()
	return c.login(t, user, password)
}

const (
	authOK     = "STORED"
	authFailed = "CLIENT_ERROR authentication failure"
)

// TestMemcachedAuthRotation runs memcached with the builder's command and
// arguments and the reloader's script, and rotates the credentials in the
// Secret the way docs/operations.md says: the new entry added, then the
// old one removed. memcached loads each version without a restart: the
// same process, its uptime still growing, its items kept.
func TestMemcachedAuthRotation(t *testing.T) {
	// A Secret as people write them: CRLF line ends, a comment, a blank
	// line, a password with ':' and a last entry without its newline,
	// which memcached 1.6.18 would read one character short.
	p := startAuthPod(t, func(s *cachev1beta1.MemcachedSpec) {
		s.Auth = &cachev1beta1.Auth{SecretName: "cache-auth"}
	}, "# the app\r\nalice:pw:1\r\n\r\nbob:pw2", "")
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(p.port))

	// A connection without credentials is accepted, which is all the
	// Pod's TCP probes ask; its commands are refused.
	anonymous := dialPlain(t, addr)
	for _, command := range []string{"get k\r\n", "stats\r\n", "version\r\n"} {
		if reply := anonymous.do(t, command); reply != "CLIENT_ERROR unauthenticated" {
			t.Errorf("unauthenticated %q: %q, want CLIENT_ERROR unauthenticated", strings.TrimSpace(command), reply)
		}
	}
	if reply := loginReply(t, addr, "alice", "wrong"); reply != authFailed {
		t.Errorf("a wrong password: %q, want %q", reply, authFailed)
	}
	if reply := loginReply(t, addr, "bob", "pw2"); reply != authOK {
		t.Errorf("bob, the last entry without a newline in the Secret: %q, want %q", reply, authOK)
	}
	alice := dialPlain(t, addr)
	if reply := alice.login(t, "alice", "pw:1"); reply != authOK {
		t.Fatalf("alice, whose password holds ':': %q, want %q", reply, authOK)
	}
	if reply := alice.do(t, "set k 0 0 5\r\nhello\r\n"); reply != "STORED" {
		t.Fatalf("set once authenticated: %q", reply)
	}
	before := alice.stats(t)

	// The new credential added beside the old ones: both work.
	p.write(t, "alice:pw:1\nbob:pw2\ncarol:pw3\n")
	waitFor(t, "carol, added to the Secret, can log in", func() (bool, string) {
		reply := loginReply(t, addr, "carol", "pw3")
		return reply == authOK, reply
	})
	if reply := loginReply(t, addr, "alice", "pw:1"); reply != authOK {
		t.Errorf("alice while the Secret holds old and new credentials: %q", reply)
	}

	// The old ones removed: refused from then on.
	p.write(t, "carol:pw3\n")
	waitFor(t, "alice, removed from the Secret, is refused", func() (bool, string) {
		reply := loginReply(t, addr, "alice", "pw:1")
		return reply == authFailed, reply
	})
	for user, want := range map[string]string{"bob": authFailed, "carol": authOK} {
		password := map[string]string{"bob": "pw2", "carol": "pw3"}[user]
		if reply := loginReply(t, addr, user, password); reply != want {
			t.Errorf("%s after the old credentials were removed: %q, want %q", user, reply, want)
		}
	}
	// A connection that logged in before stays logged in, as
	// docs/operations.md says.
	if reply := alice.do(t, "get k\r\n"); reply != "VALUE k 0 5" {
		t.Errorf("get on alice's connection opened before the removal: %q", reply)
	}

	// A Secret memcached would misread is not handed over: the
	// credentials memcached has stay.
	for i, bad := range []string{"dave:pw 4\n", "dave\n", "# nothing\n", ""} {
		p.write(t, bad)
		waitFor(t, "the reloader refuses the Secret "+strconv.Quote(bad), func() (bool, string) {
			return strings.Count(p.stderr.String(), "memcached keeps the credentials it has") == i+1, p.stderr.String()
		})
		if reply := loginReply(t, addr, "carol", "pw3"); reply != authOK {
			t.Errorf("carol after the Secret became %q: %q, want %q (the reloader must keep the file memcached has)", bad, reply, authOK)
		}
	}
	p.write(t, "erin:pw5\n")
	waitFor(t, "erin, in the fixed Secret, can log in", func() (bool, string) {
		reply := loginReply(t, addr, "erin", "pw5")
		return reply == authOK, reply
	})

	// No restart: the same process, its uptime not reset, the item kept.
	if p.memcached.ProcessState != nil {
		t.Fatalf("memcached exited: %v", p.memcached.ProcessState)
	}
	c := dialPlain(t, addr)
	if reply := c.login(t, "erin", "pw5"); reply != authOK {
		t.Fatal(reply)
	}
	after := c.stats(t)
	if after["pid"] != before["pid"] || after["pid"] != strconv.Itoa(p.memcached.Process.Pid) {
		t.Errorf("memcached pid %s, then %s; the wrapper's process is %d", before["pid"], after["pid"], p.memcached.Process.Pid)
	}
	up0, _ := strconv.Atoi(before["uptime"])
	up1, _ := strconv.Atoi(after["uptime"])
	if up1 <= up0 {
		t.Errorf("uptime %d s, then %d s: memcached restarted", up0, up1)
	}
	if reply := c.do(t, "get k\r\n"); reply != "VALUE k 0 5" {
		t.Errorf("get k after four rotations: %q, want the item stored before them", reply)
	}
	t.Logf("uptime %d s -> %d s, pid %s", up0, up1, after["pid"])
}

// TestMemcachedAuthTLS checks authentication over TLS, and that the
// reloader, which must log in like any client, still gets a renewed
// certificate loaded, with the credential the Secret holds after a
// rotation.
func TestMemcachedAuthTLS(t *testing.T) {
	tlsDir := t.TempDir()
	certs := newSecretVolume(t, tlsDir)
	certs.write(t, "first")
	spec := func(s *cachev1beta1.MemcachedSpec) {
		s.Auth = &cachev1beta1.Auth{SecretName: "cache-auth"}
		s.TLS = &cachev1beta1.TLS{SecretName: "cache-tls"}
	}
	d, err := Deployment(Default(memcached(spec)))
	if err != nil {
		t.Fatal(err)
	}
	if got := reloaderArgs(t, d.Spec.Template.Spec); got[0] != strconv.Itoa(int(LoopbackPort(memcached(spec).Spec))) {
		t.Fatalf("the reloader reaches memcached on %s, want the plain loopback port", got[0])
	}
	p := startAuthPod(t, spec, "app:old\n", tlsDir)
	tlsAddr := net.JoinHostPort(podIP, strconv.Itoa(p.port))
	loopback := p.loopback

	waitFor(t, "memcached serves the first certificate", func() (bool, string) {
		cn, err := servedCommonName(tlsAddr)
		return cn == "first", fmt.Sprintf("CN %q, error %v", cn, err)
	})
	c := dialTLS(t, tlsAddr)
	if reply := c.do(t, "get k\r\n"); reply != "CLIENT_ERROR unauthenticated" {
		t.Errorf("unauthenticated get over TLS: %q", reply)
	}
	if reply := dialPlain(t, loopback).do(t, "refresh_certs\r\n"); reply != "CLIENT_ERROR unauthenticated" {
		t.Errorf("unauthenticated refresh_certs on the loopback port: %q; the reloader must log in first", reply)
	}
	if reply := c.login(t, "app", "old"); reply != authOK {
		t.Errorf("login over TLS: %q", reply)
	}

	p.write(t, "app:new\n")
	waitFor(t, "the rotated credential works over TLS", func() (bool, string) {
		reply := dialTLS(t, tlsAddr).login(t, "app", "new")
		return reply == authOK, reply
	})
	certs.write(t, "second")
	waitFor(t, "memcached serves the renewed certificate", func() (bool, string) {
		cn, err := servedCommonName(tlsAddr)
		return cn == "second", fmt.Sprintf("CN %q, error %v", cn, err)
	})
	if reply := dialTLS(t, tlsAddr).login(t, "app", "old"); reply != authFailed {
		t.Errorf("the removed credential over TLS: %q, want %q", reply, authFailed)
	}
}

// reloaderArgs are the auth reloader's arguments.
func reloaderArgs(t *testing.T, pod *corev1ac.PodSpecApplyConfiguration) []string {
	t.Helper()
	r := container(t, pod, ReloaderContainerName)
	if r == nil {
		t.Fatal("no reloader container")
	}
	return r.Args
}

// TestMemcachedAuthWrapperRefusesBadFile starts the memcached container's
// command on Secrets memcached would refuse or misread: it stops with the
// reason instead of starting memcached.
func TestMemcachedAuthWrapperRefusesBadFile(t *testing.T) {
	bin := os.Getenv("MEMCACHED_BIN")
	if bin == "" {
		t.Fatal("MEMCACHED_BIN is not set: run make test-memcached, which installs memcached and sets it")
	}
	d, err := Deployment(Default(memcached(func(s *cachev1beta1.MemcachedSpec) {
		s.Auth = &cachev1beta1.Auth{SecretName: "cache-auth"}
	})))
	if err != nil {
		t.Fatal(err)
	}
	command := container(t, d.Spec.Template.Spec, MemcachedContainerName).Command
	tests := []struct {
		name, secret, want string
	}{
		{name: "empty, which memcached would load and refuse everyone with", secret: "", want: "no entry"},
		{name: "a ninth entry, which memcached would ignore", secret: strings.Repeat("u:p\n", 9), want: "more than 8 entries"},
		{name: "an entry without a colon", secret: "u:p\nnocolon\n", want: "no ':' on line 2"},
		{name: "an entry of 255 bytes, after which memcached would read nothing", secret: "u:" + strings.Repeat("p", 253) + "\nbob:new-Pa55\n", want: "line 1 over 254 bytes"},
		{name: "a NUL byte, which bash would drop", secret: "app:sec\x00ret\n", want: "a NUL byte in line 1"},
		{name: "a NUL byte in a comment", secret: "app:secret\n# \x00\n", want: "a NUL byte in line 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			src, dst := filepath.Join(dir, "secret"), filepath.Join(dir, "auth")
			if err := os.WriteFile(src, []byte(tt.secret), 0o644); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(command[0], command[1], command[2], command[3], src, dst, "-p", strconv.Itoa(freePorts(t, 1)[0]))
			cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(bin)+":"+os.Getenv("PATH"))
			out, err := cmd.CombinedOutput()
			if err == nil || !strings.Contains(string(out), tt.want) {
				t.Errorf("wrapper: %v, output %q; want a failure that says %q", err, out, tt.want)
			}
			if _, err := os.Stat(dst); !os.IsNotExist(err) {
				t.Errorf("the wrapper wrote %s for memcached: %v", dst, err)
			}
		})
	}
}

// TestMemcachedAuthLongEntries rotates to an entry as long as the operator
// allows, then a user: memcached must let both in. A Secret whose entry is
// one byte longer, which memcached would take for the end of the file, is
// refused by the reloader with the operator's words, and memcached keeps
// the credentials it has.
func TestMemcachedAuthLongEntries(t *testing.T) {
	p := startAuthPod(t, func(s *cachev1beta1.MemcachedSpec) {
		s.Auth = &cachev1beta1.Auth{SecretName: "cache-auth"}
	}, "app:old\n", "")
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(p.port))
	waitFor(t, "app logs in", func() (bool, string) {
		reply := loginReply(t, addr, "app", "old")
		return reply == authOK, reply
	})

	longest := "u:" + strings.Repeat("p", MaxAuthLineBytes-2)
	if problem := AuthFileProblem([]byte(longest + "\nbob:new-Pa55\n")); problem != "" {
		t.Fatalf("the operator refuses an entry of MaxAuthLineBytes: %s", problem)
	}
	p.write(t, longest+"\nbob:new-Pa55\n")
	waitFor(t, "bob, after an entry of MaxAuthLineBytes, logs in", func() (bool, string) {
		reply := loginReply(t, addr, "bob", "new-Pa55")
		return reply == authOK, reply
	})
	if reply := loginReply(t, addr, "u", strings.Repeat("p", MaxAuthLineBytes-2)); reply != authOK {
		t.Errorf("the user of the longest entry: %q, want %q", reply, authOK)
	}

	tooLong := "u:" + strings.Repeat("p", MaxAuthLineBytes-1) + "\ncarol:new-Pa55\n"
	if problem := AuthFileProblem([]byte(tooLong)); problem == "" {
		t.Fatal("the operator allows an entry longer than MaxAuthLineBytes")
	}
	p.write(t, tooLong)
	want := "line 1 over " + strconv.Itoa(MaxAuthLineBytes) + " bytes; memcached keeps the credentials it has"
	waitFor(t, "the reloader refuses the Secret", func() (bool, string) {
		return strings.Contains(p.stderr.String(), want), p.stderr.String()
	})
	if reply := loginReply(t, addr, "bob", "new-Pa55"); reply != authOK {
		t.Errorf("bob after a Secret the reloader refused: %q, want %q", reply, authOK)
	}
}

// TestMemcachedAuthRefusesBinaryProtocol sends binary-protocol requests
// to memcached run with the arguments the operator renders for spec.auth,
// as a binary client would: a "version", then a "set" of a 2 KiB value.
// The binary protocol has no part in ASCII authentication: memcached must
// answer neither, and close the connection once it has read 2 KiB without
// a newline.
func TestMemcachedAuthRefusesBinaryProtocol(t *testing.T) {
	p := startAuthPod(t, func(s *cachev1beta1.MemcachedSpec) {
		s.Auth = &cachev1beta1.Auth{SecretName: "cache-auth"}
	}, "app:pw\n", "")
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(p.port))
	c := dialPlain(t, addr)

	// binaryRequest is a request header (magic 0x80) with its body.
	binaryRequest := func(opcode byte, extras, key, value []byte) []byte {
		h := make([]byte, 24)
		h[0], h[1] = 0x80, opcode
		binary.BigEndian.PutUint16(h[2:], uint16(len(key)))
		h[4] = byte(len(extras))
		binary.BigEndian.PutUint32(h[8:], uint32(len(extras)+len(key)+len(value)))
		return slices.Concat(h, extras, key, value)
	}
	requests := slices.Concat(
		binaryRequest(0x0b, nil, nil, nil),                                                 // version
		binaryRequest(0x01, make([]byte, 8), []byte("k"), bytes.Repeat([]byte("x"), 2100)), // set k
	)
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write(requests); err != nil {
		t.Fatal(err)
	}
	reply, err := io.ReadAll(c.r)
	if len(reply) > 0 {
		t.Errorf("memcached answered binary-protocol requests: %x", reply)
	}
	if err != nil {
		t.Errorf("memcached did not close the connection of a binary client: %v", err)
	}
	if reply := loginReply(t, addr, "app", "pw"); reply != authOK {
		t.Errorf("an ASCII login after the binary client: %q, want %q", reply, authOK)
	}
}

// TestMemcachedAuthEmptyLinesBeforeLogin sends empty lines on a connection
// that has not authenticated, then logs in on it. memcached 1.6.40 to
// 1.6.43 crash on such lines with -Y (fixed in 1.6.44); the 1.6.18 this
// test runs refuses each line and goes on, and this test fails on a
// memcached that crashes.
func TestMemcachedAuthEmptyLinesBeforeLogin(t *testing.T) {
	p := startAuthPod(t, func(s *cachev1beta1.MemcachedSpec) {
		s.Auth = &cachev1beta1.Auth{SecretName: "cache-auth"}
	}, "app:pw\n", "")
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(p.port))
	c := dialPlain(t, addr)
	const login = "set auth 0 0 6\r\napp pw\r\n"
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte("\r\n\r\n\n\r\n\n" + login)); err != nil {
		t.Fatal(err)
	}
	// Refusals of the empty lines, if any, then the login's answer.
	var replies []string
	for {
		line, err := c.r.ReadString('\n')
		if err != nil {
			t.Fatalf("after the replies %q to empty lines before a login: %v (memcached running: %v)", replies, err, p.memcached.ProcessState == nil)
		}
		replies = append(replies, strings.TrimRight(line, "\r\n"))
		if replies[len(replies)-1] != "CLIENT_ERROR unauthenticated" {
			break
		}
	}
	// 1.6.18 skips the empty lines without a word; a refusal of each
	// would do as well.
	if last := replies[len(replies)-1]; last != authOK {
		t.Errorf("replies to five empty lines and a login: %q, want the login's %q last", replies, authOK)
	}
	if reply := c.do(t, "set k 0 0 1\r\nx\r\n"); reply != "STORED" {
		t.Errorf("set after the login: %q", reply)
	}
}
