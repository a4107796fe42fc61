package main

import (
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	policyv1ac "k8s.io/client-go/applyconfigurations/policy/v1"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
	"github.com/kubelite/memcached-operator/pkg/resources"
)

// desiredChildren is what a Memcached should have: its children and the
// status strings that describe them.
//
// They are built on every sync that applies them, without memoizing:
// a cache of them by generation saved about 30 µs per sync but did not
// show end to end (docs/benchmarks.md, "Memoized children"), and it was
// the largest part of the heap for busy objects.
type desiredChildren struct {
	deployment *appsv1ac.DeploymentApplyConfiguration
	service    *corev1ac.ServiceApplyConfiguration
	pdb        *policyv1ac.PodDisruptionBudgetApplyConfiguration
	// selector and endpoint are the status strings.
	selector, endpoint string
}

// desired builds the children mc should have.
func desired(mc *cachev1beta1.Memcached) (desiredChildren, error) {
	dep, err := resources.Deployment(mc)
	if err != nil {
		return desiredChildren{}, err
	}
	svc, err := resources.Service(mc)
	if err != nil {
		return desiredChildren{}, err
	}
	pdb, err := resources.PodDisruptionBudget(mc)
	if err != nil {
		return desiredChildren{}, err
	}
	return desiredChildren{deployment: dep, service: svc, pdb: pdb, selector: resources.Selector(mc), endpoint: resources.Endpoint(mc)}, nil
}
