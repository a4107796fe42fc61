package main

import (
	"errors"
	"strings"
	"time"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
	"github.com/kubelite/memcached-operator/pkg/metrics"
)

// retryPolicy says when a key is synced again after a sync.
type retryPolicy int

const (
	// noRetry: the sync is done, or only a change it gets an event about
	// (to the Memcached, or to the Secret it names) can help.
	noRetry retryPolicy = iota
	// retryAfter: the key is synced again after a fixed delay. For an
	// object in the child's way that the label-filtered informers do not
	// see, or a predecessor's child, whose events may be missed; for an
	// owner reference the apiserver cannot resolve yet, which clears by
	// itself within seconds; and for the wait for the Deployment
	// controller before a status write.
	retryAfter
	// retryBackoff: a transient failure, retried with the per-key backoff
	// (newRateLimiter).
	retryBackoff
	// dropKey: no sync can do more, whatever else the sync ran into: the
	// namespace is being deleted, and the Memcached with it.
	dropKey
)

// outcome is what a sync, or one step of it, ended in. Each step records
// exactly one, and both what the status shows (computeStatus) and what
// happens to the key (handleErr, and the reconcile metric through result)
// are derived from the sync's outcome alone.
type outcome struct {
	// reason and message say what keeps the children from matching the
	// spec, as Progressing=False and, unless the reason is one that ends
	// by itself (degrades), Degraded=True show it. reason is one of the
	// reasons of the API package; "" when nothing does.
	reason, message string
	// retry and, for retryAfter, after say when the key is synced again.
	retry retryPolicy
	after time.Duration
	// err is the failure behind the outcome, for the log. An outcome with
	// an err but no reason is a failure not to show on the status: a race
	// with the cache or a failed status write, retried with backoff, or a
	// key dropped because its namespace is going away. One with a reason
	// but no err waits for an event and is no failure.
	err error
}

// done is the outcome of a step that did what it set out to do.
var done = outcome{}

// blocked is the outcome of a step that cannot make the children match the
// spec for reason, with err's message for the status.
func blocked(reason string, err error, r retryPolicy, after time.Duration) outcome {
	return outcome{reason: reason, message: err.Error(), retry: r, after: after, err: err}
}

// transient is the outcome of a failure that is not the spec's nor a
// problem to show on the status: a race with the cache, a Memcached gone
// or replaced under the sync, a failed finalizer patch or status write, a
// panic. It is retried with backoff.
func transient(err error) outcome {
	return outcome{retry: retryBackoff, err: err}
}

// waitsForEvent is the outcome of a step that cannot go on until something
// it gets an event about changes, such as a Secret the spec names. The
// status shows why; it is not a failure, and not retried.
func waitsForEvent(reason, message string) outcome {
	return outcome{reason: reason, message: message}
}

// waitFor is the outcome of a step that waits d for something it gets no
// event about, with no problem to show.
func waitFor(d time.Duration) outcome {
	return outcome{retry: retryAfter, after: d}
}

// dropped is the outcome of a key that needs no further sync although its
// step did not finish, with err saying why.
func dropped(err error) outcome {
	return outcome{retry: dropKey, err: err}
}

// urgency orders retries: a lower value is synced again sooner.
func (o outcome) urgency() time.Duration {
	switch o.retry {
	case dropKey:
		return -2
	case retryBackoff:
		return -1
	case retryAfter:
		return o.after
	default:
		return time.Duration(1<<63 - 1)
	}
}

// degrades reports whether the outcome makes the Memcached Degraded. Only
// waits that end without anyone's help do not: for a predecessor's
// children, which the garbage collector removes unless a finalizer holds
// them (the message then names it), and for a rollout slot. A deferred
// operator rollout is the user's choice, not a problem either.
func (o outcome) degrades() bool {
	switch o.reason {
	case "", cachev1beta1.ReasonWaitingForPredecessor, cachev1beta1.ReasonOperatorRolloutQueued, cachev1beta1.ReasonOperatorRolloutDeferred:
		return false
	}
	return true
}

// shown reports whether the outcome says something the status shows.
func (o outcome) shown() bool { return o.reason != "" }

// join combines the outcomes of independent steps of one sync, such as the
// children, into one. The retry is the soonest of them: the key is
// synced again as a whole, which retries every step; a dropped key stays
// dropped. The reason is that of
// an outcome that degrades, if any, and among those the one retried
// soonest, so that the status never says "not retried" of a Memcached that
// is, nor "waiting" of one that is blocked; the message names every
// problem. The errors are joined for the log.
func (o outcome) join(other outcome) outcome {
	out := o
	if other.urgency() < o.urgency() {
		out.retry, out.after = other.retry, other.after
	}
	out.err = errors.Join(o.err, other.err)
	switch {
	case !other.shown():
	case !o.shown():
		out.reason, out.message = other.reason, other.message
	default:
		if shownBefore(other, o) {
			out.reason = other.reason
		}
		out.message = strings.Join([]string{o.message, other.message}, "; ")
	}
	return out
}

// shownBefore reports whether a's reason wins over b's on the status; see
// join.
func shownBefore(a, b outcome) bool {
	if a.degrades() != b.degrades() {
		return a.degrades()
	}
	return a.urgency() < b.urgency()
}

// result is the outcome's label on the reconcile metrics. A key that is
// done, waits for an event, or is dropped because no sync can do more
// counts as a success.
func (o outcome) result() string {
	switch {
	case o.retry == retryBackoff:
		return metrics.ResultError
	case o.retry == retryAfter && o.shown():
		return metrics.ResultRequeued
	case o.retry == noRetry && o.shown() && o.err != nil:
		return metrics.ResultTerminal
	default:
		return metrics.ResultSuccess
	}
}
