package main

import (
	"context"
	"errors"
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
	tests := []struct {
		name   string
		mutate func(*cachev1beta1.Memcached)
		want   []expectedAction
		// wantFinalizer is whether the finalizer is present afterwards.
		wantFinalizer bool
		// wantOwnerRefs is whether the children keep their ownerReferences.
		wantOwnerRefs bool
	}{
		{
			name: "orphan policy adds the finalizer",
			mutate: func(mc *cachev1beta1.Memcached) {
				mc.Spec.DeletionPolicy = cachev1beta1.DeletionPolicyOrphan
			},
			want:          []expectedAction{patchMemcached},
			wantFinalizer: true,
			wantOwnerRefs: true,
		},
		{
			name: "delete policy removes the finalizer",
			mutate: func(mc *cachev1beta1.Memcached) {
				mc.Finalizers = []string{"example.com/other", cachev1beta1.OrphanFinalizer}
			},
			want:          []expectedAction{patchMemcached},
			wantOwnerRefs: true,
		},
		{
			name: "deletion with orphan policy releases the children first",
			mutate: func(mc *cachev1beta1.Memcached) {
				mc.Spec.DeletionPolicy = cachev1beta1.DeletionPolicyOrphan
				mc.Finalizers = []string{cachev1beta1.OrphanFinalizer}
				mc.DeletionTimestamp = &now
			},
			want: []expectedAction{
				patchMemcached,
				getDeployment, {"patch", deploymentsResource, ""},
				getService, {"patch", servicesResource, ""},
				getPDB, {"patch", pdbsResource, ""},
				getNP,
			},
		},
		{
			name: "deletion with delete policy leaves the children to the garbage collector",
			mutate: func(mc *cachev1beta1.Memcached) {
				mc.Finalizers = []string{"example.com/other"}
				mc.DeletionTimestamp = &now
			},
			want:          nil,
			wantOwnerRefs: true,
		},
		{
			name: "deletion of a paused orphan still releases the children",
			mutate: func(mc *cachev1beta1.Memcached) {
				mc.Spec.Paused = true
				mc.Spec.DeletionPolicy = cachev1beta1.DeletionPolicyOrphan
				mc.Finalizers = []string{cachev1beta1.OrphanFinalizer}
				mc.DeletionTimestamp = &now
			},
			want: []expectedAction{
				patchMemcached,
				getDeployment, {"patch", deploymentsResource, ""},
				getService, {"patch", servicesResource, ""},
				getPDB, {"patch", pdbsResource, ""},
				getNP,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mc, dep, svc, pdb := converge(t, newMemcached("cache"))
			mc = mc.DeepCopy()
			tt.mutate(mc)

			f := newFixture(t)
			f.seed(mc, dep, svc, pdb)
			actions, o := f.run(cache.MetaObjectToName(mc))
			if o.err != nil {
				t.Fatalf("sync: %v", o.err)
			}
			checkActions(t, tt.want, actions)

			ctx := context.Background()
			got, err := f.client.CacheV1beta1().Memcacheds(mc.Namespace).Get(ctx, mc.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if has := containsString(got.Finalizers, cachev1beta1.OrphanFinalizer); has != tt.wantFinalizer {
				t.Errorf("finalizers = %v, want orphan finalizer present = %v", got.Finalizers, tt.wantFinalizer)
			}
			if containsString(mc.Finalizers, "example.com/other") && !containsString(got.Finalizers, "example.com/other") {
				t.Errorf("another controller's finalizer was removed: %v", got.Finalizers)
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
			mc.Finalizers = []string{cachev1beta1.OrphanFinalizer}
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
	mc.Finalizers = []string{cachev1beta1.OrphanFinalizer}
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
	if !containsString(got.Finalizers, cachev1beta1.OrphanFinalizer) {
		t.Errorf("the finalizer was removed although the children were not released: %v", got.Finalizers)
	}
}
