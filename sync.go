package main

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
	"github.com/kubelite/memcached-operator/pkg/resources"
)

// memcachedSync is one sync of one Memcached: what it read, what it built
// and how it ended. syncHandler makes one per key and each step reads and
// fills it in; nothing in it outlives the sync.
type memcachedSync struct {
	// mc is the Memcached as the cache, or the answer to the sync's
	// finalizer patch, has it.
	mc *cachev1beta1.Memcached
	// defaulted is mc with its spec defaulted once, for the validation,
	// the builders and the status alike.
	defaulted resources.Defaulted
	// desired are the children the spec asks for, built once; zero unless
	// the spec is valid and not paused. A sync that waits for a Secret
	// builds them and holds the Deployments alone.
	desired resources.Children
	// pools are the pools the spec asks for, in the order of
	// resources.Zones, each with its Deployment as the sync last saw it.
	pools []poolState
	// retiring are the Deployments this Memcached controls that the spec
	// no longer asks for and that still serve: those syncPools keeps
	// until the new pools are available (keepServing), or every such
	// Deployment of a sync that applies nothing.
	retiring []*appsv1.Deployment
	// services are the names of the Services this Memcached controls, as
	// this sync applied them or the cache shows them (noteServices): the
	// status names the endpoint of no other, since a Service of the same
	// name that someone else controls, another Memcached's zone pool say,
	// serves another cache.
	services map[string]bool
	// outcome is what the sync has ended in so far; see record.
	outcome outcome
}

// controlsService records that this sync applied the Service name, which
// its Memcached therefore controls, when o, the outcome of its apply,
// says it did.
func (s *memcachedSync) controlsService(name string, o outcome) {
	if o.shown() || o.err != nil {
		return
	}
	if s.services == nil {
		s.services = map[string]bool{}
	}
	s.services[name] = true
}

// poolState is one pool as the sync found or left it.
type poolState struct {
	// zone is the pool's zone, "" for a Memcached without zones.
	zone string
	// deployment is the Deployment of the pool this Memcached controls as
	// the sync last saw it, or nil if there is none: the apiserver's
	// answer to a write or read of this sync when live is set, else the
	// cached one. A live Deployment may be newer than what the Deployment
	// controller has acted on (syncStatus).
	deployment *appsv1.Deployment
	live       bool
}

// record adds the outcome of one step to the sync's.
func (s *memcachedSync) record(o outcome) { s.outcome = s.outcome.join(o) }

// syncHandler converges one Memcached: it makes sure the Memcached carries
// the operator's finalizer before any child exists (syncFinalizer),
// applies whatever part of the children differs from the spec, and writes
// the status if it changed. A sync that finds nothing to change sends no
// write request. It is never called concurrently for the same key. What it
// returns decides what happens to the key (handleErr).
func (c *Controller) syncHandler(ctx context.Context, key cache.ObjectName) outcome {
	logger := klog.FromContext(ctx)

	mc, err := c.memcachedLister.Get(key.Namespace, key.Name)
	if apierrors.IsNotFound(err) {
		logger.V(2).Info("Memcached does not exist")
		return done
	}
	if err != nil {
		return transient(fmt.Errorf("getting Memcached from cache: %w", err))
	}

	if mc.DeletionTimestamp != nil {
		// A Memcached on its way out takes no new template; its place in
		// line would hold back the ones after it.
		c.rollouts.WithdrawOwner(key)
		return c.finalize(ctx, mc)
	}

	mc, err = c.syncFinalizer(ctx, mc)
	if apierrors.IsNotFound(err) {
		logger.V(2).Info("Memcached was deleted while being synced")
		return done
	}
	if err != nil {
		return transient(err)
	}

	s := &memcachedSync{mc: mc, defaulted: resources.Default(mc)}
	c.syncChildren(ctx, s)
	if s.outcome.err != nil && !s.outcome.shown() {
		// A race with the cache, or a namespace going away: the sync
		// does not know the children's state, so the status is left as
		// it was.
		return s.outcome
	}
	s.record(c.syncStatus(ctx, s))
	return s.outcome
}

// syncChildren applies the children unless the spec is invalid or paused,
// and records what it saw and how each child ended. Last, whatever the
// spec, it pauses or resumes the pools' rollouts with spec.paused.
func (c *Controller) syncChildren(ctx context.Context, s *memcachedSync) {
	defer c.syncRolloutPause(ctx, s)
	mc := s.mc
	if errs := resources.Validate(s.defaulted); len(errs) > 0 {
		s.holdPools(c)
		s.record(blocked(cachev1beta1.ReasonInvalidSpec, errs.ToAggregate(), noRetry, 0))
		return
	}
	if mc.Spec.Paused {
		s.holdPools(c)
		return
	}
	var err error
	if s.desired, err = resources.Build(s.defaulted); err != nil {
		s.holdPools(c)
		s.record(blocked(cachev1beta1.ReasonInvalidSpec, err, noRetry, 0))
		return
	}

	// With spec.networkPolicy set the Pods never serve without their
	// policy: it is applied before the Deployments, which wait, as they
	// wait for a Secret, while it is not in place as rendered (an object
	// in the way of its name, a quota, an admission rule). Pods already
	// running keep serving as they are.
	policy := c.syncNetworkPolicy(ctx, mc, s.desired.NetworkPolicy)
	// A policy that a newer operator applied is in place, only not this
	// operator's to change.
	policyMissing := s.desired.NetworkPolicy != nil && (policy.shown() || policy.err != nil) && policy.reason != cachev1beta1.ReasonRenderedByNewerOperator
	if policyMissing && policy.shown() {
		policy.message += "; the Deployment is held until the NetworkPolicy of spec.networkPolicy is in place"
	}
	s.record(policy)
	if o := c.tlsSecretOutcome(mc).join(c.clientCAOutcome(mc)).join(c.authSecretOutcome(mc)); o.shown() || policyMissing {
		s.holdPools(c)
		s.record(o)
	} else {
		keys := make([]cache.ObjectName, 0, len(s.desired.Pools))
		for i := range s.desired.Pools {
			c.syncDeployment(ctx, s, &s.desired.Pools[i])
			keys = append(keys, cache.ObjectName{Namespace: mc.Namespace, Name: resources.PoolName(mc, s.desired.Pools[i].Zone)})
		}
		// A pool the spec no longer asks for takes no new template.
		c.rollouts.RetainOwner(cache.MetaObjectToName(mc), keys)
	}
	_, o := syncChild(ctx, c, mc, s.desired.Service, &c.children.services)
	s.controlsService(resources.ChildName(mc), o)
	s.record(o)
	c.syncPools(ctx, s)
}

// syncDeployment applies the Deployment of one pool, unless it is an
// operator-caused rollout that has to wait (paceDeployment).
func (c *Controller) syncDeployment(ctx context.Context, s *memcachedSync, p *resources.Pool) {
	state := poolState{zone: p.Zone}
	defer func() { s.pools = append(s.pools, state) }()
	paced, o := c.paceDeployment(ctx, s.mc, p)
	if o.shown() {
		// The new template waits; the rest of the Deployment does not.
		s.record(o)
		if dep := c.ownedDeployment(s.mc, p.Zone); dep != nil {
			held, o := c.syncHeldDeployment(ctx, s.mc, p.Deployment, dep)
			state.deployment, state.live = held.obj, held.live
			s.record(o)
		}
		return
	}
	dep, o := syncChild(ctx, c, s.mc, p.Deployment, &c.children.deployments)
	state.deployment, state.live = dep.obj, dep.live
	s.record(o)
	if paced {
		c.startedRollout(s.mc, cache.ObjectName{Namespace: s.mc.Namespace, Name: resources.PoolName(s.mc, p.Zone)}, dep, o)
	}
	s.record(c.haltedRollout(s.mc, state.deployment))
}

// holdPools records the pools' Deployments as they are, and every other
// Deployment the Memcached controls as still serving, for a sync that
// applies none of them; such a Memcached does not wait for a rollout slot
// either. A rollout slot a pool holds is handed over, and a halt reported,
// as on a sync that applies the pools (handOverRollout, haltedRollout).
func (s *memcachedSync) holdPools(c *Controller) {
	s.pools = s.pools[:0]
	for _, zone := range resources.Zones(s.defaulted) {
		dep := c.ownedDeployment(s.mc, zone)
		s.pools = append(s.pools, poolState{zone: zone, deployment: dep})
		c.handOverRollout(s.mc, cache.ObjectName{Namespace: s.mc.Namespace, Name: resources.PoolName(s.mc, zone)}, dep)
		s.record(c.haltedRollout(s.mc, dep))
	}
	c.servingRetired(s)
	c.rollouts.WithdrawOwner(cache.MetaObjectToName(s.mc))
}

// ownedDeployment returns the cached Deployment of the pool in zone if this
// Memcached controls it, so that a paused or invalid Memcached still
// reports replica counts.
func (c *Controller) ownedDeployment(mc *cachev1beta1.Memcached, zone string) *appsv1.Deployment {
	d, _, err := c.deploymentLister.Get(mc.Namespace, resources.PoolName(mc, zone))
	if err != nil || classify(mc, d) != owned {
		return nil
	}
	return d
}
