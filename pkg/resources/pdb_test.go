package resources

import (
	"reflect"
	"testing"

	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
)

func TestPodDisruptionBudget(t *testing.T) {
	tests := []struct {
		name               string
		budget             *cachev1beta1.DisruptionBudget
		wantMaxUnavailable *intstr.IntOrString
		wantMinAvailable   *intstr.IntOrString
	}{
		{name: "left out: one Pod at a time", wantMaxUnavailable: ptr.To(intstr.FromInt32(1))},
		{name: "empty block: one Pod at a time", budget: &cachev1beta1.DisruptionBudget{}, wantMaxUnavailable: ptr.To(intstr.FromInt32(1))},
		{
			name:               "maxUnavailable as a percentage",
			budget:             &cachev1beta1.DisruptionBudget{MaxUnavailable: ptr.To(intstr.FromString("25%"))},
			wantMaxUnavailable: ptr.To(intstr.FromString("25%")),
		},
		{
			name:             "minAvailable instead",
			budget:           &cachev1beta1.DisruptionBudget{MinAvailable: ptr.To(intstr.FromInt32(2))},
			wantMinAvailable: ptr.To(intstr.FromInt32(2)),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mc := memcached(func(s *cachev1beta1.MemcachedSpec) { s.PodDisruptionBudget = tt.budget })
			pdb, err := PodDisruptionBudget(Default(mc))
			if err != nil {
				t.Fatalf("PodDisruptionBudget: %v", err)
			}
			if ptr.Deref(pdb.Name, "") != "cache" || ptr.Deref(pdb.Namespace, "") != "prod" {
				t.Errorf("name = %s/%s, want prod/cache", ptr.Deref(pdb.Namespace, ""), ptr.Deref(pdb.Name, ""))
			}
			if !reflect.DeepEqual(pdb.Labels, Labels(mc)) {
				t.Errorf("labels = %v, want %v", pdb.Labels, Labels(mc))
			}
			if len(pdb.OwnerReferences) != 1 || !ptr.Deref(pdb.OwnerReferences[0].Controller, false) {
				t.Errorf("ownerReferences = %+v, want one controller reference", pdb.OwnerReferences)
			}
			if pdb.Annotations[SpecHashAnnotation] == "" {
				t.Errorf("spec hash annotation missing")
			}
			if !reflect.DeepEqual(pdb.Spec.Selector.MatchLabels, SelectorLabels(mc)) {
				t.Errorf("selector = %v, want the Pods' %v", pdb.Spec.Selector.MatchLabels, SelectorLabels(mc))
			}
			if !reflect.DeepEqual(pdb.Spec.MaxUnavailable, tt.wantMaxUnavailable) || !reflect.DeepEqual(pdb.Spec.MinAvailable, tt.wantMinAvailable) {
				t.Errorf("maxUnavailable, minAvailable = %v, %v; want %v, %v", pdb.Spec.MaxUnavailable, pdb.Spec.MinAvailable, tt.wantMaxUnavailable, tt.wantMinAvailable)
			}
			if got := ptr.Deref(pdb.Spec.UnhealthyPodEvictionPolicy, ""); got != policyv1.AlwaysAllow {
				t.Errorf("unhealthyPodEvictionPolicy = %q, want AlwaysAllow", got)
			}
		})
	}
}

// TestMoveDisruptionBudget: over the Pods of every pool of a move, the
// budget allows what the spec's budget allows in one pool of 3 replicas,
// so the serving pool can never lose more.
func TestMoveDisruptionBudget(t *testing.T) {
	tests := []struct {
		name   string
		budget *cachev1beta1.DisruptionBudget
		want   int32
	}{
		{name: "left out", want: 1},
		{name: "maxUnavailable 2", budget: &cachev1beta1.DisruptionBudget{MaxUnavailable: ptr.To(intstr.FromInt32(2))}, want: 2},
		{name: "maxUnavailable 0", budget: &cachev1beta1.DisruptionBudget{MaxUnavailable: ptr.To(intstr.FromInt32(0))}, want: 0},
		{name: "maxUnavailable 50% rounds up", budget: &cachev1beta1.DisruptionBudget{MaxUnavailable: ptr.To(intstr.FromString("50%"))}, want: 2},
		{name: "minAvailable 2", budget: &cachev1beta1.DisruptionBudget{MinAvailable: ptr.To(intstr.FromInt32(2))}, want: 1},
		{name: "minAvailable 5, more than the replicas", budget: &cachev1beta1.DisruptionBudget{MinAvailable: ptr.To(intstr.FromInt32(5))}, want: 0},
		{name: "minAvailable 50% rounds up", budget: &cachev1beta1.DisruptionBudget{MinAvailable: ptr.To(intstr.FromString("50%"))}, want: 1},
		{name: "minAvailable 100%", budget: &cachev1beta1.DisruptionBudget{MinAvailable: ptr.To(intstr.FromString("100%"))}, want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mc := memcached(func(s *cachev1beta1.MemcachedSpec) {
				s.Replicas = ptr.To[int32](3)
				s.Zones = []string{"a", "b", "c"}
				s.PodDisruptionBudget = tt.budget
			})
			pdb, err := MoveDisruptionBudget(Default(mc))
			if err != nil {
				t.Fatal(err)
			}
			if got := pdb.Spec.MaxUnavailable; got == nil || *got != intstr.FromInt32(tt.want) || pdb.Spec.MinAvailable != nil {
				t.Errorf("maxUnavailable %v, minAvailable %v; want maxUnavailable %d alone", got, pdb.Spec.MinAvailable, tt.want)
			}
			if *pdb.Name != "cache" || !reflect.DeepEqual(pdb.Spec.Selector.MatchLabels, PoolSelectorLabels(mc, "")) {
				t.Errorf("budget %s selecting %v, want the budget of the pool without zones, over every Pod", *pdb.Name, pdb.Spec.Selector.MatchLabels)
			}
		})
	}
}
