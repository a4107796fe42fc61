package resources

import cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"

// ChildName is the name of every child of mc: the Memcached's own. This is
// the one place that decides it, and MemcachedName is its inverse. Naming
// children after their owner means a lookup needs no index, and a second
// Memcached can never claim the same children.
func ChildName(mc *cachev1beta1.Memcached) string { return mc.Name }

// MemcachedName is the name of the Memcached that a child named childName
// would belong to, in the child's namespace.
func MemcachedName(childName string) string { return childName }
