//go:build integration

package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
)

const waitLong = 120 * time.Second

func createMemcached(t *testing.T, ns, name string, mutate func(*cachev1beta1.MemcachedSpec)) *cachev1beta1.Memcached {
	t.Helper()
	mc := &cachev1beta1.Memcached{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
	if mutate != nil {
		mutate(&mc.Spec)
	}
	created, err := suite.mc.CacheV1beta1().Memcacheds(ns).Create(context.Background(), mc, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating Memcached: %v", err)
	}
	return created
}

func fetchMemcached(ctx context.Context, ns, name string) (*cachev1beta1.Memcached, error) {
	return suite.mc.CacheV1beta1().Memcacheds(ns).Get(ctx, name, metav1.GetOptions{})
}

// waitConverged waits until status describes the current generation and
// Available has the wanted status.
func waitConverged(t *testing.T, ns, name string, available metav1.ConditionStatus) *cachev1beta1.Memcached {
	t.Helper()
	var mc *cachev1beta1.Memcached
	eventually(t, waitLong, "Memcached converges", func(ctx context.Context) (bool, string) {
		var err error
		if mc, err = fetchMemcached(ctx, ns, name); err != nil {
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

func fetchDeployment(ctx context.Context, ns, name string) (*appsv1.Deployment, error) {
	return suite.kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
}
