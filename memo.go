package main

import (
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
)

// memo is what the controller remembers about each Memcached between
// syncs, by UID: when a generation was first seen, which resourceVersion
// the last status write was based on, since when a status write has
// waited for a written Deployment to catch up, and which fields each
// child's apply owns. None of it is state the sync depends on for
// correctness: losing it costs a metric sample, one Conflict, one status
// write or one computation. It has one lock, one clock, and one purge
// path, forget, called when a Memcached is deleted.
type memo struct {
	clock clock.PassiveClock

	mu      sync.Mutex
	entries map[types.UID]*memoEntry
}

type memoEntry struct {
	// unobservedGeneration is the newest generation seen that the status
	// has not observed yet, and unobservedSince when the first of the
	// unobserved generations was seen; for spec_to_observed_seconds.
	unobservedGeneration int64
	unobservedSince      time.Time

	// statusWrittenFrom is the resourceVersion of the cached Memcached that
	// the last status write was computed from; see syncStatus.
	statusWrittenFrom string

	// deploymentGeneration is the Deployment generation the last wait for
	// a written Deployment to catch up was for, and deploymentWaitSince
	// when that wait began; see syncStatus.
	deploymentGeneration int64
	deploymentWaitSince  time.Time

	// applied holds, per child kind, the digest of the fields an apply of
	// the desired child makes the operator own, with the spec hash it
	// belongs to, whether an apply's answer or the schema gave it; see
	// Controller.appliedFields.
	applied []appliedFields
}

type appliedFields struct {
	kind, specHash, digest string
}

func newMemo(clk clock.PassiveClock) *memo {
	return &memo{clock: clk, entries: map[types.UID]*memoEntry{}}
}

// entry returns the entry of uid, creating it. The caller holds mu.
func (m *memo) entry(uid types.UID) *memoEntry {
	e, ok := m.entries[uid]
	if !ok {
		e = &memoEntry{}
		m.entries[uid] = e
	}
	return e
}

// sawGeneration notes a Memcached from an informer event. Several
// unobserved generations in a row keep the time of the first: that is how
// long the user has been waiting.
func (m *memo) sawGeneration(mc *cachev1beta1.Memcached) {
	if mc.Generation <= mc.Status.ObservedGeneration {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.entry(mc.UID)
	if e.unobservedGeneration == 0 {
		e.unobservedSince = m.clock.Now()
	}
	e.unobservedGeneration = mc.Generation
}

// observedGeneration reports how long ago the now observed generation was
// first seen, if it was, and stops the clock.
func (m *memo) observedGeneration(uid types.UID, generation int64) (time.Duration, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.entries[uid]
	if !ok || e.unobservedGeneration == 0 || e.unobservedGeneration > generation {
		return 0, false
	}
	e.unobservedGeneration = 0
	return m.clock.Since(e.unobservedSince), true
}

// wroteStatus records that a status write was computed from the cached
// Memcached at resourceVersion.
func (m *memo) wroteStatus(uid types.UID, resourceVersion string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.entry(uid).statusWrittenFrom = resourceVersion
}

// statusWrittenFrom reports whether the last status write was computed from
// the cached Memcached at resourceVersion, that is, whether the cache has
// not caught up with that write yet.
func (m *memo) statusWrittenFrom(uid types.UID, resourceVersion string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.entries[uid]
	return ok && e.statusWrittenFrom == resourceVersion
}

// deploymentWait reports how much longer a status write should wait for
// the Deployment's generation to catch up: limit from when start was first
// set for that generation, or nothing if it never was. Zero or less means
// no longer.
func (m *memo) deploymentWait(uid types.UID, generation int64, start bool, limit time.Duration) time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.entry(uid)
	waiting := !e.deploymentWaitSince.IsZero() && e.deploymentGeneration == generation
	if !waiting && !start {
		return 0
	}
	if !waiting {
		e.deploymentGeneration, e.deploymentWaitSince = generation, m.clock.Now()
	}
	return limit - m.clock.Since(e.deploymentWaitSince)
}

// appliedFields returns the digest of the fields an apply of a kind's
// desired child, whose spec hash is specHash, makes the operator own, if
// it is known; see convergeChild.
func (m *memo) appliedFields(uid types.UID, kind, specHash string) (string, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.entries[uid]
	if !ok {
		return "", false
	}
	i := slices.IndexFunc(e.applied, func(a appliedFields) bool { return a.kind == kind })
	if i < 0 || e.applied[i].specHash != specHash {
		return "", false
	}
	return e.applied[i].digest, true
}

// setAppliedFields records the digest appliedFields returns for a kind
// and spec hash, in place of the kind's previous one.
func (m *memo) setAppliedFields(uid types.UID, kind, specHash, digest string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.entry(uid)
	a := appliedFields{kind: kind, specHash: specHash, digest: digest}
	if i := slices.IndexFunc(e.applied, func(a appliedFields) bool { return a.kind == kind }); i >= 0 {
		e.applied[i] = a
	} else {
		e.applied = append(e.applied, a)
	}
}

// forget drops everything about a deleted Memcached.
func (m *memo) forget(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.entries, uid)
}
