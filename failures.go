package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
)

// failed turns the error of a request for a child into the sync's outcome,
// so that every failure that persists is visible on the Memcached with a
// reason a user can act on, and clears itself once its cause is gone:
//
//   - a refusal of a field of the child (422 with field causes) is the
//     spec's fault: InvalidSpec, not retried until the spec changes;
//   - an admission policy's or webhook's denial: AdmissionDenied;
//   - a ResourceQuota's refusal: QuotaExceeded;
//   - any other 403 is RBAC's: Forbidden;
//   - a 5xx, throttling, a timeout or a broken connection: APIServerError;
//   - an owner reference the apiserver cannot resolve yet: APIServerError,
//     retried every ownerKindRetry (see apiserverSays);
//   - anything else the apiserver refuses: WriteRejected.
//
// All others but InvalidSpec are retried with the per-key backoff, capped
// by --max-retry-delay, because lifting a policy, a quota or RBAC, or a webhook
// coming back, raises no event the controller watches.
//
// A race (a Conflict, an object created or deleted under us, a Memcached
// replaced before an adoption) and a cancelled context are not problems:
// they are retried with backoff, and the status is left as it was. A write into
// a terminating namespace is dropped: the namespace controller is about to
// delete the Memcached too.
func failed(kind string, err error) outcome {
	switch {
	case err == nil:
		return done
	case apierrors.IsForbidden(err) && apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause):
		return dropped(fmt.Errorf("the namespace is being deleted: %w", err))
	case isExpectedRace(err) || apierrors.IsNotFound(err) || errors.Is(err, errOwnerChanged) || errors.Is(err, context.Canceled):
		return transient(err)
	}
	says := apiserverSays(err)
	if says == ownerKindUnknown {
		// The cause clears by itself within seconds and raises no event,
		// and the per-key backoff would by then have grown to minutes
		// after the first few refusals.
		return blocked(cachev1beta1.ReasonAPIServerError, err, retryAfter, ownerKindRetry)
	}
	reason := failureReason(err, says)
	if reason == cachev1beta1.ReasonInvalidSpec {
		return blocked(reason, fmt.Errorf("the apiserver rejected the %s: %w", kind, err), noRetry, 0)
	}
	return blocked(reason, err, retryBackoff, 0)
}

// ownerKindRetry is how often a write refused with ownerKindUnknown is
// tried again.
const ownerKindRetry = 5 * time.Second

// isExpectedRace reports errors that are a normal part of optimistic
// concurrency against a cache: someone wrote the object after our informer
// saw it. They are retried quietly, without an error-level log.
func isExpectedRace(err error) bool {
	return apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err)
}

// refusal is what the apiserver's message says of a refusal whose Status
// carries no reason or cause that says it.
type refusal int

const (
	otherRefusal refusal = iota
	// deniedByAdmission: a ValidatingAdmissionPolicy or an admission
	// webhook denied the request.
	deniedByAdmission
	// quotaExceeded: "exceeded quota", and the quota plugin's other
	// refusals, such as a quota whose usage is not yet known.
	quotaExceeded
	// ownerKindUnknown: the apiserver refused an owner reference to a
	// Memcached whose kind and version its admission cannot resolve yet.
	// To check the reference's blockOwnerDeletion it looks the kind up in
	// its own cache of API discovery, which lags a CRD that has just
	// gained a version, as on an upgrade to v1beta1, until that cache
	// refreshes.
	ownerKindUnknown
)

// apiserverSays is the one place that reads an apiserver error's message.
// kube-apiserver 1.37 marks none of these refusals in the Status's reason
// or causes: a policy's denial is a 422 or a 403 like any other, a
// webhook's carries the webhook's own code, and the quota and
// owner-reference plugins answer with a plain Forbidden. So this matches
// the wording those admission plugins use; TestIntegrationFailureReasons
// holds it to what a real apiserver answers.
func apiserverSays(err error) refusal {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "ValidatingAdmissionPolicy '") && strings.Contains(msg, " denied request"),
		strings.Contains(msg, "admission webhook ") && strings.Contains(msg, " denied the request"):
		return deniedByAdmission
	case !apierrors.IsForbidden(err):
		return otherRefusal
	case strings.Contains(msg, "cannot find RESTMapping"):
		return ownerKindUnknown
	case strings.Contains(msg, "quota"):
		return quotaExceeded
	default:
		return otherRefusal
	}
}

// failureReason classifies a failed request by its type and by what its
// message says; see failed.
func failureReason(err error, says refusal) string {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		// No answer from the apiserver at all: a timeout or a broken
		// connection.
		return cachev1beta1.ReasonAPIServerError
	}
	switch code := status.Status().Code; {
	case says == deniedByAdmission:
		return cachev1beta1.ReasonAdmissionDenied
	case apierrors.IsInvalid(err) && fieldCauses(status):
		return cachev1beta1.ReasonInvalidSpec
	case apierrors.IsInvalid(err):
		// A 422 that names no field comes from admission, not from the
		// validation of the object.
		return cachev1beta1.ReasonAdmissionDenied
	case says == quotaExceeded:
		return cachev1beta1.ReasonQuotaExceeded
	case apierrors.IsForbidden(err):
		return cachev1beta1.ReasonForbidden
	case code >= 500 || code == 0 || apierrors.IsTooManyRequests(err):
		return cachev1beta1.ReasonAPIServerError
	default:
		return cachev1beta1.ReasonWriteRejected
	}
}

// fieldCauses reports a Status whose causes all name a field of the object:
// the shape of the apiserver's own validation errors.
func fieldCauses(status apierrors.APIStatus) bool {
	details := status.Status().Details
	if details == nil || len(details.Causes) == 0 {
		return false
	}
	for _, cause := range details.Causes {
		if cause.Field == "" {
			return false
		}
	}
	return true
}
