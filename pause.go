package main

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	"k8s.io/klog/v2"

	"github.com/kubelite/memcached-operator/pkg/deployutil"
	"github.com/kubelite/memcached-operator/pkg/resources"
)

// pauseApplyOptions apply the Deployment's spec.paused under a field
// manager of its own (resources.PauseManager). Forced, so that a pause
// takes the field over from whoever set it false.
var pauseApplyOptions = metav1.ApplyOptions{FieldManager: resources.PauseManager, Force: true}

// syncRolloutPause makes each pool's rollout paused exactly while the
// Memcached is, whatever else the sync found: spec.paused stops the
// operator from changing the children, and a rollout the Deployment
// controller is running when it is set stops too, as it does under
// `kubectl rollout pause`. It writes only on a change:
//
//   - a paused Memcached whose Deployment is not paused: the Deployment's
//     spec.paused is applied, true, by resources.PauseManager;
//   - a Memcached that is not paused, whose Deployment's spec.paused is
//     owned by that manager's apply: the manager applies an empty
//     configuration, which removes its field, and with it the pause unless
//     another manager also holds spec.paused;
//   - otherwise nothing. A Deployment someone else paused stays paused
//     whether or not its Memcached is (the status says so), and a paused
//     Memcached's Deployment that is already paused is left as it is.
//
// The operator's own apply (resources.ManagedBy) never sets spec.paused,
// so this manager's entry takes nothing from it and its drift check does
// not see the pause. A Deployment someone resumes while its Memcached is
// paused is paused again by the next sync: unpausing the Memcached is what
// resumes it.
//
// Each apply carries the Deployment's UID, so that one racing with the
// Deployment's deletion fails with a Conflict instead of creating a
// Deployment of that name and nothing else, which the apiserver would
// refuse as invalid. On success the sync carries on with the apiserver's
// answer.
func (c *Controller) syncRolloutPause(ctx context.Context, s *memcachedSync) {
	for i := range s.pools {
		c.syncPoolPause(ctx, s, &s.pools[i])
	}
	// The previous pool of a move follows the pause too, and is resumed
	// with the others.
	for i := range s.retiring {
		p := poolState{deployment: s.retiring[i]}
		c.syncPoolPause(ctx, s, &p)
		s.retiring[i] = p.deployment
	}
}

// syncPoolPause is syncRolloutPause for one pool.
func (c *Controller) syncPoolPause(ctx context.Context, s *memcachedSync, p *poolState) {
	dep := p.deployment
	if dep == nil {
		return
	}
	if !p.live && c.memo.writes.stale(s.mc.UID, dep) {
		// The cache has not caught up with our last write of the pause:
		// what it shows is what that write changed.
		klog.FromContext(ctx).V(4).Info("Cache has not caught up with our last pause write; waiting for it", "deployment", klog.KObj(dep))
		return
	}
	apply := appsv1ac.Deployment(dep.Name, dep.Namespace).WithUID(dep.UID)
	var what string
	switch {
	case s.mc.Spec.Paused && !dep.Spec.Paused:
		apply.WithSpec(appsv1ac.DeploymentSpec().WithPaused(true))
		what = "Paused the Deployment's rollout"
	case !s.mc.Spec.Paused && dep.Spec.Paused && deployutil.PausedBy(dep, resources.PauseManager):
		what = "Resumed the Deployment's rollout"
	default:
		return
	}
	updated, err := c.kubeClient.AppsV1().Deployments(dep.Namespace).Apply(ctx, apply, pauseApplyOptions)
	if err != nil {
		s.record(failed("Deployment", fmt.Errorf("applying the Deployment's spec.paused: %w", err)))
		return
	}
	c.memo.writes.wrote(s.mc.UID, dep, updated)
	klog.FromContext(ctx).V(2).Info(what, "deployment", klog.KObj(updated), "paused", updated.Spec.Paused)
	p.deployment, p.live = updated, true
}
