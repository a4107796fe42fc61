package resources

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
)

// TestChildOf checks how a child's name, labels and controller map to its
// Memcached: IsChild, which the cache and its index rely on, and
// MemcachedName, which routes a child's events.
func TestChildOf(t *testing.T) {
	controlledBy := func(name string) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: cachev1beta1.GroupVersion.String(), Kind: "Memcached", Name: name, UID: "u", Controller: ptr.To(true)}}
	}
	tests := []struct {
		name      string
		obj       metav1.ObjectMeta
		child     bool
		memcached string
	}{
		{name: "the pool without zones", obj: metav1.ObjectMeta{Name: "cache", OwnerReferences: controlledBy("cache")}, child: true, memcached: "cache"},
		{name: "a zone pool", obj: metav1.ObjectMeta{Name: "cache-zone-a", Labels: map[string]string{ZoneLabel: "zone-a"}, OwnerReferences: controlledBy("cache")}, child: true, memcached: "cache"},
		{name: "a zone pool's name without its label", obj: metav1.ObjectMeta{Name: "cache-zone-a", OwnerReferences: controlledBy("cache")}, memcached: "cache"},
		{name: "a label of another zone", obj: metav1.ObjectMeta{Name: "cache-zone-a", Labels: map[string]string{ZoneLabel: "zone-b"}, OwnerReferences: controlledBy("cache")}, memcached: "cache"},
		{name: "an orphan", obj: metav1.ObjectMeta{Name: "cache-zone-a", Labels: map[string]string{LabelInstance: "cache", ZoneLabel: "zone-a"}}, memcached: "cache"},
		{name: "neither controller nor labels", obj: metav1.ObjectMeta{Name: "cache-zone-a"}, memcached: "cache-zone-a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := IsChild(&tt.obj); got != tt.child {
				t.Errorf("IsChild = %t, want %t", got, tt.child)
			}
			if got := MemcachedName(&tt.obj); got != tt.memcached {
				t.Errorf("MemcachedName = %q, want %q", got, tt.memcached)
			}
		})
	}
}

func TestPoolName(t *testing.T) {
	mc := &cachev1beta1.Memcached{ObjectMeta: metav1.ObjectMeta{Name: "cache"}}
	if got := PoolName(mc, ""); got != "cache" {
		t.Errorf("PoolName without zone = %q, want the Memcached's name", got)
	}
	if got := PoolName(mc, "zone-a"); got != "cache-zone-a" {
		t.Errorf("PoolName of zone-a = %q, want cache-zone-a", got)
	}
}
