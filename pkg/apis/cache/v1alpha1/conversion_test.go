package v1alpha1

import (
	"encoding/json"
	"math/rand"
	"testing"

	"k8s.io/apimachinery/pkg/api/apitesting/fuzzer"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metafuzzer "k8s.io/apimachinery/pkg/apis/meta/fuzzer"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/randfill"

	"github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
)

// roundTrips is how many random objects each direction converts.
const roundTrips = 5000

// quantityFuzz draws memory quantities of every kind the conversion must
// carry: whole mebibytes (which v1alpha1 says exactly), decimal and
// fractional amounts, zero, negatives and values beyond int32 mebibytes.
func quantityFuzz(q *resource.Quantity, c randfill.Continue) {
	switch c.Intn(7) {
	case 0:
		*q = *resource.NewQuantity(int64(c.Int31n(70000))*mebibyte, resource.BinarySI)
	case 1:
		*q = *resource.NewQuantity(c.Int63n(1<<40), resource.DecimalSI)
	case 2:
		*q = *resource.NewScaledQuantity(c.Int63n(10000), resource.Mega)
	case 3:
		*q = *resource.NewMilliQuantity(c.Int63n(1<<30), resource.DecimalSI)
	case 4:
		*q = resource.MustParse("0")
	case 5:
		*q = *resource.NewQuantity(-int64(c.Int31n(100))*mebibyte, resource.BinarySI)
	default:
		*q = *resource.NewScaledQuantity(c.Int63n(100)+1, resource.Exa)
	}
}

// specFuzz fills a v1beta1 spec and, half of the time, leaves out the
// fields v1alpha1 has no words for, so that both the objects that need the
// annotation and the ones that do not are drawn often.
func specFuzz(s *v1beta1.MemcachedSpec, c randfill.Continue) {
	c.FillNoCustom(s)
	if c.Bool() {
		return
	}
	s.MaxItemSize, s.ExtraArgs, s.PodDisruptionBudget, s.TLS, s.NetworkPolicy, s.Auth = nil, nil, nil, nil, nil, nil
	if s.Pod != nil {
		s.Pod.Labels, s.Pod.Annotations, s.Pod.ImagePullSecrets = nil, nil, nil
		s.Pod.TerminationGracePeriodSeconds, s.Pod.PreStopDelaySeconds = nil, nil
		s.Pod.TopologySpreadConstraints = nil
	}
}

func newFuzzer(t *testing.T, seed int64) *randfill.Filler {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := Install(scheme); err != nil {
		t.Fatal(err)
	}
	if err := v1beta1.Install(scheme); err != nil {
		t.Fatal(err)
	}
	funcs := fuzzer.MergeFuzzerFuncs(metafuzzer.Funcs, func(serializer.CodecFactory) []any {
		return []any{quantityFuzz, specFuzz}
	})
	return fuzzer.FuzzerFor(funcs, rand.NewSource(seed), serializer.NewCodecFactory(scheme)).NilChance(0.3)
}

// sameJSON fails unless a and b serialize identically: the apiserver
// stores and serves JSON, so that is the form that must survive.
func sameJSON(t *testing.T, what string, a, b any) {
	t.Helper()
	ja, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	jb, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	if string(ja) != string(jb) {
		t.Fatalf("%s changed:\n before %s\n after  %s", what, ja, jb)
	}
}

// TestRoundTripFromV1alpha1 converts random v1alpha1 objects to v1beta1
// and back, and requires the very same object.
func TestRoundTripFromV1alpha1(t *testing.T) {
	f := newFuzzer(t, 1)
	for i := range roundTrips {
		var in Memcached
		f.Fill(&in)
		in.TypeMeta = metaFor(GroupVersion.String())
		delete(in.Annotations, V1beta1SpecAnnotation)

		var hub v1beta1.Memcached
		if err := in.DeepCopy().ConvertTo(&hub); err != nil {
			t.Fatalf("object %d: to v1beta1: %v", i, err)
		}
		if _, ok := hub.Annotations[V1beta1SpecAnnotation]; ok {
			t.Fatalf("object %d: the v1beta1 form carries %s", i, V1beta1SpecAnnotation)
		}
		var out Memcached
		if err := out.ConvertFrom(&hub); err != nil {
			t.Fatalf("object %d: back to v1alpha1: %v", i, err)
		}
		if !equality.Semantic.DeepEqual(&in, &out) {
			sameJSON(t, "v1alpha1 → v1beta1 → v1alpha1", &in, &out)
			t.Fatalf("object %d: v1alpha1 → v1beta1 → v1alpha1 is not semantically equal", i)
		}
		sameJSON(t, "v1alpha1 → v1beta1 → v1alpha1", &in, &out)
	}
}

// TestRoundTripFromV1beta1 converts random v1beta1 objects to v1alpha1 and
// back, and requires the same object; v1alpha1 cannot say all of it, so
// this is the test of the annotation.
func TestRoundTripFromV1beta1(t *testing.T) {
	f := newFuzzer(t, 2)
	annotated := 0
	for i := range roundTrips {
		var in v1beta1.Memcached
		f.Fill(&in)
		in.TypeMeta = metaFor(v1beta1.GroupVersion.String())
		delete(in.Annotations, V1beta1SpecAnnotation)

		var spoke Memcached
		if err := spoke.ConvertFrom(in.DeepCopy()); err != nil {
			t.Fatalf("object %d: to v1alpha1: %v", i, err)
		}
		if _, ok := spoke.Annotations[V1beta1SpecAnnotation]; ok {
			annotated++
		}
		var out v1beta1.Memcached
		if err := spoke.ConvertTo(&out); err != nil {
			t.Fatalf("object %d: back to v1beta1: %v", i, err)
		}
		if !equality.Semantic.DeepEqual(&in, &out) {
			sameJSON(t, "v1beta1 → v1alpha1 → v1beta1", &in, &out)
			t.Fatalf("object %d: v1beta1 → v1alpha1 → v1beta1 is not semantically equal", i)
		}
	}
	// Both paths must have been taken: with and without the annotation.
	if annotated == 0 || annotated == roundTrips {
		t.Errorf("%d of %d objects needed the annotation; the fuzzer does not cover both cases", annotated, roundTrips)
	}
}

// TestConversionAnnotation pins the cases a user meets: what v1alpha1
// says exactly needs no annotation, and an edit made through v1alpha1
// wins over what the annotation saved.
func TestConversionAnnotation(t *testing.T) {
	beta := func(memory string, mutate func(*v1beta1.MemcachedSpec)) *v1beta1.Memcached {
		mc := &v1beta1.Memcached{}
		mc.Name, mc.Namespace = "cache", "default"
		mc.Spec.Replicas = ptr.To[int32](1)
		if memory != "" {
			q := resource.MustParse(memory)
			mc.Spec.Memory = &q
		}
		if mutate != nil {
			mutate(&mc.Spec)
		}
		return mc
	}
	tests := []struct {
		name           string
		in             *v1beta1.Memcached
		wantMemoryMB   int32
		wantAnnotation bool
		edit           func(*Memcached)
		wantMemory     string // After the edit and the way back; "" for nil.
		wantPod        bool
	}{
		{name: "whole mebibytes", in: beta("64Mi", nil), wantMemoryMB: 64, wantMemory: "64Mi"},
		{name: "gibibytes", in: beta("2Gi", nil), wantMemoryMB: 2048, wantMemory: "2Gi"},
		{name: "decimal megabytes round up", in: beta("1000M", nil), wantMemoryMB: 954, wantAnnotation: true, wantMemory: "1G"},
		{
			name: "decimal megabytes survive an edit of another field", in: beta("1000M", nil), wantMemoryMB: 954, wantAnnotation: true,
			edit: func(mc *Memcached) { mc.Spec.Replicas = ptr.To[int32](3) }, wantMemory: "1G",
		},
		{
			name: "an edit of memoryMB wins", in: beta("1000M", nil), wantMemoryMB: 954, wantAnnotation: true,
			edit: func(mc *Memcached) { mc.Spec.MemoryMB = 128 }, wantMemory: "128Mi",
		},
		{
			name: "an empty pod block", in: beta("64Mi", func(s *v1beta1.MemcachedSpec) { s.Pod = &v1beta1.PodOverrides{} }),
			wantMemoryMB: 64, wantAnnotation: true, wantMemory: "64Mi", wantPod: true,
		},
		{
			name: "a pod block v1alpha1 holds", in: beta("64Mi", func(s *v1beta1.MemcachedSpec) { s.Pod = &v1beta1.PodOverrides{PriorityClassName: "high"} }),
			wantMemoryMB: 64, wantMemory: "64Mi", wantPod: true,
		},
		{name: "no memory", in: beta("", nil), wantMemoryMB: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var spoke Memcached
			if err := spoke.ConvertFrom(tt.in); err != nil {
				t.Fatal(err)
			}
			if spoke.Spec.MemoryMB != tt.wantMemoryMB {
				t.Errorf("memoryMB = %d, want %d", spoke.Spec.MemoryMB, tt.wantMemoryMB)
			}
			if _, ok := spoke.Annotations[V1beta1SpecAnnotation]; ok != tt.wantAnnotation {
				t.Errorf("annotation present = %v, want %v (%v)", ok, tt.wantAnnotation, spoke.Annotations)
			}
			if tt.edit != nil {
				tt.edit(&spoke)
			}
			var out v1beta1.Memcached
			if err := spoke.ConvertTo(&out); err != nil {
				t.Fatal(err)
			}
			got := ""
			if out.Spec.Memory != nil {
				got = out.Spec.Memory.String()
			}
			if got != tt.wantMemory {
				t.Errorf("memory = %q, want %q", got, tt.wantMemory)
			}
			if (out.Spec.Pod != nil) != tt.wantPod {
				t.Errorf("pod block present = %v, want %v", out.Spec.Pod != nil, tt.wantPod)
			}
			if len(out.Annotations) != 0 {
				t.Errorf("v1beta1 annotations = %v, want none", out.Annotations)
			}
		})
	}
}

// TestNetworkPolicySurvivesV1alpha1 converts spec.networkPolicy, which
// v1alpha1 has no words for, to v1alpha1, edits another field there and
// converts back: the policy must be the same, and an empty one ({}), which
// means something else than none, must stay empty rather than go.
func TestNetworkPolicySurvivesV1alpha1(t *testing.T) {
	tests := []struct {
		name   string
		policy *v1beta1.NetworkPolicy
	}{
		{name: "empty", policy: &v1beta1.NetworkPolicy{}},
		{name: "clients and metrics", policy: &v1beta1.NetworkPolicy{
			Clients: []v1beta1.NetworkPolicyPeer{{
				NamespaceSelector: &v1beta1.LabelSelector{MatchLabels: map[string]string{"team": "web"}},
				PodSelector: &v1beta1.LabelSelector{MatchExpressions: []v1beta1.LabelSelectorRequirement{
					{Key: "role", Operator: "In", Values: []string{"frontend"}},
				}},
			}},
			Metrics: []v1beta1.NetworkPolicyPeer{{NamespaceSelector: &v1beta1.LabelSelector{}}},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := &v1beta1.Memcached{}
			in.Name, in.Namespace = "cache", "default"
			in.Spec.Replicas = ptr.To[int32](1)
			in.Spec.NetworkPolicy = tt.policy
			var spoke Memcached
			if err := spoke.ConvertFrom(in.DeepCopy()); err != nil {
				t.Fatal(err)
			}
			if _, ok := spoke.Annotations[V1beta1SpecAnnotation]; !ok {
				t.Fatalf("the v1alpha1 form does not keep the v1beta1 spec: %v", spoke.Annotations)
			}
			spoke.Spec.Replicas = ptr.To[int32](3)
			var out v1beta1.Memcached
			if err := spoke.ConvertTo(&out); err != nil {
				t.Fatal(err)
			}
			sameJSON(t, "spec.networkPolicy", in.Spec.NetworkPolicy, out.Spec.NetworkPolicy)
			if *out.Spec.Replicas != 3 {
				t.Errorf("replicas = %d, want the v1alpha1 edit, 3", *out.Spec.Replicas)
			}
		})
	}
}

// TestMinReadySecondsThroughV1alpha1 converts spec.minReadySeconds, which
// v1alpha1 has no words for, there and back. Its default, which the
// apiserver writes into every stored spec, must not make every v1alpha1
// object carry the saved v1beta1 spec; any other value must come back.
func TestMinReadySecondsThroughV1alpha1(t *testing.T) {
	tests := []struct {
		name           string
		in             *int32
		wantAnnotation bool
		want           *int32 // nil: left out, for the apiserver to default
	}{
		{name: "left out", in: nil},
		{name: "the default", in: ptr.To[int32](v1beta1.DefaultMinReadySeconds)},
		{name: "another value", in: ptr.To[int32](30), wantAnnotation: true, want: ptr.To[int32](30)},
		{name: "zero", in: ptr.To[int32](0), wantAnnotation: true, want: ptr.To[int32](0)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := &v1beta1.Memcached{}
			in.Name, in.Namespace = "cache", "default"
			in.Spec.Replicas, in.Spec.MinReadySeconds = ptr.To[int32](1), tt.in
			var spoke Memcached
			if err := spoke.ConvertFrom(in); err != nil {
				t.Fatal(err)
			}
			if _, ok := spoke.Annotations[V1beta1SpecAnnotation]; ok != tt.wantAnnotation {
				t.Errorf("annotation present = %v, want %v (%v)", ok, tt.wantAnnotation, spoke.Annotations)
			}
			var out v1beta1.Memcached
			if err := spoke.ConvertTo(&out); err != nil {
				t.Fatal(err)
			}
			if got := out.Spec.MinReadySeconds; (got == nil) != (tt.want == nil) || (got != nil && *got != *tt.want) {
				t.Errorf("minReadySeconds back = %v, want %v", ptr.Deref(got, -1), ptr.Deref(tt.want, -1))
			}
		})
	}
}
