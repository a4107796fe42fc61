package resources

import (
	"encoding/json"
	"errors"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/applyconfigurations"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
	"github.com/kubelite/memcached-operator/pkg/drift"
)

// TestTemplateInputs changes each spec field that TemplateInputs leaves
// out, and proves that none of them changes any pool's Pod template; and
// that a field of the template changes the hash.
func TestTemplateInputs(t *testing.T) {
	base := func(s *cachev1beta1.MemcachedSpec) { s.Zones = []string{"a", "b"} }
	outside := []struct {
		name   string
		mutate func(*cachev1beta1.MemcachedSpec)
	}{
		{"replicas", func(s *cachev1beta1.MemcachedSpec) { s.Replicas = ptr.To[int32](7) }},
		{"paused", func(s *cachev1beta1.MemcachedSpec) { s.Paused = true }},
		{"deletionPolicy", func(s *cachev1beta1.MemcachedSpec) { s.DeletionPolicy = cachev1beta1.DeletionPolicyOrphan }},
		{"podDisruptionBudget", func(s *cachev1beta1.MemcachedSpec) {
			s.PodDisruptionBudget = &cachev1beta1.DisruptionBudget{MaxUnavailable: ptr.To(intstr.FromInt32(2))}
		}},
		{"networkPolicy", func(s *cachev1beta1.MemcachedSpec) {
			s.NetworkPolicy = &cachev1beta1.NetworkPolicy{Clients: []cachev1beta1.NetworkPolicyPeer{{
				PodSelector: &cachev1beta1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			}}}
		}},
		{"zones", func(s *cachev1beta1.MemcachedSpec) { s.Zones = []string{"a", "b", "c"} }},
		{"minReadySeconds", func(s *cachev1beta1.MemcachedSpec) { s.MinReadySeconds = ptr.To[int32](60) }},
	}
	want := templates(t, memcached(base))
	wantInputs := inputs(t, memcached(base))
	for _, tt := range outside {
		t.Run(tt.name, func(t *testing.T) {
			mc := memcached(func(s *cachev1beta1.MemcachedSpec) {
				base(s)
				tt.mutate(s)
			})
			if got := inputs(t, mc); got != wantInputs {
				t.Errorf("TemplateInputs changed with %s", tt.name)
			}
			for zone, hash := range templates(t, mc) {
				if w, ok := want[zone]; ok && w != hash {
					t.Errorf("the Pod template of zone %s changed with %s, which TemplateInputs leaves out", zone, tt.name)
				}
			}
		})
	}
	inside := []struct {
		name   string
		mutate func(*cachev1beta1.MemcachedSpec)
	}{
		{"memory", func(s *cachev1beta1.MemcachedSpec) { s.Memory = ptr.To(quantity("128Mi")) }},
		{"image", func(s *cachev1beta1.MemcachedSpec) { s.Image = "memcached:1.6.44" }},
		{"pod annotations", func(s *cachev1beta1.MemcachedSpec) {
			s.Pod = &cachev1beta1.PodOverrides{Annotations: map[string]string{"a": "b"}}
		}},
	}
	for _, tt := range inside {
		t.Run(tt.name, func(t *testing.T) {
			if got := inputs(t, memcached(func(s *cachev1beta1.MemcachedSpec) { base(s); tt.mutate(s) })); got == wantInputs {
				t.Errorf("TemplateInputs did not change with %s", tt.name)
			}
		})
	}
}

// templates returns the template hash of each pool of mc, by zone.
func templates(t *testing.T, mc *cachev1beta1.Memcached) map[string]string {
	t.Helper()
	hashes := map[string]string{}
	d := Default(mc)
	for _, zone := range Zones(d) {
		dep, err := PoolDeployment(d, zone)
		if err != nil {
			t.Fatal(err)
		}
		hashes[zone] = dep.Annotations[TemplateHashAnnotation]
	}
	return hashes
}

func inputs(t *testing.T, mc *cachev1beta1.Memcached) string {
	t.Helper()
	h, err := TemplateInputs(mc)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// TestHoldTemplate holds a Deployment whose spec asks for other replicas
// and another template at the template it runs: the held apply carries the
// replicas and the running template, the annotations that describe that
// template, and the spec hash HeldSpecHash computes without the template.
func TestHoldTemplate(t *testing.T) {
	running := appliedDeployment(t, memcached(func(s *cachev1beta1.MemcachedSpec) {
		s.Pod = &cachev1beta1.PodOverrides{Annotations: map[string]string{"rolled": "no"}}
	}))
	running.Annotations[RenderingAnnotation] = "1"
	desired, err := Deployment(Default(memcached(func(s *cachev1beta1.MemcachedSpec) {
		s.Replicas = ptr.To[int32](3)
		s.Pod = &cachev1beta1.PodOverrides{Annotations: map[string]string{"rolled": "yes"}}
	})))
	if err != nil {
		t.Fatal(err)
	}
	held, err := HoldTemplate(desired, running)
	if err != nil {
		t.Fatal(err)
	}
	if path := drift.Diff(held.Spec.Template, &running.Spec.Template); path != "" {
		t.Errorf("the held template differs from the running one at %s", path)
	}
	if got := held.Spec.Template.Annotations["rolled"]; got != "no" {
		t.Errorf("held template annotation rolled=%q, want the running one's", got)
	}
	if got := ptr.Deref(held.Spec.Replicas, 0); got != 3 {
		t.Errorf("held replicas %d, want the spec's 3", got)
	}
	for _, key := range []string{TemplateHashAnnotation, RenderingAnnotation} {
		if got, want := held.Annotations[key], running.Annotations[key]; got != want {
			t.Errorf("held annotation %s=%q, want the running Deployment's %q", key, got, want)
		}
	}
	if got, want := held.Annotations[TemplateInputsAnnotation], desired.Annotations[TemplateInputsAnnotation]; got != want {
		t.Errorf("held annotation %s=%q, want the desired one's %q", TemplateInputsAnnotation, got, want)
	}
	hash, err := HeldSpecHash(desired, running.Annotations)
	if err != nil {
		t.Fatal(err)
	}
	if held.Annotations[SpecHashAnnotation] != hash {
		t.Errorf("held spec hash %s, want HeldSpecHash's %s", held.Annotations[SpecHashAnnotation], hash)
	}
	if desired.Spec.Template.Annotations["rolled"] != "yes" || desired.Annotations[RenderingAnnotation] != renderingVersion {
		t.Errorf("HoldTemplate changed desired")
	}

	t.Run("a spec hash that ignores only the template", func(t *testing.T) {
		// Another rendering of the same spec: only the template and its
		// hash differ.
		other, err := Deployment(Default(memcached(func(s *cachev1beta1.MemcachedSpec) {
			s.Replicas = ptr.To[int32](3)
			s.Pod = &cachev1beta1.PodOverrides{Annotations: map[string]string{"rolled": "yes"}}
		})))
		if err != nil {
			t.Fatal(err)
		}
		other.Spec.Template.WithAnnotations(map[string]string{"rendered": "differently"})
		other.WithAnnotations(map[string]string{TemplateHashAnnotation: "another"})
		if h, err := HeldSpecHash(other, running.Annotations); err != nil || h != hash {
			t.Errorf("HeldSpecHash changed with the desired template alone: %s, want %s (%v)", h, hash, err)
		}
		other.Spec.WithReplicas(4)
		if h, err := HeldSpecHash(other, running.Annotations); err != nil || h == hash {
			t.Errorf("HeldSpecHash did not change with the replicas (%v)", err)
		}
	})
	t.Run("a Deployment held at its own template keeps its spec hash", func(t *testing.T) {
		if h, err := HeldSpecHash(desired, desired.Annotations); err != nil || h != desired.Annotations[SpecHashAnnotation] {
			t.Errorf("HeldSpecHash = %s, want the spec hash %s (%v)", h, desired.Annotations[SpecHashAnnotation], err)
		}
	})
	t.Run("a template the operator owns no field of", func(t *testing.T) {
		foreign := running.DeepCopy()
		foreign.ManagedFields = nil
		if _, err := HoldTemplate(desired, foreign); !errors.Is(err, ErrNoTemplate) {
			t.Errorf("HoldTemplate = %v, want ErrNoTemplate", err)
		}
	})
}

// appliedDeployment returns the Deployment of mc as the apiserver would
// hold it after the operator's apply: the typed object, with a managedFields
// entry of ManagedBy that lists every field the apply set.
func appliedDeployment(t *testing.T, mc *cachev1beta1.Memcached) *appsv1.Deployment {
	t.Helper()
	desired, err := Deployment(Default(mc))
	if err != nil {
		t.Fatal(err)
	}
	body, err := json.Marshal(desired)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(body); err != nil {
		t.Fatal(err)
	}
	typed, err := applyconfigurations.NewTypeConverter(scheme.Scheme).ObjectToTyped(u)
	if err != nil {
		t.Fatal(err)
	}
	set, err := typed.ToFieldSet()
	if err != nil {
		t.Fatal(err)
	}
	fields, err := set.ToJSON()
	if err != nil {
		t.Fatal(err)
	}
	dep := &appsv1.Deployment{}
	if err := json.Unmarshal(body, dep); err != nil {
		t.Fatal(err)
	}
	dep.ManagedFields = []metav1.ManagedFieldsEntry{{
		Manager: ManagedBy, Operation: metav1.ManagedFieldsOperationApply, APIVersion: "apps/v1",
		FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(string(fields)),
	}}
	return dep
}
