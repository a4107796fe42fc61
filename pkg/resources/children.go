package resources

import (
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	networkingv1ac "k8s.io/client-go/applyconfigurations/networking/v1"
	policyv1ac "k8s.io/client-go/applyconfigurations/policy/v1"
)

// Children are the children a Memcached should have, as apply
// configurations.
//
// A sync that applies them builds them once, and nothing keeps them
// between syncs: docs/benchmarks-log.md, "Memoized children", has the
// measurement behind that.
type Children struct {
	Deployment          *appsv1ac.DeploymentApplyConfiguration
	Service             *corev1ac.ServiceApplyConfiguration
	PodDisruptionBudget *policyv1ac.PodDisruptionBudgetApplyConfiguration
	// NetworkPolicy is nil when the spec asks for none.
	NetworkPolicy *networkingv1ac.NetworkPolicyApplyConfiguration
}

// Build returns the children of d.
func Build(d Defaulted) (Children, error) {
	dep, err := Deployment(d)
	if err != nil {
		return Children{}, err
	}
	svc, err := Service(d)
	if err != nil {
		return Children{}, err
	}
	pdb, err := PodDisruptionBudget(d)
	if err != nil {
		return Children{}, err
	}
	np, err := NetworkPolicy(d)
	if err != nil {
		return Children{}, err
	}
	return Children{Deployment: dep, Service: svc, PodDisruptionBudget: pdb, NetworkPolicy: np}, nil
}
