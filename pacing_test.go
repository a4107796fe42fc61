package main

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
	"github.com/kubelite/memcached-operator/pkg/resources"
)

// TestPaceDeployment covers which Deployment changes wait for a rollout
// slot: a converged Memcached's Deployment is made to look as if an
// operator with another rendering had applied it, and the one slot is
// taken by another Memcached.
func TestPaceDeployment(t *testing.T) {
	olderRendering := func(mc *cachev1beta1.Memcached, d *appsv1.Deployment) {
		d.Annotations[resources.SpecHashAnnotation] = "older"
		d.Annotations[resources.TemplateHashAnnotation] = "older"
	}
	tests := []struct {
		name string
		// change edits the converged Memcached and its Deployment.
		change     func(*cachev1beta1.Memcached, *appsv1.Deployment)
		slotTaken  bool
		wantApply  bool
		wantReason string
		wantEvent  string
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
			olderRendering(mc, d)
			delete(d.Annotations, resources.GenerationAnnotation)
			delete(d.Annotations, resources.RenderingAnnotation)
		},
		slotTaken:  true,
		wantReason: cachev1beta1.ReasonOperatorRolloutQueued,
		wantEvent:  cachev1beta1.ReasonOperatorRolloutQueued,
	}, {
		name: "an opted-out Memcached defers it to its next spec change",
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
				if ok, _ := c.rollouts.acquire(other, other, 1); !ok {
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
