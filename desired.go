package main

import (
	"time"

	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	cachev1alpha1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1alpha1"
	"github.com/kubelite/memcached-operator/pkg/resources"
)

// desiredIdleTTL is how long memoized children live without being used.
const desiredIdleTTL = 10 * time.Minute

// desiredEntry is the children built for one Memcached generation. The
// builders are pure functions of the spec, the name and the UID, and the
// spec only changes with metadata.generation, so a sync that finds nothing
// to do (every child status update) can skip building, hashing and
// converting them. The children in an entry are read-only once stored.
type desiredEntry struct {
	generation int64
	deployment *appsv1ac.DeploymentApplyConfiguration
	service    *corev1ac.ServiceApplyConfiguration
	// selector and endpoint are the status strings of this generation.
	selector, endpoint string
	lastUsed           time.Time
}

// desired returns the Deployment and Service mc should have.
func (c *Controller) desired(mc *cachev1alpha1.Memcached) (desiredEntry, error) {
	if e, ok := c.memo.desired(mc); ok {
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
	c.memo.offerDesired(mc, e)
	return e, nil
}

// The memoized children are the largest part of the operator's heap
// (about 8 KiB per Memcached), so only objects that are busy keep them: an
// entry is stored the second time a generation is built, not the first,
// and dropped after desiredIdleTTL without use. A restart, which syncs
// every object once, and an idle cluster hold almost none.

// desired returns the memoized children of mc's generation, if any.
func (m *memo) desired(mc *cachev1alpha1.Memcached) (desiredEntry, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.entries[mc.UID]
	if !ok || e.desired == nil || e.desired.generation != mc.Generation {
		return desiredEntry{}, false
	}
	e.desired.lastUsed = m.clock.Now()
	return *e.desired, true
}

// offerDesired offers freshly built children. They are kept only if the
// same generation was built before; the first time, only that fact is
// recorded.
func (m *memo) offerDesired(mc *cachev1alpha1.Memcached, d desiredEntry) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.entry(mc.UID)
	if e.builtOnce != mc.Generation {
		e.builtOnce, e.desired = mc.Generation, nil
		return
	}
	e.builtOnce = 0
	d.generation, d.lastUsed = mc.Generation, m.clock.Now()
	e.desired = &d
}

// expireDesired drops children idle for longer than desiredIdleTTL, and
// the built-once marks as well, so that a mark from long ago does not make
// a single rebuild count as a busy object. Run calls it every
// desiredIdleTTL.
func (m *memo) expireDesired() {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.clock.Now()
	for uid, e := range m.entries {
		if e.desired != nil && now.Sub(e.desired.lastUsed) > desiredIdleTTL {
			e.desired = nil
		}
		e.builtOnce = 0
		if *e == (memoEntry{}) {
			delete(m.entries, uid)
		}
	}
}
