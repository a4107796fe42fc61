package main

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	cachev1alpha1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1alpha1"
	"github.com/kubelite/memcached-operator/pkg/resources"
)

// desiredCache memoizes the children built for each Memcached generation.
// The builders are pure functions of the spec, the name and the UID, and
// the spec only changes with metadata.generation, so a sync that finds
// nothing to do (every resync, every child status update) skips building,
// hashing and converting them. Entries are read-only once stored.
type desiredCache struct {
	mu      sync.Mutex
	entries map[types.UID]desiredEntry
}

type desiredEntry struct {
	generation int64
	deployment *appsv1ac.DeploymentApplyConfiguration
	service    *corev1ac.ServiceApplyConfiguration
	// selector and endpoint are the status strings of this generation.
	selector, endpoint string
}

func newDesiredCache() *desiredCache {
	return &desiredCache{entries: map[types.UID]desiredEntry{}}
}

func (d *desiredCache) get(mc *cachev1alpha1.Memcached) (desiredEntry, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	e, ok := d.entries[mc.UID]
	return e, ok && e.generation == mc.Generation
}

func (d *desiredCache) put(mc *cachev1alpha1.Memcached, e desiredEntry) {
	d.mu.Lock()
	defer d.mu.Unlock()
	e.generation = mc.Generation
	d.entries[mc.UID] = e
}

// forget drops a deleted Memcached.
func (d *desiredCache) forget(uid types.UID) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.entries, uid)
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
