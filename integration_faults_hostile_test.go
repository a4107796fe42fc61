//go:build integration

package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
	"github.com/kubelite/memcached-operator/pkg/memlimit"
	"github.com/kubelite/memcached-operator/pkg/resources"
)

// operatorLimit is the memory limit of the shipped operator container
// (artifacts/deploy/deployment.yaml): a peak above it is an OOM kill.
const operatorLimit = 256 << 20

// errorLine is a klog line at error level.
var errorLine = regexp.MustCompile(`(?m)^E\d{4} .*$`)

// TestFaultHostileWebhookBodies runs the operator binary with its own
// conversion webhook, as in a cluster, from a first start with no
// certificate, and then sends its webhook what anyone who can reach port
// 9443 may: two 60 MiB reviews at once, declared and chunked, and 64
// bodies that trickle in a byte at a time. Meanwhile v1alpha1 reads,
// which the apiserver converts through that webhook, must keep working,
// and the operator's peak RSS must stay far below its 256Mi limit. The
// first start must log no error.
func TestFaultHostileWebhookBodies(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	createMemcached(t, ns, "cache", nil)
	op, addr := startWebhookBinary(t, ns)
	eventually(t, time.Minute, "v1alpha1 reads work through the binary's webhook", func(ctx context.Context) (bool, string) {
		_, err := suite.mc.CacheV1alpha1().Memcacheds(ns).Get(ctx, "cache", metav1.GetOptions{})
		return err == nil, fmt.Sprint(err)
	})
	if lines := errorLine.FindAllString(op.logs(), -1); len(lines) > 0 {
		t.Errorf("a first start with nothing wrong logged %d errors:\n%s", len(lines), strings.Join(lines, "\n"))
	}
	rssBefore := residentKiB(t, op.cmd.Process.Pid, "VmRSS")

	attack, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	// Two 60 MiB reviews with their length declared and two sent chunked.
	// The webhook must refuse each with 413, or hang up before it has all
	// of it: a client still sending when the answer comes may see only
	// the closed connection. sent counts what each client got to send.
	large := largeReview(60 << 20)
	var codes [4]int
	var sent [4]atomic.Int64
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes[i] = postReview(attack, addr, large, i%2 == 0, &sent[i])
		}()
	}
	var trickling atomic.Int32
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			trickle(attack, addr, &trickling)
		}()
	}

	// v1alpha1 reads every 200 ms for 20 s, each converted by the webhook
	// under attack.
	var reads, failed int
	var failures []string
	end := time.Now().Add(20 * time.Second)
	for time.Now().Before(end) {
		readCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := suite.mc.CacheV1alpha1().Memcacheds(ns).Get(readCtx, "cache", metav1.GetOptions{})
		cancel()
		reads++
		if err != nil {
			failed++
			failures = append(failures, err.Error())
		}
		time.Sleep(200 * time.Millisecond)
	}
	stillTrickling := trickling.Load()
	stop()
	wg.Wait()

	peak := residentKiB(t, op.cmd.Process.Pid, "VmHWM")
	t.Logf("v1alpha1 reads: %d, failed %d; 60 MiB reviews (declared, chunked, declared, chunked) answered %v after %d, %d, %d and %d MiB were sent; %d of 64 trickling bodies still open at the end; operator RSS %d MiB before, peak %d MiB",
		reads, failed, codes, sent[0].Load()>>20, sent[1].Load()>>20, sent[2].Load()>>20, sent[3].Load()>>20, stillTrickling, rssBefore>>10, peak>>10)
	if failed > 0 {
		t.Errorf("%d of %d v1alpha1 reads failed during the attack, first: %s", failed, reads, failures[0])
	}
	for i := range codes {
		if codes[i] != http.StatusRequestEntityTooLarge && sent[i].Load() >= int64(len(large)) {
			t.Errorf("a 60 MiB review was sent in full and answered %d, want 413 or the connection closed before its end", codes[i])
		}
	}
	// Over its limit, the container is killed and the cache operator
	// restarts; the Go memory limit is 90% of it.
	if peak<<10 > operatorLimit {
		t.Errorf("the operator's peak RSS was %d MiB under attack, over its %d MiB limit", peak>>10, operatorLimit>>20)
	}
	select {
	case err := <-op.exited:
		t.Fatalf("the operator exited under attack: %v", err)
	default:
	}
}

// startWebhookBinary runs the operator binary with its own conversion
// webhook, as in a cluster, under the shipped memory limit and watching
// only ns, from a first start with no certificate: the suite's webhook
// makes way, its Secret is deleted, and the CRD is handed over to the
// binary's URL without a CA bundle, as docs/operations.md says to. When
// the test ends, once the binary is gone, the CRD is handed back the same
// way and v1alpha1 reads must work steadily through the suite's webhook.
func startWebhookBinary(t *testing.T, ns string) (*binaryOperator, string) {
	t.Helper()
	ctx := context.Background()
	addr := freeAddr(t)
	url := "https://" + addr + "/convert"
	takeConversionFromSuite(t)
	err := suite.kube.CoreV1().Secrets("memcached-operator").Delete(ctx, "memcached-operator-webhook-cert", metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	patchConversion(t, map[string]any{"url": url, "service": nil, "caBundle": nil})
	op := newBinaryOperator(t)
	op.env = []string{memlimit.EnvVar + "=" + strconv.Itoa(operatorLimit)}
	op.start(t, operatorBinary(t), "--kubeconfig="+suite.operatorKubeconfig, "--leader-elect=false", "--namespace="+ns,
		"--webhook-bind-address="+addr, "--webhook-url="+url)
	return op, addr
}

// TestFaultWebhookReadyOnlyWhenServing starts the binary with its webhook
// and no certificate yet, polls /readyz every 20 ms from its start, and
// the first time it says ready checks that the webhook serves: the webhook
// Service routes to ready replicas only (it must not publish not-ready
// addresses), so one that is ready must serve.
func TestFaultWebhookReadyOnlyWhenServing(t *testing.T) {
	var svc corev1.Service
	readManifest(t, "artifacts/deploy/webhook_service.yaml", &svc)
	if svc.Spec.PublishNotReadyAddresses {
		t.Error("the webhook Service publishes not-ready addresses: a new replica takes conversions from the moment it has an IP")
	}

	ns := newNamespace(t)
	op, addr := startWebhookBinary(t, ns)
	start := time.Now()
	var samples int
	for {
		code, body := get(op.healthAddr, "/readyz")
		samples++
		if code == http.StatusOK {
			break
		}
		if time.Since(start) > waitLong {
			t.Fatalf("not ready %s after the start: %d %s", waitLong, code, body)
		}
		time.Sleep(20 * time.Millisecond)
	}
	ready := time.Since(start)
	// The handshake after /readyz said ready: a webhook that serves keeps
	// serving, since a certificate is never taken away, so one that fails
	// now did not serve when /readyz answered. Its timeout is generous: a
	// webhook without a certificate fails the handshake at once, and only
	// a slow machine takes long.
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 30 * time.Second}, "tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // The test reads what is served.
	if err != nil {
		t.Fatalf("/readyz said ready %s after the start, but a handshake with the webhook then failed: %v", ready.Round(time.Millisecond), err)
	}
	conn.Close()
	t.Logf("ready %s after the start, after %d samples of which %d not ready", ready.Round(time.Millisecond), samples, samples-1)
}

// largeReview is a well-formed ConversionReview of about size bytes of
// v1alpha1 Memcacheds, which the webhook would convert if it read it.
func largeReview(size int) []byte {
	object := `{"apiVersion":"cache.kubelite.io/v1alpha1","kind":"Memcached","metadata":{"name":"x","namespace":"y"},"spec":{"memoryMB":64,"replicas":1}}`
	var b bytes.Buffer
	b.Grow(size + len(object))
	b.WriteString(`{"kind":"ConversionReview","apiVersion":"apiextensions.k8s.io/v1","request":{"uid":"attack","desiredAPIVersion":"cache.kubelite.io/v1beta1","objects":[`)
	b.WriteString(object)
	for b.Len() < size {
		b.WriteByte(',')
		b.WriteString(object)
	}
	b.WriteString(`]}}`)
	return b.Bytes()
}

// hostileClient is anyone on the network: it does not check the webhook's
// certificate, and sends one request per connection.
var hostileClient = &http.Client{
	Timeout: 60 * time.Second,
	Transport: &http.Transport{
		TLSClientConfig:   &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // An attacker does not verify.
		DisableKeepAlives: true,
	},
}

// postReview POSTs body to the webhook, with its length declared or
// chunked, counts in sent what the client sent of it, and returns the
// status, or 0 if there was no answer.
func postReview(ctx context.Context, addr string, body []byte, declare bool, sent *atomic.Int64) int {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "https://"+addr+"/convert", &countingReader{r: bytes.NewReader(body), n: sent})
	if err != nil {
		return 0
	}
	if declare {
		req.ContentLength = int64(len(body))
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hostileClient.Do(req)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

// trickle opens a connection to the webhook, declares a 1 MiB review and
// sends it a byte every 100 ms until ctx ends or the webhook hangs up.
func trickle(ctx context.Context, addr string, open *atomic.Int32) {
	conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // An attacker does not verify.
	if err != nil {
		return
	}
	defer conn.Close()
	open.Add(1)
	defer open.Add(-1)
	w := bufio.NewWriter(conn)
	fmt.Fprintf(w, "POST /convert HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{", addr, 1<<20)
	if w.Flush() != nil {
		return
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if _, err := conn.Write([]byte(" ")); err != nil {
				return
			}
		}
	}
}

// countingReader counts what is read from r.
type countingReader struct {
	r io.Reader
	n *atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// residentKiB reads a memory figure of a process from /proc, in KiB:
// VmRSS now, or VmHWM, the peak.
func residentKiB(t *testing.T, pid int, field string) int64 {
	t.Helper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			kib, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kib
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// TestFaultHostileSecrets fills the operator's namespace with Secrets as
// large as the apiserver stores, as anyone who may create a Secret there
// can: 2,900 key names each, an auth value, and a type the operator's
// cache once took for its own trimmed copies (cache.kubelite.io/trimmed).
// 150 of them must grow the operator's heap by less than 1 MiB, a
// Memcached whose spec.tls names one of them still sees its tls.crt and
// tls.key, and one whose spec.auth names one reports what is wrong with
// its auth file without any byte of its value showing in the status, an
// Event or the operator's log.
func TestFaultHostileSecrets(t *testing.T) {
	var ns string
	checkHostileObjects(t, hostileObjects{
		kind: "Secrets",
		setup: func(t *testing.T, namespace string) {
			ns = namespace
		},
		create: func(ctx context.Context, ns string, i int) error {
			_, err := suite.kube.CoreV1().Secrets(ns).Create(ctx, hostileSecret(i), metav1.CreateOptions{})
			return err
		},
		spec: func(i int) cachev1beta1.MemcachedSpec {
			return cachev1beta1.MemcachedSpec{TLS: &cachev1beta1.TLS{SecretName: hostileSecret(i).Name}}
		},
		problems: []string{cachev1beta1.ReasonTLSSecretNotFound, cachev1beta1.ReasonTLSSecretInvalid},
		after: func(t *testing.T, op *binaryOperator) {
			ctx := context.Background()
			const name = "auth-hostile"
			if _, err := suite.mc.CacheV1beta1().Memcacheds(ns).Create(ctx, &cachev1beta1.Memcached{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
				Spec:       cachev1beta1.MemcachedSpec{Auth: &cachev1beta1.Auth{SecretName: hostileSecret(159).Name}},
			}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			var mc *cachev1beta1.Memcached
			eventually(t, time.Minute, name+" reports its auth Secret invalid", func(ctx context.Context) (bool, string) {
				var err error
				if mc, err = fetchMemcached(ctx, ns, name); err != nil {
					return false, err.Error()
				}
				for _, c := range mc.Status.Conditions {
					if c.Reason == cachev1beta1.ReasonAuthSecretInvalid {
						return true, ""
					}
				}
				return false, fmt.Sprintf("conditions %v", mc.Status.Conditions)
			})
			events, err := suite.kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			status, err := json.Marshal(mc.Status)
			if err != nil {
				t.Fatal(err)
			}
			for what, text := range map[string]string{"the status": string(status), "the Events": fmt.Sprint(events.Items), "the operator's log": op.log.String()} {
				if i := strings.Index(text, hostileValueMark); i >= 0 {
					t.Errorf("%s shows a hostile Secret's value: …%.200s…", what, text[max(0, i-100):])
				}
			}
		},
	})
}

// hostileValueMark starts the auth value of every hostileSecret.
const hostileValueMark = "hostile-secret-value"

// hostileSecret is about the largest Secret the apiserver stores: the TLS
// keys, an auth value of 200 kB that memcached would refuse (no ':'), and
// 2,897 other keys whose names fill most of the rest of its 1 MiB. Its
// type is one the operator's group could be taken to own.
func hostileSecret(i int) *corev1.Secret {
	data := map[string][]byte{
		corev1.TLSCertKey: []byte("cert"), corev1.TLSPrivateKeyKey: []byte("key"),
		resources.AuthSecretKey: []byte(hostileValueMark + strings.Repeat("v", 200_000)),
	}
	pad := strings.Repeat("k", 240)
	for j := len(data); j < 2900; j++ {
		data[fmt.Sprintf("%s%06d", pad, j)] = nil
	}
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("hostile-%03d", i)}, Type: "cache.kubelite.io/trimmed", Data: data}
}

// TestFaultHostileConfigMaps does the same with ConfigMaps of 3,500 key
// names, which the operator caches for spec.tls.clientCA: a Memcached
// whose client CA is the last one still sees its ca.crt.
func TestFaultHostileConfigMaps(t *testing.T) {
	checkHostileObjects(t, hostileObjects{
		kind: "ConfigMaps",
		setup: func(t *testing.T, ns string) {
			createTLSSecret(t, ns, "cache-tls", "first")
		},
		create: func(ctx context.Context, ns string, i int) error {
			_, err := suite.kube.CoreV1().ConfigMaps(ns).Create(ctx, hostileConfigMap(i), metav1.CreateOptions{})
			return err
		},
		spec: func(i int) cachev1beta1.MemcachedSpec {
			return cachev1beta1.MemcachedSpec{TLS: &cachev1beta1.TLS{
				SecretName: "cache-tls",
				ClientCA:   &cachev1beta1.ClientCA{ConfigMapName: hostileConfigMap(i).Name},
			}}
		},
		problems: []string{cachev1beta1.ReasonClientCANotFound, cachev1beta1.ReasonClientCAInvalid},
	})
}

// hostileObjects is one kind of object anyone may fill a namespace with,
// that the operator caches without a label selector.
type hostileObjects struct {
	kind string
	// setup, if set, creates what the Memcacheds need besides the objects.
	setup func(t *testing.T, ns string)
	// create creates the i-th object; spec is that of a Memcached that
	// names it, which shows one of problems until the operator's cache
	// holds it.
	create   func(ctx context.Context, ns string, i int) error
	spec     func(i int) cachev1beta1.MemcachedSpec
	problems []string
	// after, if set, runs once the heap has been measured.
	after func(t *testing.T, op *binaryOperator)
}

// checkHostileObjects creates 160 of the objects in the namespace the
// operator binary watches and requires the 150 after the first ten to grow
// its heap by less than 1 MiB.
func checkHostileObjects(t *testing.T, h hostileObjects) {
	ctx := context.Background()
	ns := newNamespace(t)
	op := startBinary(t, "--leader-elect=false", "--namespace="+ns, "--enable-profiling")
	waitReady(t, op)
	if h.setup != nil {
		h.setup(t, ns)
	}

	create := func(from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			if err := h.create(ctx, ns, i); err != nil {
				t.Fatalf("creating %s %d: %v", h.kind, i, err)
			}
		}
	}
	// seen waits until the operator's cache holds object i: a Memcached
	// that names it leaves the problems.
	seen := func(i int) {
		t.Helper()
		name := fmt.Sprintf("tls-%03d", i)
		if _, err := suite.mc.CacheV1beta1().Memcacheds(ns).Create(ctx, &cachev1beta1.Memcached{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec:       h.spec(i),
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, time.Minute, name+" sees the keys it needs", func(ctx context.Context) (bool, string) {
			mc, err := fetchMemcached(ctx, ns, name)
			if err != nil {
				return false, err.Error()
			}
			for _, c := range mc.Status.Conditions {
				if slices.Contains(h.problems, c.Reason) {
					return false, c.Reason + ": " + c.Message
				}
			}
			return mc.Status.ObservedGeneration == mc.Generation, fmt.Sprintf("observed generation %d of %d", mc.Status.ObservedGeneration, mc.Generation)
		})
	}
	// Ten first, so that the watch's buffers have grown to the largest
	// object before the heap is first measured: that cost is paid once.
	create(0, 10)
	seen(9)
	before := heapAfterGC(t, op)
	create(10, 160)
	seen(159)
	after := heapAfterGC(t, op)
	grown := after - before
	t.Logf("150 maximal %s: operator heap %.1f MiB before, %.1f MiB after, grew %d KiB", h.kind, before/(1<<20), after/(1<<20), int64(grown)>>10)
	if grown >= 1<<20 {
		t.Errorf("150 maximal %s grew the operator's heap by %.1f MiB, want under 1 MiB", h.kind, grown/(1<<20))
	}
	if h.after != nil {
		h.after(t, op)
	}
}

// hostileConfigMap is about the largest ConfigMap the apiserver stores,
// with ca.crt and 3,499 other keys whose names fill most of its 1 MiB.
func hostileConfigMap(i int) *corev1.ConfigMap {
	data := map[string]string{cachev1beta1.ClientCAKey: "bundle"}
	pad := strings.Repeat("k", 240)
	for j := len(data); j < 3500; j++ {
		data[fmt.Sprintf("%s%06d", pad, j)] = ""
	}
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("hostile-%03d", i)}, Data: data}
}

// heapAfterGC is the binary's live heap: its heap profile is asked for
// with gc=1, which collects first, then its go_memstats_heap_alloc_bytes
// is read. The smallest of three readings is taken.
func heapAfterGC(t *testing.T, op *binaryOperator) float64 {
	t.Helper()
	least := -1.0
	for range 3 {
		if code, body := get(op.metricsAddr, "/debug/pprof/heap?gc=1"); code != http.StatusOK {
			t.Fatalf("heap profile: %d %.200s", code, body)
		}
		m, err := op.scrape()
		if err != nil {
			t.Fatal(err)
		}
		if !m.Has("go_memstats_heap_alloc_bytes") {
			t.Fatal("the operator exports no go_memstats_heap_alloc_bytes")
		}
		if v := m.Sum("go_memstats_heap_alloc_bytes", nil); least < 0 || v < least {
			least = v
		}
	}
	return least
}
