package main

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
)

// TestClassifyAcrossVersions: a child is the Memcached's by group, kind,
// name and UID; the version in its ownerReference is whatever the release
// that made it wrote, and must not turn it into a stranger's.
func TestClassifyAcrossVersions(t *testing.T) {
	mc := &cachev1beta1.Memcached{ObjectMeta: metav1.ObjectMeta{Name: "cache", Namespace: "ns", UID: "uid-1"}}
	ref := func(apiVersion, kind, name, uid string) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: name, UID: types.UID("uid-" + uid), Controller: ptr.To(true)}}
	}
	tests := []struct {
		name string
		refs []metav1.OwnerReference
		want ownership
	}{
		{name: "v1beta1 reference", refs: ref("cache.kubelite.io/v1beta1", "Memcached", "cache", "1"), want: owned},
		{name: "v1alpha1 reference of an earlier release", refs: ref("cache.kubelite.io/v1alpha1", "Memcached", "cache", "1"), want: owned},
		{name: "a predecessor of the same name", refs: ref("cache.kubelite.io/v1alpha1", "Memcached", "cache", "0"), want: predecessor},
		{name: "another group's Memcached", refs: ref("cache.example.com/v1", "Memcached", "cache", "1"), want: foreign},
		{name: "another kind", refs: ref("cache.kubelite.io/v1beta1", "Redis", "cache", "1"), want: foreign},
		{name: "an unparsable apiVersion", refs: ref("a/b/c", "Memcached", "cache", "1"), want: foreign},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			child := &metav1.ObjectMeta{Name: "cache", Namespace: "ns", OwnerReferences: tt.refs}
			if got := classify(mc, child); got != tt.want {
				t.Errorf("classify = %v, want %v", got, tt.want)
			}
		})
	}
}
