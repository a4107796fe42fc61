package main

import (
	"reflect"
	"slices"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
)

// memo is what the controller remembers about each Memcached between
// syncs, by UID, in four named parts. None of it is state the sync depends
// on for correctness: losing it costs a metric sample, one Conflict, one
// status write, one DELETE answered NotFound or one computation. forget,
// called when a Memcached is deleted, purges every part.
type memo struct {
	// generations times spec_to_observed_seconds.
	generations generationClock
	// writes are the operator's last writes the cache may not show yet;
	// see pendingWrites.
	writes pendingWrites
	// deploymentWaits says since when a status write has waited for a
	// written Deployment to catch up; see syncStatus.
	deploymentWaits deploymentWaits
	// appliedFields holds the digests of the fields an apply of each
	// desired child makes the operator own; see Controller.appliedFields.
	appliedFields appliedFieldDigests
}

func newMemo(clk clock.PassiveClock) *memo {
	return &memo{
		generations:     generationClock{clock: clk},
		deploymentWaits: deploymentWaits{clock: clk},
	}
}

// forget drops everything about a deleted Memcached.
func (m *memo) forget(uid types.UID) {
	m.generations.entries.forget(uid)
	m.writes.forget(uid)
	m.deploymentWaits.entries.forget(uid)
	m.appliedFields.forget(uid)
}

// pendingWrites answers one question for every write whose next sync reads
// the written object from the cache: is the operator's own write in the
// cache yet? A sync that computed from an object the cache has not yet
// updated with the last write would send a write bound to fail with a
// Conflict, or the same DELETE again; the informer's event for the write
// syncs the Memcached again, so such a sync waits instead. It plays the
// part the Kubernetes controllers' expectations play. The writes it
// tracks are a Memcached's status, the pause of its Deployments'
// rollouts, and the deletion of the children its spec no longer asks
// for, each by the UID of the object written, the last maxPendingWrites
// of each Memcached.
type pendingWrites struct {
	byUID[[]pendingWrite]
}

// pendingWrite is the last write of one object.
type pendingWrite struct {
	object writtenObject
	// deleted is set for a DELETE: the cache is behind while it shows
	// the object at all.
	deleted bool
	// from is the resourceVersion an update was computed from, and
	// generation the generation the apiserver's answer has: the cache is
	// behind while it shows that version, or one of an older generation.
	// A write of the spec bumps the generation, and the writes of others
	// in between (the Deployment controller's status) do not: a sync that
	// applied the Deployment and then wrote the pause from the apply's
	// answer can be followed by one whose cache shows a status write
	// made in between, a version it never saw.
	from       string
	generation int64
}

// writtenObject names an object by its UID; and by its Go type and name,
// which tell apart the objects of a fake clientset, which have none.
type writtenObject struct {
	uid  types.UID
	kind reflect.Type
	name cache.ObjectName
}

func objectOf(obj metav1.Object) writtenObject {
	return writtenObject{uid: obj.GetUID(), kind: reflect.TypeOf(obj), name: cache.MetaObjectToName(obj)}
}

// maxPendingWrites bounds the writes kept per Memcached: a move deletes at
// most a Deployment, a Service and a budget in each of 8 zones, and the
// spec one NetworkPolicy; there is one status, and a pause per pool.
const maxPendingWrites = 64

// wrote records an update of the object from, as the cache showed it, that
// the apiserver answered with answer.
func (p *pendingWrites) wrote(mc types.UID, from, answer metav1.Object) {
	p.record(mc, pendingWrite{object: objectOf(from), from: from.GetResourceVersion(), generation: answer.GetGeneration()})
}

// deleted records a DELETE of obj.
func (p *pendingWrites) deleted(mc types.UID, obj metav1.Object) {
	p.record(mc, pendingWrite{object: objectOf(obj), deleted: true})
}

func (p *pendingWrites) record(mc types.UID, w pendingWrite) {
	p.update(mc, func(writes *[]pendingWrite) {
		// A copy: a concurrent lookup may still read the old slice.
		kept := slices.DeleteFunc(slices.Clone(*writes), func(old pendingWrite) bool { return old.object == w.object })
		kept = append(kept, w)
		*writes = kept[max(0, len(kept)-maxPendingWrites):]
	})
}

// stale reports whether the cache has not caught up with the last update
// of cached, as it shows it, by the Memcached mc.
func (p *pendingWrites) stale(mc types.UID, cached metav1.Object) bool {
	w, ok := p.last(mc, objectOf(cached))
	return ok && !w.deleted && (w.from == cached.GetResourceVersion() || cached.GetGeneration() < w.generation)
}

// gone reports whether the Memcached mc deleted cached, which the cache
// still shows.
func (p *pendingWrites) gone(mc types.UID, cached metav1.Object) bool {
	w, ok := p.last(mc, objectOf(cached))
	return ok && w.deleted
}

// last returns the last write of obj.
func (p *pendingWrites) last(mc types.UID, obj writtenObject) (pendingWrite, bool) {
	writes, _ := p.get(mc)
	i := slices.IndexFunc(writes, func(w pendingWrite) bool { return w.object == obj })
	if i < 0 {
		return pendingWrite{}, false
	}
	return writes[i], true
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

// maxAppliedFields bounds the digests kept per Memcached, the children of
// 8 zone pools and a few more: a spec whose zones change again and again
// names new children each time, and the memory the operator holds must
// not be up to whoever writes specs.
const maxAppliedFields = 32

// remember records the digest lookup returns for a child and spec hash, in
// place of the child's previous one, the last maxAppliedFields children's.
func (a *appliedFieldDigests) remember(uid types.UID, child, specHash, digest string) {
	a.update(uid, func(entries *[]appliedFields) {
		e := appliedFields{child: child, specHash: specHash, digest: digest}
		// A copy: a concurrent lookup may still read the old slice.
		kept := slices.DeleteFunc(slices.Clone(*entries), func(old appliedFields) bool { return old.child == child })
		kept = append(kept, e)
		*entries = kept[max(0, len(kept)-maxAppliedFields):]
	})
}
