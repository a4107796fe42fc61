//go:build integration

package rollout

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
	"github.com/kubelite/memcached-operator/pkg/resources"
	"github.com/kubelite/memcached-operator/test/integration/framework"
)

// TestIntegrationHaltedRolloutHoldsOnlyTheTemplate upgrades the operator,
// with one rollout slot, over two Memcacheds in a namespace whose pod
// quota leaves no room for a surge Pod, so that neither can roll:
//
//   - the one granted the slot misses its progress deadline and says
//     OperatorRolloutHalted; the other waits in OperatorRolloutQueued;
//   - the waiting one still takes a change of replicas alone, without the
//     new template, and has drift outside its template repaired;
//   - a change of the halted one's Pod template by its owner takes the
//     rollout over, and the waiting one is granted the slot.
//
// The Deployments' progress deadline is cut to a few seconds by another
// field manager, as an admin could; the operator does not set it.
// --max-concurrent-rollouts counts the rollouts of one operator, which
// here watches the test's namespace alone.
func TestIntegrationHaltedRolloutHoldsOnlyTheTemplate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := framework.NewNamespace(t)
	nextBin := framework.BuildBinary(t, "renderingnext")
	if _, err := framework.Kube().CoreV1().ResourceQuotas(ns).Create(ctx, &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "pods"},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("2")}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	names := []string{"first", "second"}
	// The Deployments' progress deadline is cut to 5 seconds below, which
	// the apiserver allows only above minReadySeconds.
	for _, name := range names {
		framework.CreateMemcached(t, ns, name, func(s *cachev1beta1.MemcachedSpec) { s.MinReadySeconds = ptr.To[int32](0) })
	}
	old := framework.StartOperator(t, ns, "--max-concurrent-rollouts=1")
	for _, name := range names {
		framework.WaitConverged(t, ns, name, metav1.ConditionTrue)
	}
	if err := old.Terminate(time.Minute); err != nil {
		t.Fatalf("stopping the old build: %v", err)
	}
	for _, name := range names {
		if _, err := framework.Kube().AppsV1().Deployments(ns).Patch(ctx, name, types.MergePatchType,
			[]byte(`{"spec":{"progressDeadlineSeconds":5}}`), metav1.PatchOptions{FieldManager: "admin"}); err != nil {
			t.Fatal(err)
		}
	}

	framework.StartOperatorBinary(t, nextBin, ns, "--max-concurrent-rollouts=1")
	var halted, waiting string
	framework.Eventually(t, framework.WaitLong, "one Memcached halted and the other queued", func(ctx context.Context) (bool, string) {
		halted, waiting = "", ""
		var seen []string
		for _, name := range names {
			mc, err := framework.GetMemcached(ctx, ns, name)
			if err != nil {
				return false, err.Error()
			}
			d, p := framework.Condition(mc, cachev1beta1.ConditionDegraded), framework.Condition(mc, cachev1beta1.ConditionProgressing)
			switch {
			case d.Status == metav1.ConditionTrue && d.Reason == cachev1beta1.ReasonOperatorRolloutHalted:
				halted = name
			case p.Reason == cachev1beta1.ReasonOperatorRolloutQueued:
				waiting = name
			}
			seen = append(seen, fmt.Sprintf("%s: Degraded %s, Progressing %s", name, d.Reason, p.Reason))
		}
		return halted != "" && waiting != "", fmt.Sprint(seen)
	})
	before, err := framework.GetDeployment(ctx, ns, waiting)
	if err != nil {
		t.Fatal(err)
	}
	oldRendering := strconv.Itoa(resources.RenderingVersion)
	heldTemplate := func(d *appsv1.Deployment) bool {
		return d.Annotations[resources.RenderingAnnotation] == oldRendering && preStopSeconds(d) == 5 &&
			d.Annotations[resources.TemplateHashAnnotation] == before.Annotations[resources.TemplateHashAnnotation]
	}
	if !heldTemplate(before) {
		t.Fatalf("the waiting Deployment %s took the new template: rendering %s, preStop %ds", waiting, before.Annotations[resources.RenderingAnnotation], preStopSeconds(before))
	}

	// A scale of the waiting one is applied at once, without the template.
	framework.PatchSpec(t, ns, waiting, `{"spec":{"replicas":2}}`)
	framework.Eventually(t, framework.WaitLong, "the scale reaches the waiting Deployment", func(ctx context.Context) (bool, string) {
		d, err := framework.GetDeployment(ctx, ns, waiting)
		if err != nil {
			return false, err.Error()
		}
		if !heldTemplate(d) {
			t.Fatalf("the scale took the new template along: rendering %s, preStop %ds", d.Annotations[resources.RenderingAnnotation], preStopSeconds(d))
		}
		return ptr.Deref(d.Spec.Replicas, 0) == 2, fmt.Sprintf("replicas %d", ptr.Deref(d.Spec.Replicas, 0))
	})

	// Drift outside its template is repaired while it waits.
	if _, err := framework.Kube().AppsV1().Deployments(ns).Patch(ctx, waiting, types.MergePatchType,
		[]byte(`{"spec":{"strategy":{"rollingUpdate":{"maxSurge":3}}}}`), metav1.PatchOptions{FieldManager: "someone"}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, framework.WaitLong, "the drift of the waiting Deployment is repaired", func(ctx context.Context) (bool, string) {
		d, err := framework.GetDeployment(ctx, ns, waiting)
		if err != nil {
			return false, err.Error()
		}
		if !heldTemplate(d) {
			t.Fatalf("the repair took the new template along: rendering %s, preStop %ds", d.Annotations[resources.RenderingAnnotation], preStopSeconds(d))
		}
		surge := d.Spec.Strategy.RollingUpdate.MaxSurge
		return surge != nil && surge.IntValue() == 1, fmt.Sprintf("maxSurge %v", surge)
	})
	mc, err := framework.GetMemcached(ctx, ns, waiting)
	if err != nil {
		t.Fatal(err)
	}
	if p := meta.FindStatusCondition(mc.Status.Conditions, cachev1beta1.ConditionProgressing); p == nil || p.Reason != cachev1beta1.ReasonOperatorRolloutQueued {
		t.Errorf("the waiting Memcached no longer says it waits: Progressing %+v", p)
	}

	// The halted one's owner changes its template: the rollout is theirs,
	// and the slot passes to the waiting one.
	updateSpec(t, ns, halted, func(s *cachev1beta1.MemcachedSpec) {
		s.Pod = &cachev1beta1.PodOverrides{Annotations: map[string]string{"example.com/owner": "changed"}}
	})
	framework.Eventually(t, framework.WaitLong, "the waiting Memcached is granted the slot", func(ctx context.Context) (bool, string) {
		d, err := framework.GetDeployment(ctx, ns, waiting)
		if err != nil {
			return false, err.Error()
		}
		return d.Annotations[resources.RenderingAnnotation] == strconv.Itoa(resources.RenderingVersion+1) && preStopSeconds(d) == 6,
			fmt.Sprintf("rendering %s, preStop %ds", d.Annotations[resources.RenderingAnnotation], preStopSeconds(d))
	})
	// Its Deployment still cannot roll, now for its owner's change: the
	// quota, not a halt, is what it says.
	framework.Eventually(t, framework.WaitLong, "the Memcached whose owner took the rollout over is no longer halted", func(ctx context.Context) (bool, string) {
		mc, err := framework.GetMemcached(ctx, ns, halted)
		if err != nil {
			return false, err.Error()
		}
		d := framework.Condition(mc, cachev1beta1.ConditionDegraded)
		return mc.Status.ObservedGeneration == mc.Generation && d.Reason == cachev1beta1.ReasonQuotaExceeded, fmt.Sprintf("Degraded %+v", d)
	})
}
