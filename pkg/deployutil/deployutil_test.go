package deployutil

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// deployment is a Deployment of generation 2 with three replicas, every one
// updated and available, as edit leaves it.
func deployment(edit func(*appsv1.Deployment)) *appsv1.Deployment {
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Generation: 2},
		Spec:       appsv1.DeploymentSpec{Replicas: ptr.To[int32](3)},
		Status:     appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 3, UpdatedReplicas: 3, ReadyReplicas: 3, AvailableReplicas: 3},
	}
	if edit != nil {
		edit(d)
	}
	return d
}

func TestPredicates(t *testing.T) {
	type want struct{ complete, rollingOut, replacing, available, stuck, failing bool }
	tests := []struct {
		name string
		edit func(*appsv1.Deployment)
		want want
	}{
		{name: "complete", want: want{complete: true, available: true}},
		{name: "a new generation not yet observed", edit: func(d *appsv1.Deployment) { d.Generation = 3 },
			want: want{rollingOut: true, replacing: true, available: true}},
		{name: "an old Pod left beside the surge Pod", edit: func(d *appsv1.Deployment) { d.Status.Replicas, d.Status.UpdatedReplicas = 4, 1 },
			want: want{rollingOut: true, replacing: true, available: true}},
		{name: "a Pod down on the current template", edit: func(d *appsv1.Deployment) { d.Status.AvailableReplicas = 2 },
			want: want{rollingOut: true, available: true}},
		{name: "two Pods down on the current template", edit: func(d *appsv1.Deployment) { d.Status.AvailableReplicas = 1 },
			want: want{rollingOut: true}},
		{name: "a scale-up by two whose Pods are not there yet", edit: func(d *appsv1.Deployment) { d.Spec.Replicas = ptr.To[int32](5) },
			want: want{rollingOut: true, replacing: true}},
		{name: "paused half way", edit: func(d *appsv1.Deployment) {
			d.Spec.Paused = true
			d.Status.Replicas, d.Status.UpdatedReplicas = 4, 1
		}, want: want{available: true}},
		{name: "past its progress deadline, its surge Pod refused", edit: func(d *appsv1.Deployment) {
			d.Status.Replicas, d.Status.UpdatedReplicas = 3, 0
			d.Status.Conditions = []appsv1.DeploymentCondition{
				{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse, Reason: "ProgressDeadlineExceeded"},
				{Type: appsv1.DeploymentReplicaFailure, Status: corev1.ConditionTrue, Reason: "FailedCreate"},
			}
		}, want: want{rollingOut: true, replacing: true, available: true, stuck: true, failing: true}},
		{name: "a ReplicaFailure that cleared", edit: func(d *appsv1.Deployment) {
			d.Status.Conditions = []appsv1.DeploymentCondition{{Type: appsv1.DeploymentReplicaFailure, Status: corev1.ConditionFalse}}
		}, want: want{complete: true, available: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := deployment(tt.edit)
			got := want{
				complete:   Complete(d, ptr.Deref(d.Spec.Replicas, 1)),
				rollingOut: RollingOut(d),
				replacing:  ReplacingPods(d),
				available:  Available(d, ptr.Deref(d.Spec.Replicas, 1)),
				stuck:      ProgressDeadlineExceeded(d),
				failing:    ReplicaFailure(d) != nil,
			}
			if got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}
