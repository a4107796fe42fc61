//go:build integration

package faults

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
	"github.com/kubelite/memcached-operator/pkg/localcluster"
	"github.com/kubelite/memcached-operator/test/integration/framework"
)

// errorLine is a line of the operator's log at error level, in klog's text
// format.
var errorLine = regexp.MustCompile(`(?m)^E\d{4} .*$`)

// workqueueRetries reads workqueue_retries_total of the operator's
// "memcached" queue from its /metrics. It only grows, so tests compare two
// readings.
func workqueueRetries(t *testing.T, op *framework.Operator) float64 {
	t.Helper()
	m, err := op.Metrics()
	if err != nil {
		t.Fatal(err)
	}
	return m.Sum("workqueue_retries_total", map[string]string{"name": "memcached"})
}

// TestFaultRBACRevoked runs the operator under its ServiceAccount and takes
// away its access to Deployments, then gives it back. Expected: no crash;
// the Memcached created meanwhile shows Degraded=Forbidden, the refusals
// are logged and retried with backoff rather than in a loop; after the
// grant it converges without a restart.
//
// It does not run in parallel: the ClusterRole it revokes is the one every
// operator of the package runs under.
func TestFaultRBACRevoked(t *testing.T) {
	const window = 20 * time.Second
	ns := framework.NewNamespace(t)
	op := framework.StartOperator(t, ns)
	op.AllowForbidden = true
	ctx := context.Background()
	framework.CreateMemcached(t, ns, "before", nil)
	framework.WaitConverged(t, ns, "before", metav1.ConditionTrue)

	roles := framework.Kube().RbacV1().ClusterRoles()
	role, err := roles.Get(ctx, "memcached-operator", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	granted := role.Rules
	restore := func() error {
		current, err := roles.Get(ctx, role.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		current.Rules = granted
		_, err = roles.Update(ctx, current, metav1.UpdateOptions{})
		return err
	}
	t.Cleanup(func() {
		if err := restore(); err != nil {
			t.Errorf("restoring the ClusterRole: %v", err)
		}
	})
	revoked := role.DeepCopy()
	revoked.Rules = slices.DeleteFunc(slices.Clone(granted), func(r rbacv1.PolicyRule) bool { return slices.Contains(r.Resources, "deployments") })
	if _, err := roles.Update(ctx, revoked, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The apiserver authorizes from its own informer's copy of the RBAC
	// objects: until that has the revoked rule, the Memcached created next
	// could still get its Deployment. A SubjectAccessReview asks the same
	// authorizer.
	framework.Eventually(t, framework.WaitLong, "the apiserver refuses the operator Deployments", func(ctx context.Context) (bool, string) {
		review, err := framework.Kube().AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
			Spec: authorizationv1.SubjectAccessReviewSpec{
				User:               op.User,
				ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: "create", Group: "apps", Resource: "deployments"},
			},
		}, metav1.CreateOptions{})
		if err != nil {
			return false, err.Error()
		}
		return !review.Status.Allowed, fmt.Sprintf("allowed: %s", review.Status.Reason)
	})
	mark := len(op.Requests(t, localcluster.AuditEvent.RBACDenied))
	retriesBefore := workqueueRetries(t, op)
	start := time.Now()
	framework.CreateMemcached(t, ns, "during", nil)
	framework.Eventually(t, window, "Degraded=Forbidden is reported", func(ctx context.Context) (bool, string) {
		mc, err := framework.GetMemcached(ctx, ns, "during")
		if err != nil {
			return false, err.Error()
		}
		c := meta.FindStatusCondition(mc.Status.Conditions, cachev1beta1.ConditionDegraded)
		return c != nil && c.Status == metav1.ConditionTrue && c.Reason == cachev1beta1.ReasonForbidden, fmt.Sprintf("%+v", c)
	})
	// The rest of the window with the rule revoked, which the refusals
	// below are counted over: the fault held, not a wait for a condition.
	time.Sleep(window - time.Since(start))

	forbidden := op.Requests(t, localcluster.AuditEvent.RBACDenied)[mark:]
	retries := workqueueRetries(t, op) - retriesBefore
	// The per-key backoff doubles from 5ms, so in 20s a key is tried about
	// log2(20s/5ms)+1 = 13 times, and once more on each resync (every
	// framework.Resync); each try sends at most two requests that need
	// Deployment access (a read and an apply). A hot loop would send
	// thousands.
	if limit := 2 * (13 + int(window/framework.Resync)); len(forbidden) == 0 || len(forbidden) > limit {
		t.Errorf("%d requests refused by RBAC in %s, want between 1 and %d: %v", len(forbidden), window, limit, forbidden)
	}
	// An error of the apiserver's RBAC reads "... is forbidden: User ...
	// cannot ...".
	logged := slices.ContainsFunc(errorLine.FindAllString(op.Log(), -1), func(line string) bool {
		return strings.Contains(line, "is forbidden") && strings.Contains(line, "cannot")
	})
	if !logged {
		t.Errorf("the refusals were not logged at error level")
	}

	if err := restore(); err != nil {
		t.Fatal(err)
	}
	grantedAt := time.Now()
	framework.WaitConverged(t, ns, "during", metav1.ConditionTrue)
	mc, err := framework.GetMemcached(ctx, ns, "during")
	if err != nil {
		t.Fatal(err)
	}
	if c := meta.FindStatusCondition(mc.Status.Conditions, cachev1beta1.ConditionDegraded); c == nil || c.Status != metav1.ConditionFalse {
		t.Errorf("Degraded after the grant = %+v, want False", c)
	}
	framework.WaitConverged(t, ns, "before", metav1.ConditionTrue)
	t.Logf("RBAC revoked for %s: %d refused requests, %v retries; converged %s after the grant",
		window, len(forbidden), retries, time.Since(grantedAt).Round(100*time.Millisecond))
}
