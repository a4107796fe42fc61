package resources

import (
	"fmt"

	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	policyv1ac "k8s.io/client-go/applyconfigurations/policy/v1"
)

// defaultMaxUnavailable is the disruption budget when the spec sets none:
// one cache shard down at a time, so a node drain never empties several
// shards, and their share of the keys, at once.
var defaultMaxUnavailable = intstr.FromInt32(1)

// PodDisruptionBudget returns the PodDisruptionBudget of the Pods of a
// Memcached without zones.
func PodDisruptionBudget(d Defaulted) (*policyv1ac.PodDisruptionBudgetApplyConfiguration, error) {
	return PoolDisruptionBudget(d, "")
}

// MoveDisruptionBudget returns the PodDisruptionBudget of a Memcached
// without zones, named and selecting as PodDisruptionBudget's, for a move
// between one pool and zone pools. It then selects the Pods of every pool,
// the one that serves and those that start, and the eviction API refuses
// to evict a Pod that two budgets select, so it is their only budget. The
// spec's budget counted over all those Pods would let a drain empty the
// serving pool: minAvailable 2 over 3 serving and 9 new Pods allows 10
// evictions. So it allows, over all of them, only as many disruptions as
// the spec's budget allows in one pool of spec.replicas Pods
// (poolDisruptionsAllowed), which no pool can then exceed.
func MoveDisruptionBudget(d Defaulted) (*policyv1ac.PodDisruptionBudgetApplyConfiguration, error) {
	allowed := intstr.FromInt32(poolDisruptionsAllowed(d))
	return poolBudget(d, "", func(spec *policyv1ac.PodDisruptionBudgetSpecApplyConfiguration) {
		spec.WithMaxUnavailable(allowed)
	})
}

// poolDisruptionsAllowed is how many of a pool's spec.replicas healthy
// Pods the spec's budget lets be evicted, with the disruption
// controller's arithmetic: a percentage of maxUnavailable or minAvailable
// is rounded up. For 3 replicas: maxUnavailable 1 allows 1, 50% allows 2;
// minAvailable 2 allows 1, 50% (2 Pods) allows 1.
func poolDisruptionsAllowed(d Defaulted) int32 {
	replicas := int(*d.Spec.Replicas)
	budget := d.Spec.PodDisruptionBudget
	var allowed int
	switch {
	case budget != nil && budget.MinAvailable != nil:
		minAvailable, err := intstr.GetScaledValueFromIntOrPercent(budget.MinAvailable, replicas, true)
		if err != nil {
			return 0
		}
		allowed = replicas - minAvailable
	case budget != nil && budget.MaxUnavailable != nil:
		maxUnavailable, err := intstr.GetScaledValueFromIntOrPercent(budget.MaxUnavailable, replicas, true)
		if err != nil {
			return 0
		}
		allowed = maxUnavailable
	default:
		allowed = defaultMaxUnavailable.IntValue()
	}
	return int32(max(0, allowed))
}

// PoolDisruptionBudget returns the PodDisruptionBudget of the Pods of the
// Memcached's pool in zone ("" for a Memcached without zones): the budget
// applies per zone, since each zone pool holds the whole keyspace.
//
// Unhealthy Pods may always be evicted (unhealthyPodEvictionPolicy
// AlwaysAllow): a Pod that is not ready serves no keys, so evicting it
// costs nothing, and counting it against the budget would let a
// crash-looping cache block every drain of its nodes.
func PoolDisruptionBudget(d Defaulted, zone string) (*policyv1ac.PodDisruptionBudgetApplyConfiguration, error) {
	return poolBudget(d, zone, func(spec *policyv1ac.PodDisruptionBudgetSpecApplyConfiguration) {
		budget := d.Spec.PodDisruptionBudget
		switch {
		case budget != nil && budget.MinAvailable != nil:
			spec.WithMinAvailable(*budget.MinAvailable)
		case budget != nil && budget.MaxUnavailable != nil:
			spec.WithMaxUnavailable(*budget.MaxUnavailable)
		default:
			spec.WithMaxUnavailable(defaultMaxUnavailable)
		}
	})
}

// poolBudget renders the budget of the pool in zone, with the amount that
// amount sets.
func poolBudget(d Defaulted, zone string, amount func(*policyv1ac.PodDisruptionBudgetSpecApplyConfiguration)) (*policyv1ac.PodDisruptionBudgetApplyConfiguration, error) {
	mc := d.Memcached
	spec := policyv1ac.PodDisruptionBudgetSpec().
		WithSelector(metav1ac.LabelSelector().WithMatchLabels(PoolSelectorLabels(mc, zone))).
		WithUnhealthyPodEvictionPolicy(policyv1.AlwaysAllow)
	amount(spec)

	pdb := policyv1ac.PodDisruptionBudget(PoolName(mc, zone), mc.Namespace).
		WithLabels(PoolLabels(mc, zone)).
		WithOwnerReferences(OwnerReference(mc)).
		WithSpec(spec)
	pdb.WithAnnotations(map[string]string{RenderingAnnotation: renderingVersion})
	hash, err := specHash(pdb)
	if err != nil {
		return nil, fmt.Errorf("hashing PodDisruptionBudget: %w", err)
	}
	return pdb.WithAnnotations(map[string]string{SpecHashAnnotation: hash}), nil
}
