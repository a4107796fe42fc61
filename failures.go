package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
)

// childFailure turns the error of a request for a child into the problem
// the status shows and the error that says how the key is retried, so that
// every failure that persists is visible on the Memcached with a reason a
// user can act on, and clears itself once its cause is gone:
//
//   - a refusal of a field of the child (422 with field causes) is the
//     spec's fault: InvalidSpec, not retried until the spec changes;
//   - an admission policy's or webhook's denial: AdmissionDenied;
//   - a ResourceQuota's refusal: QuotaExceeded;
//   - any other 403 is RBAC's: Forbidden;
//   - a 5xx, throttling, a timeout or a broken connection: APIServerError;
//   - an owner reference the apiserver cannot resolve yet: APIServerError,
//     retried every ownerKindRetry (see ownerKindUnknown);
//   - anything else the apiserver refuses: WriteRejected.
//
// All others but InvalidSpec are retried with the per-key backoff, capped
// at maxRetryDelay, because lifting a policy, a quota or RBAC, or a webhook
// coming back, raises no event the controller watches.
//
// Races (a Conflict, an object created or deleted under us, a Memcached
// replaced before an adoption), a write into
// a terminating namespace and a cancelled context are not problems: they
// are retried or dropped quietly and the status is left as it was.
func childFailure(kind string, err error) (*problem, error) {
	err = namespaceTerminating(err)
	if err == nil || isExpectedRace(err) || apierrors.IsNotFound(err) ||
		errors.Is(err, errNamespaceTerminating) || errors.Is(err, errOwnerChanged) || errors.Is(err, context.Canceled) {
		return nil, err
	}
	if ownerKindUnknown(err) {
		return &problem{reason: cachev1beta1.ReasonAPIServerError, message: err.Error()}, requeueAfter(ownerKindRetry, err)
	}
	reason := failureReason(err)
	if reason == cachev1beta1.ReasonInvalidSpec {
		err = fmt.Errorf("the apiserver rejected the %s: %w", kind, err)
		return &problem{reason: reason, message: err.Error()}, permanent(err)
	}
	return &problem{reason: reason, message: err.Error()}, err
}

// ownerKindRetry is how often a write refused by ownerKindUnknown is tried
// again.
const ownerKindRetry = 5 * time.Second

// ownerKindUnknown reports the apiserver refusing an owner reference to a
// Memcached whose kind and version its admission cannot resolve yet: to
// check the reference's blockOwnerDeletion it looks the kind up in its own
// cache of API discovery, which lags a CRD that has just gained a version,
// as on an upgrade to v1beta1, until that cache refreshes. The cause clears
// by itself within seconds and raises no event, and the per-key backoff
// would by then have grown to minutes after the first few refusals, so it
// is retried at a fixed, short interval instead.
func ownerKindUnknown(err error) bool {
	return apierrors.IsForbidden(err) && strings.Contains(err.Error(), "cannot find RESTMapping")
}

// failureReason classifies a failed request by its cause; see childFailure.
func failureReason(err error) string {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		// No answer from the apiserver at all: a timeout or a broken
		// connection.
		return cachev1beta1.ReasonAPIServerError
	}
	switch code := status.Status().Code; {
	case deniedByAdmission(err):
		return cachev1beta1.ReasonAdmissionDenied
	case apierrors.IsInvalid(err) && fieldCauses(status):
		return cachev1beta1.ReasonInvalidSpec
	case apierrors.IsInvalid(err):
		// A 422 that names no field comes from admission, not from the
		// validation of the object.
		return cachev1beta1.ReasonAdmissionDenied
	case apierrors.IsForbidden(err) && strings.Contains(err.Error(), "quota"):
		// "exceeded quota", and the quota plugin's other refusals, such
		// as a quota whose usage is not yet known.
		return cachev1beta1.ReasonQuotaExceeded
	case apierrors.IsForbidden(err):
		return cachev1beta1.ReasonForbidden
	case code >= 500 || code == 0 || apierrors.IsTooManyRequests(err):
		return cachev1beta1.ReasonAPIServerError
	default:
		return cachev1beta1.ReasonWriteRejected
	}
}

// deniedByAdmission reports a denial by a ValidatingAdmissionPolicy or an
// admission webhook. The apiserver marks neither in the Status's reason or
// causes (a policy's denial is a 422 or a 403 like any other), so this
// matches the wording its admission plugins use.
func deniedByAdmission(err error) bool {
	msg := err.Error()
	return (strings.Contains(msg, "ValidatingAdmissionPolicy '") && strings.Contains(msg, " denied request")) ||
		(strings.Contains(msg, "admission webhook ") && strings.Contains(msg, " denied the request"))
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
