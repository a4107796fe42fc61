package main

import (
	"encoding/json"
	"runtime"
	"testing"

	"k8s.io/client-go/tools/cache"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
	"github.com/kubelite/memcached-operator/pkg/childcache"
	"github.com/kubelite/memcached-operator/pkg/intern"
	"github.com/kubelite/memcached-operator/pkg/maximal"
)

// maximalMemcacheds is how many maximal Memcacheds TestMaximalMemcachedHeap
// caches.
const maximalMemcacheds = 1000

// maximalHeapBudget is what the cached maximal Memcacheds may take of the
// operator's heap: half of the 256Mi container limit
// (artifacts/deploy/deployment.yaml), whose Go limit is 90% of it, leaving
// the other half for the children's caches, the work in flight and the
// garbage collector's headroom.
const maximalHeapBudget = 128 << 20

// TestMaximalMemcachedHeap caches 1000 maximal Memcacheds
// (maximal.Memcached) as the operator's Memcached informer does, decoded
// from JSON and through its transform and intern table into a store, and
// fails if they take more of the heap than maximalHeapBudget. It logs the
// figures docs/api.md gives.
func TestMaximalMemcachedHeap(t *testing.T) {
	transform := childcache.Memcached(intern.New(intern.DefaultCapacity))
	store := cache.NewStore(cache.MetaNamespaceKeyFunc)
	var encoded int
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for n := range maximalMemcacheds {
		raw, err := json.Marshal(maximal.Memcached("tenant", n))
		if err != nil {
			t.Fatal(err)
		}
		encoded = max(encoded, len(raw))
		mc := &cachev1beta1.Memcached{}
		if err := json.Unmarshal(raw, mc); err != nil {
			t.Fatal(err)
		}
		obj, err := transform(mc)
		if err != nil {
			t.Fatal(err)
		}
		if err := store.Add(obj); err != nil {
			t.Fatal(err)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if got := len(store.ListKeys()); got != maximalMemcacheds {
		t.Fatalf("store holds %d Memcacheds, want %d", got, maximalMemcacheds)
	}
	heap := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("A maximal Memcached is %d bytes of JSON; %d of them take %.1f MiB of heap, %d bytes each",
		encoded, maximalMemcacheds, float64(heap)/(1<<20), heap/maximalMemcacheds)
	if heap > maximalHeapBudget {
		t.Errorf("%d maximal Memcacheds take %d MiB of heap, more than the budget of %d MiB", maximalMemcacheds, heap>>20, maximalHeapBudget>>20)
	}
	runtime.KeepAlive(store)
}
