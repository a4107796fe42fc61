package serving

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/klog/v2"
)

// servedCertificate returns the leaf certificate the listener presents.
func servedCertificate(t *testing.T, addr string) *x509.Certificate {
	t.Helper()
	conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // The test reads what is served.
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0]
}

func writePair(t *testing.T, dir, host string) {
	t.Helper()
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey(host, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Write to temporary names and rename, as a kubelet updating a Secret
	// volume swaps the files atomically.
	for name, data := range map[string][]byte{"tls.crt": certPEM, "tls.key": keyPEM} {
		tmp := filepath.Join(dir, "."+name)
		if err := os.WriteFile(tmp, data, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
}

// TestListenSecureReloadsItsCertificate serves from files, replaces them,
// and waits for the new certificate without a restart. It also checks
// that the handler sits behind the delegated authentication.
func TestListenSecureReloadsItsCertificate(t *testing.T) {
	dir := t.TempDir()
	writePair(t, dir, "first.example")
	api := &fakeAPIServer{users: map[string]authenticationv1.UserInfo{}, allowed: map[string]bool{}}
	ctx := context.Background()
	l, err := ListenSecure(ctx, "metrics", "127.0.0.1:0", http.NotFoundHandler(), SecureConfig{
		CertFile: filepath.Join(dir, "tls.crt"),
		KeyFile:  filepath.Join(dir, "tls.key"),
		Kube:     api.client(),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Shutdown(ctx)

	// The generated leaf's common name is the host, "@" and a timestamp.
	if cn := servedCertificate(t, l.Addr()).Subject.CommonName; !strings.HasPrefix(cn, "first.example@") {
		t.Fatalf("served certificate %q, want first.example", cn)
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // Self-signed test certificate.
	resp, err := client.Get("https://" + l.Addr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET without a token: %d, want 401", resp.StatusCode)
	}

	writePair(t, dir, "second.example")
	deadline := time.Now().Add(30 * time.Second)
	for cn := ""; !strings.HasPrefix(cn, "second.example@"); cn = servedCertificate(t, l.Addr()).Subject.CommonName {
		if time.Now().After(deadline) {
			t.Fatalf("still serving %q 30s after the files changed", cn)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestListenSecureGeneratesACertificate(t *testing.T) {
	ctx := context.Background()
	l, err := ListenSecure(ctx, "metrics", "127.0.0.1:0", http.NotFoundHandler(), SecureConfig{Kube: (&fakeAPIServer{}).client()})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Shutdown(ctx)
	if cert := servedCertificate(t, l.Addr()); !cert.NotAfter.After(time.Now().Add(300 * 24 * time.Hour)) {
		t.Errorf("generated certificate expires %s, want about a year ahead", cert.NotAfter)
	}
}

func TestListenSecureNeedsBothFiles(t *testing.T) {
	_, err := ListenSecure(context.Background(), "metrics", "127.0.0.1:0", http.NotFoundHandler(), SecureConfig{CertFile: "/tmp/x.crt", Kube: (&fakeAPIServer{}).client()})
	if err == nil {
		t.Fatal("a certificate without a key was accepted")
	}
}

// lateCert is a certificate provider that has nothing until set, as the
// webhook's Secret has nothing on a first start until it is issued.
type lateCert struct {
	mu        sync.Mutex
	cert, key []byte
	listeners []dynamiccertificates.Listener
}

func (c *lateCert) Name() string { return "late" }

func (c *lateCert) CurrentCertKeyContent() ([]byte, []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cert, c.key
}

func (c *lateCert) AddListener(l dynamiccertificates.Listener) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.listeners = append(c.listeners, l)
}

func (c *lateCert) set(cert, key []byte) {
	c.mu.Lock()
	c.cert, c.key = cert, key
	listeners := c.listeners
	c.mu.Unlock()
	for _, l := range listeners {
		l.Enqueue()
	}
}

// errorCounter is a logr sink that counts error logs.
type errorCounter struct {
	mu     sync.Mutex
	errors []string
}

func (*errorCounter) Init(logr.RuntimeInfo)            {}
func (*errorCounter) Enabled(int) bool                 { return true }
func (*errorCounter) Info(int, string, ...any)         {}
func (e *errorCounter) WithValues(...any) logr.LogSink { return e }
func (e *errorCounter) WithName(string) logr.LogSink   { return e }
func (e *errorCounter) Error(err error, msg string, _ ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.errors = append(e.errors, fmt.Sprintf("%s: %v", msg, err))
}

// TestListenTLSWaitsForItsFirstCertificateQuietly starts a listener
// before its certificate exists, as every first start of the webhook does:
// nothing is logged at error level, and the certificate is served once it
// arrives.
//
// klog's logger is global, and the certificate controller's goroutines log
// after the listener has stopped, so the logger cannot be set and cleared
// around the test while other tests' goroutines read it: the test runs
// itself in a process of its own.
func TestListenTLSWaitsForItsFirstCertificateQuietly(t *testing.T) {
	const child = "SERVING_TEST_QUIET_START"
	if os.Getenv(child) == "" {
		cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.v")
		cmd.Env = append(os.Environ(), child+"=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		return
	}
	counter := &errorCounter{}
	klog.SetLogger(logr.New(counter))

	cert := &lateCert{}
	l, err := ListenTLS(context.Background(), "webhook", "127.0.0.1:0", http.NotFoundHandler(), cert, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Shutdown(context.Background())
	// The certificate controller's retries of an empty certificate, had
	// they run, would have been logged by now: its backoff starts at 5 ms.
	time.Sleep(500 * time.Millisecond)
	if err := l.Serving(); err == nil {
		t.Error("a listener without a certificate says it can serve")
	}
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey("late.example", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	cert.set(certPEM, keyPEM)
	deadline := time.Now().Add(10 * time.Second)
	for {
		conn, err := tls.Dial("tcp", l.Addr(), &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // The test reads what is served.
		if err == nil {
			served := conn.ConnectionState().PeerCertificates[0].Subject.CommonName
			conn.Close()
			if !strings.HasPrefix(served, "late.example") {
				t.Fatalf("served %q, want late.example", served)
			}
			if err := l.Serving(); err != nil {
				t.Errorf("a listener that serves its certificate says it cannot: %v", err)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the certificate set is not served: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	counter.mu.Lock()
	defer counter.mu.Unlock()
	if len(counter.errors) > 0 {
		t.Errorf("a start that waited for its certificate logged %d errors:\n%s", len(counter.errors), strings.Join(counter.errors, "\n"))
	}
}
