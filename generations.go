package main

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	cachev1alpha1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1alpha1"
)

// generationClock remembers when the controller first saw a Memcached
// generation that its status had not observed yet, for the
// spec_to_observed_seconds histogram. Entries live only between a spec
// change and the status write that observes it.
type generationClock struct {
	mu   sync.Mutex
	seen map[types.UID]seenGeneration
}

type seenGeneration struct {
	generation int64
	at         time.Time
}

func newGenerationClock() *generationClock {
	return &generationClock{seen: map[types.UID]seenGeneration{}}
}

// saw notes a Memcached from an informer event. Several unobserved
// generations in a row keep the time of the first: that is how long the
// user has been waiting.
func (g *generationClock) saw(mc *cachev1alpha1.Memcached, now time.Time) {
	if mc.Generation <= mc.Status.ObservedGeneration {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	entry, ok := g.seen[mc.UID]
	if !ok {
		entry.at = now
	}
	entry.generation = mc.Generation
	g.seen[mc.UID] = entry
}

// observed reports how long ago the observed generation was first seen, if
// it was, and forgets it.
func (g *generationClock) observed(uid types.UID, generation int64, now time.Time) (time.Duration, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	entry, ok := g.seen[uid]
	if !ok || entry.generation > generation {
		return 0, false
	}
	delete(g.seen, uid)
	return now.Sub(entry.at), true
}

// forget drops a deleted Memcached.
func (g *generationClock) forget(uid types.UID) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.seen, uid)
}
