//go:build integration

package rollout

import (
	"context"
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
	"github.com/kubelite/memcached-operator/test/integration/framework"
)

// TestIntegrationPodQuotaHoldsTheRollout runs a Memcached of 2 replicas in
// a namespace whose pod quota it fills, then changes its Pod template: the
// rollout's surge Pod (maxSurge 1, maxUnavailable 0) is refused, so the
// cache cannot roll at all, and the Memcached says so with the quota's
// words, Degraded=True QuotaExceeded. Raising the quota lets the rollout
// finish and clears it.
func TestIntegrationPodQuotaHoldsTheRollout(t *testing.T) {
	t.Parallel()
	ns := framework.NewNamespace(t)
	framework.StartOperator(t, ns)
	ctx := context.Background()
	quotas := framework.Kube().CoreV1().ResourceQuotas(ns)
	if _, err := quotas.Create(ctx, &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "pods"},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("2")}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.CreateMemcached(t, ns, "cache", func(s *cachev1beta1.MemcachedSpec) { s.Replicas = ptr.To[int32](2) })
	framework.WaitConverged(t, ns, "cache", metav1.ConditionTrue)

	framework.PatchSpec(t, ns, "cache", `{"spec":{"pod":{"annotations":{"example.com/rolled":"yes"}}}}`)
	framework.Eventually(t, framework.WaitLong, "Degraded=QuotaExceeded quoting the pod quota", func(ctx context.Context) (bool, string) {
		mc, err := framework.GetMemcached(ctx, ns, "cache")
		if err != nil {
			return false, err.Error()
		}
		d := framework.Condition(mc, cachev1beta1.ConditionDegraded)
		return d.Status == metav1.ConditionTrue && d.Reason == cachev1beta1.ReasonQuotaExceeded && strings.Contains(d.Message, "exceeded quota: pods"),
			fmt.Sprintf("%+v", d)
	})
	mc, err := framework.GetMemcached(ctx, ns, "cache")
	if err != nil {
		t.Fatal(err)
	}
	if a := framework.Condition(mc, cachev1beta1.ConditionAvailable); a.Status != metav1.ConditionTrue {
		t.Errorf("Available = %+v while the old Pods serve", a)
	}

	// A merge patch of spec.hard, which the quota controller's status
	// writes cannot conflict with.
	if _, err := quotas.Patch(ctx, "pods", types.MergePatchType, []byte(`{"spec":{"hard":{"pods":"3"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	// The ReplicaSet controller retries a refused Pod with its own
	// backoff, which has grown for as long as the quota refused it: the
	// wait is generous.
	framework.Eventually(t, 3*framework.WaitLong, "the rollout finishes and Degraded clears", func(ctx context.Context) (bool, string) {
		mc, err := framework.GetMemcached(ctx, ns, "cache")
		if err != nil {
			return false, err.Error()
		}
		d, p := framework.Condition(mc, cachev1beta1.ConditionDegraded), framework.Condition(mc, cachev1beta1.ConditionProgressing)
		dep, err := framework.GetDeployment(ctx, ns, "cache")
		if err != nil {
			return false, err.Error()
		}
		return d.Status == metav1.ConditionFalse && p.Reason == cachev1beta1.ReasonComplete && dep.Status.UpdatedReplicas == 2 && !hasReplicaFailure(dep),
			fmt.Sprintf("Degraded %+v, Progressing %+v, %d updated", d, p, dep.Status.UpdatedReplicas)
	})
}

// hasReplicaFailure reports whether the Deployment says its ReplicaSet
// cannot create Pods.
func hasReplicaFailure(dep *appsv1.Deployment) bool {
	for _, c := range dep.Status.Conditions {
		if c.Type == appsv1.DeploymentReplicaFailure && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}
