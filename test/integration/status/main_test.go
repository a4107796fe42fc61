//go:build integration

// Package status tests what a Memcached's status tells its user about one
// Memcached's lifecycle: Available only with a serving Pod, a write the
// cluster refuses shown as Degraded with its reason and one Warning Event
// and cleared without an edit once the cause is gone, a recreated
// Memcached waiting for its predecessor's children, and an image with
// known security holes.
package status

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
	"github.com/kubelite/memcached-operator/test/integration/framework"
)

func TestMain(m *testing.M) {
	framework.Main(m, framework.Config{})
}

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
