package main

import (
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// A sync returns one of four kinds of error, and handleErr decides what
// happens to the key from the kind alone:
//
//   - nil: done; the key's backoff is forgotten.
//   - *permanentError: retrying cannot fix it; the key is forgotten until
//     the Memcached changes.
//   - *requeueAfterError: nothing failed, but the sync waits for a change
//     that raises no event; the key is synced again after a fixed delay.
//   - anything else is transient and retried with per-key backoff.
//
// What a user sees on the Memcached is decided separately, by the problem
// the sync reports to the status (status.go).

// permanentError marks a failure that retrying cannot fix, such as a spec
// that the apiserver rejects. The cause is on the status and in an Event,
// and the next change to the Memcached syncs it again.
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// permanent marks err as not worth retrying.
func permanent(err error) error { return &permanentError{err: err} }

// requeueAfterError asks for the key to be synced again after a fixed
// delay instead of with backoff. It is for a sync that did all it could
// and waits for something it gets no event about, such as the deletion of
// an object its label-filtered informers do not see.
type requeueAfterError struct {
	after time.Duration
	err   error
}

func (e *requeueAfterError) Error() string { return e.err.Error() }
func (e *requeueAfterError) Unwrap() error { return e.err }

// requeueAfter asks for another sync after d, with err saying why.
func requeueAfter(d time.Duration, err error) error { return &requeueAfterError{after: d, err: err} }

// soonestRetry combines the errors of independent steps of one sync into
// the one that must be retried soonest: transient errors (backoff, joined)
// before a requeue (the shortest delay) before a permanent error. The
// others need no retry of their own: the one returned syncs the whole
// Memcached again, and the status already shows every problem.
func soonestRetry(errs ...error) error {
	var transient []error
	var requeue *requeueAfterError
	var perm error
	for _, err := range errs {
		var r *requeueAfterError
		var p *permanentError
		switch {
		case err == nil:
		case errors.As(err, &r):
			if requeue == nil || r.after < requeue.after {
				requeue = r
			}
		case errors.As(err, &p):
			if perm == nil {
				perm = err
			}
		default:
			transient = append(transient, err)
		}
	}
	switch {
	case len(transient) > 0:
		return errors.Join(transient...)
	case requeue != nil:
		return requeue
	default:
		return perm
	}
}

// errNamespaceTerminating marks a write refused because the namespace is
// being deleted. The namespace controller is about to delete the Memcached
// too, so the key is dropped quietly instead of retried.
var errNamespaceTerminating = errors.New("namespace is terminating")

// namespaceTerminating wraps err with errNamespaceTerminating when the
// apiserver refused it for that reason.
func namespaceTerminating(err error) error {
	if apierrors.IsForbidden(err) && apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
		return fmt.Errorf("%w: %w", errNamespaceTerminating, err)
	}
	return err
}

// isExpectedRace reports errors that are a normal part of optimistic
// concurrency against a cache: someone wrote the object after our informer
// saw it. They are retried quietly, without an error-level log.
func isExpectedRace(err error) bool {
	return apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err)
}
