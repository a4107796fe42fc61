package main

import (
	"context"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	policyv1ac "k8s.io/client-go/applyconfigurations/policy/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
	"github.com/kubelite/memcached-operator/pkg/resources"
)

// syncPools makes the pools' Services and PodDisruptionBudgets match the
// spec, and removes the pools the spec no longer asks for. A zone taken out
// of spec.zones loses its pool at once. A move between one pool and zone
// pools, either way, keeps the previous pool serving until every new pool
// is available (keepServing), so that the cache never stops serving; the
// move deletes it then.
//
// Every Pod is covered by exactly one budget: the eviction API refuses to
// evict a Pod that two budgets select, and the budget of the pool without
// zones selects every Pod of the Memcached. So while that pool serves,
// whether it is the one the spec asks for or the previous one of a move to
// zones, it has the only budget, and the zone pools have none.
//
// A zone pool's Service stays as long as its Deployment, for the clients
// of the zone that still use it during a move back to one pool.
func (c *Controller) syncPools(ctx context.Context, s *memcachedSync) {
	mc := s.mc
	s.retiring = nil
	stale, err := c.ownedPools(mc, s.desired.Pools)
	if err != nil {
		s.record(transient(err))
		return
	}
	var retire []*appsv1.Deployment
	for _, dep := range stale {
		if c.keepServing(s, dep) {
			s.retiring = append(s.retiring, dep)
		} else {
			retire = append(retire, dep)
		}
	}

	wantServices := map[string]*corev1ac.ServiceApplyConfiguration{}
	wantBudgets := map[string]*policyv1ac.PodDisruptionBudgetApplyConfiguration{}
	unzonedServes := s.desired.Pools[0].Zone == ""
	for _, p := range s.desired.Pools {
		if p.Service != nil {
			wantServices[*p.Service.Name] = p.Service
		}
	}
	for _, dep := range s.retiring {
		zone := poolZone(mc, dep)
		if zone == "" {
			unzonedServes = true
			continue
		}
		svc, err := resources.ZoneService(s.defaulted, zone)
		if err != nil {
			s.record(blocked(cachev1beta1.ReasonInvalidSpec, err, noRetry, 0))
			return
		}
		wantServices[*svc.Name] = svc
	}
	if unzonedServes {
		pdb, err := resources.PodDisruptionBudget(s.defaulted)
		if err != nil {
			s.record(blocked(cachev1beta1.ReasonInvalidSpec, err, noRetry, 0))
			return
		}
		wantBudgets[*pdb.Name] = pdb
	} else {
		for _, p := range s.desired.Pools {
			wantBudgets[*p.PodDisruptionBudget.Name] = p.PodDisruptionBudget
		}
	}

	for _, p := range s.desired.Pools {
		if svc := wantServices[resources.PoolName(mc, p.Zone)]; svc != nil {
			_, o := syncChild(ctx, c, mc, svc, &c.children.services)
			s.record(o)
		}
		if pdb := wantBudgets[resources.PoolName(mc, p.Zone)]; pdb != nil {
			_, o := syncChild(ctx, c, mc, pdb, &c.children.pdbs)
			s.record(o)
		}
	}
	for _, dep := range s.retiring {
		if pdb := wantBudgets[dep.Name]; pdb != nil {
			_, o := syncChild(ctx, c, mc, pdb, &c.children.pdbs)
			s.record(o)
		}
	}

	for _, dep := range retire {
		o := deleteChild(ctx, c, mc, &c.children.deployments, dep)
		s.record(o)
		if o.err == nil {
			c.recorder.Eventf(mc, corev1.EventTypeNormal, "PoolDeleted", "Deleted Deployment %s: %s", dep.Name, whyRetired(s, poolZone(mc, dep)))
		}
	}
	s.record(deleteUnwanted(ctx, c, mc, &c.children.services, wantServices))
	s.record(deleteUnwanted(ctx, c, mc, &c.children.pdbs, wantBudgets))
}

// whyRetired says, for an Event, why the pool in zone was deleted.
func whyRetired(s *memcachedSync, zone string) string {
	switch {
	case zone == "":
		return "the Memcached moved to zone pools, and they are available"
	case s.desired.Pools[0].Zone == "":
		return "the Memcached moved to one pool without zones, and it is available"
	default:
		return "zone " + zone + " is no longer in spec.zones"
	}
}

// ownedPools returns the Deployments this Memcached controls that are not
// among desired and not being deleted: pools the spec no longer asks for.
func (c *Controller) ownedPools(mc *cachev1beta1.Memcached, desired []resources.Pool) ([]*appsv1.Deployment, error) {
	deps, err := c.deploymentLister.Owned(mc.Namespace, mc.Name)
	if err != nil {
		return nil, fmt.Errorf("listing the Memcached's Deployments from cache: %w", err)
	}
	var out []*appsv1.Deployment
	for _, dep := range deps {
		if classify(mc, dep) != owned || dep.DeletionTimestamp != nil || isDesiredPool(mc, dep, desired) {
			continue
		}
		out = append(out, dep)
	}
	return out, nil
}

func isDesiredPool(mc *cachev1beta1.Memcached, dep *appsv1.Deployment, desired []resources.Pool) bool {
	for _, p := range desired {
		if dep.Name == resources.PoolName(mc, p.Zone) {
			return true
		}
	}
	return false
}

// poolZone is the zone of a pool's Deployment, "" for the pool without
// zones; its name is resources.PoolName's (resources.IsChild).
func poolZone(mc *cachev1beta1.Memcached, dep metav1.Object) string {
	return strings.TrimPrefix(strings.TrimPrefix(dep.GetName(), mc.Name), "-")
}

// keepServing reports whether a pool the spec no longer asks for goes on
// serving: it is the previous pool of a move between one pool and zone
// pools, and not every pool the spec asks for is available yet. A zone
// taken out of spec.zones, or any pool of a Memcached scaled to zero, goes
// at once.
func (c *Controller) keepServing(s *memcachedSync, dep *appsv1.Deployment) bool {
	wantZones := s.desired.Pools[0].Zone != ""
	if previousZoned := poolZone(s.mc, dep) != ""; previousZoned == wantZones {
		return false
	}
	want := *s.defaulted.Spec.Replicas
	if want == 0 {
		return false
	}
	for _, p := range s.pools {
		if p.deployment == nil || !cacheAvailable(p.deployment, want) {
			return true
		}
	}
	return false
}

// servingRetired adds every Deployment this Memcached controls that its
// spec does not ask for to the sync's retiring ones, for a sync that
// applies nothing: they serve as long as they exist.
func (c *Controller) servingRetired(s *memcachedSync) {
	var desired []resources.Pool
	for _, zone := range resources.Zones(s.defaulted) {
		desired = append(desired, resources.Pool{Zone: zone})
	}
	stale, err := c.ownedPools(s.mc, desired)
	if err != nil {
		return
	}
	s.retiring = stale
}

// deleteUnwanted deletes the children of one kind this Memcached controls
// that are not in want, by name, and not the Memcached's own name, which
// the Service and NetworkPolicy of the whole Memcached take.
func deleteUnwanted[T metav1.Object, AC any](ctx context.Context, c *Controller, mc *cachev1beta1.Memcached, ch *child[T, AC], want map[string]*AC) outcome {
	objs, err := ch.owned(mc.Namespace, mc.Name)
	if err != nil {
		return transient(fmt.Errorf("listing the Memcached's %ss from cache: %w", ch.kind, err))
	}
	o := done
	for _, obj := range objs {
		if _, ok := want[obj.GetName()]; ok || (ch.kind == "Service" && obj.GetName() == resources.ChildName(mc)) {
			continue
		}
		if classify(mc, obj) != owned || obj.GetDeletionTimestamp() != nil {
			continue
		}
		o = o.join(deleteChild(ctx, c, mc, ch, obj))
	}
	return o
}

// deleteChild deletes a child this Memcached controls, as the cache shows
// it. The request carries its UID and resourceVersion as preconditions, so
// a child of the same name created since, or one someone changed since
// (taken over by removing the ownerReference, say), is refused with a
// Conflict and looked at again once the cache has caught up. The
// Deployment's ReplicaSets and Pods go with it, in the background.
func deleteChild[T metav1.Object, AC any](ctx context.Context, c *Controller, mc *cachev1beta1.Memcached, ch *child[T, AC], obj T) outcome {
	uid, rv := obj.GetUID(), obj.GetResourceVersion()
	err := ch.client(mc.Namespace).Delete(ctx, obj.GetName(), metav1.DeleteOptions{
		Preconditions:     &metav1.Preconditions{UID: &uid, ResourceVersion: &rv},
		PropagationPolicy: ptr.To(metav1.DeletePropagationBackground),
	})
	switch {
	case apierrors.IsNotFound(err):
		return done
	case err != nil:
		return failed(ch.kind, fmt.Errorf("deleting %s %s/%s: %w", ch.kind, mc.Namespace, obj.GetName(), err))
	}
	klog.FromContext(ctx).V(2).Info("Deleted child the spec no longer asks for", "kind", ch.kind, "name", obj.GetName())
	return done
}
