//go:build memcached

package resources

import (
	"bufio"
	"net"
	"strconv"
	"testing"
	"time"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
)

// TestMemcachedPlaintextPort runs memcached with the arguments the
// builders render for spec.tls.plaintextPort, and requires both of its
// client listeners on the Pod's address: TLS on spec.port, plain TCP on
// the plaintext port, each refusing the other protocol. An item stored
// through one is read through the other: one cache, two doors. With auth,
// both ask for credentials before anything else.
func TestMemcachedPlaintextPort(t *testing.T) {
	withPlaintext := func(s *cachev1beta1.MemcachedSpec) {
		// Any port: withHostPorts moves it to a free one of this host.
		s.TLS = &cachev1beta1.TLS{SecretName: "cache-tls", PlaintextPort: 1}
	}

	t.Run("TLS", func(t *testing.T) {
		dir := t.TempDir()
		newSecretVolume(t, dir).write(t, "cache")
		p := startTLSPod(t, withPlaintext, dir, podIP)
		tlsAddr, plainAddr := podAddrs(t, p)

		if reply := dialPlain(t, plainAddr).do(t, "set k 0 0 5\r\nplain\r\n"); reply != "STORED" {
			t.Fatalf("set on the plaintext port: %q", reply)
		}
		if reply := tlsCommand(t, tlsAddr, "get k\r\n"); reply != "VALUE k 0 5" {
			t.Errorf("get over TLS of the item stored in plain TCP: %q", reply)
		}
		if cn, err := servedCommonName(plainAddr); err == nil {
			t.Errorf("the plaintext port answered a TLS handshake with the certificate %q", cn)
		}
		if reply, err := plainReply(tlsAddr, "version\r\n"); err == nil && reply != "" {
			t.Errorf("the TLS port answered plain TCP: %q", reply)
		}
	})

	t.Run("TLS and auth", func(t *testing.T) {
		tlsDir := t.TempDir()
		newSecretVolume(t, tlsDir).write(t, "cache")
		p := startAuthPod(t, func(s *cachev1beta1.MemcachedSpec) {
			withPlaintext(s)
			s.Auth = &cachev1beta1.Auth{SecretName: "cache-auth"}
		}, "app:secret\n", tlsDir)
		tlsAddr, plainAddr := podAddrs(t, &p.sidecarPod)

		for _, c := range []struct {
			name string
			conn *memcachedConn
		}{
			{"plain TCP", dialPlain(t, plainAddr)},
			{"TLS", dialTLS(t, tlsAddr)},
		} {
			if reply := c.conn.do(t, "get k\r\n"); reply != "CLIENT_ERROR unauthenticated" {
				t.Errorf("%s: get before logging in: %q, want it refused", c.name, reply)
			}
			if reply := c.conn.login(t, "app", "wrong"); reply != authFailed {
				t.Errorf("%s: login with a wrong password: %q, want %q", c.name, reply, authFailed)
			}
			if reply := c.conn.login(t, "app", "secret"); reply != authOK {
				t.Errorf("%s: login: %q, want %q", c.name, reply, authOK)
			}
			if reply := c.conn.do(t, "get k\r\n"); reply != "END" {
				t.Errorf("%s: get once logged in: %q, want a miss", c.name, reply)
			}
		}
	})
}

// podAddrs returns the addresses, at the Pod's address, of memcached's TLS
// listener (spec.port) and of its plaintext one, the port of p's listeners
// that is neither spec.port nor the loopback one.
func podAddrs(t *testing.T, p *sidecarPod) (tlsAddr, plainAddr string) {
	t.Helper()
	_, loopback, err := net.SplitHostPort(p.loopback)
	if err != nil {
		t.Fatal(err)
	}
	for _, port := range p.listens {
		if port != p.port && strconv.Itoa(port) != loopback {
			plainAddr = net.JoinHostPort(podIP, strconv.Itoa(port))
		}
	}
	if plainAddr == "" {
		t.Fatalf("memcached listens on %v: no plaintext port beside spec.port %d and the loopback %s", p.listens, p.port, p.loopback)
	}
	return net.JoinHostPort(podIP, strconv.Itoa(p.port)), plainAddr
}

// plainReply sends command in plain TCP and returns the first line of the
// reply, or the error that ended the read.
func plainReply(addr, command string) (string, error) {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := conn.Write([]byte(command)); err != nil {
		return "", err
	}
	return bufio.NewReader(conn).ReadString('\n')
}
