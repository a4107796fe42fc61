//go:build memcached

package resources

import (
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
)

// TestMemcachedClientCA runs a real memcached with the arguments the
// builder gives a Memcached with spec.tls.clientCA, and the reloader with
// them, on a directory laid out as the kubelet lays out the projected
// volume. memcached must refuse a TLS client without a certificate and one
// whose certificate another CA signed, serve one of the configured CA, and
// load a renewed bundle in place: a client of a CA added to it is served,
// and memcached's pid and uptime show it did not restart.
func TestMemcachedClientCA(t *testing.T) {
	spec := func(s *cachev1beta1.MemcachedSpec) {
		s.TLS = &cachev1beta1.TLS{SecretName: "cache-tls", ClientCA: &cachev1beta1.ClientCA{SecretName: "clients-ca"}}
	}
	first, other, added := newCA(t, "first CA"), newCA(t, "other CA"), newCA(t, "added CA")
	dir := t.TempDir()
	volume := newSecretVolume(t, dir)
	volume.ca = first.pem
	volume.write(t, "server")
	p := startTLSPod(t, spec, dir, podIP)
	loopback := p.loopback

	addr := net.JoinHostPort(podIP, strconv.Itoa(p.port))
	waitFor(t, "memcached serves a client of the configured CA", func() (bool, string) {
		reply, err := tlsClientCommand(addr, first.client(t), "set k 0 0 5\r\nhello\r\n")
		return reply == "STORED", fmt.Sprintf("reply %q, error %v", reply, err)
	})
	refused := []struct {
		name string
		cert *tls.Certificate
	}{
		{name: "a client without a certificate"},
		{name: "a client whose certificate another CA signed", cert: other.client(t)},
		{name: "a client of a CA not yet in the bundle", cert: added.client(t)},
	}
	for _, r := range refused {
		if reply, err := tlsClientCommand(addr, r.cert, "get k\r\n"); err == nil {
			t.Errorf("%s: memcached answered %q, want the connection refused", r.name, reply)
		} else {
			t.Logf("%s: refused (%v)", r.name, err)
		}
	}
	// The exporter and the reloader use the plain loopback listener, which
	// asks for no certificate.
	if reply := plainCommand(t, loopback, "get k\r\n"); reply != "VALUE k 0 5" {
		t.Errorf("get on the loopback port = %q, want the item", reply)
	}
	// The reloader sends refresh_certs once at start; the renewal below
	// must come after it, or that first reload would load it.
	waitFor(t, "the reloader has had memcached load the files", func() (bool, string) {
		since, uptime := statValue(t, loopback, "time_since_server_cert_refresh"), statValue(t, loopback, "uptime")
		return atoi(t, since) < atoi(t, uptime), fmt.Sprintf("time_since_server_cert_refresh %s, uptime %s", since, uptime)
	})
	pid, uptime := statValue(t, loopback, "pid"), statValue(t, loopback, "uptime")

	// A renewed bundle that adds a CA, with the serving certificate left
	// as it is: the reloader notices ca.crt alone.
	volume.ca = append(append([]byte{}, first.pem...), added.pem...)
	volume.swap(t, volume.cert, volume.key)
	waitFor(t, "memcached serves a client of the CA added to the bundle", func() (bool, string) {
		reply, err := tlsClientCommand(addr, added.client(t), "get k\r\n")
		return reply == "VALUE k 0 5", fmt.Sprintf("reply %q, error %v", reply, err)
	})
	if reply, err := tlsClientCommand(addr, first.client(t), "get k\r\n"); reply != "VALUE k 0 5" {
		t.Errorf("a client of the first CA after the renewal: reply %q, error %v", reply, err)
	}
	if reply, err := tlsClientCommand(addr, other.client(t), "get k\r\n"); err == nil {
		t.Errorf("a client of a CA outside the renewed bundle: memcached answered %q", reply)
	}
	if got := statValue(t, loopback, "pid"); got != pid {
		t.Errorf("memcached's pid went from %s to %s: it restarted", pid, got)
	}
	if got := statValue(t, loopback, "uptime"); atoi(t, got) < atoi(t, uptime) {
		t.Errorf("memcached's uptime went from %s to %s: it restarted", uptime, got)
	}

	// What docs/operations.md says of removing a CA: memcached 1.6.18 adds
	// the CAs of a reloaded bundle to those it trusts and drops none. This
	// is logged, not required, so that a memcached that drops them passes.
	volume.ca = added.pem
	volume.swap(t, volume.cert, volume.key)
	// The reloader's third load, after the files at its start and the
	// bundle with the added CA: this bundle.
	waitFor(t, "the reloader has memcached load the bundle without the first CA", func() (bool, string) {
		return strings.Count(p.stdout.String(), "memcached loaded the certificate") >= 3, p.stdout.String()
	})
	reply, err := tlsClientCommand(addr, first.client(t), "get k\r\n")
	t.Logf("a client of the CA removed from the bundle, before a restart: reply %q, error %v", reply, err)
}

// testCA is a CA that signs client certificates.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newCA(t *testing.T, commonName string) *testCA {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(time.Now().UnixNano()),
		Subject:               pkix.Name{CommonName: commonName},
		NotBefore:             time.Now().Add(-time.Minute),
		NotAfter:              time.Now().Add(time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// client returns a client certificate the CA signed.
func (ca *testCA) client(t *testing.T) *tls.Certificate {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: "client of " + ca.cert.Subject.CommonName},
		NotBefore:    time.Now().Add(-time.Minute),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// tlsClientCommand sends command over TLS, presenting cert if it is not
// nil, and returns the first line of the reply. The certificate is
// presented whatever CAs memcached's request names (Go's client would
// otherwise send none that another CA signed), so that a refusal is
// memcached's verdict on it. With TLS 1.3 the client's handshake completes
// before the server has checked its certificate, so a refusal shows as an
// error reading the reply.
func tlsClientCommand(addr string, cert *tls.Certificate, command string) (string, error) {
	cfg := &tls.Config{InsecureSkipVerify: true}
	if cert != nil {
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return cert, nil }
	}
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", addr, cfg)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := conn.Write([]byte(command)); err != nil {
		return "", err
	}
	buf := make([]byte, 512)
	n, err := conn.Read(buf)
	if n == 0 {
		return "", fmt.Errorf("no reply: %w", err)
	}
	line, _, _ := strings.Cut(string(buf[:n]), "\r\n")
	return line, nil
}

// statValue is one value of memcached's stats, read on the plain port.
func statValue(t *testing.T, addr, name string) string {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := conn.Write([]byte("stats\r\n")); err != nil {
		t.Fatal(err)
	}
	var all []byte
	buf := make([]byte, 4096)
	for !strings.Contains(string(all), "END\r\n") {
		n, err := conn.Read(buf)
		all = append(all, buf[:n]...)
		if err != nil {
			t.Fatalf("reading stats: %v (read %q)", err, all)
		}
	}
	for _, line := range strings.Split(string(all), "\r\n") {
		if v, ok := strings.CutPrefix(line, "STAT "+name+" "); ok {
			return v
		}
	}
	t.Fatalf("stats has no %s: %q", name, all)
	return ""
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
