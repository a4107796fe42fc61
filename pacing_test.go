package main

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
	"github.com/kubelite/memcached-operator/pkg/resources"
)

// TestPaceDeployment covers which Deployment changes wait for a rollout
// slot: a converged Memcached's Deployment is made to look as if an
// operator with another rendering had applied it, and the one slot is
// taken by another Memcached.
func TestPaceDeployment(t *testing.T) {
	// olderRendering makes the Deployment one an operator whose Pod
	// template differs applied from the same spec: only its template hash,
	// and so its spec hash, differ.
	olderRendering := func(mc *cachev1beta1.Memcached, d *appsv1.Deployment) {
		desired, err := resources.Deployment(resources.Default(mc))
		if err != nil {
			t.Fatal(err)
		}
		d.Annotations[resources.TemplateHashAnnotation] = "older"
		if d.Annotations[resources.SpecHashAnnotation], err = resources.HeldSpecHash(desired, d.Annotations); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name string
		// change edits the converged Memcached and its Deployment.
		change     func(*cachev1beta1.Memcached, *appsv1.Deployment)
		slotTaken  bool
		wantApply  bool
		wantReason string
		wantEvent  string
		// check, if set, checks the Deployment after the sync.
		check func(*testing.T, *appsv1.Deployment)
	}{{
		name:      "an operator-caused change with a free slot rolls",
		change:    olderRendering,
		wantApply: true,
		wantEvent: "OperatorRollout",
	}, {
		name:       "an operator-caused change waits for a slot",
		change:     olderRendering,
		slotTaken:  true,
		wantReason: cachev1beta1.ReasonOperatorRolloutQueued,
		wantEvent:  cachev1beta1.ReasonOperatorRolloutQueued,
	}, {
		name: "a Deployment from a release that recorded no generation waits too",
		change: func(mc *cachev1beta1.Memcached, d *appsv1.Deployment) {
			delete(d.Annotations, resources.GenerationAnnotation)
			delete(d.Annotations, resources.RenderingAnnotation)
			delete(d.Annotations, resources.TemplateInputsAnnotation)
			d.Annotations[resources.TemplateHashAnnotation] = "older"
			d.Annotations[resources.SpecHashAnnotation] = "older"
		},
		slotTaken: true,
		// The annotations it lacks are outside the template.
		wantApply:  true,
		wantReason: cachev1beta1.ReasonOperatorRolloutQueued,
		wantEvent:  cachev1beta1.ReasonOperatorRolloutQueued,
		check: func(t *testing.T, d *appsv1.Deployment) {
			_, rendering := d.Annotations[resources.RenderingAnnotation]
			if got := d.Annotations[resources.TemplateHashAnnotation]; got != "older" || rendering || d.Annotations[resources.TemplateInputsAnnotation] == "" {
				t.Errorf("annotations %v, want the running template's hash, no rendering, and the template inputs", d.Annotations)
			}
		},
	}, {
		name: "an opted-out Memcached defers it to its next change of a template input",
		change: func(mc *cachev1beta1.Memcached, d *appsv1.Deployment) {
			olderRendering(mc, d)
			mc.Annotations = map[string]string{DeferOperatorRolloutsAnnotation: "true"}
		},
		wantReason: cachev1beta1.ReasonOperatorRolloutDeferred,
		wantEvent:  cachev1beta1.ReasonOperatorRolloutDeferred,
	}, {
		name: "a spec change applies at once, slot or not",
		change: func(mc *cachev1beta1.Memcached, d *appsv1.Deployment) {
			olderRendering(mc, d)
			mc.Generation++
			mc.Spec.Threads = 8
		},
		slotTaken: true,
		wantApply: true,
	}, {
		name: "a scale while it waits applies the replicas, not the template",
		change: func(mc *cachev1beta1.Memcached, d *appsv1.Deployment) {
			olderRendering(mc, d)
			mc.Generation++
			mc.Spec.Replicas = ptr.To[int32](5)
		},
		slotTaken:  true,
		wantApply:  true,
		wantReason: cachev1beta1.ReasonOperatorRolloutQueued,
		wantEvent:  cachev1beta1.ReasonOperatorRolloutQueued,
		check: func(t *testing.T, d *appsv1.Deployment) {
			if got := ptr.Deref(d.Spec.Replicas, 0); got != 5 {
				t.Errorf("replicas %d, want 5", got)
			}
			if got := d.Annotations[resources.TemplateHashAnnotation]; got != "older" {
				t.Errorf("template hash %q, want the running template's", got)
			}
		},
	}, {
		name: "a scale from zero takes the new template: there is no Pod to restart",
		change: func(mc *cachev1beta1.Memcached, d *appsv1.Deployment) {
			olderRendering(mc, d)
			d.Spec.Replicas = ptr.To[int32](0)
			d.Status = appsv1.DeploymentStatus{}
			mc.Generation++
			mc.Spec.Replicas = ptr.To[int32](2)
		},
		slotTaken: true,
		wantApply: true,
		check: func(t *testing.T, d *appsv1.Deployment) {
			if got := d.Annotations[resources.TemplateHashAnnotation]; got == "older" || ptr.Deref(d.Spec.Replicas, 0) != 2 {
				t.Errorf("template hash %q and replicas %d, want the new template and 2", got, ptr.Deref(d.Spec.Replicas, 0))
			}
		},
	}, {
		name: "a spec change outside the template while it is deferred applies the change alone",
		change: func(mc *cachev1beta1.Memcached, d *appsv1.Deployment) {
			olderRendering(mc, d)
			mc.Annotations = map[string]string{DeferOperatorRolloutsAnnotation: "true"}
			mc.Generation++
			mc.Spec.Replicas = ptr.To[int32](2)
		},
		wantApply:  true,
		wantReason: cachev1beta1.ReasonOperatorRolloutDeferred,
		wantEvent:  cachev1beta1.ReasonOperatorRolloutDeferred,
		check: func(t *testing.T, d *appsv1.Deployment) {
			if got := d.Annotations[resources.TemplateHashAnnotation]; ptr.Deref(d.Spec.Replicas, 0) != 2 || got != "older" {
				t.Errorf("replicas %d and template hash %q, want 2 and the running template's", ptr.Deref(d.Spec.Replicas, 0), got)
			}
		},
	}, {
		name: "a change outside the Pod template applies at once",
		change: func(mc *cachev1beta1.Memcached, d *appsv1.Deployment) {
			d.Annotations[resources.SpecHashAnnotation] = "older"
		},
		slotTaken: true,
		wantApply: true,
	}, {
		name: "a Deployment a newer rendering applied is left alone",
		change: func(mc *cachev1beta1.Memcached, d *appsv1.Deployment) {
			olderRendering(mc, d)
			d.Annotations[resources.RenderingAnnotation] = "99"
		},
		wantReason: cachev1beta1.ReasonRenderedByNewerOperator,
		wantEvent:  cachev1beta1.ReasonRenderedByNewerOperator,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mc, children := convergeAll(t, newMemcached("cache"))
			mc, dep := mc.DeepCopy(), children.dep.DeepCopy()
			tt.change(mc, dep)
			children.dep = dep
			f := newFixture(t)
			f.seedAll(mc, children)
			_, ctx := ktesting.NewTestContext(t)
			c := f.newController(ctx)
			other := cache.ObjectName{Namespace: mc.Namespace, Name: "other"}
			if tt.slotTaken {
				if ok, _ := c.rollouts.Acquire(other, other, "inputs"); !ok {
					t.Fatal("the slot was not free")
				}
			}

			o := c.syncHandler(ctx, cache.MetaObjectToName(mc))
			applied := false
			for _, a := range writes(f.kubeClient.Actions()) {
				if a.GetResource() == deploymentsResource {
					applied = true
				}
			}
			if applied != tt.wantApply {
				t.Errorf("Deployment applied = %t, want %t", applied, tt.wantApply)
			}
			if tt.check != nil {
				d, err := f.kubeClient.AppsV1().Deployments(mc.Namespace).Get(ctx, mc.Name, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				tt.check(t, d)
			}
			if o.reason != tt.wantReason {
				t.Errorf("outcome reason %q, want %q (%v)", o.reason, tt.wantReason, o.err)
			}
			if tt.wantReason != "" {
				got, err := f.client.CacheV1beta1().Memcacheds(mc.Namespace).Get(ctx, mc.Name, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				cond := meta.FindStatusCondition(got.Status.Conditions, cachev1beta1.ConditionProgressing)
				if cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != tt.wantReason {
					t.Errorf("Progressing = %+v, want False/%s", cond, tt.wantReason)
				}
			}
			var events []string
			for len(f.recorder.Events) > 0 {
				events = append(events, <-f.recorder.Events)
			}
			if tt.wantEvent != "" && (len(events) != 1 || !strings.Contains(events[0], " "+tt.wantEvent+" ")) {
				t.Errorf("Events = %v, want one with reason %s", events, tt.wantEvent)
			}
			if tt.slotTaken && tt.wantReason != "" && (len(events) != 1 || !strings.Contains(events[0], "Deployment "+other.Name)) {
				t.Errorf("Events = %v, want one naming the slot's holder %s", events, other)
			}
		})
	}
}
