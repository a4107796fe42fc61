package main

import (
	"context"
	"errors"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	core "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
)

func TestSyncCreatesChildren(t *testing.T) {
	mc := newMemcached("cache")
	f := newFixture(t)
	f.addMemcached(mc)
	_, ctx := ktesting.NewTestContext(t)
	c := f.newController(ctx)
	key := cache.MetaObjectToName(mc)
	if o := c.syncHandler(ctx, key); o.err != nil {
		t.Fatalf("sync: %v", o.err)
	}
	// The status waits for the new Deployment to catch up; no Deployment
	// controller runs here, so it is written once the wait is over.
	checkActions(t, []expectedAction{applyDeployment, applyService, applyPDB}, append(filterInformerActions(f.client.Actions()), filterInformerActions(f.kubeClient.Actions())...))
	f.clock.Step(deploymentControllerWait)
	if o := c.syncHandler(ctx, key); o.err != nil {
		t.Fatalf("sync after the wait: %v", o.err)
	}

	dep, err := f.kubeClient.AppsV1().Deployments(mc.Namespace).Get(ctx, mc.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("Deployment was not created: %v", err)
	}
	if got := ptr.Deref(dep.Spec.Replicas, -1); got != 2 {
		t.Errorf("Deployment replicas = %d, want 2", got)
	}
	ref := metav1.GetControllerOf(dep)
	if ref == nil || ref.UID != mc.UID || !ptr.Deref(ref.BlockOwnerDeletion, false) {
		t.Errorf("Deployment controller reference = %+v, want one to UID %s with blockOwnerDeletion", ref, mc.UID)
	}
	if _, err := f.kubeClient.CoreV1().Services(mc.Namespace).Get(ctx, mc.Name, metav1.GetOptions{}); err != nil {
		t.Fatalf("Service was not created: %v", err)
	}

	got, err := f.client.CacheV1beta1().Memcacheds(mc.Namespace).Get(ctx, mc.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status.ObservedGeneration != mc.Generation {
		t.Errorf("observedGeneration = %d, want %d", got.Status.ObservedGeneration, mc.Generation)
	}
	if want := "cache.default.svc:11211"; got.Status.Endpoint != want {
		t.Errorf("endpoint = %q, want %q", got.Status.Endpoint, want)
	}
	for _, cond := range []string{cachev1beta1.ConditionAvailable, cachev1beta1.ConditionProgressing, cachev1beta1.ConditionDegraded} {
		if meta.FindStatusCondition(got.Status.Conditions, cond) == nil {
			t.Errorf("condition %s missing", cond)
		}
	}
}

func TestSyncConvergedSendsNoWrites(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*cachev1beta1.Memcached)
	}{
		{name: "defaults"},
		{name: "exporter and scheduling", mutate: func(mc *cachev1beta1.Memcached) {
			mc.Spec.Monitoring = &cachev1beta1.Monitoring{Exporter: &cachev1beta1.Exporter{Enabled: true, Image: cachev1beta1.DefaultExporterImage}}
			podOf(&mc.Spec).NodeSelector = map[string]string{"disk": "ssd"}
			podOf(&mc.Spec).Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "cache", Effect: corev1.TaintEffectNoSchedule}}
			mc.Spec.Resources = &cachev1beta1.ResourceOverrides{Limits: &cachev1beta1.ResourceAmounts{CPU: "1"}}
		}},
		{name: "paused", mutate: func(mc *cachev1beta1.Memcached) { mc.Spec.Paused = true }},
		{name: "orphan policy", mutate: func(mc *cachev1beta1.Memcached) { mc.Spec.DeletionPolicy = cachev1beta1.DeletionPolicyOrphan }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mc := newMemcached("cache")
			if tt.mutate != nil {
				tt.mutate(mc)
			}
			mc, dep, svc, pdb := converge(t, mc)

			f := newFixture(t)
			f.seed(mc, dep, svc, pdb)
			actions, o := f.run(cache.MetaObjectToName(mc))
			if o.err != nil {
				t.Fatalf("sync: %v", o.err)
			}
			checkActions(t, nil, actions)
			if len(f.recorder.Events) != 0 {
				t.Errorf("converged sync emitted an Event: %s", <-f.recorder.Events)
			}
		})
	}
}

func TestSyncInvalidSpec(t *testing.T) {
	t.Run("requests above limits", func(t *testing.T) {
		mc, dep, svc, pdb := converge(t, newMemcached("cache"))
		mc = mc.DeepCopy()
		mc.Generation++
		mc.Spec.Replicas = ptr.To[int32](5)
		mc.Spec.Resources = &cachev1beta1.ResourceOverrides{
			Requests: &cachev1beta1.ResourceAmounts{CPU: "2"},
			Limits:   &cachev1beta1.ResourceAmounts{CPU: "1"},
		}
		f := newFixture(t)
		f.seed(mc, dep, svc, pdb)
		actions, o := f.run(cache.MetaObjectToName(mc))
		if !isPermanent(o) {
			t.Fatalf("sync error = %v, want a permanent error", o.err)
		}
		checkActions(t, []expectedAction{updateStatus}, actions)
		checkDegraded(t, f, mc, cachev1beta1.ReasonInvalidSpec, "spec.resources.requests.cpu")
		checkEvent(t, f.recorder, cachev1beta1.ReasonInvalidSpec)
	})

	t.Run("apiserver rejects the Deployment", func(t *testing.T) {
		mc := newMemcached("cache")
		podOf(&mc.Spec).Tolerations = []corev1.Toleration{{Key: "k", Operator: "Sometimes"}}
		f := newFixture(t)
		f.addMemcached(mc)
		_, ctx := ktesting.NewTestContext(t)
		c := f.newController(ctx)
		f.kubeClient.PrependReactor("patch", "deployments", func(core.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewInvalid(schema.GroupKind{Group: "apps", Kind: "Deployment"}, "cache",
				field.ErrorList{field.NotSupported(field.NewPath("spec", "template", "spec", "tolerations").Index(0).Child("operator"), "Sometimes", []string{"Equal", "Exists"})})
		})
		o := c.syncHandler(ctx, cache.MetaObjectToName(mc))
		if !isPermanent(o) {
			t.Fatalf("sync error = %v, want a permanent error", o.err)
		}
		checkDegraded(t, f, mc, cachev1beta1.ReasonInvalidSpec, "tolerations[0].operator")
	})
}

// TestSyncForbiddenChild covers RBAC that does not let the operator write a
// child: the Memcached says so in Degraded, and the key is retried with
// backoff, since a grant raises no event.
func TestSyncForbiddenChild(t *testing.T) {
	mc := newMemcached("cache")
	f := newFixture(t)
	f.addMemcached(mc)
	_, ctx := ktesting.NewTestContext(t)
	c := f.newController(ctx)
	f.kubeClient.PrependReactor("patch", "deployments", func(core.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "apps", Resource: "deployments"}, "cache",
			errors.New(`User "system:serviceaccount:memcached-operator:memcached-operator" cannot patch resource "deployments"`))
	})
	key := cache.MetaObjectToName(mc)
	o := c.syncHandler(ctx, key)
	if !apierrors.IsForbidden(o.err) || !isTransient(o) {
		t.Fatalf("sync error = %v, want the Forbidden error, transient", o.err)
	}
	checkDegraded(t, f, mc, cachev1beta1.ReasonForbidden, "cannot patch")
	checkEvent(t, f.recorder, cachev1beta1.ReasonForbidden)
	if _, err := f.kubeClient.CoreV1().Services(mc.Namespace).Get(ctx, mc.Name, metav1.GetOptions{}); err != nil {
		t.Errorf("the Service, which RBAC allows, was not created: %v", err)
	}
	c.handleErr(ctx, key, o)
	if c.workqueue.NumRequeues(key) != 1 {
		t.Errorf("Forbidden key was not requeued with backoff")
	}
}

// TestSyncRefusedUpdateKeepsTheDeployment covers an apply to an existing
// Deployment that admission refuses: the status reports the Deployment
// that still serves, with its counts, next to the refusal, instead of a
// missing Deployment.
func TestSyncRefusedUpdateKeepsTheDeployment(t *testing.T) {
	mc, dep, svc, pdb := converge(t, newMemcached("cache"))
	dep.Status = appsv1.DeploymentStatus{ObservedGeneration: dep.Generation, Replicas: 2, UpdatedReplicas: 2, ReadyReplicas: 2, AvailableReplicas: 2}
	mc.Spec.Replicas = ptr.To[int32](3)
	mc.Generation++
	f := newFixture(t)
	f.seed(mc, dep, svc, pdb)
	_, ctx := ktesting.NewTestContext(t)
	c := f.newController(ctx)
	denial := `deployments.apps "cache" is forbidden: ValidatingAdmissionPolicy 'freeze' with binding 'freeze' denied request: frozen`
	f.kubeClient.PrependReactor("patch", "deployments", func(core.Action) (bool, runtime.Object, error) {
		return true, nil, &apierrors.StatusError{ErrStatus: metav1.Status{
			Status: metav1.StatusFailure, Code: 422, Reason: metav1.StatusReasonInvalid, Message: denial,
			Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{{Message: denial}}},
		}}
	})
	o := c.syncHandler(ctx, cache.MetaObjectToName(mc))
	if !isTransient(o) || o.reason != cachev1beta1.ReasonAdmissionDenied {
		t.Fatalf("sync outcome = %+v, want AdmissionDenied, retried with backoff", o)
	}
	checkDegraded(t, f, mc, cachev1beta1.ReasonAdmissionDenied, "frozen")
	got, err := f.client.CacheV1beta1().Memcacheds(mc.Namespace).Get(context.Background(), mc.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status.ReadyReplicas != 2 || got.Status.AvailableReplicas != 2 {
		t.Errorf("status replicas ready %d, available %d; want the 2 that serve", got.Status.ReadyReplicas, got.Status.AvailableReplicas)
	}
	if a := meta.FindStatusCondition(got.Status.Conditions, cachev1beta1.ConditionAvailable); a == nil || a.Reason == cachev1beta1.ReasonDeploymentMissing {
		t.Errorf("Available = %+v while the Deployment serves", a)
	}
}

func TestSyncPaused(t *testing.T) {
	mc, dep, svc, pdb := converge(t, newMemcached("cache"))
	dep = withPauseEdits(t, dep)
	mc = mc.DeepCopy()
	mc.Generation++
	mc.Spec.Paused = true
	mc.Spec.Replicas = ptr.To[int32](9)
	f := newFixture(t)
	f.seed(mc, dep, svc, pdb)
	actions, o := f.run(cache.MetaObjectToName(mc))
	if o.err != nil {
		t.Fatalf("sync: %v", o.err)
	}
	// The new replicas do not reach the Deployment; only its rollout is
	// paused (TestSyncRolloutPause). The Memcached client's actions come
	// first.
	checkActions(t, []expectedAction{updateStatus, applyDeployment}, actions)
	if live, err := f.kubeClient.AppsV1().Deployments(mc.Namespace).Get(context.Background(), mc.Name, metav1.GetOptions{}); err != nil || *live.Spec.Replicas != 2 || !live.Spec.Paused {
		t.Errorf("Deployment = %+v, %v; want 2 replicas, paused", live, err)
	}
	got, _ := f.client.CacheV1beta1().Memcacheds(mc.Namespace).Get(context.Background(), mc.Name, metav1.GetOptions{})
	cond := meta.FindStatusCondition(got.Status.Conditions, cachev1beta1.ConditionProgressing)
	if cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != cachev1beta1.ReasonPaused {
		t.Errorf("Progressing = %+v, want False/%s", cond, cachev1beta1.ReasonPaused)
	}
}

func TestSyncMemcachedGone(t *testing.T) {
	f := newFixture(t)
	actions, o := f.run(cache.ObjectName{Namespace: "default", Name: "gone"})
	if o.err != nil {
		t.Fatalf("sync: %v", o.err)
	}
	checkActions(t, nil, actions)
}

// TestSyncTwoChildrenFailDifferently covers a Deployment and a Service that
// fail for different causes in one sync: the status shows both messages
// under the reason rechecked soonest, and the key is retried as the most
// urgent outcome says (outcome.go).
func TestSyncTwoChildrenFailDifferently(t *testing.T) {
	foreignDeployment := func(f *fixture, mc *cachev1beta1.Memcached) {
		f.addDeployment(&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: mc.Name, Namespace: mc.Namespace, ResourceVersion: "3"}})
	}
	refuse := func(resource string, o error) func(*fixture) {
		return func(f *fixture) {
			f.kubeClient.PrependReactor("patch", resource, func(core.Action) (bool, runtime.Object, error) { return true, nil, o })
		}
	}
	forbidden := apierrors.NewForbidden(servicesResource.GroupResource(), "cache", errors.New("cannot patch services"))
	invalid := apierrors.NewInvalid(schema.GroupKind{Group: "apps", Kind: "Deployment"}, "cache",
		field.ErrorList{field.Invalid(field.NewPath("spec"), "x", "rejected")})
	tests := []struct {
		name       string
		seed       func(*fixture, *cachev1beta1.Memcached)
		react      []func(*fixture)
		wantReason string
		// wantMessage is part of Degraded's message.
		wantMessage string
		// wantRetry is how handleErr will treat the error.
		wantRetry string
	}{
		{
			name:       "foreign Deployment, Service refused by RBAC",
			seed:       foreignDeployment,
			react:      []func(*fixture){refuse("services", forbidden)},
			wantReason: cachev1beta1.ReasonForbidden, wantMessage: "not managed by this Memcached; applying Service", wantRetry: "backoff",
		},
		{
			name:       "foreign Deployment, Service timed out",
			seed:       foreignDeployment,
			react:      []func(*fixture){refuse("services", apierrors.NewTimeoutError("slow", 1))},
			wantReason: cachev1beta1.ReasonAPIServerError, wantMessage: "Deployment default/cache already exists", wantRetry: "backoff",
		},
		{
			name: "Deployment rejected, foreign Service",
			seed: func(f *fixture, mc *cachev1beta1.Memcached) {
				f.addService(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: mc.Name, Namespace: mc.Namespace, ResourceVersion: "3"}})
			},
			react:      []func(*fixture){refuse("deployments", invalid)},
			wantReason: cachev1beta1.ReasonResourceExists, wantMessage: "rejected the Deployment", wantRetry: foreignRecheckInterval.String(),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mc := newMemcached("cache")
			f := newFixture(t)
			f.addMemcached(mc)
			tt.seed(f, mc)
			_, ctx := ktesting.NewTestContext(t)
			c := f.newController(ctx)
			for _, r := range tt.react {
				r(f)
			}
			o := c.syncHandler(ctx, cache.MetaObjectToName(mc))
			got := retryOf(o)
			if got != tt.wantRetry {
				t.Errorf("sync error %v is retried by %q, want %q", o, got, tt.wantRetry)
			}
			checkDegraded(t, f, mc, tt.wantReason, tt.wantMessage)
		})
	}
}
