//go:build integration

package rollout

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
	"github.com/kubelite/memcached-operator/pkg/resources"
	"github.com/kubelite/memcached-operator/test/integration/framework"
)

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

// preStopSeconds is the memcached container's preStop sleep, 0 if none.
func preStopSeconds(d *appsv1.Deployment) int64 {
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name == resources.MemcachedContainerName && c.Lifecycle != nil && c.Lifecycle.PreStop != nil && c.Lifecycle.PreStop.Sleep != nil {
			return c.Lifecycle.PreStop.Sleep.Seconds
		}
	}
	return 0
}

// cordonUntilCleanup cordons every node now and uncordons them when the
// test ends, whatever the test did in between, so that the tests after it
// find the nodes schedulable.
func cordonUntilCleanup(t *testing.T) {
	t.Helper()
	framework.SetUnschedulable(t, true)
	t.Cleanup(func() { framework.SetUnschedulable(t, false) })
}
