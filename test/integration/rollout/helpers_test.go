//go:build integration

package rollout

import (
	"context"
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
	"github.com/kubelite/memcached-operator/pkg/resources"
	"github.com/kubelite/memcached-operator/test/integration/framework"
)

// condition returns the Memcached's condition of type condType, or an
// empty one.
func condition(mc *cachev1beta1.Memcached, condType string) metav1.Condition {
	if c := meta.FindStatusCondition(mc.Status.Conditions, condType); c != nil {
		return *c
	}
	return metav1.Condition{}
}

// patchSpec merge-patches the Memcached; a merge patch carries no
// resourceVersion, so the operator's status writes cannot conflict with it.
func patchSpec(t *testing.T, ns, name, patch string) {
	t.Helper()
	if _, err := framework.Memcacheds().CacheV1beta1().Memcacheds(ns).Patch(context.Background(), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatalf("patching Memcached %s/%s: %v", ns, name, err)
	}
}

// updateSpec changes the spec of a Memcached with an update, read again
// and retried on a Conflict, and returns the Memcached as updated.
func updateSpec(t *testing.T, ns, name string, change func(*cachev1beta1.MemcachedSpec)) *cachev1beta1.Memcached {
	t.Helper()
	var updated *cachev1beta1.Memcached
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		mc, err := framework.GetMemcached(context.Background(), ns, name)
		if err != nil {
			return err
		}
		change(&mc.Spec)
		updated, err = framework.Memcacheds().CacheV1beta1().Memcacheds(ns).Update(context.Background(), mc, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("updating the spec of %s: %v", name, err)
	}
	return updated
}

// normalEvents returns the Normal Events about the Memcached with reason.
func normalEvents(t *testing.T, ns, name, reason string) []string {
	t.Helper()
	list, err := framework.Kube().CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{
		FieldSelector: "involvedObject.kind=Memcached,involvedObject.name=" + name + ",reason=" + reason + ",type=Normal",
	})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range list.Items {
		out = append(out, e.Message)
	}
	return out
}

// preStopSeconds is the memcached container's preStop sleep, 0 if none.
func preStopSeconds(d *appsv1.Deployment) int64 {
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name == resources.MemcachedContainerName && c.Lifecycle != nil && c.Lifecycle.PreStop != nil && c.Lifecycle.PreStop.Sleep != nil {
			return c.Lifecycle.PreStop.Sleep.Seconds
		}
	}
	return 0
}

// setUnschedulable cordons or uncordons every node of the package's
// cluster. Every test that schedules Pods sees it, so a test that cordons
// does not run in parallel with others (see its comment).
func setUnschedulable(t *testing.T, unschedulable bool) {
	t.Helper()
	ctx := context.Background()
	nodes, err := framework.Kube().CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	patch := fmt.Appendf(nil, `{"spec":{"unschedulable":%t}}`, unschedulable)
	for _, n := range nodes.Items {
		if _, err := framework.Kube().CoreV1().Nodes().Patch(ctx, n.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatalf("setting node %s unschedulable=%t: %v", n.Name, unschedulable, err)
		}
	}
}

// cordonUntilCleanup cordons every node now and uncordons them when the
// test ends, whatever the test did in between, so that the tests after it
// find the nodes schedulable.
func cordonUntilCleanup(t *testing.T) {
	t.Helper()
	setUnschedulable(t, true)
	t.Cleanup(func() { setUnschedulable(t, false) })
}
