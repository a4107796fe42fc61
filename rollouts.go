package main

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

// rollouts paces the rollouts the operator causes: a Pod template that
// changed because the operator renders it differently, not because the
// spec did (operatorCaused). Every restart empties that part of a cache,
// and an operator upgrade would otherwise roll every cache in the cluster
// at once. At most limit Deployments roll at a time; the next one starts
// only when one of them has completed. A slot is a Deployment's, so a
// Memcached with zones rolls its zone pools one slot each: with the
// default limit of one, no two zones empty part of their cache at once.
//
// A Deployment holds a slot while it rolls out, whoever started the
// rollout: a user's spec change is applied at once, never held, but it
// occupies a slot while it rolls, so that the operator does not add its
// own restarts to it. The slots are derived from the Deployments in
// the cache (observe, from the informer's events, which also delivers
// every Deployment before the workers start), so a new leader starts from
// what the cluster shows.
//
// A rollout the operator starts holds its slot from the moment it is
// granted (acquire) until its Deployment has completed that generation,
// every replica updated and available, even when the Deployment
// controller never gets to it or it misses its progress deadline: a
// template that cannot roll out must not reach the next cache. One the
// operator did not start counts only while Pods of an older template
// remain, not for a Pod that is merely down, and stops counting once the
// Deployment says it missed its progress deadline, so that one broken
// cache does not hold every operator rollout forever. A new leader knows
// only the Deployments, so to it every rollout is one it did not start.
//
// Deployments wait in the order they asked, and the Memcached of one that
// waits is synced again (wake) when a slot frees. The state is the
// process's own and lives only while it runs; it needs no lock order with
// anything else.
type rollouts struct {
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

// waiter is a Deployment in line for a slot, and its Memcached.
type waiter struct{ deployment, owner cache.ObjectName }

// defaultMaxConcurrentRollouts is the default of --max-concurrent-rollouts.
// One at a time is the only limit that is safe without knowing the
// cluster: several caches often front the same database, and each cache's
// rollout already restarts its Pods one by one, so a second cache rolling
// at the same time doubles the misses that database takes. The cost is
// time: an upgrade takes the sum of the caches' rollouts, which a large
// fleet shortens by raising the limit.
const defaultMaxConcurrentRollouts = 1

// slot is one Deployment's hold on a rollout slot.
type slot struct {
	// owner is the Deployment's Memcached.
	owner cache.ObjectName
	// generation is the Deployment generation whose completion frees the
	// slot; granted while the operator's apply is in flight.
	generation int64
	// operator is set for a rollout the operator started (acquire).
	operator bool
	// inputs are the Pod template's inputs in the Memcached's spec
	// (resources.TemplateInputs) an operator rollout was granted at:
	// others are a change of the template by the Memcached's owner, which
	// makes the rollout theirs (takeOver). A scale changes none of them.
	inputs string
}

// granted is the generation of a slot granted to an apply still in
// flight, which no Deployment completion frees.
const granted = math.MaxInt64

func newRollouts(limit int, wake func(cache.ObjectName)) *rollouts {
	return &rollouts{limit: limit, wake: wake, rolling: map[cache.ObjectName]slot{}}
}

// acquire reports whether the Deployment key of the Memcached owner, with
// the template inputs inputs, may start an operator-caused rollout now, and
// reserves its slot if so. One that may not is put in line, and its
// Memcached wakes when its turn comes; the Deployments holding the slots
// are returned for its status.
func (r *rollouts) acquire(key, owner cache.ObjectName, inputs string) (bool, []cache.ObjectName) {
	r.mu.Lock()
	defer r.mu.Unlock()
	// A Deployment already rolling takes the operator's template along
	// with no more Pods restarting at once than the limit allows; one
	// whose own rollout, a scale-up say, took a slot over the limit
	// (observe) waits its turn, or its operator template would join the
	// excess.
	if sl, ok := r.rolling[key]; ok && (sl.operator || len(r.rolling) <= r.limit) {
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
	r.rolling[key] = slot{owner: owner, generation: granted, operator: true, inputs: inputs}
	return true, nil
}

// started records the generation an apply granted a slot gave the
// Deployment; its completion frees the slot.
func (r *rollouts) started(key cache.ObjectName, generation int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if sl, ok := r.rolling[key]; ok && sl.generation == granted {
		sl.generation = generation
		r.rolling[key] = sl
	}
}

// halted reports whether the Deployment key holds a slot for a rollout the
// operator started and applied: with a Deployment past its progress
// deadline, it holds the line (see rollouts), and the Memcached says so.
func (r *rollouts) halted(key cache.ObjectName, dep *appsv1.Deployment) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	sl, ok := r.rolling[key]
	return ok && sl.operator && sl.generation != granted && progressDeadlineExceeded(dep)
}

// takeOver hands the operator rollout of the Deployment key to its
// Memcached's owner once the template inputs of the Memcached's spec are
// not those the slot was granted at: the owner changed the template since,
// so the rollout is theirs (handOver).
func (r *rollouts) takeOver(key cache.ObjectName, inputs string, dep *appsv1.Deployment) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if sl, ok := r.rolling[key]; ok && sl.operator && sl.generation != granted && inputs != sl.inputs {
		r.handOverLocked(key, sl, dep)
	}
}

// release hands the operator rollout of the Deployment key over as
// takeOver does, whatever the Memcached's spec, for a Memcached
// whose admin deferred the operator's rollouts
// (DeferOperatorRolloutsAnnotation): the way to release a halt without a
// spec change. A slot granted to an apply still in flight is given back.
func (r *rollouts) release(key cache.ObjectName, dep *appsv1.Deployment) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.waiting = slices.DeleteFunc(r.waiting, func(w waiter) bool { return w.deployment == key })
	if sl, ok := r.rolling[key]; ok && sl.operator {
		r.handOverLocked(key, sl, dep)
	}
}

// handOverLocked makes an operator rollout count as one the operator did
// not start: past its progress deadline, or with its Deployment gone, it
// frees its slot; otherwise it keeps it while it replaces Pods (observe),
// so that the limit still holds.
func (r *rollouts) handOverLocked(key cache.ObjectName, sl slot, dep *appsv1.Deployment) {
	if dep == nil || sl.generation == granted || progressDeadlineExceeded(dep) || !replacingPods(dep) {
		delete(r.rolling, key)
		r.wakeLocked()
		return
	}
	r.rolling[key] = slot{owner: sl.owner, generation: dep.Generation}
}

// withdraw takes a Deployment out of line and gives back a slot granted
// to an apply that did not go through: it no longer needs an
// operator-caused rollout (its spec changed, its Memcached opted out), or
// the apply failed and will ask again.
func (r *rollouts) withdraw(key cache.ObjectName) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.waiting = slices.DeleteFunc(r.waiting, func(w waiter) bool { return w.deployment == key })
	if sl, ok := r.rolling[key]; ok && sl.generation == granted {
		delete(r.rolling, key)
	}
	r.wakeLocked()
}

// withdrawOwner withdraws every Deployment of the Memcached owner, for a
// sync that applies none of them: the Memcached is invalid, paused, waits
// for a Secret, or is being deleted.
func (r *rollouts) withdrawOwner(owner cache.ObjectName) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.leaveLineLocked(owner)
	maps.DeleteFunc(r.rolling, func(_ cache.ObjectName, sl slot) bool {
		return sl.owner == owner && sl.generation == granted
	})
	r.wakeLocked()
}

// retainOwner withdraws every Deployment of the Memcached owner but
// those in keep: a sync that applies the Memcached's pools keeps in line
// only the ones it asked for, whatever became of the others (a zone taken
// out, a Deployment someone took over).
func (r *rollouts) retainOwner(owner cache.ObjectName, keep []cache.ObjectName) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.waiting = slices.DeleteFunc(r.waiting, func(w waiter) bool {
		return w.owner == owner && !slices.Contains(keep, w.deployment)
	})
	maps.DeleteFunc(r.rolling, func(key cache.ObjectName, sl slot) bool {
		return sl.owner == owner && sl.generation == granted && !slices.Contains(keep, key)
	})
	r.wakeLocked()
}

// observe updates the slot of the Deployment key, of the Memcached owner,
// from the Deployment as the cache now has it, or nil once it is gone.
func (r *rollouts) observe(key, owner cache.ObjectName, dep *appsv1.Deployment) {
	r.mu.Lock()
	defer r.mu.Unlock()
	sl, holds := r.rolling[key]
	switch {
	case dep == nil:
		// A Deployment that is gone no longer waits either.
		r.waiting = slices.DeleteFunc(r.waiting, func(w waiter) bool { return w.deployment == key })
		if holds && sl.generation != granted {
			delete(r.rolling, key)
		}
	case holds && sl.operator:
		if sl.generation != granted && dep.Generation >= sl.generation && !rollingOut(dep) {
			delete(r.rolling, key)
		}
	case holds:
		if !replacingPods(dep) || progressDeadlineExceeded(dep) {
			delete(r.rolling, key)
		}
	case replacingPods(dep) && !progressDeadlineExceeded(dep):
		r.rolling[key] = slot{owner: owner, generation: dep.Generation}
	}
	r.wakeLocked()
}

// forget drops a deleted Memcached: its Deployments out of line, and their
// slots freed. They may stay behind as orphans, which no longer count.
func (r *rollouts) forget(owner cache.ObjectName) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.leaveLineLocked(owner)
	maps.DeleteFunc(r.rolling, func(_ cache.ObjectName, sl slot) bool { return sl.owner == owner })
	r.wakeLocked()
}

// leaveLineLocked takes the Deployments of the Memcached owner out of line.
func (r *rollouts) leaveLineLocked(owner cache.ObjectName) {
	r.waiting = slices.DeleteFunc(r.waiting, func(w waiter) bool { return w.owner == owner })
}

// wakeLocked syncs the Memcacheds whose turn has come. A woken one that no
// longer needs the slot withdraws, which wakes the next.
func (r *rollouts) wakeLocked() {
	free := r.limit - len(r.rolling)
	for _, w := range r.waiting[:max(0, min(free, len(r.waiting)))] {
		r.wake(w.owner)
	}
}

// holdersLocked lists the Deployments holding a slot, sorted.
func (r *rollouts) holdersLocked() []cache.ObjectName {
	holders := make([]cache.ObjectName, 0, len(r.rolling))
	for key := range r.rolling {
		holders = append(holders, key)
	}
	slices.SortFunc(holders, func(a, b cache.ObjectName) int { return strings.Compare(a.String(), b.String()) })
	return holders
}

// rollingOut reports a Deployment whose rollout has not completed and can
// go on: not paused, and its replicas not all running its template and
// available.
func rollingOut(dep *appsv1.Deployment) bool {
	return !dep.Spec.Paused && !rolloutComplete(dep, ptr.Deref(dep.Spec.Replicas, 1))
}

// replacingPods reports a Deployment that is replacing Pods of an older
// template and can go on: not paused, and its controller has not yet
// observed the current generation, or not every wanted replica runs the
// current template, or Pods of an older one remain. A Pod that is down
// while every replica runs the current template is no rollout.
func replacingPods(dep *appsv1.Deployment) bool {
	want := ptr.Deref(dep.Spec.Replicas, 1)
	return !dep.Spec.Paused && (dep.Status.ObservedGeneration < dep.Generation ||
		dep.Status.UpdatedReplicas < want || dep.Status.Replicas > want)
}

// describeHolders names, for an Event on a Memcached of namespace, up to
// three Deployments of that namespace, and only counts those of others:
// Events are read by the namespace's tenants, who learn nothing of
// another's caches from them (the operator's log names every holder).
func describeHolders(namespace string, holders []cache.ObjectName) string {
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
