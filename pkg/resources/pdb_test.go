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
