//go:build integration

package children

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
	"github.com/kubelite/memcached-operator/test/integration/framework"
)

// TestIntegrationDeletionWithTheOperatorDown deletes converged Memcacheds
// while no operator runs, then starts one. The garbage collector of the
// control plane's kube-controller-manager acts on the deletions meanwhile.
//
//   - orphan: set to deletionPolicy Orphan only after the operator stopped,
//     then deleted. Its Deployment, Service and PodDisruptionBudget must
//     outlive it: while the operator is down they keep their owner and
//     wait, and once it runs they end without owner, the same objects.
//   - delete: deletionPolicy Delete. Its children wait for the operator
//     too, then the garbage collector deletes them.
//   - cascade-orphan: deletionPolicy Delete, deleted as `kubectl delete
//     --cascade=orphan` does. The garbage collector releases the children
//     at once, without the operator; the Memcached waits for the operator
//     and then goes, and the children stay.
//   - late-cascade: the same, deleted with --cascade=orphan only once it
//     waits in deletion, as after an uninstall (docs/operations.md).
//
// A Memcached the operator never saw, created and deleted meanwhile, goes
// at once with its dependent; that it has gone tells that the garbage
// collector has processed a deletion made after the others.
func TestIntegrationDeletionWithTheOperatorDown(t *testing.T) {
	t.Parallel()
	ns := framework.NewNamespace(t)
	op := framework.StartOperator(t, ns)
	ctx := context.Background()
	names := []string{"orphan", "delete", "cascade-orphan", "late-cascade"}
	cascaded := []string{"cascade-orphan", "late-cascade"}
	for _, name := range names {
		framework.CreateMemcached(t, ns, name, func(s *cachev1beta1.MemcachedSpec) { s.Replicas = ptr.To[int32](1) })
	}
	children := map[string]map[string]types.UID{}
	for _, name := range names {
		framework.WaitConverged(t, ns, name, metav1.ConditionTrue)
		children[name] = childUIDs(t, ns, name)
	}
	if err := op.Terminate(time.Minute); err != nil {
		t.Fatalf("stopping the operator: %v", err)
	}

	framework.PatchSpec(t, ns, "orphan", `{"spec":{"deletionPolicy":"Orphan"}}`)
	mcs := framework.Memcacheds().CacheV1beta1().Memcacheds(ns)
	for _, name := range []string{"orphan", "delete", "late-cascade"} {
		if err := mcs.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range cascaded {
		if err := mcs.Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationOrphan)}); err != nil {
			t.Fatal(err)
		}
	}
	unseen := framework.CreateMemcached(t, ns, "unseen", nil)
	canary := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "gc-canary", OwnerReferences: []metav1.OwnerReference{{
		APIVersion: cachev1beta1.GroupVersion.String(), Kind: "Memcached", Name: unseen.Name, UID: unseen.UID,
	}}}}
	if _, err := framework.Kube().CoreV1().ConfigMaps(ns).Create(ctx, canary, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := mcs.Delete(ctx, unseen.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, framework.WaitLong, "the Memcached the operator never saw goes, and the garbage collector deletes its dependent", func(ctx context.Context) (bool, string) {
		_, err := framework.GetMemcached(ctx, ns, unseen.Name)
		_, canaryErr := framework.Kube().CoreV1().ConfigMaps(ns).Get(ctx, canary.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err) && apierrors.IsNotFound(canaryErr), fmt.Sprint(err, canaryErr)
	})
	for _, name := range cascaded {
		framework.Eventually(t, framework.WaitLong, "the garbage collector releases the children of "+name+", deleted with --cascade=orphan", func(ctx context.Context) (bool, string) {
			// Whether the Memcached is still there is checked below.
			var finalizers []string
			switch mc, err := framework.GetMemcached(ctx, ns, name); {
			case apierrors.IsNotFound(err):
			case err != nil:
				return false, err.Error()
			default:
				finalizers = mc.Finalizers
			}
			owned := ownedChildren(t, ns, name)
			return len(owned) == 0 && !slices.Contains(finalizers, metav1.FinalizerOrphanDependents), fmt.Sprintf("finalizers %v, still owned: %v", finalizers, owned)
		})
	}
	for _, name := range names {
		if got := childUIDs(t, ns, name); !equalUIDs(got, children[name]) {
			t.Errorf("children of %s with the operator down: %v, want the same %v", name, got, children[name])
		}
		mc, err := framework.GetMemcached(ctx, ns, name)
		if err != nil {
			t.Errorf("Memcached %s went without the operator: %v", name, err)
			continue
		}
		if mc.DeletionTimestamp == nil || !slices.Equal(mc.Finalizers, []string{cachev1beta1.ChildrenFinalizer}) {
			t.Errorf("Memcached %s: deletionTimestamp %v, finalizers %v; want it held by %s alone", name, mc.DeletionTimestamp, mc.Finalizers, cachev1beta1.ChildrenFinalizer)
		}
	}
	if owned := ownedChildren(t, ns, "orphan"); len(owned) != 3 {
		t.Errorf("children of orphan still owned with the operator down: %v, want all three (the operator releases them)", owned)
	}

	framework.StartOperator(t, ns)
	framework.Eventually(t, framework.WaitLong, "the operator finalizes every Memcached", func(ctx context.Context) (bool, string) {
		var left []string
		for _, name := range names {
			if _, err := framework.GetMemcached(ctx, ns, name); !apierrors.IsNotFound(err) {
				left = append(left, fmt.Sprintf("%s: %v", name, err))
			}
		}
		return len(left) == 0, fmt.Sprint(left)
	})
	framework.Eventually(t, framework.WaitLong, "the garbage collector deletes the children of the Delete Memcached", func(ctx context.Context) (bool, string) {
		left := childUIDs(t, ns, "delete")
		return len(left) == 0, fmt.Sprintf("left: %v", left)
	})
	for _, name := range append([]string{"orphan"}, cascaded...) {
		if got := childUIDs(t, ns, name); !equalUIDs(got, children[name]) {
			t.Errorf("children of %s after the operator ran: %v, want the same %v", name, got, children[name])
		}
		if owned := ownedChildren(t, ns, name); len(owned) > 0 {
			t.Errorf("children of %s keep an owner: %v", name, owned)
		}
	}
}

// childUIDs returns the UIDs of the Memcached's Deployment, Service and
// PodDisruptionBudget that exist, by kind.
func childUIDs(t *testing.T, ns, name string) map[string]types.UID {
	t.Helper()
	uids := map[string]types.UID{}
	for kind, obj := range childObjects(t, ns, name) {
		uids[kind] = obj.GetUID()
	}
	return uids
}

// ownedChildren names those of the Memcached's Deployment, Service and
// PodDisruptionBudget that have an ownerReference.
func ownedChildren(t *testing.T, ns, name string) []string {
	t.Helper()
	var owned []string
	for kind, obj := range childObjects(t, ns, name) {
		if refs := obj.GetOwnerReferences(); len(refs) > 0 {
			owned = append(owned, fmt.Sprintf("%s owned by %v", kind, refs))
		}
	}
	slices.Sort(owned)
	return owned
}

// childObjects reads the Memcached's Deployment, Service and
// PodDisruptionBudget from the apiserver, leaving out those that do not
// exist.
func childObjects(t *testing.T, ns, name string) map[string]metav1.Object {
	t.Helper()
	ctx := context.Background()
	objs := map[string]metav1.Object{}
	add := func(kind string, obj metav1.Object, err error) {
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			t.Fatalf("reading the %s of %s: %v", kind, name, err)
		default:
			objs[kind] = obj
		}
	}
	dep, err := framework.Kube().AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
	add("Deployment", dep, err)
	svc, err := framework.Kube().CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
	add("Service", svc, err)
	pdb, err := framework.Kube().PolicyV1().PodDisruptionBudgets(ns).Get(ctx, name, metav1.GetOptions{})
	add("PodDisruptionBudget", pdb, err)
	return objs
}

// equalUIDs reports whether got holds exactly the three children of want,
// each with the same UID.
func equalUIDs(got, want map[string]types.UID) bool {
	if len(want) != 3 || len(got) != len(want) {
		return false
	}
	for kind, uid := range want {
		if got[kind] != uid {
			return false
		}
	}
	return true
}
