package resources

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
)

// ChildName is the name of the children a Memcached has once: the
// Service that selects all its Pods, its NetworkPolicy, and the pool of a
// Memcached without zones. It is the Memcached's own. Naming children
// after their owner means a lookup needs no index, and a second Memcached
// can never claim the same children.
func ChildName(mc *cachev1beta1.Memcached) string { return mc.Name }

// PoolName is the name of the Deployment, and of the PodDisruptionBudget,
// of the Memcached's pool in zone: <name>-<zone>, or the Memcached's own
// name for the pool of a Memcached without zones (zone ""). A zone pool's
// headless Service takes the same name. The CRD refuses a name and zone
// that do not make a Service name.
func PoolName(mc *cachev1beta1.Memcached, zone string) string {
	if zone == "" {
		return ChildName(mc)
	}
	return mc.Name + "-" + zone
}

// MemcachedName is the name of the Memcached a child belongs to, in the
// child's namespace: that of its controller if a Memcached controls it,
// else that of its instance label (an orphan), else its own.
func MemcachedName(obj metav1.Object) string {
	if ref := metav1.GetControllerOf(obj); ref != nil && IsMemcachedRef(ref) {
		return ref.Name
	}
	if name := obj.GetLabels()[LabelInstance]; name != "" {
		return name
	}
	return obj.GetName()
}
