package main

import (
	"context"
	"errors"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	core "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
	"github.com/kubelite/memcached-operator/pkg/deployutil"
	"github.com/kubelite/memcached-operator/pkg/drift"
	"github.com/kubelite/memcached-operator/pkg/resources"
)

// pauseEdit changes a Deployment's spec.paused on the fake apiserver the
// way someone would, under their field manager.
type pauseEdit func(ctx context.Context, t *testing.T, client *k8sfake.Clientset, d *appsv1.Deployment)

// operatorPause applies spec.paused as the operator's pause does.
func operatorPause(ctx context.Context, t *testing.T, client *k8sfake.Clientset, d *appsv1.Deployment) {
	t.Helper()
	ac := appsv1ac.Deployment(d.Name, d.Namespace).WithSpec(appsv1ac.DeploymentSpec().WithPaused(true))
	if _, err := client.AppsV1().Deployments(d.Namespace).Apply(ctx, ac, pauseApplyOptions); err != nil {
		t.Fatal(err)
	}
}

// handPause sets spec.paused with an update, as kubectl rollout pause does.
func handPause(paused bool) pauseEdit {
	return func(ctx context.Context, t *testing.T, client *k8sfake.Clientset, _ *appsv1.Deployment) {
		t.Helper()
		d, err := client.AppsV1().Deployments(metav1.NamespaceDefault).Get(ctx, "cache", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		d.Spec.Paused = paused
		if _, err := client.AppsV1().Deployments(d.Namespace).Update(ctx, d, metav1.UpdateOptions{FieldManager: "kubectl-rollout"}); err != nil {
			t.Fatal(err)
		}
	}
}

// withPauseEdits returns dep as the apiserver has it after the edits, its
// status as the Deployment controller leaves a finished rollout, so that
// the status the sync writes does not wait for that controller.
func withPauseEdits(t *testing.T, dep *appsv1.Deployment, edits ...pauseEdit) *appsv1.Deployment {
	t.Helper()
	ctx := context.Background()
	dep = dep.DeepCopy()
	dep.Status = appsv1.DeploymentStatus{
		ObservedGeneration: dep.Generation, Replicas: 2, UpdatedReplicas: 2, ReadyReplicas: 2, AvailableReplicas: 2,
	}
	client := k8sfake.NewClientset(dep)
	for _, edit := range edits {
		edit(ctx, t, client, dep)
	}
	live, err := client.AppsV1().Deployments(dep.Namespace).Get(ctx, dep.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return live
}

// writesToDeployments returns the writes to Deployments among actions.
func writesToDeployments(actions []core.Action) []core.Action {
	var out []core.Action
	for _, a := range writes(actions) {
		if a.GetResource() == deploymentsResource {
			out = append(out, a)
		}
	}
	return out
}

// TestSyncRolloutPause pauses and resumes the Deployment's rollout with
// the Memcached's spec.paused, and checks that the sync after, reading the
// result through the cache, writes nothing to the Deployment.
func TestSyncRolloutPause(t *testing.T) {
	tests := []struct {
		name string
		// paused is the Memcached's spec.paused; invalid gives it a spec
		// the operator cannot render.
		paused, invalid bool
		edits           []pauseEdit
		// wantWrite is whether the sync writes the Deployment, and
		// wantPaused and wantOwned how it leaves spec.paused and whether
		// the pause manager owns it.
		wantWrite, wantPaused, wantOwned bool
	}{
		{name: "paused Memcached pauses the rollout", paused: true, wantWrite: true, wantPaused: true, wantOwned: true},
		{name: "paused Memcached with an invalid spec pauses the rollout", paused: true, invalid: true, wantWrite: true, wantPaused: true, wantOwned: true},
		{name: "paused Memcached, rollout paused by the operator", paused: true, edits: []pauseEdit{operatorPause}, wantPaused: true, wantOwned: true},
		{name: "paused Memcached, rollout paused by hand", paused: true, edits: []pauseEdit{handPause(true)}, wantPaused: true},
		{
			name: "paused Memcached, rollout resumed by hand: paused again", paused: true,
			edits: []pauseEdit{operatorPause, handPause(false)}, wantWrite: true, wantPaused: true, wantOwned: true,
		},
		{name: "unpaused Memcached resumes the operator's pause", edits: []pauseEdit{operatorPause}, wantWrite: true},
		{name: "unpaused Memcached with an invalid spec resumes the operator's pause", invalid: true, edits: []pauseEdit{operatorPause}, wantWrite: true},
		{name: "unpaused Memcached leaves a pause by hand", edits: []pauseEdit{handPause(true)}, wantPaused: true},
		{
			name: "unpaused Memcached, pause held by the operator and by hand: stays paused", edits: []pauseEdit{handPause(true), operatorPause},
			wantWrite: true, wantPaused: true,
		},
		{name: "unpaused Memcached, rollout not paused", wantPaused: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mc, dep, svc, pdb := converge(t, newMemcached("cache"))
			dep = withPauseEdits(t, dep, tt.edits...)
			mc = mc.DeepCopy()
			mc.Spec.Paused = tt.paused
			if tt.invalid {
				mc.Spec.Resources = &cachev1beta1.ResourceOverrides{
					Requests: &cachev1beta1.ResourceAmounts{CPU: "2"},
					Limits:   &cachev1beta1.ResourceAmounts{CPU: "1"},
				}
			}
			if tt.paused || tt.invalid {
				mc.Generation++
			}
			ownedBefore := drift.Owned(dep.ManagedFields, fieldManager)

			f := newFixture(t)
			f.seed(mc, dep, svc, pdb)
			actions, o := f.run(cache.MetaObjectToName(mc))
			if o.err != nil && !tt.invalid {
				t.Fatalf("sync: %v", o.err)
			}
			if got := writesToDeployments(actions); (len(got) == 1) != tt.wantWrite || len(got) > 1 {
				t.Fatalf("Deployment writes = %v, want a write %t", describe(got), tt.wantWrite)
			}
			live, err := f.kubeClient.AppsV1().Deployments(mc.Namespace).Get(context.Background(), mc.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if live.Spec.Paused != tt.wantPaused || deployutil.PausedBy(live, resources.PauseManager) != tt.wantOwned {
				t.Errorf("Deployment paused %t, by the operator %t; want %t, %t; managedFields %v",
					live.Spec.Paused, deployutil.PausedBy(live, resources.PauseManager), tt.wantPaused, tt.wantOwned, live.ManagedFields)
			}
			// The pause is not the operator's apply: its fields, which the
			// drift check compares, are what they were.
			if got := drift.Owned(live.ManagedFields, fieldManager); got != ownedBefore {
				t.Errorf("the operator's owned fields changed from %q to %q", ownedBefore, got)
			}

			// The next sync reads the Deployment from the cache.
			got, err := f.client.CacheV1beta1().Memcacheds(mc.Namespace).Get(context.Background(), mc.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			next := newFixture(t)
			next.seed(got, live, svc, pdb)
			actions, _ = next.run(cache.MetaObjectToName(got))
			if w := writes(actions); len(w) > 0 {
				t.Errorf("the sync after wrote %v", describe(w))
			}
		})
	}
}

// TestSyncRolloutPauseStatus checks what Progressing says of a paused
// rollout: Paused while the Memcached is paused, DeploymentPaused for a
// rollout someone else paused, and the rollout's own state once the
// operator resumed its pause.
func TestSyncRolloutPauseStatus(t *testing.T) {
	tests := []struct {
		name   string
		paused bool
		edits  []pauseEdit
		want   string
	}{
		{name: "paused Memcached", paused: true, want: cachev1beta1.ReasonPaused},
		{name: "paused Memcached, rollout paused by hand", paused: true, edits: []pauseEdit{handPause(true)}, want: cachev1beta1.ReasonPaused},
		{name: "rollout paused by hand", edits: []pauseEdit{handPause(true)}, want: cachev1beta1.ReasonDeploymentPaused},
		{name: "rollout paused by the operator, resumed", edits: []pauseEdit{operatorPause}, want: cachev1beta1.ReasonComplete},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mc, dep, svc, pdb := converge(t, newMemcached("cache"))
			dep = withPauseEdits(t, dep, tt.edits...)
			mc = mc.DeepCopy()
			mc.Generation++
			mc.Spec.Paused = tt.paused

			f := newFixture(t)
			f.seed(mc, dep, svc, pdb)
			if _, o := f.run(cache.MetaObjectToName(mc)); o.err != nil {
				t.Fatalf("sync: %v", o.err)
			}
			got, err := f.client.CacheV1beta1().Memcacheds(mc.Namespace).Get(context.Background(), mc.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if p := meta.FindStatusCondition(got.Status.Conditions, cachev1beta1.ConditionProgressing); p == nil || p.Reason != tt.want || p.ObservedGeneration != mc.Generation {
				t.Errorf("Progressing = %+v, want reason %s at generation %d", p, tt.want, mc.Generation)
			}
			if a := meta.FindStatusCondition(got.Status.Conditions, cachev1beta1.ConditionAvailable); a == nil || a.Status != metav1.ConditionTrue {
				t.Errorf("Available = %+v, want True: a paused rollout keeps its Pods", a)
			}
		})
	}
}

// TestSyncRolloutPauseRefused shows a refused pause on the status, retried
// with backoff, and a pause that races with the Deployment's deletion as
// a race: the UID in the apply keeps it from creating a Deployment.
func TestSyncRolloutPauseRefused(t *testing.T) {
	tests := []struct {
		name       string
		refuse     error
		wantReason string
	}{
		{
			name:       "forbidden",
			refuse:     apierrors.NewForbidden(deploymentsResource.GroupResource(), "cache", errors.New("cannot patch deployments")),
			wantReason: cachev1beta1.ReasonForbidden,
		},
		{
			name:   "deleted meanwhile",
			refuse: apierrors.NewConflict(deploymentsResource.GroupResource(), "cache", errors.New("uid mismatch: the provided object specified uid uid-dep, and no existing object was found")),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mc, dep, svc, pdb := converge(t, newMemcached("cache"))
			dep = withPauseEdits(t, dep)
			mc = mc.DeepCopy()
			mc.Generation++
			mc.Spec.Paused = true
			f := newFixture(t)
			f.seed(mc, dep, svc, pdb)
			_, ctx := ktesting.NewTestContext(t)
			c := f.newController(ctx)
			f.kubeClient.PrependReactor("patch", "deployments", func(core.Action) (bool, runtime.Object, error) {
				return true, nil, tt.refuse
			})
			o := c.syncHandler(ctx, cache.MetaObjectToName(mc))
			if !isTransient(o) || o.reason != tt.wantReason {
				t.Fatalf("sync outcome = %+v, want reason %q retried with backoff", o, tt.wantReason)
			}
			if tt.wantReason != "" {
				checkDegraded(t, f, mc, tt.wantReason, "spec.paused")
			}
		})
	}
}

// TestSyncRolloutPauseWaitsForTheCache syncs a Memcached that was just
// paused twice on the same cache, as a sync queued for another event would
// run before the cache delivers the pause: the second sends no second
// write of spec.paused.
func TestSyncRolloutPauseWaitsForTheCache(t *testing.T) {
	mc, dep, svc, pdb := converge(t, newMemcached("cache"))
	dep = withPauseEdits(t, dep)
	mc = mc.DeepCopy()
	mc.Generation++
	mc.Spec.Paused = true

	f := newFixture(t)
	f.seed(mc, dep, svc, pdb)
	_, ctx := ktesting.NewTestContext(t)
	c := f.newController(ctx)
	key := cache.MetaObjectToName(mc)
	c.syncHandler(ctx, key)
	c.syncHandler(ctx, key)
	var pauses int
	for _, a := range writesToDeployments(filterInformerActions(f.kubeClient.Actions())) {
		if p, ok := a.(core.PatchAction); ok && p.GetPatchType() == "application/apply-patch+yaml" {
			pauses++
		}
	}
	if pauses != 1 {
		t.Errorf("%d writes of spec.paused over two syncs from a cache that has not caught up, want 1", pauses)
	}
}
