//go:build integration

package faults

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubelite/memcached-operator/pkg/conversion"
	"github.com/kubelite/memcached-operator/test/integration/framework"
)

// TestFaultHostileWebhookBodies runs the operator binary with its own
// conversion webhook, as in a cluster, from a first start with no
// certificate, and then sends its webhook what anyone who can reach port
// 9443 may: two 60 MiB reviews at once, declared and chunked, and 64
// bodies that trickle in a byte at a time. Meanwhile v1alpha1 reads,
// which the apiserver converts through that webhook, must keep working,
// and the operator's peak RSS must stay far below its 256Mi limit. The
// first start must log no error.
//
// It runs the operator as released (framework.ReleaseBinary): the race
// detector's shadow memory is no part of the RSS users see. It does not
// run in parallel: it takes the CRD's conversion from the package's
// webhook (handConversionTo), and its attack takes the machine's cores.
func TestFaultHostileWebhookBodies(t *testing.T) {
	ctx := context.Background()
	ns := framework.NewNamespace(t)
	framework.CreateMemcached(t, ns, "cache", nil)
	addr := framework.FreeAddr(t)
	op := framework.StartOperatorBinary(t, framework.ReleaseBinary(t), ns, handConversionTo(t, addr)...)
	waitAlphaReads(t, ns, "cache")
	if lines := errorLine.FindAllString(op.Log(), -1); len(lines) > 0 {
		t.Errorf("a first start with nothing wrong logged %d errors:\n%s", len(lines), strings.Join(lines, "\n"))
	}
	rssBefore := residentKiB(t, op.PID(), "VmRSS")

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
		wg.Go(func() { codes[i] = postReview(attack, addr, large, i%2 == 0, &sent[i]) })
	}
	var trickling atomic.Int32
	for range 64 {
		wg.Go(func() { trickle(attack, addr, &trickling) })
	}

	// v1alpha1 reads every 200 ms for 20 s, each converted by the webhook
	// under attack. The reads' pace is part of the scenario, not a wait.
	var reads, failed int
	var failures []string
	end := time.Now().Add(20 * time.Second)
	for time.Now().Before(end) {
		readCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := framework.Memcacheds().CacheV1alpha1().Memcacheds(ns).Get(readCtx, "cache", metav1.GetOptions{})
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

	peak := residentKiB(t, op.PID(), "VmHWM")
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
	if !op.Running() {
		t.Fatalf("the operator exited under attack")
	}
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
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "https://"+addr+conversion.Path, &countingReader{r: bytes.NewReader(body), n: sent})
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
	fmt.Fprintf(w, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{", conversion.Path, addr, 1<<20)
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
