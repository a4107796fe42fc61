package framework

import (
	"context"
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
)

// CreateMemcached creates a Memcached with the spec mutate gives it.
func CreateMemcached(t *testing.T, ns, name string, mutate func(*cachev1beta1.MemcachedSpec)) *cachev1beta1.Memcached {
	t.Helper()
	mc := &cachev1beta1.Memcached{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
	if mutate != nil {
		mutate(&mc.Spec)
	}
	created, err := env.mc.CacheV1beta1().Memcacheds(ns).Create(context.Background(), mc, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating Memcached %s/%s: %v", ns, name, err)
	}
	return created
}

// GetMemcached reads a Memcached.
func GetMemcached(ctx context.Context, ns, name string) (*cachev1beta1.Memcached, error) {
	return env.mc.CacheV1beta1().Memcacheds(ns).Get(ctx, name, metav1.GetOptions{})
}

// GetDeployment reads a Deployment.
func GetDeployment(ctx context.Context, ns, name string) (*appsv1.Deployment, error) {
	return env.kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
}

// WaitConverged waits until the Memcached's status describes its current
// generation and Available has the wanted status; when that is True, also
// until Progressing says the rollout is complete.
func WaitConverged(t *testing.T, ns, name string, available metav1.ConditionStatus) *cachev1beta1.Memcached {
	t.Helper()
	var mc *cachev1beta1.Memcached
	Eventually(t, WaitLong, "Memcached "+ns+"/"+name+" converges", func(ctx context.Context) (bool, string) {
		var err error
		if mc, err = GetMemcached(ctx, ns, name); err != nil {
			return false, err.Error()
		}
		cond := meta.FindStatusCondition(mc.Status.Conditions, cachev1beta1.ConditionAvailable)
		prog := meta.FindStatusCondition(mc.Status.Conditions, cachev1beta1.ConditionProgressing)
		ok := mc.Status.ObservedGeneration == mc.Generation && cond != nil && cond.Status == available &&
			(available != metav1.ConditionTrue || (prog != nil && prog.Reason == cachev1beta1.ReasonComplete))
		return ok, fmt.Sprintf("generation %d, status %+v", mc.Generation, mc.Status)
	})
	return mc
}

// WaitProgressing waits for the Memcached's Progressing condition to have
// reason at its current generation.
func WaitProgressing(t *testing.T, ns, name, reason string) {
	t.Helper()
	Eventually(t, WaitLong, "Progressing is "+reason, func(ctx context.Context) (bool, string) {
		mc, err := GetMemcached(ctx, ns, name)
		if err != nil {
			return false, err.Error()
		}
		prog := meta.FindStatusCondition(mc.Status.Conditions, cachev1beta1.ConditionProgressing)
		return prog != nil && prog.Reason == reason && prog.ObservedGeneration == mc.Generation, fmt.Sprintf("Progressing %+v", prog)
	})
}

// PodOf is the spec's Pod overrides, made empty first when unset, for a
// mutate function of CreateMemcached to fill in.
func PodOf(s *cachev1beta1.MemcachedSpec) *cachev1beta1.PodOverrides {
	if s.Pod == nil {
		s.Pod = &cachev1beta1.PodOverrides{}
	}
	return s.Pod
}

// Condition returns the Memcached's condition of type condType, or an
// empty one.
func Condition(mc *cachev1beta1.Memcached, condType string) metav1.Condition {
	if c := meta.FindStatusCondition(mc.Status.Conditions, condType); c != nil {
		return *c
	}
	return metav1.Condition{}
}

// PatchSpec merge-patches the Memcached, as `kubectl patch --type=merge`
// does. A merge patch carries no resourceVersion, so the operator's status
// writes cannot make it conflict.
func PatchSpec(t *testing.T, ns, name, patch string) {
	t.Helper()
	if _, err := env.mc.CacheV1beta1().Memcacheds(ns).Patch(context.Background(), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatalf("patching Memcached %s/%s: %v", ns, name, err)
	}
}
