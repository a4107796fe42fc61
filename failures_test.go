package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
)

// statusError builds an error the way client-go decodes an apiserver
// Status. The shapes below are those kube-apiserver 1.37 answered with in
// the integration suite's cases.
func statusError(code int32, reason metav1.StatusReason, message string, causes ...metav1.StatusCause) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: code, Reason: reason, Message: message,
		Details: &metav1.StatusDetails{Name: "cache", Group: "apps", Kind: "deployments", Causes: causes},
	}}
}

func TestChildFailure(t *testing.T) {
	gr := schema.GroupResource{Group: "apps", Resource: "deployments"}
	policyDenial := `deployments.apps "cache" is forbidden: ValidatingAdmissionPolicy 'no-deploys' with binding 'no-deploys' denied request: deployments are frozen`
	tests := []struct {
		name string
		err  error
		// wantReason is the problem's reason; "" for no problem.
		wantReason string
		wantRetry  string
	}{
		{
			name:       "field validation",
			err:        apierrors.NewInvalid(schema.GroupKind{Group: "apps", Kind: "Deployment"}, "cache", field.ErrorList{field.Invalid(field.NewPath("spec", "template", "spec", "affinity"), "x", "bad")}),
			wantReason: cachev1beta1.ReasonInvalidSpec, wantRetry: "never",
		},
		{
			name:       "admission policy, default reason",
			err:        statusError(http.StatusUnprocessableEntity, metav1.StatusReasonInvalid, policyDenial, metav1.StatusCause{Message: policyDenial}),
			wantReason: cachev1beta1.ReasonAdmissionDenied, wantRetry: "backoff",
		},
		{
			name:       "admission policy, reason Forbidden",
			err:        statusError(http.StatusForbidden, metav1.StatusReasonForbidden, policyDenial),
			wantReason: cachev1beta1.ReasonAdmissionDenied, wantRetry: "backoff",
		},
		{
			name:       "422 without field causes",
			err:        statusError(http.StatusUnprocessableEntity, metav1.StatusReasonInvalid, "refused"),
			wantReason: cachev1beta1.ReasonAdmissionDenied, wantRetry: "backoff",
		},
		{
			name:       "webhook denial",
			err:        statusError(http.StatusBadRequest, metav1.StatusReasonBadRequest, `admission webhook "deny.example.com" denied the request: no`),
			wantReason: cachev1beta1.ReasonAdmissionDenied, wantRetry: "backoff",
		},
		{
			name:       "quota",
			err:        statusError(http.StatusForbidden, metav1.StatusReasonForbidden, `deployments.apps "cache" is forbidden: exceeded quota: q, requested: count/deployments.apps=1, used: count/deployments.apps=0, limited: count/deployments.apps=0`),
			wantReason: cachev1beta1.ReasonQuotaExceeded, wantRetry: "backoff",
		},
		{
			name:       "RBAC",
			err:        apierrors.NewForbidden(gr, "cache", errors.New(`User "system:serviceaccount:x:y" cannot patch resource "deployments"`)),
			wantReason: cachev1beta1.ReasonForbidden, wantRetry: "backoff",
		},
		{
			name:       "webhook down",
			err:        statusError(http.StatusInternalServerError, metav1.StatusReasonInternalError, `Internal error occurred: failed calling webhook "down.example.com": connection refused`),
			wantReason: cachev1beta1.ReasonAPIServerError, wantRetry: "backoff",
		},
		{
			name:       "throttled",
			err:        apierrors.NewTooManyRequests("slow down", 1),
			wantReason: cachev1beta1.ReasonAPIServerError, wantRetry: "backoff",
		},
		{
			name:       "no answer",
			err:        fmt.Errorf("applying Deployment: %w", &net.OpError{Op: "dial", Err: errors.New("connection refused")}),
			wantReason: cachev1beta1.ReasonAPIServerError, wantRetry: "backoff",
		},
		{
			name: "owner kind not yet known to the apiserver",
			err: statusError(http.StatusForbidden, metav1.StatusReasonForbidden,
				`poddisruptionbudgets.policy "cache" is forbidden: cannot set blockOwnerDeletion in this case because cannot find RESTMapping for APIVersion cache.kubelite.io/v1beta1 Kind Memcached: no matches for kind "Memcached" in version "cache.kubelite.io/v1beta1"`),
			wantReason: cachev1beta1.ReasonAPIServerError, wantRetry: "5s",
		},
		{
			name:       "another refusal",
			err:        apierrors.NewMethodNotSupported(gr, "patch"),
			wantReason: cachev1beta1.ReasonWriteRejected, wantRetry: "backoff",
		},
		{name: "conflict", err: apierrors.NewConflict(gr, "cache", errors.New("changed")), wantRetry: "backoff"},
		{name: "gone again", err: apierrors.NewNotFound(gr, "cache"), wantRetry: "backoff"},
		{name: "owner replaced", err: fmt.Errorf("%w: it was replaced", errOwnerChanged), wantRetry: "backoff"},
		{name: "shutting down", err: context.Canceled, wantRetry: "backoff"},
		{
			name: "namespace terminating",
			err: &apierrors.StatusError{ErrStatus: metav1.Status{
				Status: metav1.StatusFailure, Code: http.StatusForbidden, Reason: metav1.StatusReasonForbidden, Message: "namespace is being terminated",
				Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{{Type: corev1.NamespaceTerminatingCause}}},
			}},
			wantRetry: "dropped",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := failed("Deployment", tt.err)
			if o.reason != tt.wantReason {
				t.Errorf("reason = %q, want %q", o.reason, tt.wantReason)
			}
			if o.shown() && o.message == "" {
				t.Errorf("reason %s has no message", o.reason)
			}
			retry := retryOf(o)
			if retry != tt.wantRetry {
				t.Errorf("outcome %+v is retried %q, want %q", o, retry, tt.wantRetry)
			}
		})
	}
}
