package main

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
	"github.com/kubelite/memcached-operator/pkg/resources"
)

func deploymentWithStatus(generation, observed int64, replicas, updated, available int32, availableCond corev1.ConditionStatus) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Generation: generation},
		Spec: appsv1.DeploymentSpec{Strategy: appsv1.DeploymentStrategy{
			Type:          appsv1.RollingUpdateDeploymentStrategyType,
			RollingUpdate: &appsv1.RollingUpdateDeployment{MaxUnavailable: ptr.To(intstr.FromInt32(1))},
		}},
		Status: appsv1.DeploymentStatus{
			ObservedGeneration: observed,
			Replicas:           replicas,
			UpdatedReplicas:    updated,
			ReadyReplicas:      available,
			AvailableReplicas:  available,
			Conditions:         []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: availableCond}},
		},
	}
}

// withMaxUnavailable sets the Deployment's maxUnavailable to n.
func withMaxUnavailable(d *appsv1.Deployment, n int32) *appsv1.Deployment {
	d.Spec.Strategy.RollingUpdate.MaxUnavailable = ptr.To(intstr.FromInt32(n))
	return d
}

func TestComputeStatus(t *testing.T) {
	type cond struct {
		status metav1.ConditionStatus
		reason string
	}
	tests := []struct {
		name            string
		replicas        int32
		paused          bool
		obs             observed
		wantAvailable   cond
		wantProgressing cond
		wantDegraded    cond
	}{
		{
			name:            "no Deployment yet",
			replicas:        2,
			wantAvailable:   cond{metav1.ConditionFalse, cachev1beta1.ReasonDeploymentMissing},
			wantProgressing: cond{metav1.ConditionTrue, cachev1beta1.ReasonRollingOut},
			wantDegraded:    cond{metav1.ConditionFalse, cachev1beta1.ReasonAsExpected},
		},
		{
			name:            "rolling out",
			replicas:        2,
			obs:             observed{deployment: deploymentWithStatus(2, 2, 2, 1, 1, corev1.ConditionTrue)},
			wantAvailable:   cond{metav1.ConditionTrue, cachev1beta1.ReasonMinimumReplicasAvailable},
			wantProgressing: cond{metav1.ConditionTrue, cachev1beta1.ReasonRollingOut},
			wantDegraded:    cond{metav1.ConditionFalse, cachev1beta1.ReasonAsExpected},
		},
		{
			name:            "Deployment controller has not seen the new template",
			replicas:        2,
			obs:             observed{deployment: deploymentWithStatus(3, 2, 2, 2, 2, corev1.ConditionTrue)},
			wantAvailable:   cond{metav1.ConditionTrue, cachev1beta1.ReasonMinimumReplicasAvailable},
			wantProgressing: cond{metav1.ConditionTrue, cachev1beta1.ReasonRollingOut},
			wantDegraded:    cond{metav1.ConditionFalse, cachev1beta1.ReasonAsExpected},
		},
		{
			name:            "complete",
			replicas:        2,
			obs:             observed{deployment: deploymentWithStatus(2, 2, 2, 2, 2, corev1.ConditionTrue)},
			wantAvailable:   cond{metav1.ConditionTrue, cachev1beta1.ReasonMinimumReplicasAvailable},
			wantProgressing: cond{metav1.ConditionFalse, cachev1beta1.ReasonComplete},
			wantDegraded:    cond{metav1.ConditionFalse, cachev1beta1.ReasonAsExpected},
		},
		{
			name:            "unavailable",
			replicas:        3,
			obs:             observed{deployment: deploymentWithStatus(1, 1, 3, 3, 0, corev1.ConditionFalse)},
			wantAvailable:   cond{metav1.ConditionFalse, cachev1beta1.ReasonMinimumReplicasUnavailable},
			wantProgressing: cond{metav1.ConditionTrue, cachev1beta1.ReasonRollingOut},
			wantDegraded:    cond{metav1.ConditionFalse, cachev1beta1.ReasonAsExpected},
		},
		{
			// The Deployment reports Available (1 replica, maxUnavailable
			// 1), but no Pod can serve.
			name:            "one replica, none available",
			replicas:        1,
			obs:             observed{deployment: deploymentWithStatus(1, 1, 1, 1, 0, corev1.ConditionTrue)},
			wantAvailable:   cond{metav1.ConditionFalse, cachev1beta1.ReasonMinimumReplicasUnavailable},
			wantProgressing: cond{metav1.ConditionTrue, cachev1beta1.ReasonRollingOut},
			wantDegraded:    cond{metav1.ConditionFalse, cachev1beta1.ReasonAsExpected},
		},
		{
			name:            "three replicas, one missing",
			replicas:        3,
			obs:             observed{deployment: deploymentWithStatus(1, 1, 3, 3, 2, corev1.ConditionTrue)},
			wantAvailable:   cond{metav1.ConditionTrue, cachev1beta1.ReasonMinimumReplicasAvailable},
			wantProgressing: cond{metav1.ConditionTrue, cachev1beta1.ReasonRollingOut},
			wantDegraded:    cond{metav1.ConditionFalse, cachev1beta1.ReasonAsExpected},
		},
		{
			name:            "three replicas, two missing",
			replicas:        3,
			obs:             observed{deployment: deploymentWithStatus(1, 1, 3, 3, 1, corev1.ConditionTrue)},
			wantAvailable:   cond{metav1.ConditionFalse, cachev1beta1.ReasonMinimumReplicasUnavailable},
			wantProgressing: cond{metav1.ConditionTrue, cachev1beta1.ReasonRollingOut},
			wantDegraded:    cond{metav1.ConditionFalse, cachev1beta1.ReasonAsExpected},
		},
		{
			// The operator's strategy (maxUnavailable 0, maxSurge 1) makes
			// the Deployment say unavailable; a cache missing one shard
			// still serves.
			name:            "three replicas, one missing, maxUnavailable 0",
			replicas:        3,
			obs:             observed{deployment: withMaxUnavailable(deploymentWithStatus(1, 1, 3, 3, 2, corev1.ConditionFalse), 0)},
			wantAvailable:   cond{metav1.ConditionTrue, cachev1beta1.ReasonMinimumReplicasAvailable},
			wantProgressing: cond{metav1.ConditionTrue, cachev1beta1.ReasonRollingOut},
			wantDegraded:    cond{metav1.ConditionFalse, cachev1beta1.ReasonAsExpected},
		},
		{
			// Mid-rollout of one replica: the surge Pod has joined the
			// one it replaces.
			name:            "one replica rolling, maxUnavailable 0",
			replicas:        1,
			obs:             observed{deployment: withMaxUnavailable(deploymentWithStatus(2, 2, 2, 1, 2, corev1.ConditionTrue), 0)},
			wantAvailable:   cond{metav1.ConditionTrue, cachev1beta1.ReasonMinimumReplicasAvailable},
			wantProgressing: cond{metav1.ConditionTrue, cachev1beta1.ReasonRollingOut},
			wantDegraded:    cond{metav1.ConditionFalse, cachev1beta1.ReasonAsExpected},
		},
		{
			name:     "rollout paused by someone else",
			replicas: 3,
			obs: observed{deployment: func() *appsv1.Deployment {
				d := withMaxUnavailable(deploymentWithStatus(2, 2, 4, 1, 4, corev1.ConditionTrue), 0)
				d.Spec.Paused = true
				return d
			}()},
			wantAvailable:   cond{metav1.ConditionTrue, cachev1beta1.ReasonMinimumReplicasAvailable},
			wantProgressing: cond{metav1.ConditionFalse, cachev1beta1.ReasonDeploymentPaused},
			wantDegraded:    cond{metav1.ConditionFalse, cachev1beta1.ReasonAsExpected},
		},
		{
			name:            "scaled to zero",
			replicas:        0,
			obs:             observed{deployment: deploymentWithStatus(1, 1, 0, 0, 0, corev1.ConditionTrue)},
			wantAvailable:   cond{metav1.ConditionFalse, cachev1beta1.ReasonScaledToZero},
			wantProgressing: cond{metav1.ConditionFalse, cachev1beta1.ReasonComplete},
			wantDegraded:    cond{metav1.ConditionFalse, cachev1beta1.ReasonAsExpected},
		},
		{
			name:            "paused",
			replicas:        2,
			paused:          true,
			obs:             observed{deployment: deploymentWithStatus(1, 1, 2, 2, 2, corev1.ConditionTrue)},
			wantAvailable:   cond{metav1.ConditionTrue, cachev1beta1.ReasonMinimumReplicasAvailable},
			wantProgressing: cond{metav1.ConditionFalse, cachev1beta1.ReasonPaused},
			wantDegraded:    cond{metav1.ConditionFalse, cachev1beta1.ReasonAsExpected},
		},
		{
			name:            "foreign Deployment",
			replicas:        2,
			obs:             observed{outcome: blocked(cachev1beta1.ReasonResourceExists, errors.New("taken"), retryAfter, foreignRecheckInterval)},
			wantAvailable:   cond{metav1.ConditionFalse, cachev1beta1.ReasonDeploymentMissing},
			wantProgressing: cond{metav1.ConditionFalse, cachev1beta1.ReasonResourceExists},
			wantDegraded:    cond{metav1.ConditionTrue, cachev1beta1.ReasonResourceExists},
		},
		{
			name:     "progress deadline exceeded",
			replicas: 2,
			obs: observed{deployment: func() *appsv1.Deployment {
				d := deploymentWithStatus(2, 2, 2, 1, 1, corev1.ConditionTrue)
				d.Status.Conditions = append(d.Status.Conditions, appsv1.DeploymentCondition{
					Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse, Reason: "ProgressDeadlineExceeded",
				})
				return d
			}()},
			wantAvailable:   cond{metav1.ConditionTrue, cachev1beta1.ReasonMinimumReplicasAvailable},
			wantProgressing: cond{metav1.ConditionFalse, cachev1beta1.ReasonProgressDeadlineExceeded},
			wantDegraded:    cond{metav1.ConditionTrue, cachev1beta1.ReasonProgressDeadlineExceeded},
		},
	}
	now := metav1.NewTime(time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mc := newMemcached("cache")
			mc.Generation = 4
			mc.Spec.Replicas = ptr.To(tt.replicas)
			mc.Spec.Paused = tt.paused
			status := statusOf(mc, tt.obs, now)

			if status.ObservedGeneration != 4 {
				t.Errorf("observedGeneration = %d, want 4", status.ObservedGeneration)
			}
			for condType, want := range map[string]cond{
				cachev1beta1.ConditionAvailable:   tt.wantAvailable,
				cachev1beta1.ConditionProgressing: tt.wantProgressing,
				cachev1beta1.ConditionDegraded:    tt.wantDegraded,
			} {
				c := meta.FindStatusCondition(status.Conditions, condType)
				if c == nil {
					t.Errorf("%s missing", condType)
					continue
				}
				if c.Status != want.status || c.Reason != want.reason {
					t.Errorf("%s = %s/%s, want %s/%s", condType, c.Status, c.Reason, want.status, want.reason)
				}
				if c.ObservedGeneration != 4 || c.Message == "" {
					t.Errorf("%s observedGeneration = %d, message = %q", condType, c.ObservedGeneration, c.Message)
				}
			}
		})
	}
}

func TestComputeStatusKeepsTransitionTimes(t *testing.T) {
	earlier := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	later := metav1.NewTime(earlier.Add(time.Hour))

	mc := newMemcached("cache")
	mc.Spec.Replicas = ptr.To[int32](2)
	rolling := observed{deployment: deploymentWithStatus(1, 1, 2, 1, 1, corev1.ConditionTrue)}
	mc.Status = statusOf(mc, rolling, earlier)

	// The rollout advances but Progressing stays True: its time must not move.
	advanced := observed{deployment: deploymentWithStatus(1, 1, 2, 2, 1, corev1.ConditionTrue)}
	status := statusOf(mc, advanced, later)
	if c := meta.FindStatusCondition(status.Conditions, cachev1beta1.ConditionProgressing); !c.LastTransitionTime.Equal(&earlier) {
		t.Errorf("Progressing lastTransitionTime moved to %v without a flip", c.LastTransitionTime)
	}

	// The rollout completes: Progressing flips and takes the new time.
	done := observed{deployment: deploymentWithStatus(1, 1, 2, 2, 2, corev1.ConditionTrue)}
	status = statusOf(mc, done, later)
	if c := meta.FindStatusCondition(status.Conditions, cachev1beta1.ConditionProgressing); !c.LastTransitionTime.Equal(&later) {
		t.Errorf("Progressing lastTransitionTime = %v after a flip, want %v", c.LastTransitionTime, later)
	}
}

func TestStatusEqual(t *testing.T) {
	mc := newMemcached("cache")
	base := statusOf(mc, observed{deployment: deploymentWithStatus(1, 1, 1, 1, 1, corev1.ConditionTrue)}, metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)))
	tests := []struct {
		name   string
		mutate func(*cachev1beta1.MemcachedStatus)
		want   bool
	}{
		{name: "identical", mutate: func(*cachev1beta1.MemcachedStatus) {}, want: true},
		{name: "observedGeneration", mutate: func(s *cachev1beta1.MemcachedStatus) { s.ObservedGeneration++ }},
		{name: "ready replicas", mutate: func(s *cachev1beta1.MemcachedStatus) { s.ReadyReplicas++ }},
		{name: "endpoint", mutate: func(s *cachev1beta1.MemcachedStatus) { s.Endpoint = "x" }},
		{name: "condition message", mutate: func(s *cachev1beta1.MemcachedStatus) { s.Conditions[0].Message = "x" }},
		{name: "condition time", mutate: func(s *cachev1beta1.MemcachedStatus) {
			s.Conditions[1].LastTransitionTime = metav1.NewTime(s.Conditions[1].LastTransitionTime.Add(time.Second))
		}},
		{name: "condition removed", mutate: func(s *cachev1beta1.MemcachedStatus) { s.Conditions = s.Conditions[:2] }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			other := base.DeepCopy()
			tt.mutate(other)
			if got := statusEqual(&base, other); got != tt.want {
				t.Errorf("statusEqual = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestStatusEqualCoversEveryField changes each field of a status in turn,
// found by reflection, and requires statusEqual to notice, as
// equality.Semantic does. A field added to MemcachedStatus (or to a
// condition) that statusEqual forgets would never be written; this test
// fails instead.
func TestStatusEqualCoversEveryField(t *testing.T) {
	mc := newMemcached("cache")
	mc.Spec.Zones = []string{"a"}
	base := statusOf(mc, observed{deployment: deploymentWithStatus(1, 1, 1, 1, 1, corev1.ConditionTrue)}, metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)))
	if !statusEqual(&base, base.DeepCopy()) {
		t.Fatalf("statusEqual is false for a deep copy")
	}

	var paths []string
	var walk func(path string, v reflect.Value)
	walk = func(path string, v reflect.Value) {
		switch {
		case v.Type() == reflect.TypeFor[metav1.Time]():
			paths = append(paths, path)
		case v.Kind() == reflect.Struct:
			for i := range v.NumField() {
				walk(path+"."+v.Type().Field(i).Name, v.Field(i))
			}
		case v.Kind() == reflect.Slice:
			if v.Len() == 0 {
				t.Fatalf("%s is empty in the base status; give it an element so its fields are covered", path)
			}
			walk(path+"[0]", v.Index(0))
		default:
			paths = append(paths, path)
		}
	}
	walk("status", reflect.ValueOf(base))

	for _, path := range paths {
		t.Run(path, func(t *testing.T) {
			other := base.DeepCopy()
			change(t, reflect.ValueOf(other).Elem(), strings.Split(path, ".")[1:])
			if equality.Semantic.DeepEqual(base, *other) {
				t.Fatalf("changing %s did not change the status", path)
			}
			if statusEqual(&base, other) {
				t.Errorf("statusEqual misses a change of %s", path)
			}
		})
	}
}

// change changes the field at path (field names, a slice as Name[0]) to a
// different value of its type.
func change(t *testing.T, v reflect.Value, path []string) {
	t.Helper()
	for _, name := range path {
		name, indexed := strings.CutSuffix(name, "[0]")
		v = v.FieldByName(name)
		if indexed {
			v = v.Index(0)
		}
	}
	switch {
	case v.Type() == reflect.TypeFor[metav1.Time]():
		tm := v.Interface().(metav1.Time)
		v.Set(reflect.ValueOf(metav1.NewTime(tm.Add(time.Second))))
	case v.CanInt():
		v.SetInt(v.Int() + 1)
	case v.Kind() == reflect.String:
		v.SetString(v.String() + "x")
	case v.Kind() == reflect.Bool:
		v.SetBool(!v.Bool())
	default:
		t.Fatalf("this test cannot change a %s; teach it, and make sure statusEqual compares the field", v.Type())
	}
}

// TestStatusWaitsForDeploymentController checks that a status write waits,
// for at most deploymentControllerWait, while the Deployment controller has
// not observed the Deployment's generation or no Pod of its template
// exists, and that the key is requeued for when the wait ends.
func TestStatusWaitsForDeploymentController(t *testing.T) {
	converged, dep, svc, pdb := converge(t, newMemcached("cache"))
	// A new generation of the Memcached that changes its Deployment.
	mc := converged.DeepCopy()
	mc.Generation++
	mc.Spec.Memory = ptr.To(resource.MustParse("96Mi"))
	tests := []struct {
		name string
		// observed is the generation the Deployment controller observed,
		// updated the Pods of the current template.
		observed, updated int32
		// waited is how long ago the first sync of this generation was.
		waited    time.Duration
		wantWrite bool
	}{
		{name: "not observed yet", observed: 1, updated: 2},
		{name: "observed, no Pod of the new template yet", observed: 2},
		{name: "observed, with Pods of the new template", observed: 2, updated: 1, wantWrite: true},
		{name: "not observed when the wait is over", observed: 1, updated: 2, waited: deploymentControllerWait, wantWrite: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := dep.DeepCopy()
			d.Generation, d.Status.ObservedGeneration, d.Status.UpdatedReplicas = 2, int64(tt.observed), tt.updated
			f := newFixture(t)
			f.seed(mc, d, svc, pdb)
			_, ctx := ktesting.NewTestContext(t)
			c := f.newController(ctx)
			key := cache.MetaObjectToName(mc)
			if tt.waited > 0 {
				if o := c.syncHandler(ctx, key); o.err != nil {
					t.Fatalf("first sync: %v", o.err)
				}
				f.clock.Step(tt.waited)
			}
			// The sync applies the Deployment, and the fake returns it with
			// the status it was seeded with.
			before := len(writes(f.client.Actions()))
			o := c.syncHandler(ctx, key)
			if o.err != nil {
				t.Fatalf("sync: %v", o.err)
			}
			if got := writes(f.client.Actions())[before:]; (len(got) > 0) != tt.wantWrite {
				t.Fatalf("status writes %v, want a write: %v", describe(got), tt.wantWrite)
			}
			if tt.wantWrite {
				return
			}
			if !isRequeue(o, deploymentControllerWait) {
				t.Fatalf("sync outcome %+v, want a sync again when the wait ends", o)
			}
			c.handleErr(ctx, key, o)
			if n := c.workqueue.Len(); n != 0 {
				t.Fatalf("queue length %d before the wait ended, want 0", n)
			}
			f.clock.Step(deploymentControllerWait)
			if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
				return c.workqueue.Len() == 1, nil
			}); err != nil {
				t.Errorf("the Memcached was not requeued for when the wait ends: queue length %d", c.workqueue.Len())
			}
		})
	}
}

// observed is what a sync saw, for the status tests.
type observed struct {
	deployment *appsv1.Deployment
	outcome    outcome
}

// statusOf is the status a sync of mc computes from what it observed.
func statusOf(mc *cachev1beta1.Memcached, obs observed, now metav1.Time) cachev1beta1.MemcachedStatus {
	d := resources.Default(mc)
	return computeStatus(&memcachedSync{mc: mc, defaulted: d, pools: []poolState{{zone: resources.Zones(d)[0], deployment: obs.deployment}}, outcome: obs.outcome}, now)
}

func TestSyncSkipsStatusWriteFromStaleCache(t *testing.T) {
	mc := newMemcached("cache")
	f := newFixture(t)
	f.addMemcached(mc)
	_, ctx := ktesting.NewTestContext(t)
	c := f.newController(ctx)
	key := cache.MetaObjectToName(mc)
	if o := c.syncHandler(ctx, key); o.err != nil {
		t.Fatalf("first sync: %v", o.err)
	}
	first := len(writes(f.client.Actions()))

	// The lister still holds the Memcached as it was before our status
	// write, as an informer does until the write's event arrives.
	if o := c.syncHandler(ctx, key); o.err != nil {
		t.Fatalf("second sync: %v", o.err)
	}
	if got := writes(f.client.Actions())[first:]; len(got) != 0 {
		t.Errorf("a sync from the stale cache wrote again: %v", describe(got))
	}
}
