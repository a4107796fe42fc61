//go:build integration

package faults

import (
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

// The flood of TestFaultWebhookHTTP2StreamFlood: a few HTTP/2 connections,
// each offering as many streams as Go's server allows by default, each
// stream a review of which 1 MiB is sent at once and the rest never.
const (
	h2FloodConns    = 4
	h2FloodStreams  = 250
	h2FloodBody     = 1 << 20
	h2FloodDuration = 20 * time.Second
)

// h2FloodAllowance is what the flood may add to the operator's RSS: what
// the webhook's listener may hold at its limits, 39 MiB (serving.Limits),
// and twice its review budget of 32 MiB, since the decoder's buffers hold
// up to 1.4 times what the budget counts: 103 MiB. That leaves the rest of
// the 256Mi limit to the informer caches (1,000 maximal Memcacheds take
// 112 MiB, docs/operations.md).
const h2FloodAllowance = 103 << 20

// TestFaultWebhookHTTP2StreamFlood runs the operator binary with its own
// conversion webhook, under the shipped memory limit, and floods the
// webhook over HTTP/2: h2FloodConns connections, each opening up to
// h2FloodStreams streams at once, as many as the webhook admits, each
// sending 1 MiB of a review and then holding the stream open. Over
// HTTP/1 the connection cap bounds the requests in flight; over HTTP/2
// only the streams per connection do. Meanwhile v1alpha1 reads, converted
// by that webhook, must keep working; the operator's peak RSS must grow by
// less than h2FloodAllowance and stay under its 256Mi limit, and it must
// not exit.
//
// It runs the operator as released (framework.ReleaseBinary): the race
// detector's shadow memory is no part of the RSS users see. It does not
// run in parallel: it takes the CRD's conversion from the package's
// webhook (handConversionTo), and its thousand senders take the machine's
// cores.
func TestFaultWebhookHTTP2StreamFlood(t *testing.T) {
	ctx := context.Background()
	ns := framework.NewNamespace(t)
	framework.CreateMemcached(t, ns, "cache", nil)
	addr := framework.FreeAddr(t)
	op := framework.StartOperatorBinary(t, framework.ReleaseBinary(t), ns, handConversionTo(t, addr)...)
	waitAlphaReads(t, ns, "cache")
	rssBefore := residentKiB(t, op.PID(), "VmRSS")

	attack, stop := context.WithTimeout(ctx, h2FloodDuration)
	defer stop()
	counts := &h2FloodCounts{codes: map[int]int{}}
	var wg sync.WaitGroup
	for range h2FloodConns {
		// One transport per connection: with StrictMaxConcurrentRequests
		// it waits for a free stream rather than dialing again.
		tr := &http.Transport{
			TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // An attacker does not verify.
			HTTP2:           &http.HTTP2Config{StrictMaxConcurrentRequests: true},
			Protocols:       new(http.Protocols),
		}
		tr.Protocols.SetHTTP2(true)
		defer tr.CloseIdleConnections()
		for range h2FloodStreams {
			wg.Go(func() { heldReviews(attack, tr, "https://"+addr+conversion.Path, counts) })
		}
	}

	// v1alpha1 reads every 200 ms, each converted by the webhook under
	// attack.
	var reads int
	var failures []string
	tick := time.NewTicker(200 * time.Millisecond)
	for attack.Err() == nil {
		readCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := framework.Memcacheds().CacheV1alpha1().Memcacheds(ns).Get(readCtx, "cache", metav1.GetOptions{})
		cancel()
		reads++
		if err != nil {
			failures = append(failures, err.Error())
		}
		select {
		case <-attack.Done():
		case <-tick.C:
		}
	}
	tick.Stop()
	wg.Wait()

	peak := residentKiB(t, op.PID(), "VmHWM")
	t.Logf("%d HTTP/2 connections of up to %d streams of %d KiB for %s: %s; v1alpha1 reads: %d, failed %d; operator RSS %d MiB before, peak %d MiB",
		h2FloodConns, h2FloodStreams, h2FloodBody>>10, h2FloodDuration, counts, reads, len(failures), rssBefore>>10, peak>>10)
	if !op.Running() {
		t.Fatalf("the operator exited under the flood")
	}
	if counts.sent.Load() == 0 {
		t.Fatal("no stream sent its body; the test proves nothing")
	}
	// Over its limit, the container is killed and the operator restarts;
	// the Go memory limit is 90% of it.
	if grew := (peak - rssBefore) << 10; grew >= h2FloodAllowance {
		t.Errorf("the flood grew the operator's RSS by %d MiB at the peak, want less than %d MiB", grew>>20, h2FloodAllowance>>20)
	}
	if peak<<10 > operatorLimit {
		t.Errorf("the operator's peak RSS was %d MiB under the flood, over its %d MiB limit", peak>>10, operatorLimit>>20)
	}
	if len(failures) > 0 {
		t.Errorf("%d of %d v1alpha1 reads failed during the flood, first: %s", len(failures), reads, failures[0])
	}
}

// h2FloodCounts counts the flood's streams: those whose body was sent in
// full and the bytes sent, and the answers by status code.
type h2FloodCounts struct {
	// sent counts the bodies sent in full, bytes what all streams sent.
	sent, bytes atomic.Int64
	mu          sync.Mutex
	codes       map[int]int
	errors      int
}

func (c *h2FloodCounts) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return fmt.Sprintf("%d bodies sent in full, %d MiB in all, answers by code %v, %d streams ended without an answer", c.sent.Load(), c.bytes.Load()>>20, c.codes, c.errors)
}

// heldReviews POSTs reviews to url through rt, one after another until ctx
// ends: each sends the start of a review and h2FloodBody bytes of a string
// in it, and then nothing more until ctx ends.
func heldReviews(ctx context.Context, rt http.RoundTripper, url string, counts *h2FloodCounts) {
	for ctx.Err() == nil {
		body := &heldBody{ctx: ctx, r: io.MultiReader(
			strings.NewReader(`{"kind":"ConversionReview","apiVersion":"apiextensions.k8s.io/v1","request":{"uid":"`),
			io.LimitReader(repeatReader('a'), h2FloodBody)), counts: counts}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, body)
		if err != nil {
			return
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := rt.RoundTrip(req)
		if err != nil {
			counts.mu.Lock()
			counts.errors++
			counts.mu.Unlock()
			// A refused stream is retried after a pause, so that the
			// flood's 1,000 senders do not spin on 2 cores and slow the
			// reads the test times instead of the operator.
			select {
			case <-ctx.Done():
				return
			case <-time.After(50 * time.Millisecond):
			}
			continue
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		counts.mu.Lock()
		counts.codes[resp.StatusCode]++
		counts.mu.Unlock()
	}
}

// heldBody reads r, counting what it reads and, once r is read to its
// end, the body as sent, and then blocks until ctx ends.
type heldBody struct {
	ctx    context.Context
	r      io.Reader
	counts *h2FloodCounts
	done   bool
}

func (b *heldBody) Read(p []byte) (int, error) {
	if !b.done {
		n, err := b.r.Read(p)
		b.counts.bytes.Add(int64(n))
		if err != io.EOF {
			return n, err
		}
		b.done = true
		b.counts.sent.Add(1)
		if n > 0 {
			return n, nil
		}
	}
	<-b.ctx.Done()
	return 0, b.ctx.Err()
}

// repeatReader reads as an endless run of one byte.
type repeatReader byte

func (r repeatReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(r)
	}
	return len(p), nil
}
