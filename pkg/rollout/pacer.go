package rollout

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/kubelite/memcached-operator/pkg/deployutil"
)

// DefaultMaxConcurrent is the default limit of a Pacer. One at a time is
// the only limit that is safe without knowing the cluster: several caches
// often front the same database, and each cache's rollout already
// restarts its Pods one by one, so a second cache rolling at the same time
// doubles the misses that database takes. The cost is time: an upgrade
// takes the sum of the caches' rollouts, which a large fleet shortens by
// raising the limit.
const DefaultMaxConcurrent = 1

// Pacer lets at most limit Deployments roll at a time; the next one starts
// only when one of them has completed. A slot is a Deployment's, so a
// Memcached with zones rolls its zone pools one slot each: with a limit of
// one, no two zones empty part of their cache at once.
//
// A Deployment holds a slot while it rolls out, whoever started the
// rollout: a user's spec change is applied at once, never held, but it
// occupies a slot while it rolls, so that the operator does not add its
// own restarts to it. The slots are derived from the Deployments in the
// cache (Observe, from the informer's events, which also delivers every
// Deployment before the workers start), so a new leader starts from what
// the cluster shows. To a new leader every rollout is one it did not
// start.
//
// Each Deployment is in one of the states of state; the methods are the
// transitions, and the table there lists them. Deployments wait in the
// order they asked, and the Memcached of one that waits is synced again
// (the wake function) when a slot frees. The state is the process's own
// and lives only while it runs; its lock is taken after no other.
type Pacer struct {
	limit int
	// wake queues a Memcached whose turn has come.
	wake func(cache.ObjectName)

	mu sync.Mutex
	// rolling holds the slot of each Deployment holding one.
	rolling map[cache.ObjectName]slot
	// waiting are the Deployments that asked for a slot and did not get
	// one, first come first.
	waiting []waiter
}

// state is where a Deployment holding a slot stands. Two more states are
// not slots: waiting, in line for one (Pacer.waiting), and free, neither.
//
//	free     → waiting   Acquire, no slot free
//	free     → granted   Acquire, a slot free (or Acquire from waiting)
//	observed → granted   Acquire, within the limit
//	waiting  → free      Withdraw, WithdrawOwner, RetainOwner, Release, Forget, Observe of its end
//	granted  → operator  Started, with the generation the apply gave
//	granted  → free      Withdraw, WithdrawOwner, RetainOwner, Release, Forget
//	operator → free      Observe of that generation complete, or of its end; Forget
//	operator → observed  TakeOver, Release (handOver), while it replaces Pods
//	operator → free      TakeOver, Release, once past its deadline or replacing no Pods
//	free     → observed  Observe of a Deployment replacing Pods, not past its deadline
//	observed → free      Observe of one replacing no Pods, past its deadline, or gone; Forget
type state int

const (
	// granted: granted a slot for the operator's template, whose apply
	// is in flight; no Deployment event frees it. The zero state is none
	// of them.
	granted state = iota + 1
	// operator: rolling out the operator's template. It holds the slot
	// until its Deployment has completed that generation, every replica
	// updated and available, even when it misses its progress deadline
	// (Halted): a template that cannot roll out must not reach the next
	// cache.
	operator
	// observed: rolling out for a reason the operator did not cause. It
	// counts only while Pods of an older template remain, not for a Pod
	// that is merely down, and stops counting once the Deployment missed
	// its progress deadline, so that one broken cache does not hold
	// every operator rollout forever.
	observed
)

// slot is one Deployment's hold on a rollout slot.
type slot struct {
	state state
	// owner is the Deployment's Memcached.
	owner cache.ObjectName
	// generation is the Deployment generation whose completion frees an
	// operator slot, or that an observed rollout was last seen at.
	generation int64
	// inputs are the Pod template's inputs in the Memcached's spec
	// (resources.TemplateInputs) an operator rollout was granted at:
	// others are a change of the template by the Memcached's owner, which
	// makes the rollout theirs (TakeOver). A scale changes none of them.
	inputs string
}

// waiter is a Deployment in line for a slot, and its Memcached.
type waiter struct{ deployment, owner cache.ObjectName }

// NewPacer returns a Pacer of limit slots that calls wake with the
// Memcached of a waiting Deployment whose turn has come.
func NewPacer(limit int, wake func(cache.ObjectName)) *Pacer {
	return &Pacer{limit: limit, wake: wake, rolling: map[cache.ObjectName]slot{}}
}

// Limit is the number of slots.
func (r *Pacer) Limit() int { return r.limit }

// Acquire reports whether the Deployment key of the Memcached owner, with
// the template inputs inputs, may start an operator-caused rollout now,
// and reserves its slot if so. One that may not is put in line, and its
// Memcached wakes when its turn comes; the Deployments holding the slots
// are returned for its status.
func (r *Pacer) Acquire(key, owner cache.ObjectName, inputs string) (bool, []cache.ObjectName) {
	r.mu.Lock()
	defer r.mu.Unlock()
	sl, holds := r.rolling[key]
	switch {
	case holds && sl.state != observed:
		return true, nil
	case holds && len(r.rolling) <= r.limit:
		// A Deployment rolling on its own, within the limit, takes the
		// operator's template along in the slot it holds, which becomes
		// the operator's: it is freed only once that template has rolled
		// out. One whose own rollout, a scale-up say, took a slot over
		// the limit (Observe) waits its turn, or its template would join
		// the excess.
		r.waiting = slices.DeleteFunc(r.waiting, func(w waiter) bool { return w.deployment == key })
		r.rolling[key] = slot{state: granted, owner: owner, inputs: inputs}
		r.wakeLocked()
		return true, nil
	}
	pos := slices.IndexFunc(r.waiting, func(w waiter) bool { return w.deployment == key })
	if pos < 0 {
		pos = len(r.waiting)
		r.waiting = append(r.waiting, waiter{deployment: key, owner: owner})
	}
	if pos >= r.limit-len(r.rolling) {
		return false, r.holdersLocked()
	}
	r.waiting = slices.Delete(r.waiting, pos, pos+1)
	r.rolling[key] = slot{state: granted, owner: owner, inputs: inputs}
	return true, nil
}

// Started records the generation an apply granted a slot gave the
// Deployment; its completion frees the slot.
func (r *Pacer) Started(key cache.ObjectName, generation int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if sl, ok := r.rolling[key]; ok && sl.state == granted {
		sl.state, sl.generation = operator, generation
		r.rolling[key] = sl
	}
}

// Halted reports whether the Deployment key holds a slot for a rollout the
// operator started and applied, dep as the cache shows it, past its
// progress deadline: it holds the line (see operator), and the Memcached
// says so.
func (r *Pacer) Halted(key cache.ObjectName, dep *appsv1.Deployment) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	sl, ok := r.rolling[key]
	return ok && sl.state == operator && deployutil.ProgressDeadlineExceeded(dep)
}

// TakeOver hands the operator rollout of the Deployment key to its
// Memcached's owner once the template inputs of the Memcached's spec are
// not those the slot was granted at: the owner changed the template since,
// so the rollout is theirs (handOverLocked).
func (r *Pacer) TakeOver(key cache.ObjectName, inputs string, dep *appsv1.Deployment) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if sl, ok := r.rolling[key]; ok && sl.state == operator && inputs != sl.inputs {
		r.handOverLocked(key, dep)
	}
}

// Release hands the operator rollout of the Deployment key over as
// TakeOver does, whatever the Memcached's spec, for a Memcached whose
// admin deferred the operator's rollouts: the way to release a halt
// without a spec change. A slot granted to an apply still in flight is
// given back, and the line left.
func (r *Pacer) Release(key cache.ObjectName, dep *appsv1.Deployment) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.waiting = slices.DeleteFunc(r.waiting, func(w waiter) bool { return w.deployment == key })
	if sl, ok := r.rolling[key]; ok && sl.state != observed {
		r.handOverLocked(key, dep)
	}
}

// handOverLocked makes an operator rollout count as one the operator did
// not start: past its progress deadline, or with its Deployment gone, it
// frees its slot; otherwise it keeps it while it replaces Pods (Observe),
// so that the limit still holds.
func (r *Pacer) handOverLocked(key cache.ObjectName, dep *appsv1.Deployment) {
	sl := r.rolling[key]
	if dep == nil || sl.state == granted || deployutil.ProgressDeadlineExceeded(dep) || !deployutil.ReplacingPods(dep) {
		delete(r.rolling, key)
		r.wakeLocked()
		return
	}
	r.rolling[key] = slot{state: observed, owner: sl.owner, generation: dep.Generation}
}

// Withdraw takes a Deployment out of line and gives back a slot granted
// to an apply that did not go through: it no longer needs an
// operator-caused rollout (its spec changed, its Memcached opted out), or
// the apply failed and will ask again.
func (r *Pacer) Withdraw(key cache.ObjectName) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.waiting = slices.DeleteFunc(r.waiting, func(w waiter) bool { return w.deployment == key })
	if sl, ok := r.rolling[key]; ok && sl.state == granted {
		delete(r.rolling, key)
	}
	r.wakeLocked()
}

// WithdrawOwner withdraws every Deployment of the Memcached owner, for a
// sync that applies none of them: the Memcached is invalid, paused, waits
// for a Secret, or is being deleted.
func (r *Pacer) WithdrawOwner(owner cache.ObjectName) {
	r.RetainOwner(owner, nil)
}

// RetainOwner withdraws every Deployment of the Memcached owner but those
// in keep: a sync that applies the Memcached's pools keeps in line only
// the ones it asked for, whatever became of the others (a zone taken out,
// a Deployment someone took over).
func (r *Pacer) RetainOwner(owner cache.ObjectName, keep []cache.ObjectName) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.waiting = slices.DeleteFunc(r.waiting, func(w waiter) bool {
		return w.owner == owner && !slices.Contains(keep, w.deployment)
	})
	maps.DeleteFunc(r.rolling, func(key cache.ObjectName, sl slot) bool {
		return sl.owner == owner && sl.state == granted && !slices.Contains(keep, key)
	})
	r.wakeLocked()
}

// Observe updates the slot of the Deployment key, of the Memcached owner,
// from the Deployment as the cache now has it, or nil once it is gone or
// on its way out.
func (r *Pacer) Observe(key, owner cache.ObjectName, dep *appsv1.Deployment) {
	r.mu.Lock()
	defer r.mu.Unlock()
	sl, holds := r.rolling[key]
	switch {
	case dep == nil:
		// A Deployment that is gone no longer waits either.
		r.waiting = slices.DeleteFunc(r.waiting, func(w waiter) bool { return w.deployment == key })
		if holds && sl.state != granted {
			delete(r.rolling, key)
		}
	case holds && sl.state == granted:
	case holds && sl.state == operator:
		if dep.Generation >= sl.generation && !deployutil.RollingOut(dep) {
			delete(r.rolling, key)
		}
	case holds:
		if !deployutil.ReplacingPods(dep) || deployutil.ProgressDeadlineExceeded(dep) {
			delete(r.rolling, key)
		}
	case deployutil.ReplacingPods(dep) && !deployutil.ProgressDeadlineExceeded(dep):
		r.rolling[key] = slot{state: observed, owner: owner, generation: dep.Generation}
	}
	r.wakeLocked()
}

// Forget drops a deleted Memcached: its Deployments out of line, and their
// slots freed. They may stay behind as orphans, which no longer count.
func (r *Pacer) Forget(owner cache.ObjectName) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.waiting = slices.DeleteFunc(r.waiting, func(w waiter) bool { return w.owner == owner })
	maps.DeleteFunc(r.rolling, func(_ cache.ObjectName, sl slot) bool { return sl.owner == owner })
	r.wakeLocked()
}

// wakeLocked syncs the Memcacheds whose turn has come. A woken one that no
// longer needs the slot withdraws, which wakes the next.
func (r *Pacer) wakeLocked() {
	free := r.limit - len(r.rolling)
	for _, w := range r.waiting[:max(0, min(free, len(r.waiting)))] {
		r.wake(w.owner)
	}
}

// holdersLocked lists the Deployments holding a slot, sorted.
func (r *Pacer) holdersLocked() []cache.ObjectName {
	holders := make([]cache.ObjectName, 0, len(r.rolling))
	for key := range r.rolling {
		holders = append(holders, key)
	}
	slices.SortFunc(holders, func(a, b cache.ObjectName) int { return strings.Compare(a.String(), b.String()) })
	return holders
}

// DescribeHolders names, for an Event on a Memcached of namespace, up to
// three Deployments of that namespace, and only counts those of others:
// Events are read by the namespace's tenants, who learn nothing of
// another's caches from them (the operator's log names every holder).
func DescribeHolders(namespace string, holders []cache.ObjectName) string {
	var names []string
	elsewhere := 0
	for _, k := range holders {
		if k.Namespace != namespace {
			elsewhere++
			continue
		}
		names = append(names, k.Name)
	}
	shown := names[:min(3, len(names))]
	parts := []string{}
	if len(shown) > 0 {
		s := "Deployment " + strings.Join(shown, ", ")
		if len(names) > len(shown) {
			s += fmt.Sprintf(" and %d more", len(names)-len(shown))
		}
		parts = append(parts, s)
	}
	if elsewhere > 0 {
		parts = append(parts, fmt.Sprintf("%d Deployment(s) in other namespaces", elsewhere))
	}
	return strings.Join(parts, " and ")
}
