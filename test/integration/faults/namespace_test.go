//go:build integration

package faults

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
	"github.com/kubelite/memcached-operator/pkg/localcluster"
	"github.com/kubelite/memcached-operator/pkg/metrics"
	"github.com/kubelite/memcached-operator/test/integration/framework"
)

// TestFaultNamespaceDeletion deletes a namespace that holds Memcacheds of
// both deletion policies, each with the operator's finalizer, with the
// operator running. Expected: the namespace finishes deleting; no
// finalizer is left behind.
func TestFaultNamespaceDeletion(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := namespaceDeletedByTest(t, "fault-ns-deletion")
	framework.StartOperator(t, ns)
	for i := range 6 {
		framework.CreateMemcached(t, ns, fmt.Sprintf("cache-%d", i), func(s *cachev1beta1.MemcachedSpec) {
			if i%2 == 0 {
				s.DeletionPolicy = cachev1beta1.DeletionPolicyOrphan
			}
		})
	}
	for i := range 6 {
		mc := framework.WaitConverged(t, ns, fmt.Sprintf("cache-%d", i), metav1.ConditionTrue)
		if !slices.Contains(mc.Finalizers, cachev1beta1.ChildrenFinalizer) {
			t.Fatalf("%s: finalizers = %v, want %s", mc.Name, mc.Finalizers, cachev1beta1.ChildrenFinalizer)
		}
	}
	start := time.Now()
	if err := framework.Kube().CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 2*time.Minute, "the namespace is deleted", func(ctx context.Context) (bool, string) {
		_, err := framework.Kube().CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, ""
		}
		mcs, listErr := framework.Memcacheds().CacheV1beta1().Memcacheds(ns).List(ctx, metav1.ListOptions{})
		if listErr != nil {
			return false, listErr.Error()
		}
		var left []string
		for _, mc := range mcs.Items {
			left = append(left, fmt.Sprintf("%s finalizers=%v", mc.Name, mc.Finalizers))
		}
		return false, fmt.Sprintf("namespace: %v; Memcacheds left: %v", err, left)
	})
	t.Logf("namespace with 6 Memcacheds (3 with deletionPolicy Orphan), each with the finalizer, deleted in %s", time.Since(start).Round(100*time.Millisecond))
}

// TestFaultNamespaceTerminatingIsNoError keeps a Memcached alive in a
// namespace that is being deleted: a policy refuses the deletion of
// Memcacheds there, so the namespace controller deletes the children under
// it. The operator then syncs the Memcached and its creates are refused
// because the namespace is terminating. That key is done, not failed: the
// reconcile metric counts no error for it, and it is not retried.
func TestFaultNamespaceTerminatingIsNoError(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := namespaceDeletedByTest(t, "fault-ns-terminating")
	namespaces := framework.Kube().CoreV1().Namespaces()
	// No resync in the test's window: each would sync the Memcached, and
	// so write the Deployment, once more than the events do.
	op := framework.StartOperator(t, ns, "--resync-period=1h")
	framework.CreateMemcached(t, ns, "cache", func(s *cachev1beta1.MemcachedSpec) { s.Replicas = ptr.To[int32](0) })
	framework.WaitConverged(t, ns, "cache", metav1.ConditionFalse)
	// Converged at zero replicas, the Memcached may still wait for the
	// Deployment controller to observe its Deployment. That sync, if it
	// came after the namespace controller deleted the Deployment, would
	// try the create once more than the events do.
	framework.WaitProgressing(t, ns, "cache", cachev1beta1.ReasonComplete)
	op.WaitQuiet(t)

	unprotect := protectMemcacheds(t, ns)
	// Registered after the operator started, so it runs before the
	// operator is stopped: the Memcached's finalizer needs the operator.
	t.Cleanup(func() {
		// Lets the namespace controller finish, then waits for it, with
		// the operator still running.
		unprotect()
		framework.Eventually(t, 2*time.Minute, "the namespace is deleted", func(ctx context.Context) (bool, string) {
			_, err := namespaces.Get(ctx, ns, metav1.GetOptions{})
			return apierrors.IsNotFound(err), fmt.Sprint(err)
		})
	})
	errorsBefore := syncErrors(t, op)
	mark := len(op.Writes(t))
	if err := namespaces.Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 2*time.Minute, "a create refused because the namespace is terminating", func(context.Context) (bool, string) {
		refused := slices.DeleteFunc(op.Writes(t)[mark:], func(e localcluster.AuditEvent) bool {
			return e.Code() != http.StatusForbidden || e.RBACDenied()
		})
		return len(refused) > 0, fmt.Sprintf("%d refused writes", len(refused))
	})
	// Once the operator is quiet, every sync that met the refusal has
	// been counted; retried with backoff, it would have synced again.
	op.WaitQuiet(t)
	if got := syncErrors(t, op) - errorsBefore; got != 0 {
		t.Errorf("%v syncs counted as errors in a terminating namespace, want 0", got)
	}
	deploymentWrites := slices.DeleteFunc(op.Writes(t)[mark:], func(e localcluster.AuditEvent) bool { return e.Resource() != "deployments" })
	// The children's deletions sync the Memcached, one sync each at most;
	// a retry with backoff would add a try every few milliseconds.
	if len(deploymentWrites) > 3 {
		t.Errorf("%d writes of the Deployment in the terminating namespace, want at most one per event: %v", len(deploymentWrites), deploymentWrites)
	}
}

// syncErrors is memcached_operator_reconcile_total{result="error"} from the
// operator's /metrics.
func syncErrors(t *testing.T, op *framework.Operator) float64 {
	t.Helper()
	m, err := op.Metrics()
	if err != nil {
		t.Fatal(err)
	}
	return m.Sum("memcached_operator_reconcile_total", map[string]string{"result": metrics.ResultError})
}

// namespaceDeletedByTest creates a namespace, named prefix-suffix, for a
// test that deletes it itself. Should the test end before it does, the
// namespace is deleted as framework.DeleteNamespace deletes one.
func namespaceDeletedByTest(t *testing.T, prefix string) string {
	t.Helper()
	ctx := context.Background()
	ns := fmt.Sprintf("%s-%d", prefix, time.Now().UnixNano()%100000)
	namespaces := framework.Kube().CoreV1().Namespaces()
	if _, err := namespaces.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		got, err := namespaces.Get(ctx, ns, metav1.GetOptions{})
		if apierrors.IsNotFound(err) || (err == nil && got.DeletionTimestamp != nil) {
			return
		}
		framework.DeleteNamespace(t, ns)
	})
	return ns
}

// protectMemcacheds has a ValidatingAdmissionPolicy refuse the deletion of
// every Memcached in ns, and returns what removes it.
func protectMemcacheds(t *testing.T, ns string) func() {
	t.Helper()
	remove := framework.DenyInNamespace(t, "keep-"+ns, ns, admissionregistrationv1.RuleWithOperations{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Delete},
		Rule: admissionregistrationv1.Rule{
			APIGroups: []string{cachev1beta1.GroupName}, APIVersions: []string{"*"}, Resources: []string{"memcacheds"},
		},
	}, "Memcacheds are kept in this namespace")
	framework.Eventually(t, 30*time.Second, "the deletion of Memcacheds is refused", func(ctx context.Context) (bool, string) {
		err := framework.Memcacheds().CacheV1beta1().Memcacheds(ns).Delete(ctx, "cache", metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil && strings.Contains(err.Error(), "kept in this namespace"), fmt.Sprint(err)
	})
	return remove
}
