package main

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/utils/clock"

	cachev1alpha1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1alpha1"
	"github.com/kubelite/memcached-operator/pkg/resources"
)

// desiredIdleTTL is how long a memoized entry lives without being used.
const desiredIdleTTL = 10 * time.Minute

// desiredCache memoizes the children built for each Memcached generation.
// The builders are pure functions of the spec, the name and the UID, and
// the spec only changes with metadata.generation, so a sync that finds
// nothing to do (every child status update) skips building, hashing and
// converting them. The children in an entry are read-only once stored.
//
// The entries are the largest part of the operator's heap (about 8 KiB per
// Memcached), so only objects that are busy keep one: an entry is stored
// the second time a generation is built, not the first, and dropped after
// desiredIdleTTL without use. A restart, which syncs every object once,
// and an idle cluster, hold almost none.
type desiredCache struct {
	clock clock.PassiveClock

	mu      sync.Mutex
	entries map[types.UID]*desiredEntry
	// builtOnce records generations built once and not stored.
	builtOnce map[types.UID]int64
}

type desiredEntry struct {
	generation int64
	deployment *appsv1ac.DeploymentApplyConfiguration
	service    *corev1ac.ServiceApplyConfiguration
	// selector and endpoint are the status strings of this generation.
	selector, endpoint string
	lastUsed           time.Time
}

func newDesiredCache(clk clock.PassiveClock) *desiredCache {
	return &desiredCache{clock: clk, entries: map[types.UID]*desiredEntry{}, builtOnce: map[types.UID]int64{}}
}

func (d *desiredCache) get(mc *cachev1alpha1.Memcached) (desiredEntry, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	e, ok := d.entries[mc.UID]
	if !ok || e.generation != mc.Generation {
		return desiredEntry{}, false
	}
	e.lastUsed = d.clock.Now()
	return *e, true
}

// put offers a freshly built entry. It is kept only if the same generation
// was built before; the first time, only that fact is recorded.
func (d *desiredCache) put(mc *cachev1alpha1.Memcached, e desiredEntry) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if gen, ok := d.builtOnce[mc.UID]; !ok || gen != mc.Generation {
		d.builtOnce[mc.UID] = mc.Generation
		delete(d.entries, mc.UID)
		return
	}
	delete(d.builtOnce, mc.UID)
	e.generation, e.lastUsed = mc.Generation, d.clock.Now()
	d.entries[mc.UID] = &e
}

// expire drops entries idle for longer than desiredIdleTTL, and the
// built-once marks as well, so that a mark from long ago does not make a
// single rebuild count as a busy object. Run calls it every
// desiredIdleTTL.
func (d *desiredCache) expire() {
	d.mu.Lock()
	defer d.mu.Unlock()
	now := d.clock.Now()
	for uid, e := range d.entries {
		if now.Sub(e.lastUsed) > desiredIdleTTL {
			delete(d.entries, uid)
		}
	}
	clear(d.builtOnce)
}

// forget drops a deleted Memcached.
func (d *desiredCache) forget(uid types.UID) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.entries, uid)
	delete(d.builtOnce, uid)
}

// desired returns the Deployment and Service mc should have.
func (c *Controller) desired(mc *cachev1alpha1.Memcached) (desiredEntry, error) {
	if e, ok := c.desiredCache.get(mc); ok {
		return e, nil
	}
	dep, err := resources.Deployment(mc)
	if err != nil {
		return desiredEntry{}, err
	}
	svc, err := resources.Service(mc)
	if err != nil {
		return desiredEntry{}, err
	}
	e := desiredEntry{deployment: dep, service: svc, selector: resources.Selector(mc), endpoint: resources.Endpoint(mc)}
	c.desiredCache.put(mc, e)
	return e, nil
}
