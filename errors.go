package main

import (
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// errTerminal marks a sync error that retrying cannot fix, such as an invalid
// spec or a child owned by someone else. handleErr does not requeue it; the
// problem is reported on the Memcached's conditions and in an Event instead.
var errTerminal = errors.New("terminal")

// terminalError wraps a reason and message so that errors.Is(err, errTerminal)
// holds while the message stays readable.
type terminalError struct {
	reason  string
	message string
}

func (e *terminalError) Error() string { return e.reason + ": " + e.message }

func (e *terminalError) Is(target error) bool { return target == errTerminal }

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
