package framework

import (
	"context"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// WaitLong bounds a wait for the cluster to act: Pods scheduled and made
// Ready, a rollout completed. It is generous, for a loaded machine; no
// test asserts how long anything took.
const WaitLong = 2 * time.Minute

// Eventually polls cond every 100 ms until it holds or the timeout
// passes, then fails the test with what cond last reported.
func Eventually(t *testing.T, timeout time.Duration, what string, cond func(ctx context.Context) (bool, string)) {
	t.Helper()
	EventuallyEvery(t, 100*time.Millisecond, timeout, what, cond)
}

// EventuallyEvery is Eventually polling every interval: less often for a
// check that costs the apiserver (a list of hundreds of objects), more
// often for one that must catch a short failure.
func EventuallyEvery(t *testing.T, interval, timeout time.Duration, what string, cond func(ctx context.Context) (bool, string)) {
	t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(context.Background(), interval, timeout, true, func(context.Context) (bool, error) {
		// Each check gets its own deadline, so that the last one is not
		// cut short by the overall timeout and reports the real state.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		ok, detail := cond(ctx)
		last = detail
		return ok, nil
	})
	if err != nil {
		t.Fatalf("%s: not reached within %s; last: %s", what, timeout, last)
	}
}

// WaitQuiet waits until the operator has gone two seconds without a sync.
func (op *Operator) WaitQuiet(t *testing.T) {
	t.Helper()
	last, quietSince := -1.0, time.Now()
	Eventually(t, time.Minute, "the operator goes quiet", func(context.Context) (bool, string) {
		n, err := op.Syncs()
		if err != nil {
			return false, err.Error()
		}
		if n != last {
			last, quietSince = n, time.Now()
		}
		return time.Since(quietSince) > 2*time.Second, fmt.Sprintf("%v syncs so far", last)
	})
}

// WaitTwoResyncs waits until an operator with the framework's resync period
// has run two resync passes over the objects Memcacheds of its namespace
// and finished their syncs: the positive signal to wait for before
// asserting that those syncs did nothing, such as sending no write.
//
// It first waits for quiet, so that the syncs of earlier events are over,
// and marks the time and the sync count. Resyncs tick a period apart, so
// the two periods after the mark hold exactly two ticks, each syncing
// every Memcached once: it waits for both the two periods and 2×objects
// more syncs. The count alone is not enough: a watch event delivered late
// can sync Memcacheds after the quiet, and its syncs would stand in for a
// pass. Last it waits for quiet again, so that the second pass's syncs are
// over when the caller looks at what they did.
func (op *Operator) WaitTwoResyncs(t *testing.T, objects int) {
	t.Helper()
	if objects == 0 {
		t.Fatal("waiting for the resync of no Memcached: any count would do")
	}
	op.WaitQuiet(t)
	mark, err := op.Syncs()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	want := mark + float64(2*objects)
	Eventually(t, 3*Resync+30*time.Second, fmt.Sprintf("two resync passes over %d Memcacheds", objects), func(context.Context) (bool, string) {
		n, err := op.Syncs()
		if err != nil {
			return false, err.Error()
		}
		return n >= want && time.Since(start) >= 2*Resync,
			fmt.Sprintf("%v of %v syncs after %s of %s", n-mark, want-mark, time.Since(start).Round(time.Millisecond), 2*Resync)
	})
	op.WaitQuiet(t)
}
