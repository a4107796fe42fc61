package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
	"github.com/kubelite/memcached-operator/pkg/deployutil"
	"github.com/kubelite/memcached-operator/pkg/resources"
)

// syncPools makes the pools' Services and PodDisruptionBudgets match the
// spec, and removes the pools the spec no longer asks for once they are
// not needed (keepServing): a zone taken out of spec.zones loses its pool
// at once, but the previous pool of a move between one pool and zone
// pools, either way, serves until every new pool is available, and so
// does any pool while none the spec asks for is, so that the cache never
// stops serving.
//
// Every Pod is covered by one budget: the eviction API refuses to evict a
// Pod that two budgets select, and the budget of the pool without zones
// selects every Pod of the Memcached. So while that pool serves, whether
// it is the one the spec asks for or the previous one of a move to zones,
// it has the only budget, and the zone pools have none. While it covers
// more than one pool, it allows only the disruptions the spec's budget
// allows in one (resources.MoveDisruptionBudget), so that a drain cannot
// empty the pool that serves. At the switch the
// new budgets are applied before the old one is deleted, and the old one
// only once they are: between the two requests evictions of those Pods are
// refused, rather than left without a budget.
//
// A zone pool's Service stays as long as its Deployment, for the clients
// of the zone that still use it during a move back to one pool.
func (c *Controller) syncPools(ctx context.Context, s *memcachedSync) {
	mc := s.mc
	s.retiring = nil
	if s.desired.Pools[0].Zone != "" {
		if adopting, o := c.adoptOrphanedPool(ctx, s); adopting {
			s.record(o)
			return
		}
	}
	stale, err := c.ownedPools(mc, s.desired.Pools)
	if err != nil {
		s.record(transient(err))
		return
	}
	blockedBudget := done
	if needsBudgetCheck(s, stale) {
		blockedBudget = c.budgetsBlocked(ctx, mc, s.desired.Pools)
	}
	plan, err := planPools(s, stale, blockedBudget.shown() || blockedBudget.err != nil)
	if err != nil {
		s.record(blocked(cachev1beta1.ReasonInvalidSpec, err, noRetry, 0))
		return
	}
	s.retiring = plan.retiring

	for _, svc := range plan.services {
		_, o := syncChild(ctx, c, mc, svc, &c.children.services)
		s.controlsService(*svc.Name, o)
		s.record(o)
	}
	// One budget that cannot be applied keeps every budget the spec no
	// longer asks for, the pools' whose zone was taken out included:
	// deleting none is what keeps every Pod under a budget.
	budgetsApplied := true
	keptBudgets := map[string]bool{}
	for _, pdb := range plan.budgets {
		keptBudgets[*pdb.Name] = true
		_, o := syncChild(ctx, c, mc, pdb, &c.children.pdbs)
		s.record(o)
		budgetsApplied = budgetsApplied && o.err == nil
	}

	for _, dep := range plan.retire {
		deleted, o := deleteChild(ctx, c, mc, &c.children.deployments, dep)
		s.record(o)
		if deleted {
			c.recorder.Eventf(mc, corev1.EventTypeNormal, "PoolDeleted", "Deleted Deployment %s: %s", dep.Name, whyRetired(s, poolZone(mc, dep)))
		}
	}
	s.record(deleteUnwanted(ctx, c, mc, &c.children.services, plan.keptServices))
	if budgetsApplied {
		s.record(deleteUnwanted(ctx, c, mc, &c.children.pdbs, keptBudgets))
	}
	s.record(blockedBudget)
}

// adoptOrphanedPool adopts the Deployment and budget of a pool without
// zones that an earlier Memcached of this name left behind
// (deletionPolicy Orphan), for a Memcached with zones: adopted, they are
// the previous pool of a move to zone pools, which serves until the zone
// pools are available and is then retired, and its budget is the only
// one over every Pod until then. Left alone, the orphaned budget would
// select every Pod of this Memcached beside the zone budgets, and the
// eviction API refuses to evict a Pod that two budgets select. Adoption
// only sets the controller reference, conditional on the resourceVersion
// the cache shows, after an uncached check that this Memcached is the one
// the cache shows (recheckOwner); the informer's event for it syncs the
// Memcached again, so a sync that adopts, or tries to, stops there: it
// reports true.
func (c *Controller) adoptOrphanedPool(ctx context.Context, s *memcachedSync) (bool, outcome) {
	mc := s.mc
	name := resources.ChildName(mc)
	var orphans []metav1.Object
	if dep, _, err := c.deploymentLister.Get(mc.Namespace, name); err == nil && classify(mc, dep) == orphan && dep.DeletionTimestamp == nil {
		orphans = append(orphans, dep)
	}
	if pdb, _, err := c.pdbLister.Get(mc.Namespace, name); err == nil && classify(mc, pdb) == orphan && pdb.DeletionTimestamp == nil {
		orphans = append(orphans, pdb)
	}
	if len(orphans) == 0 {
		return false, done
	}
	if err := c.recheckOwner(ctx, mc); err != nil {
		return true, failed("Deployment", err)
	}
	for _, obj := range orphans {
		var err error
		var kind string
		switch o := obj.(type) {
		case *appsv1.Deployment:
			kind = "Deployment"
			if err = adoptForRetirement(ctx, mc, &c.children.deployments, o); err == nil {
				// It serves until the zone pools are available, and the
				// status says so from this sync on.
				s.retiring = append(s.retiring, o)
			}
		case *policyv1.PodDisruptionBudget:
			kind = "PodDisruptionBudget"
			err = adoptForRetirement(ctx, mc, &c.children.pdbs, o)
		}
		if err != nil {
			return true, failed(kind, err)
		}
		klog.FromContext(ctx).V(2).Info("Adopted orphaned pool child to retire it", "kind", kind, "name", obj.GetName())
		c.recorder.Eventf(mc, corev1.EventTypeNormal, "Adopted", "Adopted orphaned %s %s, the pool without zones an earlier Memcached of this name left, to retire it once the zone pools are available", kind, obj.GetName())
	}
	// The adoption's own events sync the Memcached again.
	return true, done
}

// adoptForRetirement makes this Memcached the controller of a cached
// orphan, with a merge patch conditional on its resourceVersion.
func adoptForRetirement[T metav1.Object, AC any](ctx context.Context, mc *cachev1beta1.Memcached, ch *child[T, AC], obj T) error {
	refs := append(slices.Clone(obj.GetOwnerReferences()), resources.ControllerRef(mc))
	body, err := json.Marshal(map[string]any{
		"metadata": map[string]any{
			"resourceVersion": obj.GetResourceVersion(),
			"ownerReferences": refs,
		},
	})
	if err != nil {
		return fmt.Errorf("encoding %s adoption patch: %w", ch.kind, err)
	}
	if _, err := ch.client(mc.Namespace).Patch(ctx, obj.GetName(), types.MergePatchType, body, metav1.PatchOptions{FieldManager: fieldManager}); err != nil {
		return fmt.Errorf("adopting %s %s/%s: %w", ch.kind, mc.Namespace, obj.GetName(), err)
	}
	return nil
}

// budgetsBlocked reports a zone pool's budget name that an object the
// operator may not take over holds, when a Memcached moving to zone pools
// is about to retire its pool without zones. That pool then keeps serving,
// under its own budget alone: retiring it would leave its budget, which
// selects every Pod, over the zone budgets that could be applied, and the
// eviction API refuses to evict a Pod that two budgets select, for as long
// as the object stays. A name the cache does not show as this Memcached's
// is read from the apiserver, since the cache holds only objects with the
// operator's labels; that read happens once per move, and once per recheck
// while an object is in the way.
func (c *Controller) budgetsBlocked(ctx context.Context, mc *cachev1beta1.Memcached, desired []resources.Pool) outcome {
	for _, p := range desired {
		name := resources.PoolName(mc, p.Zone)
		pdb, _, err := c.pdbLister.Get(mc.Namespace, name)
		if err == nil && classify(mc, pdb) == owned {
			continue
		}
		live, err := c.kubeClient.PolicyV1().PodDisruptionBudgets(mc.Namespace).Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			return failed("PodDisruptionBudget", wrapGet("PodDisruptionBudget", mc.Namespace, name, err))
		}
		switch classify(mc, live) {
		case foreign:
			return foreignChild("PodDisruptionBudget", live)
		case predecessor:
			return waitForPredecessor("PodDisruptionBudget", live)
		}
	}
	return done
}

// whyRetired says, for an Event, why the pool in zone was deleted.
func whyRetired(s *memcachedSync, zone string) string {
	switch {
	case *s.defaulted.Spec.Replicas == 0:
		return "the spec no longer asks for it, and the Memcached is scaled to zero"
	case zone == "":
		return "the Memcached moved to zone pools, and they are available"
	case s.desired.Pools[0].Zone == "":
		return "the Memcached moved to one pool without zones, and it is available"
	default:
		return "zone " + zone + " is no longer in spec.zones"
	}
}

// ownedPools returns the Deployments this Memcached controls that are not
// among desired, not being deleted and not deleted by an earlier sync:
// pools the spec no longer asks for.
func (c *Controller) ownedPools(mc *cachev1beta1.Memcached, desired []resources.Pool) ([]*appsv1.Deployment, error) {
	deps, err := c.deploymentLister.Owned(mc.Namespace, mc.Name)
	if err != nil {
		return nil, fmt.Errorf("listing the Memcached's Deployments from cache: %w", err)
	}
	var out []*appsv1.Deployment
	for _, dep := range deps {
		if classify(mc, dep) != owned || dep.DeletionTimestamp != nil || isDesiredPool(mc, dep, desired) || c.memo.writes.gone(mc.UID, dep) {
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
// serving. Every such pool goes once every pool the spec asks for is
// available, and any of them at once if the Memcached is scaled to zero.
// Until then the previous pool of a move between one pool and zone pools
// stays, and so does every other one while no pool the spec asks for is
// available: a zone taken out of spec.zones goes at once only if the cache
// goes on serving from the others.
func keepServing(s *memcachedSync, dep *appsv1.Deployment) bool {
	want := *s.defaulted.Spec.Replicas
	if want == 0 {
		return false
	}
	allAvailable, anyAvailable := true, false
	for _, p := range s.pools {
		available := p.deployment != nil && deployutil.Available(p.deployment, want)
		allAvailable = allAvailable && available
		anyAvailable = anyAvailable || available
	}
	if allAvailable {
		return false
	}
	wantZones := s.desired.Pools[0].Zone != ""
	moving := (poolZone(s.mc, dep) != "") != wantZones
	return moving || !anyAvailable
}

// deleteUnwanted deletes the children of one kind this Memcached controls
// whose names are not in keep. The Service named after the Memcached,
// which selects every Pod, is always kept.
func deleteUnwanted[T metav1.Object, AC any](ctx context.Context, c *Controller, mc *cachev1beta1.Memcached, ch *child[T, AC], keep map[string]bool) outcome {
	objs, err := ch.owned(mc.Namespace, mc.Name)
	if err != nil {
		return transient(fmt.Errorf("listing the Memcached's %ss from cache: %w", ch.kind, err))
	}
	o := done
	for _, obj := range objs {
		if keep[obj.GetName()] || (ch.kind == "Service" && obj.GetName() == resources.ChildName(mc)) {
			continue
		}
		if classify(mc, obj) != owned || obj.GetDeletionTimestamp() != nil || c.memo.writes.gone(mc.UID, obj) {
			continue
		}
		_, d := deleteChild(ctx, c, mc, ch, obj)
		o = o.join(d)
	}
	return o
}

// deleteChild deletes a child this Memcached controls, as the cache shows
// it, and reports whether this request deleted it. The request carries
// its UID and resourceVersion as preconditions, so a child of the same
// name created since, or one someone changed since (taken over by removing
// the ownerReference, say), is refused with a Conflict and looked at again
// once the cache has caught up. The Deployment's ReplicaSets and Pods go
// with it, in the background. The memo records the DELETE
// (pendingWrites), so that the syncs before the cache sees it go send no
// second one.
func deleteChild[T metav1.Object, AC any](ctx context.Context, c *Controller, mc *cachev1beta1.Memcached, ch *child[T, AC], obj T) (bool, outcome) {
	uid, rv := obj.GetUID(), obj.GetResourceVersion()
	err := ch.client(mc.Namespace).Delete(ctx, obj.GetName(), metav1.DeleteOptions{
		Preconditions:     &metav1.Preconditions{UID: &uid, ResourceVersion: &rv},
		PropagationPolicy: ptr.To(metav1.DeletePropagationBackground),
	})
	switch {
	case apierrors.IsNotFound(err):
		// Deleted by someone else since the cache saw it.
		return false, done
	case err != nil:
		return false, failed(ch.kind, fmt.Errorf("deleting %s %s/%s: %w", ch.kind, mc.Namespace, obj.GetName(), err))
	}
	c.memo.writes.deleted(mc.UID, obj)
	klog.FromContext(ctx).V(2).Info("Deleted child the spec no longer asks for", "kind", ch.kind, "name", obj.GetName())
	return true, done
}
