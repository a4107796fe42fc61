package main

import (
	"context"
	"testing"

	"github.com/go-logr/logr"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// BenchmarkSyncConverged measures a sync of an object whose children and
// status already match: the steady-state cost of every resync and every
// event that changes nothing the operator owns. It fails if that sync
// writes anything.
func BenchmarkSyncConverged(b *testing.B) {
	mc, dep, svc, pdb := converge(b, newMemcached("cache"))
	f := newFixture(b)
	f.seed(mc, dep, svc, pdb)
	ctx := klog.NewContext(context.Background(), logr.Discard())
	c := f.newController(ctx)
	key := cache.MetaObjectToName(mc)

	b.ReportAllocs()
	for b.Loop() {
		if o := c.syncHandler(ctx, key); o.err != nil {
			b.Fatal(o)
		}
	}
	b.StopTimer()
	if w := writes(f.kubeClient.Actions()); len(w) > 0 {
		b.Fatalf("a converged sync wrote: %v", describe(w))
	}
	if w := writes(f.client.Actions()); len(w) > 0 {
		b.Fatalf("a converged sync wrote: %v", describe(w))
	}
}
