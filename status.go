package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
	"github.com/kubelite/memcached-operator/pkg/deployutil"
	"github.com/kubelite/memcached-operator/pkg/resources"
)

// syncStatus writes the status computed from the sync, if it differs
// from the stored one, and emits a Warning Event when Degraded turns True or
// changes its reason. An unchanged status costs no request and no Event.
//
// A status write makes the cached Memcached stale until the informer
// delivers the write. A sync in between (a child's event, say) would
// compute from that stale copy and send an update bound to fail with a
// Conflict; instead it is skipped, since the informer's event for our own
// write syncs the object again.
//
// A Deployment the sync has just created or changed reports the previous
// generation's replica counts until the Deployment controller takes it up
// and the new ReplicaSet has a Pod, well within a second on a control
// plane that keeps up; a status written before that would be followed by
// another right after. So once a sync has the Deployment live (it wrote
// it, or read it from the apiserver), status writes wait while it catches
// up, for at most
// deploymentControllerWait per Deployment generation: the Deployment's
// status updates sync the Memcached again, and the outcome syncs it again
// when the wait ends in case they never come. That includes the write
// that pauses or resumes the Deployment's rollout (syncRolloutPause). A
// Deployment the operator did not change (that of a paused Memcached once
// its rollout is paused, or one changed by someone else) is reported at
// once.
func (c *Controller) syncStatus(ctx context.Context, s *memcachedSync) outcome {
	mc := s.mc
	c.noteServices(s)
	now := c.clock.Now()
	// A claim still within its grace is looked at again once it is over.
	var recheck time.Duration
	s.stuckClaims, recheck = c.stuckClaims(s, now)
	finished := done
	if recheck > 0 {
		finished = waitFor(recheck)
	}
	status := computeStatus(s, metav1.NewTime(now))
	if statusEqual(&mc.Status, &status) {
		return finished
	}
	if c.memo.writes.stale(mc.UID, mc) {
		klog.FromContext(ctx).V(4).Info("Cache has not caught up with our last status write; waiting for it")
		return done
	}
	if dep, generations, live := s.catchingUp(); dep != nil && !s.outcome.shown() {
		if wait := c.memo.deploymentWaits.remaining(mc.UID, generations, live, deploymentControllerWait); wait > 0 {
			klog.FromContext(ctx).V(4).Info("Waiting for the Deployment controller before writing status", "deployment", klog.KObj(dep), "generation", dep.Generation, "wait", wait)
			return waitFor(wait)
		}
	}
	updated := mc.DeepCopy()
	updated.Status = status
	answer, err := c.memcachedClient.CacheV1beta1().Memcacheds(mc.Namespace).UpdateStatus(ctx, updated, metav1.UpdateOptions{FieldManager: fieldManager})
	if err != nil {
		return transient(fmt.Errorf("updating status: %w", err))
	}
	c.memo.writes.wrote(mc.UID, mc, answer)
	klog.FromContext(ctx).V(4).Info("Updated status", "observedGeneration", status.ObservedGeneration)
	if mc.Status.ObservedGeneration < status.ObservedGeneration {
		if d, ok := c.memo.generations.observed(mc.UID, status.ObservedGeneration); ok {
			c.metrics.ObserveSpecToObserved(d)
		}
	}

	// A Warning Event when Degraded turns True or changes its reason, and
	// when ImageVulnerable turns True or names other holes.
	before := meta.FindStatusCondition(mc.Status.Conditions, cachev1beta1.ConditionDegraded)
	after := meta.FindStatusCondition(status.Conditions, cachev1beta1.ConditionDegraded)
	if after != nil && after.Status == metav1.ConditionTrue &&
		(before == nil || before.Status != metav1.ConditionTrue || before.Reason != after.Reason) {
		c.recorder.Event(mc, corev1.EventTypeWarning, after.Reason, after.Message)
	}
	before = meta.FindStatusCondition(mc.Status.Conditions, cachev1beta1.ConditionImageVulnerable)
	after = meta.FindStatusCondition(status.Conditions, cachev1beta1.ConditionImageVulnerable)
	if after != nil && after.Status == metav1.ConditionTrue &&
		(before == nil || before.Status != metav1.ConditionTrue || before.Message != after.Message) {
		c.recorder.Event(mc, corev1.EventTypeWarning, after.Reason, after.Message)
	}
	return finished
}

// noteServices adds to the sync's Services those of the Memcached's and its
// pools' names that the cache shows it controlling, for a sync that did
// not apply them (an invalid or paused spec, say).
func (c *Controller) noteServices(s *memcachedSync) {
	names := []string{resources.ChildName(s.mc)}
	if len(s.defaulted.Spec.Zones) > 0 {
		for _, p := range s.pools {
			names = append(names, resources.PoolName(s.mc, p.zone))
		}
	}
	for _, name := range names {
		if s.services[name] {
			continue
		}
		if svc, _, err := c.serviceLister.Get(s.mc.Namespace, name); err == nil && classify(s.mc, svc) == owned {
			s.controlsService(name, done)
		}
	}
}

// deploymentControllerWait bounds how long a status write waits for a
// Deployment the sync created or changed to catch up: long enough for
// controllers that keep up, short enough that a Memcached's
// observedGeneration is at most a second later than without the wait
// when they are slow or absent.
const deploymentControllerWait = time.Second

// catchingUp returns a pool Deployment whose controllers have not yet
// acted on its spec (deploymentCatchingUp), if any, with the sum of the
// generations of all such Deployments, which changes whenever one of them
// does and so keys the wait for them, and whether any of them is live.
func (s *memcachedSync) catchingUp() (first *appsv1.Deployment, generations int64, live bool) {
	for _, p := range s.pools {
		if p.deployment == nil || !deploymentCatchingUp(p.deployment) {
			continue
		}
		if first == nil {
			first = p.deployment
		}
		generations += p.deployment.Generation
		live = live || p.live
	}
	return first, generations, live
}

// deploymentCatchingUp reports a Deployment whose controllers have not yet
// acted on its current spec: the Deployment controller has not observed
// its generation, or no Pod of its current template exists yet.
func deploymentCatchingUp(dep *appsv1.Deployment) bool {
	return dep.Status.ObservedGeneration < dep.Generation ||
		(ptr.Deref(dep.Spec.Replicas, 1) > 0 && dep.Status.UpdatedReplicas == 0)
}

// computeStatus derives the whole status from the sync: the Memcached, the
// pools' Deployments it saw and its outcome so far. It is a pure function:
// conditions keep their lastTransitionTime unless their status flips, in
// which case they take now.
//
// Without zones the counts are those of the one pool. With zones each zone
// has its entry in status.zones, and the counts are per zone, the lowest
// among the zones, so that the scale subresource, whose spec.replicas
// counts per zone, reads a matching status.replicas.
func computeStatus(s *memcachedSync, now metav1.Time) cachev1beta1.MemcachedStatus {
	mc, o := s.mc, s.outcome
	status := mc.Status
	status.Conditions = slices.Clone(mc.Status.Conditions)
	status.ObservedGeneration = mc.Generation
	status.Selector = resources.Selector(mc)
	// An endpoint is named only once the Memcached controls its Service:
	// one of the same name that it does not control serves another cache.
	status.Endpoint = ""
	if s.services[resources.ChildName(mc)] {
		status.Endpoint = resources.Endpoint(s.defaulted)
	}
	zoned := len(s.defaulted.Spec.Zones) > 0

	status.Zones = nil
	for i, p := range s.pools {
		var r cachev1beta1.ZoneStatus
		if p.deployment != nil {
			r = cachev1beta1.ZoneStatus{
				Replicas:          p.deployment.Status.Replicas,
				ReadyReplicas:     p.deployment.Status.ReadyReplicas,
				AvailableReplicas: p.deployment.Status.AvailableReplicas,
				UpdatedReplicas:   p.deployment.Status.UpdatedReplicas,
			}
		}
		if zoned {
			r.Name = p.zone
			if s.services[resources.PoolName(mc, p.zone)] {
				r.Endpoint = resources.ZoneEndpoint(s.defaulted, p.zone)
			}
			status.Zones = append(status.Zones, r)
		}
		if i == 0 {
			status.Replicas, status.ReadyReplicas, status.AvailableReplicas, status.UpdatedReplicas = r.Replicas, r.ReadyReplicas, r.AvailableReplicas, r.UpdatedReplicas
			continue
		}
		status.Replicas = min(status.Replicas, r.Replicas)
		status.ReadyReplicas = min(status.ReadyReplicas, r.ReadyReplicas)
		status.AvailableReplicas = min(status.AvailableReplicas, r.AvailableReplicas)
		status.UpdatedReplicas = min(status.UpdatedReplicas, r.UpdatedReplicas)
	}

	set := func(condType string, s metav1.ConditionStatus, reason, message string) {
		meta.SetStatusCondition(&status.Conditions, metav1.Condition{
			Type:               condType,
			Status:             s,
			Reason:             reason,
			Message:            message,
			ObservedGeneration: mc.Generation,
			LastTransitionTime: now,
		})
	}

	want := *s.defaulted.Spec.Replicas
	var missing, unavailable, stuck, failing, pausedByOthers, rolling []poolState
	for _, p := range s.pools {
		switch dep := p.deployment; {
		case dep == nil:
			missing = append(missing, p)
		case !deployutil.Available(dep, want):
			unavailable = append(unavailable, p)
		}
		if dep := p.deployment; dep != nil {
			if deployutil.ProgressDeadlineExceeded(dep) {
				stuck = append(stuck, p)
			}
			if deployutil.ReplicaFailure(dep) != nil {
				failing = append(failing, p)
			}
			if dep.Spec.Paused {
				pausedByOthers = append(pausedByOthers, p)
			}
			if !deployutil.Complete(dep, want) {
				rolling = append(rolling, p)
			}
		}
	}
	// A pool the spec no longer asks for, kept while the new ones start,
	// serves the cache if it is available.
	previousServes := false
	for _, dep := range s.retiring {
		previousServes = previousServes || deployutil.Available(dep, ptr.Deref(dep.Spec.Replicas, 1))
	}

	switch {
	case len(missing) == len(s.pools) && !previousServes:
		set(cachev1beta1.ConditionAvailable, metav1.ConditionFalse, cachev1beta1.ReasonDeploymentMissing, deploymentsMissing(missing, zoned))
	case want == 0:
		set(cachev1beta1.ConditionAvailable, metav1.ConditionFalse, cachev1beta1.ReasonScaledToZero, "The Memcached is scaled to zero replicas")
	case len(missing) == 0 && len(unavailable) == 0:
		set(cachev1beta1.ConditionAvailable, metav1.ConditionTrue, cachev1beta1.ReasonMinimumReplicasAvailable, availability(s.pools, want, zoned))
	case previousServes:
		set(cachev1beta1.ConditionAvailable, metav1.ConditionTrue, cachev1beta1.ReasonMinimumReplicasAvailable,
			"A pool the spec no longer asks for serves: "+availability(s.pools, want, zoned))
	default:
		set(cachev1beta1.ConditionAvailable, metav1.ConditionFalse, cachev1beta1.ReasonMinimumReplicasUnavailable, availability(append(missing, unavailable...), want, zoned))
	}

	switch {
	case o.shown():
		set(cachev1beta1.ConditionProgressing, metav1.ConditionFalse, o.reason, "Blocked: "+o.message)
	case mc.Spec.Paused:
		set(cachev1beta1.ConditionProgressing, metav1.ConditionFalse, cachev1beta1.ReasonPaused, "Changes to the children and the Deployment's rollout are paused")
	case len(stuck) > 0:
		set(cachev1beta1.ConditionProgressing, metav1.ConditionFalse, cachev1beta1.ReasonProgressDeadlineExceeded, "The Deployment"+ofZones(stuck, zoned)+" exceeded its progress deadline")
	case len(missing) > 0:
		set(cachev1beta1.ConditionProgressing, metav1.ConditionTrue, cachev1beta1.ReasonRollingOut, "Creating the Deployment"+ofZones(missing, zoned))
	case len(pausedByOthers) > 0:
		// Not by the operator: the sync resumes a rollout it paused
		// once the Memcached is not paused (syncRolloutPause).
		set(cachev1beta1.ConditionProgressing, metav1.ConditionFalse, cachev1beta1.ReasonDeploymentPaused,
			"Someone other than the operator paused "+deploymentsRollout(pausedByOthers, zoned)+" (its spec.paused); the Pods take the current spec once it is resumed, for instance with kubectl rollout resume")
	case len(s.retiring) > 0:
		set(cachev1beta1.ConditionProgressing, metav1.ConditionTrue, cachev1beta1.ReasonRollingOut,
			replacing(s, zoned)+" until the pools of the spec are available: "+availability(s.pools, want, zoned))
	case len(rolling) == 0:
		set(cachev1beta1.ConditionProgressing, metav1.ConditionFalse, cachev1beta1.ReasonComplete, "All "+itoa(want)+" replicas"+perZone(zoned)+" run the current spec")
	default:
		set(cachev1beta1.ConditionProgressing, metav1.ConditionTrue, cachev1beta1.ReasonRollingOut, rollingMessage(rolling, want, zoned))
	}

	switch {
	case o.degrades():
		set(cachev1beta1.ConditionDegraded, metav1.ConditionTrue, o.reason, o.message)
	case o.shown():
		set(cachev1beta1.ConditionDegraded, metav1.ConditionFalse, o.reason, o.message)
	case len(failing) > 0:
		reason, message := podsNotCreated(failing, zoned)
		set(cachev1beta1.ConditionDegraded, metav1.ConditionTrue, reason, message)
	case s.stuckClaims != "":
		set(cachev1beta1.ConditionDegraded, metav1.ConditionTrue, cachev1beta1.ReasonExtstoreClaimPending, s.stuckClaims)
	case len(stuck) > 0:
		set(cachev1beta1.ConditionDegraded, metav1.ConditionTrue, cachev1beta1.ReasonProgressDeadlineExceeded, "The Deployment"+ofZones(stuck, zoned)+" exceeded its progress deadline; check its Pods")
	default:
		set(cachev1beta1.ConditionDegraded, metav1.ConditionFalse, cachev1beta1.ReasonAsExpected, "The children match the spec")
	}

	imageStatus, imageReason, imageMessage := resources.ImageAdvisory(s.defaulted)
	set(cachev1beta1.ConditionImageVulnerable, imageStatus, imageReason, imageMessage)
	return status
}

// podsNotCreated says why the Deployments of pools cannot create Pods, in
// the words of their ReplicaFailure condition: QuotaExceeded for a
// ResourceQuota, such as a namespace at its pod quota, where the surge Pod
// of every rollout (maxSurge 1, maxUnavailable 0) is refused, so that no
// spec change can roll either; PodsNotCreated for any other refusal.
func podsNotCreated(failing []poolState, zoned bool) (string, string) {
	reason := cachev1beta1.ReasonPodsNotCreated
	parts := make([]string, 0, len(failing))
	for _, p := range failing {
		msg := deployutil.ReplicaFailure(p.deployment).Message
		if strings.Contains(msg, "exceeded quota") {
			reason = cachev1beta1.ReasonQuotaExceeded
		}
		if zoned {
			msg = "zone " + p.zone + ": " + msg
		}
		parts = append(parts, msg)
	}
	return reason, "The Deployment" + ofZones(failing, zoned) + " cannot create Pods, so it can neither replace nor add one: " + strings.Join(parts, "; ")
}

// deploymentsMissing says that no pool has its Deployment.
func deploymentsMissing(missing []poolState, zoned bool) string {
	if !zoned {
		return "The Deployment does not exist"
	}
	return "The Deployments" + ofZones(missing, zoned) + " do not exist"
}

// availability says how many replicas of each pool are available. A zone
// pool with none is named as such: its Pods may be Pending because no
// node of the zone can run them, which the Memcached cannot see.
func availability(pools []poolState, want int32, zoned bool) string {
	if !zoned {
		var available int32
		if dep := pools[0].deployment; dep != nil {
			available = dep.Status.AvailableReplicas
		}
		return ofReplicas(available, want, "are available")
	}
	parts := make([]string, 0, len(pools))
	for _, p := range pools {
		switch dep := p.deployment; {
		case dep == nil:
			parts = append(parts, "zone "+p.zone+": its Deployment does not exist yet")
		case dep.Status.AvailableReplicas == 0 && want > 0:
			parts = append(parts, "zone "+p.zone+": no Pod is available (0 of "+itoa(want)+"); if its Pods are Pending, no schedulable node has the label "+corev1.LabelTopologyZone+"="+p.zone)
		default:
			parts = append(parts, "zone "+p.zone+": "+ofReplicas(dep.Status.AvailableReplicas, want, "are available"))
		}
	}
	return strings.Join(parts, "; ")
}

// rollingMessage says how far the pools that roll out are.
func rollingMessage(rolling []poolState, want int32, zoned bool) string {
	parts := make([]string, 0, len(rolling))
	for _, p := range rolling {
		m := ofReplicas(p.deployment.Status.UpdatedReplicas, want, "updated, "+itoa(p.deployment.Status.AvailableReplicas)+" available")
		if zoned {
			m = "zone " + p.zone + ": " + m
		}
		parts = append(parts, m)
	}
	return strings.Join(parts, "; ")
}

// ofZones names the zones of pools, for a message about their Deployments:
// " of zones a, b"; "" without zones.
func ofZones(pools []poolState, zoned bool) string {
	if !zoned {
		return ""
	}
	zones := make([]string, 0, len(pools))
	for _, p := range pools {
		zones = append(zones, p.zone)
	}
	if len(zones) == 1 {
		return " of zone " + zones[0]
	}
	return "s of zones " + strings.Join(zones, ", ")
}

// deploymentsRollout names the rollout of the pools' Deployments.
func deploymentsRollout(pools []poolState, zoned bool) string {
	if !zoned {
		return "the Deployment's rollout"
	}
	return "the rollout of the Deployment" + ofZones(pools, zoned)
}

func perZone(zoned bool) string {
	if zoned {
		return " of every zone"
	}
	return ""
}

// replacing names the pools a sync keeps while the new ones start: the
// previous pool of a move between one pool and zone pools, or the pools
// of zones taken out of spec.zones.
func replacing(s *memcachedSync, zoned bool) string {
	var zones []string
	for _, dep := range s.retiring {
		zone := poolZone(s.mc, dep)
		if zone == "" {
			return "Moving to zone pools; the pool without zones serves"
		}
		zones = append(zones, zone)
	}
	if !zoned {
		return "Moving to one pool without zones; the zone pools serve"
	}
	return "Changing zones; the pools of zones " + strings.Join(zones, ", ") + " serve"
}

// ofReplicas formats "N of M replicas <what>" without fmt, which this
// per-sync path would pay for in allocations.
func ofReplicas(n, of int32, what string) string {
	return itoa(n) + " of " + itoa(of) + " replicas " + what
}

func itoa(n int32) string { return strconv.FormatInt(int64(n), 10) }

// statusEqual compares two statuses field by field. It is what decides
// whether a sync writes, on every sync, so it avoids the allocations of a
// reflective deep equal. TestStatusEqualCoversEveryField fails when a
// status field is added without a comparison here.
func statusEqual(a, b *cachev1beta1.MemcachedStatus) bool {
	if a.ObservedGeneration != b.ObservedGeneration || a.Replicas != b.Replicas ||
		a.ReadyReplicas != b.ReadyReplicas || a.AvailableReplicas != b.AvailableReplicas ||
		a.UpdatedReplicas != b.UpdatedReplicas || a.Selector != b.Selector || a.Endpoint != b.Endpoint ||
		len(a.Conditions) != len(b.Conditions) || !slices.Equal(a.Zones, b.Zones) {
		return false
	}
	for i := range a.Conditions {
		x, y := &a.Conditions[i], &b.Conditions[i]
		if x.Type != y.Type || x.Status != y.Status || x.Reason != y.Reason || x.Message != y.Message ||
			x.ObservedGeneration != y.ObservedGeneration || !x.LastTransitionTime.Equal(&y.LastTransitionTime) {
			return false
		}
	}
	return true
}
