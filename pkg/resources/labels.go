package resources

import (
	"k8s.io/apimachinery/pkg/labels"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
)

// Well-known labels every child carries. The name and instance labels form
// the Pod selector; managed-by lets informers and humans find the operator's
// objects.
const (
	LabelName      = "app.kubernetes.io/name"
	LabelInstance  = "app.kubernetes.io/instance"
	LabelManagedBy = "app.kubernetes.io/managed-by"

	// AppName is the value of LabelName.
	AppName = "memcached"
	// ManagedBy is the value of LabelManagedBy, and the server-side apply
	// field manager of every write the operator makes but PauseManager's.
	ManagedBy = "memcached-operator"
	// PauseManager is the field manager of the one field the operator
	// sets apart from the children it renders: a Deployment's
	// spec.paused, while its Memcached is paused. It needs a manager of
	// its own: an apply by ManagedBy is the whole desired configuration,
	// and one of spec.paused alone would remove every other field
	// ManagedBy owns.
	PauseManager = "memcached-operator-pause"
)

// SpecHashAnnotation records a hash of the apply configuration a child was
// last applied from. A spec change that only removes something (a toleration,
// the exporter sidecar) changes the hash, so the child is applied again even
// though every value it still carries matches.
const SpecHashAnnotation = AnnotationPrefix + "spec-hash"

// AnnotationPrefix starts every annotation the operator sets on a child;
// its caches keep no other.
const AnnotationPrefix = "cache.kubelite.io/"

// AdoptingAnnotation marks a child the operator has taken over from an
// orphan but not yet replaced with exactly what it would have created. The
// replacement removes it; until then every sync tries the replacement
// again.
const AdoptingAnnotation = AnnotationPrefix + "adopting"

// ZoneLabel is on a zone pool's children and Pods, with the zone as its
// value; it is part of the pool's selector.
const ZoneLabel = AnnotationPrefix + "zone"

// SelectorLabels are the labels that select a Memcached's Pods. They are part
// of the Deployment's immutable selector, so they never change.
func SelectorLabels(mc *cachev1beta1.Memcached) map[string]string {
	return map[string]string{
		LabelName:     AppName,
		LabelInstance: mc.Name,
	}
}

// Labels are the labels of every child and of the Pods.
func Labels(mc *cachev1beta1.Memcached) map[string]string {
	l := SelectorLabels(mc)
	l[LabelManagedBy] = ManagedBy
	return l
}

// PoolSelectorLabels are the labels that select the Pods of the pool in
// zone: SelectorLabels, and for a zone the ZoneLabel. The pool of a
// Memcached without zones selects every Pod of the Memcached, as it always
// did: a Deployment's selector cannot change.
func PoolSelectorLabels(mc *cachev1beta1.Memcached, zone string) map[string]string {
	l := SelectorLabels(mc)
	if zone != "" {
		l[ZoneLabel] = zone
	}
	return l
}

// PoolLabels are the labels of a pool's children and Pods.
func PoolLabels(mc *cachev1beta1.Memcached, zone string) map[string]string {
	l := PoolSelectorLabels(mc, zone)
	l[LabelManagedBy] = ManagedBy
	return l
}

// Selector is the Pod selector as a string, for status.selector and the scale
// subresource.
func Selector(mc *cachev1beta1.Memcached) string {
	return labels.SelectorFromSet(SelectorLabels(mc)).String()
}

// HasOperatorLabels reports whether an object carries the labels the operator
// puts on the children of the named Memcached. Only such an object may be
// adopted when it has no controller.
func HasOperatorLabels(objLabels map[string]string, memcachedName string) bool {
	return objLabels[LabelManagedBy] == ManagedBy &&
		objLabels[LabelName] == AppName &&
		objLabels[LabelInstance] == memcachedName
}
