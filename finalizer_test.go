package main

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	core "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
)

func TestSyncFinalizer(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	releaseChildren := []expectedAction{
		getDeployment, {"patch", deploymentsResource, ""},
		getService, {"patch", servicesResource, ""},
		getPDB, {"patch", pdbsResource, ""},
		getNP,
		patchMemcached,
	}
	tests := []struct {
		name   string
		mutate func(*cachev1beta1.Memcached)
		want   []expectedAction
		// wantFinalizers are the Memcached's finalizers afterwards.
		wantFinalizers []string
		// wantOwnerRefs is whether the children keep their ownerReferences.
		wantOwnerRefs bool
	}{
		{
			name:           "delete policy adds the finalizer",
			mutate:         func(mc *cachev1beta1.Memcached) { mc.Finalizers = nil },
			want:           []expectedAction{patchMemcached},
			wantFinalizers: []string{cachev1beta1.ChildrenFinalizer},
			wantOwnerRefs:  true,
		},
		{
			name: "orphan policy adds the same finalizer",
			mutate: func(mc *cachev1beta1.Memcached) {
				mc.Spec.DeletionPolicy = cachev1beta1.DeletionPolicyOrphan
				mc.Finalizers = []string{"example.com/other"}
			},
			want:           []expectedAction{patchMemcached},
			wantFinalizers: []string{"example.com/other", cachev1beta1.ChildrenFinalizer},
			wantOwnerRefs:  true,
		},
		{
			name: "the legacy orphan finalizer is replaced in one patch",
			mutate: func(mc *cachev1beta1.Memcached) {
				mc.Spec.DeletionPolicy = cachev1beta1.DeletionPolicyOrphan
				mc.Finalizers = []string{legacyOrphanFinalizer, "example.com/other"}
			},
			want:           []expectedAction{patchMemcached},
			wantFinalizers: []string{"example.com/other", cachev1beta1.ChildrenFinalizer},
			wantOwnerRefs:  true,
		},
		{
			name: "the legacy finalizer beside the new one is removed",
			mutate: func(mc *cachev1beta1.Memcached) {
				mc.Finalizers = []string{cachev1beta1.ChildrenFinalizer, legacyOrphanFinalizer}
			},
			want:           []expectedAction{patchMemcached},
			wantFinalizers: []string{cachev1beta1.ChildrenFinalizer},
			wantOwnerRefs:  true,
		},
		{
			name: "orphan policy with the finalizer writes nothing",
			mutate: func(mc *cachev1beta1.Memcached) {
				mc.Spec.DeletionPolicy = cachev1beta1.DeletionPolicyOrphan
			},
			want:           nil,
			wantFinalizers: []string{cachev1beta1.ChildrenFinalizer},
			wantOwnerRefs:  true,
		},
		{
			name: "deletion with orphan policy releases the children first",
			mutate: func(mc *cachev1beta1.Memcached) {
				mc.Spec.DeletionPolicy = cachev1beta1.DeletionPolicyOrphan
				mc.Finalizers = []string{"example.com/other", cachev1beta1.ChildrenFinalizer}
				mc.DeletionTimestamp = &now
			},
			want:           releaseChildren,
			wantFinalizers: []string{"example.com/other"},
		},
		{
			name: "deletion with orphan policy honours the legacy finalizer",
			mutate: func(mc *cachev1beta1.Memcached) {
				mc.Spec.DeletionPolicy = cachev1beta1.DeletionPolicyOrphan
				mc.Finalizers = []string{legacyOrphanFinalizer}
				mc.DeletionTimestamp = &now
			},
			want: releaseChildren,
		},
		{
			name: "deletion with delete policy lifts the finalizer and leaves the children to the garbage collector",
			mutate: func(mc *cachev1beta1.Memcached) {
				mc.Finalizers = []string{cachev1beta1.ChildrenFinalizer, "example.com/other"}
				mc.DeletionTimestamp = &now
			},
			want:           []expectedAction{patchMemcached},
			wantFinalizers: []string{"example.com/other"},
			wantOwnerRefs:  true,
		},
		{
			name: "deletion with delete policy lifts the legacy finalizer",
			mutate: func(mc *cachev1beta1.Memcached) {
				mc.Finalizers = []string{legacyOrphanFinalizer}
				mc.DeletionTimestamp = &now
			},
			want:          []expectedAction{patchMemcached},
			wantOwnerRefs: true,
		},
		{
			name: "deletion without our finalizer writes nothing",
			mutate: func(mc *cachev1beta1.Memcached) {
				mc.Spec.DeletionPolicy = cachev1beta1.DeletionPolicyOrphan
				mc.Finalizers = []string{"example.com/other"}
				mc.DeletionTimestamp = &now
			},
			want:           nil,
			wantFinalizers: []string{"example.com/other"},
			wantOwnerRefs:  true,
		},
		{
			name: "deletion of a paused orphan still releases the children",
			mutate: func(mc *cachev1beta1.Memcached) {
				mc.Spec.Paused = true
				mc.Spec.DeletionPolicy = cachev1beta1.DeletionPolicyOrphan
				mc.Finalizers = []string{cachev1beta1.ChildrenFinalizer}
				mc.DeletionTimestamp = &now
			},
			want: releaseChildren,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mc, dep, svc, pdb := converge(t, newMemcached("cache"))
			mc = mc.DeepCopy()
			tt.mutate(mc)

			f := newFixture(t)
			f.seed(mc, dep, svc, pdb)
			_, ctx := ktesting.NewTestContext(t)
			c := f.newController(ctx)
			sent := f.inOrder()
			if o := c.syncHandler(ctx, cache.MetaObjectToName(mc)); o.err != nil {
				t.Fatalf("sync: %v", o.err)
			}
			checkActions(t, tt.want, sent())

			got, err := f.client.CacheV1beta1().Memcacheds(mc.Namespace).Get(ctx, mc.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got.Finalizers, tt.wantFinalizers) {
				t.Errorf("finalizers = %v, want %v", got.Finalizers, tt.wantFinalizers)
			}
			d, _ := f.kubeClient.AppsV1().Deployments(mc.Namespace).Get(ctx, mc.Name, metav1.GetOptions{})
			s, _ := f.kubeClient.CoreV1().Services(mc.Namespace).Get(ctx, mc.Name, metav1.GetOptions{})
			p, _ := f.kubeClient.PolicyV1().PodDisruptionBudgets(mc.Namespace).Get(ctx, mc.Name, metav1.GetOptions{})
			for _, obj := range []metav1.Object{d, s, p} {
				if has := len(obj.GetOwnerReferences()) > 0; has != tt.wantOwnerRefs {
					t.Errorf("%T ownerReferences = %v, want present = %v", obj, obj.GetOwnerReferences(), tt.wantOwnerRefs)
				}
			}
		})
	}
}

// TestNoChildBeforeTheFinalizer syncs a Memcached the operator has never
// seen: the finalizer patch goes out before any child is created, and a
// refused patch (here a Conflict: the Memcached changed, perhaps because
// its deletion started) creates no child at all, since a child of a
// Memcached without the finalizer would be the garbage collector's to
// delete whatever the deletion policy says.
func TestNoChildBeforeTheFinalizer(t *testing.T) {
	tests := []struct {
		name string
		// refuse makes the apiserver refuse the finalizer patch.
		refuse bool
		want   []expectedAction
	}{
		{
			name: "the finalizer comes first",
			want: []expectedAction{
				patchMemcached,
				applyDeployment, applyService, applyPDB,
			},
		},
		{
			name:   "no child without the finalizer",
			refuse: true,
			want:   []expectedAction{patchMemcached},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mc := newMemcached("cache")
			mc.Finalizers = nil
			f := newFixture(t)
			f.addMemcached(mc)
			_, ctx := ktesting.NewTestContext(t)
			c := f.newController(ctx)
			if tt.refuse {
				conflict := apierrors.NewConflict(memcachedsResource.GroupResource(), mc.Name, errors.New("the object has been modified"))
				f.client.PrependReactor("patch", "memcacheds", func(core.Action) (bool, runtime.Object, error) { return true, nil, conflict })
			}
			sent := f.inOrder()
			o := c.syncHandler(ctx, cache.MetaObjectToName(mc))
			if tt.refuse != (o.err != nil) {
				t.Fatalf("sync error = %v, want one = %v", o.err, tt.refuse)
			}
			checkActions(t, tt.want, writes(sent()))
		})
	}
}

// TestSyncMemcachedGoneDuringFinalizerPatch covers a cache that still
// shows a Memcached the apiserver has already removed: the finalizer patch
// finds nothing, and that is success, not an error to log and retry.
func TestSyncMemcachedGoneDuringFinalizerPatch(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	tests := []struct {
		name   string
		mutate func(*cachev1beta1.Memcached)
	}{
		{name: "adding the finalizer", mutate: func(mc *cachev1beta1.Memcached) {
			mc.Spec.DeletionPolicy = cachev1beta1.DeletionPolicyOrphan
		}},
		{name: "removing the finalizer after deletion", mutate: func(mc *cachev1beta1.Memcached) {
			mc.Finalizers = []string{cachev1beta1.ChildrenFinalizer}
			mc.DeletionTimestamp = &now
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mc := newMemcached("cache")
			tt.mutate(mc)
			f := newFixture(t)
			f.memcachedLister = append(f.memcachedLister, mc) // In the cache only.
			_, ctx := ktesting.NewTestContext(t)
			c := f.newController(ctx)
			if o := c.syncHandler(ctx, cache.MetaObjectToName(mc)); o.err != nil {
				t.Errorf("sync error = %v, want nil for a Memcached that is gone", o.err)
			}
		})
	}
}

// TestFinalizeFailureIsOnStatus refuses the orphaning patch, as
// OwnerReferencesPermissionEnforcement does without delete on the child:
// the Memcached being deleted must say why it is stuck, and keep its
// finalizer.
func TestFinalizeFailureIsOnStatus(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	mc, dep, svc, pdb := converge(t, newMemcached("cache"))
	mc = mc.DeepCopy()
	mc.Spec.DeletionPolicy = cachev1beta1.DeletionPolicyOrphan
	mc.Finalizers = []string{cachev1beta1.ChildrenFinalizer}
	mc.DeletionTimestamp = &now

	f := newFixture(t)
	f.seed(mc, dep, svc, pdb)
	_, ctx := ktesting.NewTestContext(t)
	c := f.newController(ctx)
	refused := apierrors.NewForbidden(deploymentsResource.GroupResource(), "cache", errors.New("cannot set an ownerRef on a resource you can't delete"))
	f.kubeClient.PrependReactor("patch", "deployments", func(core.Action) (bool, runtime.Object, error) { return true, nil, refused })

	o := c.syncHandler(ctx, cache.MetaObjectToName(mc))
	if !isTransient(o) {
		t.Fatalf("sync error = %v, want a transient error", o.err)
	}
	checkDegraded(t, f, mc, cachev1beta1.ReasonForbidden, "Cannot release the children before deletion")
	got, err := f.client.CacheV1beta1().Memcacheds(mc.Namespace).Get(context.Background(), mc.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !containsString(got.Finalizers, cachev1beta1.ChildrenFinalizer) {
		t.Errorf("the finalizer was removed although the children were not released: %v", got.Finalizers)
	}
}
