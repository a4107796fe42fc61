package main

import (
	"context"
	"errors"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	cachev1alpha1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1alpha1"
	"github.com/kubelite/memcached-operator/pkg/resources"
)

// Reasons for the Degraded condition and the Warning Events that go with it.
const (
	// ReasonResourceExists: a Deployment or Service with the child's name
	// exists and is not controlled by this Memcached.
	ReasonResourceExists = "ResourceExists"
	// ReasonInvalidSpec: the spec passed the schema but cannot be turned
	// into valid children.
	ReasonInvalidSpec = "InvalidSpec"
	// ReasonForbidden: the apiserver refused the operator access to a child,
	// which is how revoked or incomplete RBAC shows. Unlike the reasons
	// above it is retried with backoff, because granting access raises no
	// event the operator could wait for.
	ReasonForbidden = "Forbidden"
)

// observation is what a sync learned about the children, for the status.
type observation struct {
	// deployment is the live Deployment this Memcached controls, or nil.
	deployment *appsv1.Deployment
	// problem is a condition that only a user can clear, or nil.
	problem *terminalError
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
		return errors.Join(childErr, err)
	}
	if childErr != nil {
		return childErr
	}
	if obs.problem != nil {
		return obs.problem
	}
	return nil
}

// syncChildren applies the children unless the spec is invalid or paused,
// and returns what it saw. A returned error is transient; problems a user
// must fix are reported in the observation instead. A refusal by RBAC is
// both: reported, so that the Memcached shows why it is stuck, and returned,
// so that the key is retried until access is granted.
func (c *Controller) syncChildren(ctx context.Context, mc *cachev1alpha1.Memcached) (observation, error) {
	if errs := resources.Validate(mc); len(errs) > 0 {
		return observation{
			deployment: c.ownedDeployment(mc),
			problem:    &terminalError{reason: ReasonInvalidSpec, message: errs.ToAggregate().Error()},
		}, nil
	}
	if mc.Spec.Paused {
		return observation{deployment: c.ownedDeployment(mc)}, nil
	}

	desired, err := c.desired(mc)
	if err != nil {
		return observation{
			deployment: c.ownedDeployment(mc),
			problem:    &terminalError{reason: ReasonInvalidSpec, message: err.Error()},
		}, nil
	}
	var obs observation
	obs.selector, obs.endpoint = desired.selector, desired.endpoint
	dep, depErr := syncChild(ctx, c, mc, desired.deployment, &c.children.deployments)
	_, svcErr := syncChild(ctx, c, mc, desired.service, &c.children.services)
	obs.deployment = dep

	var problems []*terminalError
	var transient []error
	for _, err := range []error{depErr, svcErr} {
		var te *terminalError
		switch {
		case err == nil:
		case errors.As(err, &te):
			problems = append(problems, te)
		default:
			transient = append(transient, err)
		}
	}
	if len(transient) > 0 {
		err := errors.Join(transient...)
		if apierrors.IsForbidden(err) && !errors.Is(err, errNamespaceTerminating) {
			obs.problem = &terminalError{reason: ReasonForbidden, message: err.Error()}
		}
		return obs, err
	}
	if len(problems) > 0 {
		obs.problem = problems[0]
		for _, p := range problems[1:] {
			obs.problem.message += "; " + p.message
		}
	}
	return obs, nil
}

// ownedDeployment returns the cached Deployment if this Memcached controls
// it, so that a paused or invalid Memcached still reports replica counts.
func (c *Controller) ownedDeployment(mc *cachev1alpha1.Memcached) *appsv1.Deployment {
	d, err := c.deploymentLister.Get(mc.Namespace, mc.Name)
	if err != nil || classify(mc, d) != owned {
		return nil
	}
	return d
}
