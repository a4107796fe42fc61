// Package v1beta1 is the v1beta1 version of the cache.kubelite.io API, the
// successor of v1alpha1: item memory is a quantity, the Pod-level settings
// sit in one block, and the exporter sits under monitoring. docs/api.md
// gives the reason for each change and the conversion table.
// v1alpha1 objects convert to and from it without loss
// (pkg/apis/cache/v1alpha1/conversion.go).
//
// +k8s:deepcopy-gen=package
// +groupName=cache.kubelite.io
package v1beta1
