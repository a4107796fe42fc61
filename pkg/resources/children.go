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
	// Service is the headless Service named after the Memcached, which
	// selects every Pod of every pool.
	Service *corev1ac.ServiceApplyConfiguration
	// Pools are the pools the spec asks for: one per zone of spec.zones,
	// in its order, or the one pool of a Memcached without zones.
	Pools []Pool
	// NetworkPolicy is nil when the spec asks for none.
	NetworkPolicy *networkingv1ac.NetworkPolicyApplyConfiguration
}

// Pool is one Deployment of a Memcached and what goes with it.
type Pool struct {
	// Zone is the pool's zone, "" for the pool of a Memcached without
	// zones.
	Zone       string
	Deployment *appsv1ac.DeploymentApplyConfiguration
	// Service is a zone pool's own headless Service; nil for the pool of
	// a Memcached without zones, whose Service is Children.Service.
	Service *corev1ac.ServiceApplyConfiguration
	// PodDisruptionBudget is the budget of the pool's Pods.
	PodDisruptionBudget *policyv1ac.PodDisruptionBudgetApplyConfiguration
}

// Zones are the zones of d's pools: spec.zones, or the one zone "" of a
// Memcached without zones.
func Zones(d Defaulted) []string {
	if len(d.Spec.Zones) == 0 {
		return []string{""}
	}
	return d.Spec.Zones
}

// Build returns the children of d.
func Build(d Defaulted) (Children, error) {
	svc, err := Service(d)
	if err != nil {
		return Children{}, err
	}
	np, err := NetworkPolicy(d)
	if err != nil {
		return Children{}, err
	}
	out := Children{Service: svc, NetworkPolicy: np}
	for _, zone := range Zones(d) {
		p, err := BuildPool(d, zone)
		if err != nil {
			return Children{}, err
		}
		out.Pools = append(out.Pools, p)
	}
	return out, nil
}

// BuildPool returns the children of d's pool in zone.
func BuildPool(d Defaulted, zone string) (Pool, error) {
	dep, err := PoolDeployment(d, zone)
	if err != nil {
		return Pool{}, err
	}
	pdb, err := PoolDisruptionBudget(d, zone)
	if err != nil {
		return Pool{}, err
	}
	p := Pool{Zone: zone, Deployment: dep, PodDisruptionBudget: pdb}
	if zone != "" {
		if p.Service, err = ZoneService(d, zone); err != nil {
			return Pool{}, err
		}
	}
	return p, nil
}
