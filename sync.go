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

// observation is what a sync learned about the children, for the status.
type observation struct {
	// deployment is the live Deployment this Memcached controls, or nil.
	deployment *appsv1.Deployment
	// deploymentWritten is set when this sync created or changed the
	// Deployment, or read it from the apiserver (which is rare: see
	// syncChild): the Deployment is then the apiserver's answer, not the
	// cached object, and may be newer than what the Deployment controller
	// has acted on.
	deploymentWritten bool
	// problem is what keeps the children from matching the spec, or nil.
	problem *problem
	// selector and endpoint for the status; computed when empty.
	selector, endpoint string
}

// syncHandler converges one Memcached: it makes sure the finalizer matches
// the deletion policy, applies whatever part of the children differs from
// the spec, and writes the status if it changed. A sync that finds nothing
// to change sends no write request. It is never called concurrently for the
// same key.
func (c *Controller) syncHandler(ctx context.Context, key cache.ObjectName) error {
	logger := klog.FromContext(ctx)

	mc, err := c.memcachedLister.Get(key.Namespace, key.Name)
	if apierrors.IsNotFound(err) {
		logger.V(2).Info("Memcached no longer exists")
		return nil
	}
	if err != nil {
		return fmt.Errorf("getting Memcached from cache: %w", err)
	}

	if mc.DeletionTimestamp != nil {
		return c.finalize(ctx, mc)
	}

	mc, err = c.syncFinalizer(ctx, mc)
	if apierrors.IsNotFound(err) {
		logger.V(2).Info("Memcached was deleted while being synced")
		return nil
	}
	if err != nil {
		return err
	}

	obs, childErr := c.syncChildren(ctx, mc)
	if childErr != nil && obs.problem == nil {
		return childErr
	}
	if err := c.syncStatus(ctx, mc, obs); err != nil {
		return soonestRetry(childErr, err)
	}
	return childErr
}

// syncChildren applies the children unless the spec is invalid or paused,
// and returns what it saw. The error says how to retry (errors.go); the
// observation's problem says what the status shows. A failure that is not
// a race is both (childFailure): a problem, so that the Memcached shows why
// it is stuck, and an error that retries the key until the cause is gone.
func (c *Controller) syncChildren(ctx context.Context, mc *cachev1beta1.Memcached) (observation, error) {
	if errs := resources.Validate(mc); len(errs) > 0 {
		err := errs.ToAggregate()
		return observation{
			deployment: c.ownedDeployment(mc),
			problem:    &problem{reason: cachev1beta1.ReasonInvalidSpec, message: err.Error()},
		}, permanent(err)
	}
	if mc.Spec.Paused {
		return observation{deployment: c.ownedDeployment(mc)}, nil
	}

	desired, err := desired(mc)
	if err != nil {
		return observation{
			deployment: c.ownedDeployment(mc),
			problem:    &problem{reason: cachev1beta1.ReasonInvalidSpec, message: err.Error()},
		}, permanent(err)
	}
	var obs observation
	obs.selector, obs.endpoint = desired.selector, desired.endpoint
	var dep *appsv1.Deployment
	var depProblem *problem
	var depErr error
	if p := c.tlsSecretProblem(mc); p != nil {
		dep, depProblem = c.ownedDeployment(mc), p
	} else {
		dep, obs.deploymentWritten, depProblem, depErr = syncChild(ctx, c, mc, desired.deployment, &c.children.deployments)
	}
	_, _, svcProblem, svcErr := syncChild(ctx, c, mc, desired.service, &c.children.services)
	_, _, pdbProblem, pdbErr := syncChild(ctx, c, mc, desired.pdb, &c.children.pdbs)
	obs.deployment = dep
	obs.problem = joinProblems(depProblem, svcProblem, pdbProblem)
	return obs, soonestRetry(depErr, svcErr, pdbErr)
}

// ownedDeployment returns the cached Deployment if this Memcached controls
// it, so that a paused or invalid Memcached still reports replica counts.
func (c *Controller) ownedDeployment(mc *cachev1beta1.Memcached) *appsv1.Deployment {
	d, err := c.deploymentLister.Get(mc.Namespace, resources.ChildName(mc))
	if err != nil || classify(mc, d) != owned {
		return nil
	}
	return d
}
