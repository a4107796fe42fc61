package main

import (
	"maps"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubelite/memcached-operator/pkg/drift"
	"github.com/kubelite/memcached-operator/pkg/intern"
	"github.com/kubelite/memcached-operator/pkg/resources"
)

// The informer transforms below decide what the operator holds in memory
// for every object it watches. Each runs on an object the reflector
// decoded, before it reaches the cache or a handler, while no one else
// holds it, so it may change it in place. A watch-list runs it twice on
// the same object (ownedFields), so each must leave what it returns as it
// is.

// stripManagedFields drops managedFields, typically the largest part of a
// cached object, which nothing here reads.
func stripManagedFields(obj any) {
	if accessor, ok := obj.(metav1.ObjectMetaAccessor); ok {
		accessor.GetObjectMeta().SetManagedFields(nil)
	}
}

// lastApplied is the annotation kubectl apply keeps a whole copy of the
// object in.
const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

// trimMemcached is the Memcached informer's transform: managedFields and
// kubectl's last-applied copy of the object dropped, since the sync reads
// neither, and equal values shared through table.
func trimMemcached(table *intern.Table) func(any) (any, error) {
	return func(obj any) (any, error) {
		stripManagedFields(obj)
		if accessor, ok := obj.(metav1.ObjectMetaAccessor); ok {
			meta := accessor.GetObjectMeta()
			if _, ok := meta.GetAnnotations()[lastApplied]; ok {
				annotations := maps.Clone(meta.GetAnnotations())
				delete(annotations, lastApplied)
				meta.SetAnnotations(annotations)
			}
		}
		table.Object(obj)
		return obj, nil
	}
}

// trimChild is the child informers' transform. The informers list every
// object with the operator's managed-by label in their scope, and anyone who
// may create a Deployment, Service or PodDisruptionBudget there can add
// that label, so what a labelled object costs must not be up to its
// author:
//
//   - managedFields, and every annotation but the operator's own
//     (resources.AnnotationPrefix), are dropped: the sync reads no other.
//   - An object that is not a child keeps only its metadata: one whose
//     controller is not a Memcached of the name the object's name maps to
//     (resources.MemcachedName). The sync only reads such an object's
//     owner references, labels, finalizers and deletion state to classify
//     it (ownership.go), and reads an orphan from the apiserver before it
//     adopts it. One that names a Memcached that does not exist as its
//     controller is deleted by the garbage collector.
//   - A child keeps its status, its metadata but its labels, and the few
//     spec fields the status reads (slimChild); in place of the rest of
//     its spec and its labels, the digest of the fields the operator's
//     apply owns (ownedFieldsKey). The drift check compares that digest,
//     not the values (convergeChild), and classify reads labels only of
//     objects without a controller. The spec is most of what a
//     Deployment costs.
//   - Children share equal values through table.
func trimChild(table *intern.Table) func(any) (any, error) {
	return func(obj any) (any, error) {
		accessor, ok := obj.(metav1.ObjectMetaAccessor)
		if !ok {
			return obj, nil
		}
		meta := accessor.GetObjectMeta()
		ref := metav1.GetControllerOf(meta)
		if ref == nil || !isMemcachedRef(ref) || ref.Name != resources.MemcachedName(meta.GetName()) {
			stripManagedFields(obj)
			annotations := operatorAnnotations(meta.GetAnnotations())
			delete(annotations, ownedFieldsKey)
			meta.SetAnnotations(annotations)
			return metadataOnly(obj), nil
		}
		owned := ownedFields(meta)
		stripManagedFields(obj)
		annotations := operatorAnnotations(meta.GetAnnotations())
		if annotations == nil {
			annotations = map[string]string{}
		}
		annotations[ownedFieldsKey] = owned
		meta.SetAnnotations(annotations)
		meta.SetLabels(nil)
		slimChild(obj)
		table.Object(obj)
		return obj, nil
	}
}

// ownedFieldsKey holds, in a cached child's annotations only, the digest of
// the fields the operator's server-side apply owns (drift.Owned), which the
// transform computes before it drops managedFields and the spec. An
// annotation of that name on an object with managedFields, which is every
// object the apiserver serves unless someone emptied them, is overwritten.
const ownedFieldsKey = resources.AnnotationPrefix + "cached-owned-fields"

// ownedFields returns the digest of the fields the operator's apply owns
// in a child: from managedFields when it has them (an object read from the
// apiserver), else what the transform recorded. The latter also keeps the
// transform idempotent, as client-go requires: a watch-list that fills a
// cache transforms each object twice, in the reflector's temporary store
// and again in the informer's queue.
func ownedFields(obj metav1.Object) string {
	if managed := obj.GetManagedFields(); len(managed) > 0 {
		return drift.Owned(managed, fieldManager)
	}
	return obj.GetAnnotations()[ownedFieldsKey]
}

// slimChild drops the spec fields of a child that the sync does not read
// besides the drift check; it keeps a Deployment's replicas and strategy,
// which the status compares the rollout with.
func slimChild(obj any) {
	switch o := obj.(type) {
	case *appsv1.Deployment:
		o.Spec = appsv1.DeploymentSpec{Replicas: o.Spec.Replicas, Strategy: o.Spec.Strategy}
	case *corev1.Service:
		o.Spec = corev1.ServiceSpec{}
	case *policyv1.PodDisruptionBudget:
		o.Spec = policyv1.PodDisruptionBudgetSpec{}
	}
}

// operatorAnnotations returns the annotations with the operator's prefix,
// nil if there are none.
func operatorAnnotations(annotations map[string]string) map[string]string {
	var kept map[string]string
	for key, value := range annotations {
		if strings.HasPrefix(key, resources.AnnotationPrefix) {
			if kept == nil {
				kept = map[string]string{}
			}
			kept[key] = value
		}
	}
	return kept
}

// metadataOnly returns a child kind's object with only its metadata; any
// other object unchanged.
func metadataOnly(obj any) any {
	switch o := obj.(type) {
	case *appsv1.Deployment:
		return &appsv1.Deployment{ObjectMeta: o.ObjectMeta}
	case *corev1.Service:
		return &corev1.Service{ObjectMeta: o.ObjectMeta}
	case *policyv1.PodDisruptionBudget:
		return &policyv1.PodDisruptionBudget{ObjectMeta: o.ObjectMeta}
	}
	return obj
}
