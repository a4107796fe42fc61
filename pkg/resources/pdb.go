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

// PoolDisruptionBudget returns the PodDisruptionBudget of the Pods of the
// Memcached's pool in zone ("" for a Memcached without zones): the budget
// applies per zone, since each zone pool holds the whole keyspace.
//
// Unhealthy Pods may always be evicted (unhealthyPodEvictionPolicy
// AlwaysAllow): a Pod that is not ready serves no keys, so evicting it
// costs nothing, and counting it against the budget would let a
// crash-looping cache block every drain of its nodes.
func PoolDisruptionBudget(d Defaulted, zone string) (*policyv1ac.PodDisruptionBudgetApplyConfiguration, error) {
	mc := d.Memcached
	spec := policyv1ac.PodDisruptionBudgetSpec().
		WithSelector(metav1ac.LabelSelector().WithMatchLabels(PoolSelectorLabels(mc, zone))).
		WithUnhealthyPodEvictionPolicy(policyv1.AlwaysAllow)
	budget := d.Spec.PodDisruptionBudget
	switch {
	case budget != nil && budget.MinAvailable != nil:
		spec.WithMinAvailable(*budget.MinAvailable)
	case budget != nil && budget.MaxUnavailable != nil:
		spec.WithMaxUnavailable(*budget.MaxUnavailable)
	default:
		spec.WithMaxUnavailable(defaultMaxUnavailable)
	}

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
