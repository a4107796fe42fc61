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
	// stuckClaims says which extstore claims have been Pending too long,
	// "" if none (Controller.stuckClaims).
	stuckClaims string
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
	// Whatever the spec, the pools' rollouts are paused exactly while
	// spec.paused is set.
	c.syncRolloutPause(ctx, s)
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
// and records what it saw and how each child ended. A sync that applies no
// Deployment (prepareChildren) records the pools as the cache shows them
// and holds their rollouts (holdRollouts).
func (c *Controller) syncChildren(ctx context.Context, s *memcachedSync) {
	if held, why := c.prepareChildren(ctx, s); held {
		s.pools, s.retiring = c.cachedPools(s.mc, s.defaulted)
		s.record(c.holdRollouts(s.mc, s.pools))
		s.record(why)
	} else {
		c.syncDeployments(ctx, s)
	}
	if s.desired.Service == nil {
		// Invalid or paused: nothing else is applied.
		return
	}
	_, o := syncChild(ctx, c, s.mc, s.desired.Service, &c.children.services)
	s.controlsService(resources.ChildName(s.mc), o)
	s.record(o)
	c.syncPools(ctx, s)
}

// prepareChildren validates and builds the children, and applies the
// NetworkPolicy, which comes before the Deployments; it reports whether
// the Deployments are held, and why: the spec is invalid or paused, or
// the Pods would not start or serve as asked (a Secret or the client CA
// missing, the NetworkPolicy not in place). Pods already running keep
// serving as they are. syncChildren records the reason after the pools'
// halt, if one: of two reasons of the same weight the status shows the
// halt, which holds back every other cache (outcome.join).
func (c *Controller) prepareChildren(ctx context.Context, s *memcachedSync) (held bool, why outcome) {
	mc := s.mc
	if errs := resources.Validate(s.defaulted); len(errs) > 0 {
		return true, blocked(cachev1beta1.ReasonInvalidSpec, errs.ToAggregate(), noRetry, 0)
	}
	if mc.Spec.Paused {
		return true, done
	}
	desired, err := resources.Build(s.defaulted)
	if err != nil {
		return true, blocked(cachev1beta1.ReasonInvalidSpec, err, noRetry, 0)
	}
	s.desired = desired

	// With spec.networkPolicy set the Pods never serve without their
	// policy: the Deployments wait, as they wait for a Secret, while it is
	// not in place as rendered (an object in the way of its name, a quota,
	// an admission rule).
	policy := c.syncNetworkPolicy(ctx, mc, s.desired.NetworkPolicy)
	// A policy that a newer operator applied is in place, only not this
	// operator's to change.
	policyMissing := s.desired.NetworkPolicy != nil && (policy.shown() || policy.err != nil) && policy.reason != cachev1beta1.ReasonRenderedByNewerOperator
	if policyMissing && policy.shown() {
		policy.message += "; the Deployment is held until the NetworkPolicy of spec.networkPolicy is in place"
	}
	s.record(policy)
	secrets := c.tlsSecretOutcome(mc).join(c.clientCAOutcome(mc)).join(c.authSecretOutcome(mc))
	if secrets.shown() || policyMissing {
		return true, secrets
	}
	return false, done
}

// syncDeployments applies the Deployment of each pool, and keeps in line
// for a rollout slot only the pools the spec asks for.
func (c *Controller) syncDeployments(ctx context.Context, s *memcachedSync) {
	keys := make([]cache.ObjectName, 0, len(s.desired.Pools))
	for i := range s.desired.Pools {
		p := &s.desired.Pools[i]
		state, o := c.syncDeployment(ctx, s.mc, p)
		s.pools = append(s.pools, state)
		s.record(o)
		keys = append(keys, cache.ObjectName{Namespace: s.mc.Namespace, Name: resources.PoolName(s.mc, p.Zone)})
	}
	c.rollouts.RetainOwner(cache.MetaObjectToName(s.mc), keys)
}

// syncDeployment applies the Deployment of one pool, unless it is an
// operator-caused rollout that has to wait (paceDeployment), and returns
// the pool as it left it.
func (c *Controller) syncDeployment(ctx context.Context, mc *cachev1beta1.Memcached, p *resources.Pool) (poolState, outcome) {
	state := poolState{zone: p.Zone}
	paced, o := c.paceDeployment(ctx, mc, p)
	if o.shown() {
		// The new template waits; the rest of the Deployment does not.
		if dep := c.ownedDeployment(mc, p.Zone); dep != nil {
			held, heldOutcome := c.syncHeldDeployment(ctx, mc, p.Deployment, dep)
			state.deployment, state.live = held.obj, held.live
			o = o.join(heldOutcome)
		}
		return state, o
	}
	dep, o := syncChild(ctx, c, mc, p.Deployment, &c.children.deployments)
	state.deployment, state.live = dep.obj, dep.live
	if paced {
		c.startedRollout(mc, cache.ObjectName{Namespace: mc.Namespace, Name: resources.PoolName(mc, p.Zone)}, dep, o)
	}
	return state, o.join(c.haltedRollout(mc, state.deployment))
}

// cachedPools returns the pools the spec asks for with their Deployments
// as the cache shows them, and every other Deployment the Memcached
// controls as still serving, for a sync that applies none of them.
func (c *Controller) cachedPools(mc *cachev1beta1.Memcached, d resources.Defaulted) ([]poolState, []*appsv1.Deployment) {
	var pools []poolState
	var desired []resources.Pool
	for _, zone := range resources.Zones(d) {
		pools = append(pools, poolState{zone: zone, deployment: c.ownedDeployment(mc, zone)})
		desired = append(desired, resources.Pool{Zone: zone})
	}
	// Only a read of the cache can fail, and then none is reported.
	retiring, _ := c.ownedPools(mc, desired)
	return pools, retiring
}

// holdRollouts takes the pools of a sync that applies no Deployment out of
// line for a rollout slot: such a Memcached does not wait for one. A slot
// a pool holds is handed over, and a halt reported, as on a sync that
// applies the pools (handOverRollout, haltedRollout).
func (c *Controller) holdRollouts(mc *cachev1beta1.Memcached, pools []poolState) outcome {
	// The hash of a decoded spec cannot fail to encode; if it did, no
	// rollout would be taken over, which is the safe side.
	inputs, err := resources.TemplateInputs(mc)
	o := done
	for _, p := range pools {
		if err == nil {
			c.handOverRollout(mc, cache.ObjectName{Namespace: mc.Namespace, Name: resources.PoolName(mc, p.zone)}, p.deployment, inputs)
		}
		o = o.join(c.haltedRollout(mc, p.deployment))
	}
	c.rollouts.WithdrawOwner(cache.MetaObjectToName(mc))
	return o
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
