//go:build integration

package install

import (
	"context"
	"net/http"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
	"github.com/kubelite/memcached-operator/test/integration/framework"
)

// TestIntegrationNamespaceScope runs the operator with --namespace under
// the namespaced RBAC of artifacts/namespaced: it converges objects in its
// namespace, leaves others alone, and needs no cluster-wide permission.
func TestIntegrationNamespaceScope(t *testing.T) {
	t.Parallel()
	const watched = "memcached" // The namespace artifacts/namespaced is written for.
	ctx := context.Background()
	// Cleanup deletes it without waiting, so a run before this one
	// (-count) may have left it terminating.
	framework.Eventually(t, 2*time.Minute, "namespace "+watched+" of an earlier run is gone", func(ctx context.Context) (bool, string) {
		_, err := framework.Kube().CoreV1().Namespaces().Get(ctx, watched, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return true, ""
		case err != nil:
			return false, err.Error()
		}
		return false, "it still exists"
	})
	if _, err := framework.Kube().CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: watched}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { framework.DeleteNamespace(t, watched) })
	if err := framework.Cluster().ApplyFiles(ctx, framework.Path("artifacts/namespaced/rbac.yaml"), framework.Path("artifacts/namespaced/cluster.yaml")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = framework.Kube().RbacV1().ClusterRoleBindings().Delete(context.Background(), "memcached-operator-auth-delegator", metav1.DeleteOptions{})
	})
	kubeconfig, err := framework.Cluster().ServiceAccountKubeconfig(ctx, watched, "memcached-operator")
	if err != nil {
		t.Fatal(err)
	}
	other := framework.NewNamespace(t)
	framework.CreateMemcached(t, other, "cache", nil)

	// Leader election on, as the namespaced install runs it: the Lease,
	// its watch and the Events all need the namespaced Role.
	// Secure metrics, as shipped: the reviews need the install's
	// cluster-wide grants, cluster.yaml.
	op := framework.StartOperator(t, watched, "--kubeconfig="+kubeconfig, "--leader-elect=true", "--leader-election-namespace="+watched, "--metrics-secure=true")
	op.User = "system:serviceaccount:" + watched + ":memcached-operator"
	framework.CreateMemcached(t, watched, "cache", func(s *cachev1beta1.MemcachedSpec) { s.Replicas = ptr.To[int32](2) })
	framework.WaitConverged(t, watched, "cache", metav1.ConditionTrue)
	op.WaitQuiet(t)
	lease, err := framework.Kube().CoordinationV1().Leases(watched).Get(ctx, "memcached-operator", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the namespaced operator's Lease: %v", err)
	}
	if ptr.Deref(lease.Spec.HolderIdentity, "") == "" {
		t.Errorf("the namespaced operator converged a Memcached without holding its Lease")
	}

	if code, body := framework.GetWithToken("https://"+op.MetricsAddr+"/metrics", framework.MetricsReaderToken(t)); code != http.StatusOK {
		t.Errorf("the namespaced operator's /metrics for the metrics reader: %d %s", code, body)
	}

	mc, err := framework.GetMemcached(ctx, other, "cache")
	if err != nil {
		t.Fatal(err)
	}
	if mc.Status.ObservedGeneration != 0 || len(mc.Status.Conditions) != 0 {
		t.Errorf("Memcached outside --namespace was synced: %+v", mc.Status)
	}
	if _, err := framework.GetDeployment(ctx, other, "cache"); err == nil {
		t.Errorf("Deployment created outside --namespace")
	}
}
