package main

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
	"github.com/kubelite/memcached-operator/pkg/metrics"
)

// namespaceTerminatingError is how the apiserver refuses a create in a
// namespace that is being deleted.
var namespaceTerminatingError = &apierrors.StatusError{ErrStatus: metav1.Status{
	Status: metav1.StatusFailure, Code: 403, Reason: metav1.StatusReasonForbidden,
	Message: `deployments.apps "cache" is forbidden: unable to create new content in namespace default because it is being terminated`,
	Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{{Type: corev1.NamespaceTerminatingCause}}},
}}

// TestOutcome checks that handleErr and the reconcile metric read the same
// outcome the same way: what is retried, when, and how it is counted.
func TestOutcome(t *testing.T) {
	key := cache.ObjectName{Namespace: "default", Name: "cache"}
	invalid := blocked(cachev1beta1.ReasonInvalidSpec, errors.New("invalid"), noRetry, 0)
	foreign := blocked(cachev1beta1.ReasonResourceExists, errors.New("taken"), retryAfter, time.Minute)
	tests := []struct {
		name string
		o    outcome
		// wantBackoff: requeued through the per-key rate limiter.
		wantBackoff bool
		// wantAfter: queued again once this much time has passed; 0 for
		// never.
		wantAfter  time.Duration
		wantResult string
	}{
		{name: "done", o: done, wantResult: metrics.ResultSuccess},
		{name: "invalid spec", o: invalid, wantResult: metrics.ResultTerminal},
		{name: "foreign object", o: foreign, wantAfter: time.Minute, wantResult: metrics.ResultRequeued},
		{name: "waiting for the Deployment controller", o: waitFor(time.Second), wantAfter: time.Second, wantResult: metrics.ResultSuccess},
		{name: "conflict", o: failed("Deployment", fmt.Errorf("updating status: %w", apierrors.NewConflict(memcachedsResource.GroupResource(), "cache", errors.New("stale")))),
			wantBackoff: true, wantResult: metrics.ResultError},
		{name: "timeout", o: failed("Deployment", apierrors.NewTimeoutError("slow", 1)), wantBackoff: true, wantResult: metrics.ResultError},
		{name: "forbidden by RBAC", o: failed("Deployment", apierrors.NewForbidden(deploymentsResource.GroupResource(), "cache", errors.New("cannot patch"))),
			wantBackoff: true, wantResult: metrics.ResultError},
		{name: "namespace terminating", o: failed("Deployment", namespaceTerminatingError), wantResult: metrics.ResultSuccess},
		{name: "namespace terminating beside a conflict", o: failed("Deployment", namespaceTerminatingError).join(transient(apierrors.NewConflict(memcachedsResource.GroupResource(), "cache", errors.New("stale")))),
			wantResult: metrics.ResultSuccess},
		{name: "waiting for a Secret", o: waitsForEvent(cachev1beta1.ReasonTLSSecretNotFound, "no Secret"), wantResult: metrics.ResultSuccess},
		{name: "transient wins over a requeue", o: foreign.join(failed("Deployment", apierrors.NewTimeoutError("slow", 1))),
			wantBackoff: true, wantResult: metrics.ResultError},
		{name: "requeue wins over not retrying", o: invalid.join(foreign), wantAfter: time.Minute, wantResult: metrics.ResultRequeued},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.o.result(); got != tt.wantResult {
				t.Errorf("result = %q, want %q", got, tt.wantResult)
			}
			_, ctx := ktesting.NewTestContext(t)
			f := newFixture(t)
			c := f.newController(ctx)
			defer c.workqueue.ShutDown()
			c.handleErr(ctx, key, tt.o)
			if got := c.workqueue.NumRequeues(key) > 0; got != tt.wantBackoff {
				t.Errorf("requeued with backoff = %v, want %v", got, tt.wantBackoff)
			}
			if tt.wantBackoff {
				return
			}
			step := tt.wantAfter
			if step == 0 {
				step = time.Hour
			} else {
				f.clock.Step(step - time.Millisecond)
				if queued(c, absenceWait) {
					t.Errorf("queued again a millisecond before %s", tt.wantAfter)
				}
				step = time.Millisecond
			}
			f.clock.Step(step)
			want := tt.wantAfter > 0
			timeout := absenceWait
			if want {
				timeout = wait.ForeverTestTimeout
			}
			if got := queued(c, timeout); got != want {
				t.Errorf("queued again = %v, want %v", got, want)
			}
		})
	}
}

// TestOutcomeJoin checks which reason the status shows when several
// children fail differently: one that degrades before one that does not,
// and among those the one retried soonest, with every message.
func TestOutcomeJoin(t *testing.T) {
	invalid := blocked(cachev1beta1.ReasonInvalidSpec, errors.New("bad"), noRetry, 0)
	exists := blocked(cachev1beta1.ReasonResourceExists, errors.New("taken"), retryAfter, time.Minute)
	forbidden := blocked(cachev1beta1.ReasonForbidden, errors.New("denied"), retryBackoff, 0)
	tlsMissing := waitsForEvent(cachev1beta1.ReasonTLSSecretNotFound, "no secret")
	ownerKind := blocked(cachev1beta1.ReasonAPIServerError, errors.New("no mapping"), retryAfter, ownerKindRetry)
	predecessor := blocked(cachev1beta1.ReasonWaitingForPredecessor, errors.New("waits"), retryAfter, time.Minute)
	tests := []struct {
		name        string
		outcomes    []outcome
		wantReason  string
		wantMessage string
		wantRetry   retryPolicy
	}{
		{name: "none", outcomes: []outcome{done, done}, wantRetry: noRetry},
		{name: "one", outcomes: []outcome{done, exists}, wantReason: cachev1beta1.ReasonResourceExists, wantMessage: "taken", wantRetry: retryAfter},
		{name: "RBAC before a foreign object", outcomes: []outcome{exists, forbidden}, wantReason: cachev1beta1.ReasonForbidden, wantMessage: "taken; denied", wantRetry: retryBackoff},
		{name: "RBAC before an invalid spec", outcomes: []outcome{invalid, forbidden}, wantReason: cachev1beta1.ReasonForbidden, wantMessage: "bad; denied", wantRetry: retryBackoff},
		{name: "a foreign object before an invalid spec", outcomes: []outcome{invalid, exists}, wantReason: cachev1beta1.ReasonResourceExists, wantMessage: "bad; taken", wantRetry: retryAfter},
		{name: "a foreign object before a missing Secret", outcomes: []outcome{tlsMissing, exists}, wantReason: cachev1beta1.ReasonResourceExists, wantMessage: "no secret; taken", wantRetry: retryAfter},
		{name: "an unknown owner kind before a foreign object", outcomes: []outcome{exists, ownerKind}, wantReason: cachev1beta1.ReasonAPIServerError, wantMessage: "taken; no mapping", wantRetry: retryAfter},
		{name: "a degrading reason before a predecessor", outcomes: []outcome{predecessor, invalid}, wantReason: cachev1beta1.ReasonInvalidSpec, wantMessage: "waits; bad", wantRetry: retryAfter},
		{name: "a race is not shown", outcomes: []outcome{transient(errors.New("conflict")), invalid}, wantReason: cachev1beta1.ReasonInvalidSpec, wantMessage: "bad", wantRetry: retryBackoff},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got outcome
			for _, o := range tt.outcomes {
				got = got.join(o)
			}
			if got.reason != tt.wantReason || got.message != tt.wantMessage || got.retry != tt.wantRetry {
				t.Errorf("joined = reason %q, message %q, retry %d; want %q, %q, %d", got.reason, got.message, got.retry, tt.wantReason, tt.wantMessage, tt.wantRetry)
			}
		})
	}
}

// absenceWait is how long a check that no key arrives waits for one: it
// can only pass wrongly, on a machine too slow to move a due key in time,
// never fail wrongly.
const absenceWait = 200 * time.Millisecond

// queued waits up to timeout for the delaying queue's goroutine to move a
// key whose time has come into the queue, and reports whether one arrived.
func queued(c *Controller, timeout time.Duration) bool {
	err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		return c.workqueue.Len() > 0, nil
	})
	return err == nil
}

// retryOf names how handleErr treats an outcome: "dropped", "never", the
// delay of a retry after one, or "backoff".
func retryOf(o outcome) string {
	switch o.retry {
	case dropKey:
		return "dropped"
	case noRetry:
		return "never"
	case retryAfter:
		return o.after.String()
	default:
		return "backoff"
	}
}

// isPermanent reports an outcome that handleErr never retries, of a
// failure.
func isPermanent(o outcome) bool { return o.retry == noRetry && o.err != nil }

// isRequeue reports an outcome that handleErr syncs again after d.
func isRequeue(o outcome, d time.Duration) bool { return o.retry == retryAfter && o.after == d }

// isTransient reports an outcome that handleErr retries with backoff.
func isTransient(o outcome) bool { return o.retry == retryBackoff }

func TestRateLimiterCap(t *testing.T) {
	rl := newRateLimiter(defaultMaxRetryDelay)
	key := cache.ObjectName{Namespace: "default", Name: "cache"}
	tests := []struct {
		name     string
		failures int
		want     time.Duration
	}{
		{name: "first retry", failures: 1, want: 5 * time.Millisecond},
		{name: "tenth retry", failures: 10, want: 5 * time.Millisecond << 9},
		{name: "capped", failures: 40, want: defaultMaxRetryDelay},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rl.Forget(key)
			var got time.Duration
			for range tt.failures {
				got = rl.When(key)
			}
			if got != tt.want {
				t.Errorf("delay after %d failures = %s, want %s", tt.failures, got, tt.want)
			}
		})
	}
}

// TestRateLimiterBoundsRecoveryWhateverN fails 10,000 keys at once, as a
// webhook that is down or RBAC revoked would, some of them many times. Once
// the cause is gone, every key must be retried within the per-key cap of
// its last failure: no key waits behind the others. A limiter shared by
// all keys, such as client-go's default 10 per second, would put the last
// retry 1,000 s after the first.
func TestRateLimiterBoundsRecoveryWhateverN(t *testing.T) {
	const n = 10000
	for _, failures := range []int{1, 3, 30} {
		t.Run(fmt.Sprintf("%d failures each", failures), func(t *testing.T) {
			rl := newRateLimiter(defaultMaxRetryDelay)
			var latest time.Duration
			for i := range n {
				key := cache.ObjectName{Namespace: "default", Name: fmt.Sprintf("cache-%d", i)}
				for range failures {
					latest = max(latest, rl.When(key))
				}
			}
			if latest > defaultMaxRetryDelay {
				t.Errorf("with %d keys failing %d times, a retry waits %s, more than the cap %s", n, failures, latest, defaultMaxRetryDelay)
			}
		})
	}
}
