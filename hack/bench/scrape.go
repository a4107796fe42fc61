package main

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubelite/memcached-operator/pkg/metrics/scrape"
)

// The metric families the bench reads. The last three exist from the
// moment /metrics first answers (the reconcile counter is initialised for
// every result, the queue is named and created before the listener
// starts), so a scrape without them is an error rather than zeros. The
// REST client counter appears with the first request.
const (
	restRequests  = "rest_client_requests_total"
	reconciles    = "memcached_operator_reconcile_total"
	workqueue     = "workqueue_depth"
	heapInuse     = "go_memstats_heap_inuse_bytes"
	workqueueName = "memcached"
)

// scrapeTimeout bounds one scrape, so an operator that accepts but never
// answers fails the run instead of hanging it.
const scrapeTimeout = 30 * time.Second

// sample is what the bench reads from /metrics.
type sample struct {
	writes     map[string]float64 // REST requests other than GET, by method
	reads      float64            // REST GET requests
	reconciles float64            // syncs, whatever their result
	depth      float64            // length of the operator's work queue
	heapInuse  float64
}

// scrape reads the operator's /metrics. It fails, rather than returning
// zeros, when the operator has exited, when /metrics does not answer, and
// when a family the bench relies on is missing: a figure computed from
// zeros would read as an idle operator.
func (op *operatorProc) scrape(ctx context.Context) (sample, error) {
	m, err := op.metrics(ctx)
	if err != nil {
		return sample{}, err
	}
	writes := m.SumBy(restRequests, "method", nil)
	reads := writes["GET"]
	delete(writes, "GET")
	return sample{
		writes:     writes,
		reads:      reads,
		reconciles: m.Sum(reconciles, nil),
		depth:      m.Sum(workqueue, map[string]string{"name": workqueueName}),
		heapInuse:  m.Sum(heapInuse, nil),
	}, nil
}

// metrics reads the operator's /metrics, failing as scrape does when the
// families the bench relies on are missing.
func (op *operatorProc) metrics(ctx context.Context) (scrape.Metrics, error) {
	ctx, cancel := context.WithTimeout(ctx, scrapeTimeout)
	defer cancel()
	m, err := scrape.Get(ctx, op.url("/metrics"))
	if err != nil {
		return nil, op.failed(err)
	}
	for _, family := range []string{reconciles, workqueue, heapInuse} {
		if !m.Has(family) {
			return nil, fmt.Errorf("the operator's /metrics has no %s", family)
		}
	}
	return m, nil
}

// writesSince is the writes, by method, made between before and s; methods
// with none are left out.
func (s sample) writesSince(before sample) map[string]float64 {
	out := map[string]float64{}
	for k, v := range s.writes {
		if d := v - before.writes[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

// waitDrained waits until the operator has synced at least n objects and
// its queue is empty.
func (op *operatorProc) waitDrained(ctx context.Context, n int) error {
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 20*time.Minute, true, func(ctx context.Context) (bool, error) {
		s, err := op.scrape(ctx)
		if err != nil {
			return false, err
		}
		return s.reconciles >= float64(n) && s.depth == 0, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for %d syncs and an empty queue: %w", n, err)
	}
	return nil
}

// waitIdle waits until the operator has not synced anything for 3 seconds.
func (op *operatorProc) waitIdle(ctx context.Context) error {
	last, since := -1.0, time.Now()
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 10*time.Minute, true, func(ctx context.Context) (bool, error) {
		s, err := op.scrape(ctx)
		if err != nil {
			return false, err
		}
		if s.reconciles != last || s.depth != 0 {
			last, since = s.reconciles, time.Now()
		}
		return time.Since(since) > 3*time.Second, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the operator to go idle: %w", err)
	}
	return nil
}
