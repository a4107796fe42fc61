//go:build integration

package status

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
	"github.com/kubelite/memcached-operator/test/integration/framework"
)

// foreignRecheckInterval is how long after a sync that found a child it
// cannot own the operator syncs the Memcached again: foreignRecheckInterval
// in the repository root's controller.go, which no flag sets.
const foreignRecheckInterval = time.Minute

// TestIntegrationRecreatedMemcachedWaitsForPredecessor deletes a Memcached
// whose Deployment someone else's finalizer holds, and creates it again
// under the same name. The new one must say what it waits for, and create
// its own Deployment once the old one is released, before its recheck.
func TestIntegrationRecreatedMemcachedWaitsForPredecessor(t *testing.T) {
	t.Parallel()
	ns := framework.NewNamespace(t)
	framework.StartOperator(t, ns)
	ctx := context.Background()
	framework.CreateMemcached(t, ns, "cache", nil)
	old := framework.WaitConverged(t, ns, "cache", metav1.ConditionTrue)

	const hold = "kubelite.io/test-hold"
	deployments := framework.Kube().AppsV1().Deployments(ns)
	if _, err := deployments.Patch(ctx, "cache", types.MergePatchType, []byte(`{"metadata":{"finalizers":["`+hold+`"]}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	release := func() {
		_, err := deployments.Patch(ctx, "cache", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("releasing the old Deployment: %v", err)
		}
	}
	t.Cleanup(release)
	if err := framework.Memcacheds().CacheV1beta1().Memcacheds(ns).Delete(ctx, "cache", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, framework.WaitLong, "the garbage collector marks the old Deployment deleted", func(ctx context.Context) (bool, string) {
		dep, err := framework.GetDeployment(ctx, ns, "cache")
		if err != nil {
			return false, err.Error()
		}
		return dep.DeletionTimestamp != nil, fmt.Sprintf("deletionTimestamp %v", dep.DeletionTimestamp)
	})

	framework.CreateMemcached(t, ns, "cache", nil)
	var waiting metav1.Condition
	framework.Eventually(t, framework.WaitLong, "the new Memcached says what it waits for", func(ctx context.Context) (bool, string) {
		mc, err := framework.GetMemcached(ctx, ns, "cache")
		if err != nil {
			return false, err.Error()
		}
		p, d := framework.Condition(mc, cachev1beta1.ConditionProgressing), framework.Condition(mc, cachev1beta1.ConditionDegraded)
		waiting = p
		return p.Status == metav1.ConditionFalse && p.Reason == cachev1beta1.ReasonWaitingForPredecessor &&
				strings.Contains(p.Message, hold) && strings.Contains(p.Message, string(old.UID)) && d.Status == metav1.ConditionFalse,
			fmt.Sprintf("Progressing %+v, Degraded %+v", p, d)
	})

	released := time.Now()
	release()
	// The sync that reported the wait, at or after the condition's
	// transition, queued the recheck foreignRecheckInterval later; the
	// wait ends before the recheck can come, so only the old child's
	// deletion event can get the new Deployment created in it. The time is
	// the operator's, in whole seconds rounded down, so never late.
	recheck := waiting.LastTransitionTime.Add(foreignRecheckInterval)
	var took time.Duration
	framework.Eventually(t, time.Until(recheck), "the new Memcached owns a Deployment before its recheck at "+recheck.Format(time.TimeOnly), func(ctx context.Context) (bool, string) {
		mc, err := framework.GetMemcached(ctx, ns, "cache")
		if err != nil {
			return false, err.Error()
		}
		dep, err := framework.GetDeployment(ctx, ns, "cache")
		if err != nil {
			return false, err.Error()
		}
		ref := metav1.GetControllerOf(dep)
		took = time.Since(released)
		return ref != nil && ref.UID == mc.UID, fmt.Sprintf("controller %+v, Memcached UID %s", ref, mc.UID)
	})
	t.Logf("the new Deployment existed %s after the old one was released", took.Round(time.Millisecond))
	framework.WaitConverged(t, ns, "cache", metav1.ConditionTrue)
}
