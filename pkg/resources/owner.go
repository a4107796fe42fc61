package resources

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/utils/ptr"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
)

// OwnerReference is the controller reference every child carries. The
// garbage collector deletes children through it, and blockOwnerDeletion
// keeps a foreground deletion of the Memcached waiting for them.
func OwnerReference(mc *cachev1beta1.Memcached) *metav1ac.OwnerReferenceApplyConfiguration {
	return metav1ac.OwnerReference().
		WithAPIVersion(cachev1beta1.GroupVersion.String()).
		WithKind("Memcached").
		WithName(mc.Name).
		WithUID(mc.UID).
		WithController(true).
		WithBlockOwnerDeletion(true)
}

// ControllerRef is OwnerReference as an object's ownerReferences hold it,
// for a write that is not an apply.
func ControllerRef(mc *cachev1beta1.Memcached) metav1.OwnerReference {
	return metav1.OwnerReference{
		APIVersion:         cachev1beta1.GroupVersion.String(),
		Kind:               "Memcached",
		Name:               mc.Name,
		UID:                mc.UID,
		Controller:         ptr.To(true),
		BlockOwnerDeletion: ptr.To(true),
	}
}

// IsMemcachedRef reports a reference to a Memcached in any version: a
// child made by a release that wrote v1alpha1 into its ownerReference is as
// much the Memcached's as one made now. The next apply moves the reference
// to the storage version.
func IsMemcachedRef(ref *metav1.OwnerReference) bool {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	return err == nil && ref.Kind == "Memcached" && gv.Group == cachev1beta1.GroupName
}

// IsChild reports whether obj is a Memcached's child: its controller is a
// Memcached, and its name is one that Memcached gives a child, its own or,
// for the pool of a zone its labels name, PoolName's. Whether it is this
// Memcached's, and not a deleted predecessor's of the same name, takes the
// Memcached's UID.
func IsChild(obj metav1.Object) bool {
	ref := metav1.GetControllerOf(obj)
	if ref == nil || !IsMemcachedRef(ref) {
		return false
	}
	zone := obj.GetLabels()[ZoneLabel]
	return obj.GetName() == ref.Name || (zone != "" && obj.GetName() == ref.Name+"-"+zone)
}

// specHash hashes an apply configuration's JSON form. The hash only has to
// change when the configuration does; it is not a security boundary.
func specHash(ac any) (string, error) {
	b, err := json.Marshal(ac)
	if err != nil {
		return "", fmt.Errorf("encoding apply configuration: %w", err)
	}
	h := fnv.New64a()
	_, _ = h.Write(b) // hash.Hash.Write never returns an error.
	return strconv.FormatUint(h.Sum64(), 36), nil
}

// convert copies a typed API value into its apply configuration through
// JSON, which both sides share by construction.
func convert[T any](typed any) (*T, error) {
	b, err := json.Marshal(typed)
	if err != nil {
		return nil, err
	}
	out := new(T)
	if err := json.Unmarshal(b, out); err != nil {
		return nil, err
	}
	return out, nil
}
