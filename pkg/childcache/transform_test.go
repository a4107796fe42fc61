package childcache

import (
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
	"github.com/kubelite/memcached-operator/pkg/drift"
	"github.com/kubelite/memcached-operator/pkg/intern"
	"github.com/kubelite/memcached-operator/pkg/resources"
)

// fieldManager is the operator's field manager.
const fieldManager = resources.ManagedBy

// cachedAs returns what Child caches of a copy of obj.
func cachedAs(obj apiruntime.Object) *cachedChild {
	cached, _ := Child(intern.New(intern.DefaultCapacity))(obj.DeepCopyObject())
	return cached.(*cachedChild)
}

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
		{name: "NetworkPolicy of a Memcached", obj: &networkingv1.NetworkPolicy{ObjectMeta: meta(memcachedRef(cachev1beta1.GroupVersion.String())), Spec: networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}}}, child: true},
		{name: "orphaned NetworkPolicy", obj: &networkingv1.NetworkPolicy{ObjectMeta: meta(nil), Spec: networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The transform changes the object in place: compare with a
			// copy taken before.
			wantLabels := maps.Clone(tt.obj.GetLabels())
			wantOwners := slices.Clone(tt.obj.GetOwnerReferences())
			transform := Child(intern.New(intern.DefaultCapacity))
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
			if !maps.Equal(got.GetAnnotations(), want) {
				t.Errorf("annotations = %v, want only %v", got.GetAnnotations(), want)
			}
			wantOwned := ""
			if tt.child {
				wantOwned = owned
			}
			if got := OwnedFields(out); got != wantOwned {
				t.Errorf("owned-fields digest = %q, want %q", got, wantOwned)
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

// TestTrimChildKeepsRolloutPause checks that a cached Deployment keeps its
// spec.paused and, of its managedFields, only the pause manager's claim on
// it, which the lister's Deployment shows as that manager's entry.
func TestTrimChildKeepsRolloutPause(t *testing.T) {
	entry := func(manager string, op metav1.ManagedFieldsOperationType, fields string) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{Manager: manager, Operation: op, FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(fields)}
	}
	operator := entry(fieldManager, metav1.ManagedFieldsOperationApply, `{"f:spec":{"f:replicas":{}}}`)
	tests := []struct {
		name             string
		paused           bool
		managed          []metav1.ManagedFieldsEntry
		wantByPauseOwner bool
	}{
		{name: "not paused", managed: []metav1.ManagedFieldsEntry{operator}},
		{
			name: "paused by the pause manager", paused: true, wantByPauseOwner: true,
			managed: []metav1.ManagedFieldsEntry{operator, entry(resources.PauseManager, metav1.ManagedFieldsOperationApply, `{"f:spec":{"f:paused":{}}}`)},
		},
		{
			name: "paused by hand", paused: true,
			managed: []metav1.ManagedFieldsEntry{operator, entry("kubectl-rollout", metav1.ManagedFieldsOperationUpdate, `{"f:spec":{"f:paused":{}}}`)},
		},
		{
			name: "paused by hand and by the pause manager", paused: true, wantByPauseOwner: true,
			managed: []metav1.ManagedFieldsEntry{
				operator,
				entry("kubectl-rollout", metav1.ManagedFieldsOperationUpdate, `{"f:spec":{"f:paused":{}}}`),
				entry(resources.PauseManager, metav1.ManagedFieldsOperationApply, `{"f:spec":{"f:paused":{}}}`),
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := &appsv1.Deployment{
				ObjectMeta: metav1.ObjectMeta{
					Name: "cache", Namespace: "ns", ManagedFields: tt.managed,
					OwnerReferences: []metav1.OwnerReference{{APIVersion: cachev1beta1.GroupVersion.String(), Kind: "Memcached", Name: "cache", UID: "uid-1", Controller: ptr.To(true)}},
				},
				Spec: appsv1.DeploymentSpec{Paused: tt.paused},
			}
			wantOwned := drift.Owned(tt.managed, fieldManager)
			cached := cachedAs(d)
			if cached.GetManagedFields() != nil {
				t.Errorf("cached managedFields = %v, want none", cached.GetManagedFields())
			}
			if got := OwnedFields(cached); got != wantOwned {
				t.Errorf("owned-fields digest = %q, want %q: the pause is not the operator's apply", got, wantOwned)
			}
			typed := deploymentOf(cached)
			if typed.Spec.Paused != tt.paused {
				t.Errorf("spec.paused = %t, want %t", typed.Spec.Paused, tt.paused)
			}
			if got := drift.OwnsField(typed.ManagedFields, resources.PauseManager, "spec", "paused"); got != tt.wantByPauseOwner {
				t.Errorf("the pause manager owns spec.paused = %t, want %t; managedFields %v", got, tt.wantByPauseOwner, typed.ManagedFields)
			}
			if len(typed.ManagedFields) > 1 || (len(typed.ManagedFields) == 1 && typed.ManagedFields[0].Manager != resources.PauseManager) {
				t.Errorf("managedFields = %v, want at most the pause manager's", typed.ManagedFields)
			}
			if cp := cached.DeepCopyObject(); !reflect.DeepEqual(cp, cached) {
				t.Errorf("DeepCopyObject = %+v, want %+v", cp, cached)
			}
		})
	}
}

func TestCachedChildAnnotations(t *testing.T) {
	tests := []struct {
		name        string
		annotations map[string]string
	}{
		{name: "none"},
		{name: "spec hash", annotations: map[string]string{resources.SpecHashAnnotation: "abc"}},
		{name: "adopting", annotations: map[string]string{resources.SpecHashAnnotation: "abc", resources.AdoptingAnnotation: "true"}},
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
	all := &ChildLister[appsv1.Deployment]{resource: appsv1.Resource("deployments"), typed: deploymentOf}
	all.addScope(metav1.NamespaceAll, indexer)
	got, _, err := all.Get("a", "one")
	if err != nil || got.Name != "one" || got.Namespace != "a" || got.Status.ReadyReplicas != 0 {
		t.Errorf("Get(a/one) = %+v, %v", got, err)
	}
	if _, _, err := all.Get("b", "one"); !apierrors.IsNotFound(err) {
		t.Errorf("Get(b/one) error = %v, want NotFound", err)
	}
	onlyB := &ChildLister[appsv1.Deployment]{resource: appsv1.Resource("deployments"), typed: deploymentOf}
	onlyB.addScope("b", indexer)
	if got, _, err := onlyB.Get("b", "two"); err != nil || got.Name != "two" {
		t.Errorf("Get(b/two) in scope b = %+v, %v", got, err)
	}
	if _, _, err := onlyB.Get("a", "one"); !apierrors.IsNotFound(err) {
		t.Errorf("Get(a/one) out of scope b = %v, want NotFound", err)
	}
}

func TestTrimMemcached(t *testing.T) {
	mc := &cachev1beta1.Memcached{ObjectMeta: metav1.ObjectMeta{Name: "cache", Namespace: "default", UID: "uid-1"}}
	mc.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "m"}}
	mc.Annotations = map[string]string{lastApplied: `{"spec":{}}`, "example.com/team": "web"}
	want := mc.DeepCopy()
	want.ManagedFields = nil
	want.Annotations = map[string]string{"example.com/team": "web"}
	out, err := Memcached(intern.New(intern.DefaultCapacity))(mc)
	if err != nil {
		t.Fatal(err)
	}
	if got := out.(*cachev1beta1.Memcached); !equality.Semantic.DeepEqual(got, want) {
		t.Errorf("transform result = %+v, want the Memcached without managedFields and last-applied: %+v", got, want)
	}
}

// TestStatusConditions: the cache keeps Progressing without its message,
// and a True ReplicaFailure with its message, without the Pod name the
// ReplicaSet generates anew on every attempt.
func TestStatusConditions(t *testing.T) {
	in := []appsv1.DeploymentCondition{
		{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Message: "has minimum availability"},
		{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable", Message: `ReplicaSet "cache-7d9f" has successfully progressed.`},
		{Type: appsv1.DeploymentReplicaFailure, Status: corev1.ConditionTrue, Reason: "FailedCreate",
			Message: `pods "cache-7d9f-x2x4l" is forbidden: exceeded quota: pods, requested: pods=1, used: pods=1, limited: pods=1`},
	}
	got := statusConditions(in)
	want := []appsv1.DeploymentCondition{
		{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable"},
		{Type: appsv1.DeploymentReplicaFailure, Status: corev1.ConditionTrue, Reason: "FailedCreate",
			Message: "a Pod is forbidden: exceeded quota: pods, requested: pods=1, used: pods=1, limited: pods=1"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("statusConditions =\n%+v\nwant\n%+v", got, want)
	}
	resolved := []appsv1.DeploymentCondition{{Type: appsv1.DeploymentReplicaFailure, Status: corev1.ConditionFalse, Message: "resolved"}}
	if got := statusConditions(resolved); got != nil {
		t.Errorf("statusConditions keeps a ReplicaFailure that is not True: %+v", got)
	}
}
