package drift

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
)

const manager = "memcached-operator"

// TestOwnedFollowsEdits applies desiredDeployment through the fake
// clientset, whose field manager is the apiserver's, lets someone else
// write, and checks that the operator's entry still lists what an apply of
// desired owns exactly when the edit left the operator's fields alone.
func TestOwnedFollowsEdits(t *testing.T) {
	tests := []struct {
		name      string
		edit      func(ctx context.Context, client *fake.Clientset, d *appsv1.Deployment) error
		wantOwned bool
	}{
		{name: "no edit", wantOwned: true},
		{
			name: "update of a field the operator set",
			edit: func(ctx context.Context, client *fake.Clientset, d *appsv1.Deployment) error {
				d.Spec.Replicas = ptr.To[int32](7)
				_, err := client.AppsV1().Deployments(d.Namespace).Update(ctx, d, metav1.UpdateOptions{FieldManager: "kubectl-edit"})
				return err
			},
		},
		{
			name: "update of a label the operator set",
			edit: func(ctx context.Context, client *fake.Clientset, d *appsv1.Deployment) error {
				delete(d.Labels, "app")
				_, err := client.AppsV1().Deployments(d.Namespace).Update(ctx, d, metav1.UpdateOptions{FieldManager: "kubectl-edit"})
				return err
			},
		},
		{
			name: "update that adds a field the operator does not set",
			edit: func(ctx context.Context, client *fake.Clientset, d *appsv1.Deployment) error {
				d.Labels["team"] = "web"
				d.Spec.Template.Annotations = map[string]string{"kubectl.kubernetes.io/restartedAt": "now"}
				_, err := client.AppsV1().Deployments(d.Namespace).Update(ctx, d, metav1.UpdateOptions{FieldManager: "kubectl-rollout"})
				return err
			},
			wantOwned: true,
		},
		{
			name: "forced apply of other replicas",
			edit: func(ctx context.Context, client *fake.Clientset, d *appsv1.Deployment) error {
				ac := appsv1ac.Deployment(d.Name, d.Namespace).WithSpec(appsv1ac.DeploymentSpec().WithReplicas(3))
				_, err := client.AppsV1().Deployments(d.Namespace).Apply(ctx, ac, metav1.ApplyOptions{FieldManager: "other", Force: true})
				return err
			},
		},
		{
			name: "apply of the same value by another manager",
			edit: func(ctx context.Context, client *fake.Clientset, d *appsv1.Deployment) error {
				ac := appsv1ac.Deployment(d.Name, d.Namespace).WithSpec(appsv1ac.DeploymentSpec().WithReplicas(2))
				_, err := client.AppsV1().Deployments(d.Namespace).Apply(ctx, ac, metav1.ApplyOptions{FieldManager: "other"})
				return err
			},
			wantOwned: true,
		},
		{
			name: "status written by the Deployment controller",
			edit: func(ctx context.Context, client *fake.Clientset, d *appsv1.Deployment) error {
				d.Status.Replicas = 2
				_, err := client.AppsV1().Deployments(d.Namespace).UpdateStatus(ctx, d, metav1.UpdateOptions{FieldManager: "kube-controller-manager"})
				return err
			},
			wantOwned: true,
		},
	}
	fieldSets := NewFieldSets()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			client := fake.NewClientset()
			desired := desiredDeployment()
			applied, err := client.AppsV1().Deployments("default").Apply(ctx, desired, metav1.ApplyOptions{FieldManager: manager, Force: true})
			if err != nil {
				t.Fatal(err)
			}
			if tt.edit != nil {
				if err := tt.edit(ctx, client, applied); err != nil {
					t.Fatal(err)
				}
			}
			live, err := client.AppsV1().Deployments("default").Get(ctx, "cache", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			want, err := fieldSets.Applied(desired)
			if err != nil {
				t.Fatal(err)
			}
			if owned := Owned(live.ManagedFields, manager) == want; owned != tt.wantOwned {
				t.Errorf("operator owns what it applied = %t, want %t; managedFields: %v", owned, tt.wantOwned, live.ManagedFields)
			}
		})
	}
}

// TestAppliedListsFieldsNotValues shows why the drift check also compares
// the spec hash: a new value for a field the operator already sets leaves
// the field set as it was.
func TestAppliedListsFieldsNotValues(t *testing.T) {
	fieldSets := NewFieldSets()
	before, err := fieldSets.Applied(desiredDeployment())
	if err != nil {
		t.Fatal(err)
	}
	changed := desiredDeployment()
	changed.Spec.WithReplicas(5)
	after, err := fieldSets.Applied(changed)
	if err != nil {
		t.Fatal(err)
	}
	if before != after {
		t.Errorf("a changed value changed the field set digest: %s, %s", before, after)
	}
	changed.Spec.WithMinReadySeconds(10)
	if added, err := fieldSets.Applied(changed); err != nil || added == before {
		t.Errorf("an added field left the field set digest at %s (err %v)", added, err)
	}
}

func TestOwnedReadsOnlyTheOperatorsApply(t *testing.T) {
	fields := metav1.NewFieldsV1(`{"f:spec":{"f:replicas":{}}}`)
	tests := []struct {
		name    string
		entries []metav1.ManagedFieldsEntry
		want    bool
	}{
		{name: "none"},
		{name: "another manager's apply", entries: []metav1.ManagedFieldsEntry{{Manager: "other", Operation: metav1.ManagedFieldsOperationApply, FieldsV1: fields}}},
		{name: "the operator's update", entries: []metav1.ManagedFieldsEntry{{Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate, FieldsV1: fields}}},
		{name: "the operator's apply to status", entries: []metav1.ManagedFieldsEntry{{Manager: manager, Operation: metav1.ManagedFieldsOperationApply, Subresource: "status", FieldsV1: fields}}},
		{name: "unreadable fields", entries: []metav1.ManagedFieldsEntry{{Manager: manager, Operation: metav1.ManagedFieldsOperationApply, FieldsV1: metav1.NewFieldsV1(`{`)}}},
		{name: "the operator's apply", entries: []metav1.ManagedFieldsEntry{{Manager: manager, Operation: metav1.ManagedFieldsOperationApply, FieldsV1: fields}}, want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Owned(tt.entries, manager); (got != "") != tt.want {
				t.Errorf("Owned = %q, want a digest: %t", got, tt.want)
			}
		})
	}
}

func TestOwnsField(t *testing.T) {
	paused := metav1.NewFieldsV1(`{"f:spec":{"f:paused":{}}}`)
	tests := []struct {
		name    string
		entries []metav1.ManagedFieldsEntry
		want    bool
	}{
		{name: "none"},
		{name: "another manager's apply", entries: []metav1.ManagedFieldsEntry{{Manager: "other", Operation: metav1.ManagedFieldsOperationApply, FieldsV1: paused}}},
		{name: "the manager's update", entries: []metav1.ManagedFieldsEntry{{Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate, FieldsV1: paused}}},
		{name: "the manager's apply to status", entries: []metav1.ManagedFieldsEntry{{Manager: manager, Operation: metav1.ManagedFieldsOperationApply, Subresource: "status", FieldsV1: paused}}},
		{name: "unreadable fields", entries: []metav1.ManagedFieldsEntry{{Manager: manager, Operation: metav1.ManagedFieldsOperationApply, FieldsV1: metav1.NewFieldsV1(`{`)}}},
		{name: "the manager's apply of another field", entries: []metav1.ManagedFieldsEntry{{Manager: manager, Operation: metav1.ManagedFieldsOperationApply, FieldsV1: metav1.NewFieldsV1(`{"f:spec":{"f:replicas":{}}}`)}}},
		{name: "the manager's apply of the field's parent only", entries: []metav1.ManagedFieldsEntry{{Manager: manager, Operation: metav1.ManagedFieldsOperationApply, FieldsV1: metav1.NewFieldsV1(`{"f:spec":{".":{}}}`)}}},
		{name: "the manager's apply of the field", entries: []metav1.ManagedFieldsEntry{{Manager: manager, Operation: metav1.ManagedFieldsOperationApply, FieldsV1: paused}}, want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := OwnsField(tt.entries, manager, "spec", "paused"); got != tt.want {
				t.Errorf("OwnsField = %t, want %t", got, tt.want)
			}
		})
	}
}
