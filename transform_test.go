package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	apiruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
	"github.com/kubelite/memcached-operator/pkg/drift"
	"github.com/kubelite/memcached-operator/pkg/intern"
	"github.com/kubelite/memcached-operator/pkg/resources"
)

func TestTrimChild(t *testing.T) {
	memcachedRef := func(apiVersion string) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: apiVersion, Kind: "Memcached", Name: "cache", UID: "uid-1", Controller: ptr.To(true)}}
	}
	managed := []metav1.ManagedFieldsEntry{
		{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate, Subresource: "status", FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:status":{"f:replicas":{}}}`)},
		{Manager: fieldManager, Operation: metav1.ManagedFieldsOperationApply, FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:spec":{"f:replicas":{}}}`)},
	}
	owned := drift.Owned(managed, fieldManager)
	if owned == "" {
		t.Fatal("no digest of the operator's fields")
	}
	meta := func(owners []metav1.OwnerReference) metav1.ObjectMeta {
		return metav1.ObjectMeta{
			Name:            "cache",
			Namespace:       "ns",
			Labels:          map[string]string{resources.LabelManagedBy: resources.ManagedBy},
			OwnerReferences: owners,
			Finalizers:      []string{"example.com/hold"},
			ManagedFields:   managed,
			Annotations: map[string]string{
				resources.SpecHashAnnotation: "abc",
				ownedFieldsKey:               "spoofed",
				"junk":                       strings.Repeat("x", 200*1024),
				"kubectl.kubernetes.io/last-applied-configuration": "{}",
			},
		}
	}
	deployment := func(owners []metav1.OwnerReference) *appsv1.Deployment {
		return &appsv1.Deployment{
			ObjectMeta: meta(owners),
			Spec:       appsv1.DeploymentSpec{Replicas: ptr.To[int32](2), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}}},
			Status: appsv1.DeploymentStatus{ReadyReplicas: 2, Conditions: []appsv1.DeploymentCondition{
				{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable", Message: "Deployment has minimum availability."},
				{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable", Message: `ReplicaSet "cache-5d8f" has successfully progressed.`},
			}},
		}
	}
	tests := []struct {
		name  string
		obj   metav1.Object
		child bool
	}{
		{name: "Deployment of a Memcached", obj: deployment(memcachedRef(cachev1beta1.GroupVersion.String())), child: true},
		{name: "Deployment of a Memcached, owner reference of v1alpha1", obj: deployment(memcachedRef(cachev1beta1.GroupName + "/v1alpha1")), child: true},
		{name: "orphaned Deployment", obj: deployment(nil)},
		{name: "Deployment controlled by another kind", obj: deployment([]metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "cache", UID: "x", Controller: ptr.To(true)}})},
		{name: "Deployment owned, not controlled, by a Memcached", obj: deployment([]metav1.OwnerReference{{APIVersion: cachev1beta1.GroupVersion.String(), Kind: "Memcached", Name: "cache", UID: "uid-1"}})},
		{name: "Deployment controlled by a Memcached of another name", obj: deployment([]metav1.OwnerReference{{APIVersion: cachev1beta1.GroupVersion.String(), Kind: "Memcached", Name: "other", UID: "uid-1", Controller: ptr.To(true)}})},
		{name: "Service of a Memcached", obj: &corev1.Service{ObjectMeta: meta(memcachedRef(cachev1beta1.GroupVersion.String())), Spec: corev1.ServiceSpec{ClusterIP: "None"}}, child: true},
		{name: "orphaned Service", obj: &corev1.Service{ObjectMeta: meta(nil), Spec: corev1.ServiceSpec{ClusterIP: "None"}}},
		{name: "PodDisruptionBudget of a Memcached", obj: &policyv1.PodDisruptionBudget{ObjectMeta: meta(memcachedRef(cachev1beta1.GroupVersion.String())), Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(1))}}, child: true},
		{name: "orphaned PodDisruptionBudget", obj: &policyv1.PodDisruptionBudget{ObjectMeta: meta(nil), Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(1))}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The transform changes the object in place: compare with a
			// copy taken before.
			wantLabels := maps.Clone(tt.obj.GetLabels())
			wantOwners := slices.Clone(tt.obj.GetOwnerReferences())
			transform := trimChild(intern.New(intern.DefaultCapacity))
			out, err := transform(tt.obj)
			if err != nil {
				t.Fatal(err)
			}
			// A watch-list transforms each object twice.
			once := out.(apiruntime.Object).DeepCopyObject()
			if out, err = transform(out); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(out, once) {
				t.Errorf("a second transform changed the object:\n%+v\nafter one:\n%+v", out, once)
			}
			got, ok := out.(*cachedChild)
			if !ok {
				t.Fatalf("transform returned %T, want *cachedChild", out)
			}
			if got.GetManagedFields() != nil {
				t.Errorf("managedFields kept: %v", got.GetManagedFields())
			}
			want := map[string]string{resources.SpecHashAnnotation: "abc"}
			if tt.child {
				want[ownedFieldsKey] = owned
			}
			if !maps.Equal(got.GetAnnotations(), want) {
				t.Errorf("annotations = %v, want only %v", got.GetAnnotations(), want)
			}
			// What classify and the status messages read stays: the
			// labels of what is not a child.
			if tt.child {
				wantLabels = nil
			}
			if got.GetName() != "cache" || got.GetNamespace() != "ns" || !maps.Equal(got.GetLabels(), wantLabels) ||
				!reflect.DeepEqual(got.GetOwnerReferences(), wantOwners) || !slices.Equal(got.GetFinalizers(), []string{"example.com/hold"}) {
				t.Errorf("metadata = %+v, want name, namespace, labels, owners and finalizers kept", got)
			}
			// The lister's typed object carries what the sync reads.
			typed := typedOf(tt.obj, got)
			if !maps.Equal(typed.GetAnnotations(), want) || !maps.Equal(typed.GetLabels(), wantLabels) ||
				!reflect.DeepEqual(typed.GetOwnerReferences(), wantOwners) || typed.GetName() != "cache" {
				t.Errorf("typed object's metadata = %+v, want that of the cached object", typed)
			}
			if kept := keptOf(typed); kept != (tt.child && got.deployment != nil) {
				t.Errorf("Deployment replicas and status kept = %t", kept)
			}
			if _, isDeployment := tt.obj.(*appsv1.Deployment); (got.deployment != nil) != (tt.child && isDeployment) {
				t.Errorf("Deployment state kept = %t, want it for a child Deployment only", got.deployment != nil)
			}
		})
	}
}

// typedOf builds the object a child lister returns for cached, of obj's kind.
func typedOf(obj metav1.Object, cached *cachedChild) metav1.Object {
	switch obj.(type) {
	case *appsv1.Deployment:
		return deploymentOf(cached)
	case *corev1.Service:
		return serviceOf(cached)
	default:
		return pdbOf(cached)
	}
}

// keptOf reports whether a typed object built from the cache carries a
// Deployment's replicas and status, with the Progressing condition's
// reason but no other condition and no message.
func keptOf(obj metav1.Object) bool {
	d, ok := obj.(*appsv1.Deployment)
	return ok && d.Spec.Replicas != nil && d.Status.ReadyReplicas == 2 &&
		len(d.Status.Conditions) == 1 && d.Status.Conditions[0].Type == appsv1.DeploymentProgressing &&
		d.Status.Conditions[0].Reason == "NewReplicaSetAvailable" && d.Status.Conditions[0].Message == ""
}

func TestCachedChildAnnotations(t *testing.T) {
	tests := []struct {
		name        string
		annotations map[string]string
	}{
		{name: "none"},
		{name: "spec hash", annotations: map[string]string{resources.SpecHashAnnotation: "abc"}},
		{name: "spec hash and digest", annotations: map[string]string{resources.SpecHashAnnotation: "abc", ownedFieldsKey: "d"}},
		{name: "adopting", annotations: map[string]string{resources.SpecHashAnnotation: "abc", ownedFieldsKey: "d", resources.AdoptingAnnotation: "true"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &cachedChild{}
			c.SetAnnotations(tt.annotations)
			if got := c.GetAnnotations(); !maps.Equal(got, tt.annotations) {
				t.Errorf("GetAnnotations = %v, want %v", got, tt.annotations)
			}
			var asObject metav1.Object = c
			if got := asObject.GetAnnotations(); !maps.Equal(got, tt.annotations) {
				t.Errorf("as metav1.Object: GetAnnotations = %v, want %v", got, tt.annotations)
			}
			if got := c.GetObjectMeta().GetAnnotations(); !maps.Equal(got, tt.annotations) {
				t.Errorf("through GetObjectMeta: GetAnnotations = %v, want %v", got, tt.annotations)
			}
			if cp := c.DeepCopyObject(); !reflect.DeepEqual(cp, c) {
				t.Errorf("DeepCopyObject = %+v, want %+v", cp, c)
			}
		})
	}
}

func TestChildLister(t *testing.T) {
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, d := range []*appsv1.Deployment{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "one"}, Status: appsv1.DeploymentStatus{ReadyReplicas: 2}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "b", Name: "two"}},
	} {
		if err := indexer.Add(cachedAs(d)); err != nil {
			t.Fatal(err)
		}
	}
	all := childLister[appsv1.Deployment]{indexer: indexer, resource: appsv1.Resource("deployments"), typed: deploymentOf}
	got, err := all.inNamespace("a").Get("one")
	if err != nil || got.Name != "one" || got.Namespace != "a" {
		t.Errorf("Get(a/one) = %+v, %v", got, err)
	}
	if _, err := all.inNamespace("b").Get("one"); !apierrors.IsNotFound(err) {
		t.Errorf("Get(b/one) error = %v, want NotFound", err)
	}
	if list, err := all.List(labels.Everything()); err != nil || len(list) != 2 {
		t.Errorf("List of all namespaces = %d objects, %v; want 2", len(list), err)
	}
	if list, err := all.inNamespace("b").List(labels.Everything()); err != nil || len(list) != 1 || list[0].Name != "two" {
		t.Errorf("List of namespace b = %+v, %v; want two", list, err)
	}
}

func TestTrimMemcached(t *testing.T) {
	mc := newMemcached("cache")
	mc.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "m"}}
	mc.Annotations = map[string]string{lastApplied: `{"spec":{}}`, "example.com/team": "web"}
	want := mc.DeepCopy()
	want.ManagedFields = nil
	want.Annotations = map[string]string{"example.com/team": "web"}
	out, err := trimMemcached(intern.New(intern.DefaultCapacity))(mc)
	if err != nil {
		t.Fatal(err)
	}
	if got := out.(*cachev1beta1.Memcached); !equality.Semantic.DeepEqual(got, want) {
		t.Errorf("transform result = %+v, want the Memcached without managedFields and last-applied: %+v", got, want)
	}
}

// BenchmarkCachedBytes reports what one cached object of each kind holds
// on the heap, decoded as the informers decode it (protobuf for the child
// kinds, JSON for Memcacheds), with and without the informer transforms,
// over 2000 objects whose names differ as the objects of 2000 Memcacheds
// would. The objects are the unit tests' converged children, without the
// fields the apiserver defaults and the Deployment controller's status, so
// the figures are lower than a cluster's; `make bench` measures those. The
// time per operation is one decode and one transform.
func BenchmarkCachedBytes(b *testing.B) {
	mc, dep, svc, pdb := converge(b, newMemcached("cache"))
	const n = 2000
	rename := func(obj metav1.Object, i int) {
		name := fmt.Sprintf("cache-%d", i)
		obj.SetName(name)
		labels := maps.Clone(obj.GetLabels())
		if labels == nil {
			labels = map[string]string{}
		}
		labels[resources.LabelInstance] = name
		obj.SetLabels(labels)
		// A child's controller is the Memcached of its name; one whose
		// owner names another is cached as a foreign object.
		owners := slices.Clone(obj.GetOwnerReferences())
		for j := range owners {
			owners[j].Name = name
		}
		obj.SetOwnerReferences(owners)
	}
	type protoObject interface {
		metav1.Object
		Marshal() ([]byte, error)
	}
	encodeProto := func(o protoObject) func(int) []byte {
		return func(i int) []byte {
			rename(o, i)
			raw, err := o.Marshal()
			if err != nil {
				b.Fatal(err)
			}
			return raw
		}
	}
	kinds := []struct {
		name      string
		encode    func(i int) []byte
		decode    func([]byte) any
		transform func(*intern.Table) func(any) (any, error)
	}{
		{"Deployment", encodeProto(dep.DeepCopy()), func(raw []byte) any {
			d := &appsv1.Deployment{}
			_ = d.Unmarshal(raw)
			return d
		}, trimChild},
		{"Service", encodeProto(svc.DeepCopy()), func(raw []byte) any {
			s := &corev1.Service{}
			_ = s.Unmarshal(raw)
			return s
		}, trimChild},
		{"PodDisruptionBudget", encodeProto(pdb.DeepCopy()), func(raw []byte) any {
			p := &policyv1.PodDisruptionBudget{}
			_ = p.Unmarshal(raw)
			return p
		}, trimChild},
		{"Memcached", func(i int) []byte {
			m := mc.DeepCopy()
			rename(m, i)
			raw, err := json.Marshal(m)
			if err != nil {
				b.Fatal(err)
			}
			return raw
		}, func(raw []byte) any {
			m := &cachev1beta1.Memcached{}
			_ = json.Unmarshal(raw, m)
			return m
		}, trimMemcached},
	}
	for _, kind := range kinds {
		raw := make([][]byte, n)
		for i := range raw {
			raw[i] = kind.encode(i)
		}
		for _, trimmed := range []bool{false, true} {
			name := kind.name + "/decoded"
			if trimmed {
				name = kind.name + "/transformed"
			}
			b.Run(name, func(b *testing.B) {
				transform := func(obj any) (any, error) { return obj, nil }
				if trimmed {
					transform = kind.transform(intern.New(intern.DefaultCapacity))
				}
				held := make([]any, n)
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				for i := range n {
					held[i], _ = transform(kind.decode(raw[i]))
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				runtime.KeepAlive(held)

				i := 0
				for b.Loop() {
					_, _ = transform(kind.decode(raw[i%n]))
					i++
				}
				// After the loop: b.Loop resets what was reported before it.
				b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "B/cached")
			})
		}
	}
}
