package main

import (
	"slices"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
)

// memo is what the controller remembers about each Memcached between
// syncs, by UID, in six named parts. None of it is state the sync depends
// on for correctness: losing it costs a metric sample, one Conflict, one
// status write, one DELETE answered NotFound or one computation. forget, called when a Memcached is
// deleted, purges every part.
type memo struct {
	// generations times spec_to_observed_seconds.
	generations generationClock
	// statusWrites says which cached Memcached the last status write was
	// computed from; see syncStatus.
	statusWrites byUID[string]
	// deploymentWaits says since when a status write has waited for a
	// written Deployment to catch up; see syncStatus.
	deploymentWaits deploymentWaits
	// appliedFields holds the digests of the fields an apply of each
	// desired child makes the operator own; see Controller.appliedFields.
	appliedFields appliedFieldDigests
	// pauseWrites says, per Memcached and Deployment, what the cache
	// shows until it has caught up with the last write of its
	// spec.paused; see syncPoolPause.
	pauseWrites byUID[map[types.UID]pauseWrite]
	// deletedChildren holds the UIDs of the last children each Memcached
	// deleted (pools and its NetworkPolicy), which the cache may still
	// show; see deleteChild.
	deletedChildren byUID[[]types.UID]
}

// maxDeletedChildren bounds deletedChildren per Memcached: a move deletes
// at most a Deployment, a Service and a budget per zone, and the spec one
// NetworkPolicy.
const maxDeletedChildren = 32

func newMemo(clk clock.PassiveClock) *memo {
	return &memo{
		generations:     generationClock{clock: clk},
		deploymentWaits: deploymentWaits{clock: clk},
	}
}

// forget drops everything about a deleted Memcached.
func (m *memo) forget(uid types.UID) {
	m.generations.entries.forget(uid)
	m.statusWrites.forget(uid)
	m.deploymentWaits.entries.forget(uid)
	m.appliedFields.forget(uid)
	m.deletedChildren.forget(uid)
	m.pauseWrites.forget(uid)
}

// pauseWrite is one write of a Deployment's spec.paused: the
// resourceVersion of the Deployment it was made from, and the generation
// the apiserver's answer has.
type pauseWrite struct {
	from       string
	generation int64
}

// wrotePause records that the Memcached mc wrote the spec.paused of the
// Deployment dep, as the sync had it, and the apiserver answered with
// updated.
func (m *memo) wrotePause(mc types.UID, dep, updated *appsv1.Deployment) {
	m.pauseWrites.update(mc, func(written *map[types.UID]pauseWrite) {
		if *written == nil {
			*written = map[types.UID]pauseWrite{}
		}
		(*written)[dep.UID] = pauseWrite{from: dep.ResourceVersion, generation: updated.Generation}
	})
}

// pauseWrittenFrom reports whether the cache has not caught up with the
// last write of the Deployment's spec.paused: dep, as the cache shows it,
// is the version the write was made from, or one of an older generation
// than the write gave it. A change of spec.paused is a change of the spec,
// which bumps the generation, while the Deployment controller's status
// writes do not: a sync that applied the Deployment and then wrote the
// pause from the apiserver's answer can be followed by a sync whose cache
// shows a status write made in between, a version it never saw.
func (m *memo) pauseWrittenFrom(mc types.UID, dep *appsv1.Deployment) bool {
	var from bool
	m.pauseWrites.update(mc, func(written *map[types.UID]pauseWrite) {
		w, ok := (*written)[dep.UID]
		from = ok && (w.from == dep.ResourceVersion || dep.Generation < w.generation)
	})
	return from
}

// deletedChild records that the Memcached mc deleted the child child.
func (m *memo) deletedChild(mc, child types.UID) {
	m.deletedChildren.update(mc, func(uids *[]types.UID) {
		*uids = append(*uids, child)
		if n := len(*uids); n > maxDeletedChildren {
			*uids = (*uids)[n-maxDeletedChildren:]
		}
	})
}

// wasDeleted reports whether the Memcached mc deleted the child child.
func (m *memo) wasDeleted(mc, child types.UID) bool {
	if child == "" {
		// Not an object the apiserver returned; only tests make those.
		return false
	}
	uids, _ := m.deletedChildren.get(mc)
	return slices.Contains(uids, child)
}

// byUID is a map by Memcached UID that the workers, which sync different
// keys at once, may share.
type byUID[V any] struct {
	mu sync.Mutex
	m  map[types.UID]V
}

func (b *byUID[V]) get(uid types.UID) (V, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	v, ok := b.m[uid]
	return v, ok
}

// update sets the value of uid to what f makes of the current one (the
// zero V if there is none), under the lock.
func (b *byUID[V]) update(uid types.UID, f func(*V)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.m == nil {
		b.m = map[types.UID]V{}
	}
	v := b.m[uid]
	f(&v)
	b.m[uid] = v
}

func (b *byUID[V]) forget(uid types.UID) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.m, uid)
}

// generationClock times how long a new generation waits to be observed.
type generationClock struct {
	clock   clock.PassiveClock
	entries byUID[unobserved]
}

// unobserved is the newest generation seen that the status has not
// observed yet, and since when the first of the unobserved generations
// was seen.
type unobserved struct {
	generation int64
	since      time.Time
}

// saw notes a Memcached from an informer event. Several unobserved
// generations in a row keep the time of the first: that is how long the
// user has been waiting.
func (g *generationClock) saw(mc *cachev1beta1.Memcached) {
	if mc.Generation <= mc.Status.ObservedGeneration {
		return
	}
	g.entries.update(mc.UID, func(u *unobserved) {
		if u.generation == 0 {
			u.since = g.clock.Now()
		}
		u.generation = mc.Generation
	})
}

// observed reports how long ago the now observed generation was first
// seen, if it was, and stops the clock.
func (g *generationClock) observed(uid types.UID, generation int64) (time.Duration, bool) {
	var waited time.Duration
	var ok bool
	g.entries.update(uid, func(u *unobserved) {
		if u.generation == 0 || u.generation > generation {
			return
		}
		waited, ok = g.clock.Since(u.since), true
		*u = unobserved{}
	})
	return waited, ok
}

// deploymentWaits holds, per Memcached, the wait of its status writes for
// a written Deployment to catch up.
type deploymentWaits struct {
	clock   clock.PassiveClock
	entries byUID[deploymentWait]
}

// deploymentWait is the Deployment generation a wait was for, and when it
// began.
type deploymentWait struct {
	generation int64
	since      time.Time
}

// remaining reports how much longer a status write should wait for the
// Deployment's generation to catch up: limit from when start was first
// set for that generation, or nothing if it never was. Zero or less means
// no longer.
func (d *deploymentWaits) remaining(uid types.UID, generation int64, start bool, limit time.Duration) time.Duration {
	var left time.Duration
	d.entries.update(uid, func(w *deploymentWait) {
		waiting := !w.since.IsZero() && w.generation == generation
		if !waiting && !start {
			return
		}
		if !waiting {
			*w = deploymentWait{generation: generation, since: d.clock.Now()}
		}
		left = limit - d.clock.Since(w.since)
	})
	return left
}

// appliedFieldDigests holds, per Memcached and child (kind and name), the
// digest of the fields an apply of the desired child makes the operator
// own, with the spec hash it belongs to, whether an apply's answer or the
// schema gave it.
type appliedFieldDigests struct {
	byUID[[]appliedFields]
}

type appliedFields struct {
	child, specHash, digest string
}

// lookup returns the digest of the desired child whose spec hash is
// specHash, if it is known.
func (a *appliedFieldDigests) lookup(uid types.UID, child, specHash string) (string, bool) {
	entries, _ := a.get(uid)
	i := slices.IndexFunc(entries, func(e appliedFields) bool { return e.child == child })
	if i < 0 || entries[i].specHash != specHash {
		return "", false
	}
	return entries[i].digest, true
}

// remember records the digest lookup returns for a child and spec hash, in
// place of the child's previous one.
func (a *appliedFieldDigests) remember(uid types.UID, child, specHash, digest string) {
	a.update(uid, func(entries *[]appliedFields) {
		e := appliedFields{child: child, specHash: specHash, digest: digest}
		if i := slices.IndexFunc(*entries, func(e appliedFields) bool { return e.child == child }); i >= 0 {
			// A copy: a concurrent lookup may still read the old slice.
			*entries = slices.Clone(*entries)
			(*entries)[i] = e
		} else {
			*entries = append(slices.Clip(*entries), e)
		}
	})
}

// wroteStatus records that a status write was computed from the cached
// Memcached as mc is.
func (m *memo) wroteStatus(mc *cachev1beta1.Memcached) {
	m.statusWrites.update(mc.UID, func(rv *string) { *rv = mc.ResourceVersion })
}

// statusWrittenFrom reports whether the last status write was computed
// from the cached Memcached as mc is, that is, whether the cache has not
// caught up with that write yet.
func (m *memo) statusWrittenFrom(mc *cachev1beta1.Memcached) bool {
	rv, ok := m.statusWrites.get(mc.UID)
	return ok && rv == mc.ResourceVersion
}
