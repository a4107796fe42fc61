package main

import (
	"context"
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	core "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
	"github.com/kubelite/memcached-operator/pkg/resources"
)

// withPolicy is a Memcached "cache" with spec.networkPolicy set to {}.
func withPolicy() *cachev1beta1.Memcached {
	mc := newMemcached("cache")
	mc.Spec.NetworkPolicy = &cachev1beta1.NetworkPolicy{}
	return mc
}

// policyNamed is a NetworkPolicy "cache" of the default namespace with the
// given labels and owner references.
func policyNamed(labels map[string]string, owners []metav1.OwnerReference) *networkingv1.NetworkPolicy {
	return &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{
		Name: "cache", Namespace: metav1.NamespaceDefault, UID: "np-uid", ResourceVersion: "42",
		Labels: labels, OwnerReferences: owners,
	}}
}

func TestSyncNetworkPolicy(t *testing.T) {
	operatorLabels := resources.Labels(newMemcached("cache"))
	tests := []struct {
		name string
		// setup returns the Memcached to sync and seeds the fixture.
		setup func(t *testing.T, f *fixture) *cachev1beta1.Memcached
		// wantWrites are the writes to NetworkPolicies.
		wantWrites []expectedAction
		wantReason string
		wantEvent  string
	}{
		{
			name: "set: created next to the other children",
			setup: func(t *testing.T, f *fixture) *cachev1beta1.Memcached {
				mc := withPolicy()
				f.addMemcached(mc)
				return mc
			},
			wantWrites: []expectedAction{applyNP},
		},
		{
			name: "set and converged: no write",
			setup: func(t *testing.T, f *fixture) *cachev1beta1.Memcached {
				mc, c := convergeAll(t, withPolicy())
				if c.np == nil {
					t.Fatal("converging created no NetworkPolicy")
				}
				f.seedAll(mc, c)
				return mc
			},
		},
		{
			name: "left out after a policy: the controlled policy is deleted",
			setup: func(t *testing.T, f *fixture) *cachev1beta1.Memcached {
				mc, c := convergeAll(t, withPolicy())
				mc = mc.DeepCopy()
				mc.Spec.NetworkPolicy = nil
				c.np.UID, c.np.ResourceVersion = "np-uid", "42"
				f.seedAll(mc, c)
				return mc
			},
			wantWrites: []expectedAction{deleteNP},
			wantEvent:  "NetworkPolicyDeleted",
		},
		{
			name: "left out, a foreign policy of the name: left alone",
			setup: func(t *testing.T, f *fixture) *cachev1beta1.Memcached {
				mc, dep, svc, pdb := converge(t, newMemcached("cache"))
				f.seed(mc, dep, svc, pdb)
				f.addNetworkPolicy(policyNamed(operatorLabels, []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "cache", UID: "other", Controller: ptr.To(true)}}))
				return mc
			},
		},
		{
			name: "left out, an orphan policy: left alone",
			setup: func(t *testing.T, f *fixture) *cachev1beta1.Memcached {
				mc, dep, svc, pdb := converge(t, newMemcached("cache"))
				f.seed(mc, dep, svc, pdb)
				f.addNetworkPolicy(policyNamed(operatorLabels, nil))
				return mc
			},
		},
		{
			name: "left out, a deleted predecessor's policy: left to the garbage collector",
			setup: func(t *testing.T, f *fixture) *cachev1beta1.Memcached {
				mc, dep, svc, pdb := converge(t, newMemcached("cache"))
				f.seed(mc, dep, svc, pdb)
				f.addNetworkPolicy(policyNamed(operatorLabels, controlledBy("uid-0")))
				return mc
			},
		},
		{
			name: "left out while paused: the controlled policy stays",
			setup: func(t *testing.T, f *fixture) *cachev1beta1.Memcached {
				mc, c := convergeAll(t, withPolicy())
				mc = mc.DeepCopy()
				mc.Spec.NetworkPolicy, mc.Spec.Paused = nil, true
				f.seedAll(mc, c)
				return mc
			},
		},
		{
			name: "set, a foreign policy of the name: not touched, ResourceExists",
			setup: func(t *testing.T, f *fixture) *cachev1beta1.Memcached {
				mc, dep, svc, pdb := converge(t, newMemcached("cache"))
				mc = mc.DeepCopy()
				mc.Spec.NetworkPolicy = &cachev1beta1.NetworkPolicy{}
				f.seed(mc, dep, svc, pdb)
				f.addNetworkPolicy(policyNamed(map[string]string{"app": "other"}, nil))
				return mc
			},
			wantReason: cachev1beta1.ReasonResourceExists,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			mc := tt.setup(t, f)
			actions, o := f.run(cache.MetaObjectToName(mc))
			var npWrites []core.Action
			for _, a := range writes(actions) {
				if a.GetResource() == npsResource {
					npWrites = append(npWrites, a)
				}
			}
			checkActions(t, tt.wantWrites, npWrites)
			if o.reason != tt.wantReason {
				t.Errorf("outcome reason %q, want %q (%v)", o.reason, tt.wantReason, o.err)
			}
			if tt.wantReason == "" && o.err != nil {
				t.Errorf("sync: %v", o.err)
			}
			for _, a := range npWrites {
				if del, ok := a.(core.DeleteAction); ok {
					pre := del.GetDeleteOptions().Preconditions
					if pre == nil || ptr.Deref(pre.UID, "") != k8stypes.UID("np-uid") || ptr.Deref(pre.ResourceVersion, "") != "42" {
						t.Errorf("delete preconditions %+v, want the cached UID np-uid and resourceVersion 42", pre)
					}
				}
			}
			if tt.wantEvent != "" {
				checkEvent(t, f.recorder, tt.wantEvent)
			}
		})
	}
}

// TestNetworkPolicyHoldsTheDeployment: with spec.networkPolicy set, a
// policy that is not in place holds the Deployment, new or changed, so that
// no Pod serves without it.
func TestNetworkPolicyHoldsTheDeployment(t *testing.T) {
	foreign := func() *networkingv1.NetworkPolicy { return policyNamed(map[string]string{"app": "other"}, nil) }
	tests := []struct {
		name  string
		setup func(t *testing.T, f *fixture) *cachev1beta1.Memcached
	}{
		{
			name: "a new Memcached: no Deployment is created",
			setup: func(t *testing.T, f *fixture) *cachev1beta1.Memcached {
				mc := withPolicy()
				f.addMemcached(mc)
				f.addNetworkPolicy(foreign())
				return mc
			},
		},
		{
			name: "a running Memcached whose template changes: the Deployment keeps its template",
			setup: func(t *testing.T, f *fixture) *cachev1beta1.Memcached {
				mc, dep, svc, pdb := converge(t, newMemcached("cache"))
				mc = mc.DeepCopy()
				mc.Generation++
				mc.Spec.NetworkPolicy = &cachev1beta1.NetworkPolicy{}
				podOf(&mc.Spec).Annotations = map[string]string{"example.com/rolled": "yes"}
				f.seed(mc, dep, svc, pdb)
				f.addNetworkPolicy(foreign())
				return mc
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			mc := tt.setup(t, f)
			actions, o := f.run(cache.MetaObjectToName(mc))
			for _, a := range writes(actions) {
				if a.GetResource() == deploymentsResource {
					t.Errorf("wrote the Deployment while its NetworkPolicy is not in place: %s", describe([]core.Action{a}))
				}
			}
			if o.reason != cachev1beta1.ReasonResourceExists || !strings.Contains(o.message, "the Deployment is held until the NetworkPolicy") {
				t.Errorf("outcome %s: %s, want ResourceExists saying the Deployment is held", o.reason, o.message)
			}
		})
	}
}

// TestDeletedNetworkPolicyIsDeletedOnce syncs twice against a cache that
// still shows the policy the first sync deleted, as the Deployment's events
// of the same spec change can: the second sync sends no DELETE.
func TestDeletedNetworkPolicyIsDeletedOnce(t *testing.T) {
	mc, c := convergeAll(t, withPolicy())
	mc = mc.DeepCopy()
	mc.Spec.NetworkPolicy = nil
	c.np.UID, c.np.ResourceVersion = "np-uid", "42"
	f := newFixture(t)
	f.seedAll(mc, c)
	_, ctx := ktesting.NewTestContext(t)
	ctrl := f.newController(ctx)
	deletes := func() int {
		n := 0
		for _, a := range f.kubeClient.Actions() {
			if a.GetVerb() == "delete" && a.GetResource() == npsResource {
				n++
			}
		}
		return n
	}
	for i := range 2 {
		if o := ctrl.syncHandler(ctx, cache.MetaObjectToName(mc)); o.err != nil {
			t.Fatalf("sync %d: %v", i, o.err)
		}
	}
	if n := deletes(); n != 1 {
		t.Errorf("%d DELETEs of the policy across two syncs with the cache behind, want 1", n)
	}
}

// TestOrphanReleasesNetworkPolicy deletes a Memcached with deletionPolicy
// Orphan that has a NetworkPolicy: the policy loses its ownerReference
// with the other children, so it keeps protecting the Pods that go on
// serving.
func TestOrphanReleasesNetworkPolicy(t *testing.T) {
	mc := withPolicy()
	mc.Spec.DeletionPolicy = cachev1beta1.DeletionPolicyOrphan
	mc, c := convergeAll(t, mc)
	mc = mc.DeepCopy()
	now := metav1.Now()
	mc.DeletionTimestamp = &now

	f := newFixture(t)
	f.seedAll(mc, c)
	actions, o := f.run(cache.MetaObjectToName(mc))
	if o.err != nil {
		t.Fatalf("sync: %v", o.err)
	}
	checkActions(t, []expectedAction{
		patchMemcached,
		getDeployment, applyDeployment,
		getService, applyService,
		getPDB, applyPDB,
		getNP, applyNP,
	}, actions)
	np, err := f.kubeClient.NetworkingV1().NetworkPolicies(mc.Namespace).Get(context.Background(), mc.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(np.OwnerReferences) != 0 {
		t.Errorf("the orphaned NetworkPolicy keeps its ownerReferences %v", np.OwnerReferences)
	}
}
