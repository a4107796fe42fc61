// Package v1alpha1 is the v1alpha1 version of the cache.kubelite.io API: the
// Memcached custom resource that memcached-operator reconciles.
//
// +k8s:deepcopy-gen=package
// +groupName=cache.kubelite.io
package v1alpha1
