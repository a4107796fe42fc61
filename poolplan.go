package main

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	policyv1ac "k8s.io/client-go/applyconfigurations/policy/v1"

	"github.com/kubelite/memcached-operator/pkg/resources"
)

// poolPlan is what one sync does with the pools besides their Deployments:
// which Deployments of pools the spec no longer asks for keep serving and
// which go, and the Services and PodDisruptionBudgets to apply. Every
// other Service and budget the Memcached controls goes, except that the
// budgets stay while one of the plan's cannot be applied (syncPools).
type poolPlan struct {
	// retiring are the Deployments of pools the spec no longer asks for
	// that keep serving (keepServing); retire, those to delete.
	retiring, retire []*appsv1.Deployment
	// services are the zone pools' Services to apply: those the spec asks
	// for.
	services []*corev1ac.ServiceApplyConfiguration
	// keptServices are the names of every Service to keep besides the one
	// named after the Memcached: those of services, and those of the
	// retiring zone pools, for the clients of a zone that still use it.
	keptServices map[string]bool
	// budgets are the budgets to apply, one for every Pod (see syncPools).
	budgets []*policyv1ac.PodDisruptionBudgetApplyConfiguration
}

// planPools decides syncPools' work from the sync alone: its defaulted spec
// and desired pools, the pools' Deployments as it found or left them, and
// stale, the Deployments this Memcached controls that its spec no longer
// asks for. budgetsBlocked is set when the budgets of the zone pools the
// spec asks for cannot be applied yet (Controller.budgetsBlocked): the
// pool without zones then keeps serving under its own budget. It reads
// and writes nothing; an error is a child the builders cannot render.
func planPools(s *memcachedSync, stale []*appsv1.Deployment, budgetsBlocked bool) (poolPlan, error) {
	mc, desired := s.mc, s.desired.Pools
	plan := poolPlan{keptServices: map[string]bool{}}
	for _, dep := range stale {
		if keepServing(s, dep) || (poolZone(mc, dep) == "" && budgetsBlocked) {
			plan.retiring = append(plan.retiring, dep)
		} else {
			plan.retire = append(plan.retire, dep)
		}
	}

	unzonedServes := desired[0].Zone == ""
	for _, p := range desired {
		if p.Service != nil {
			plan.services = append(plan.services, p.Service)
			plan.keptServices[*p.Service.Name] = true
		}
	}
	for _, dep := range plan.retiring {
		zone := poolZone(mc, dep)
		if zone == "" {
			unzonedServes = true
			continue
		}
		plan.keptServices[resources.PoolName(mc, zone)] = true
	}

	switch {
	case unzonedServes && len(plan.retiring) == 0:
		plan.budgets = append(plan.budgets, desired[0].PodDisruptionBudget)
	case unzonedServes:
		// During a move the one budget selects the Pods of every pool,
		// and allows only what the spec's budget allows in one.
		pdb, err := resources.MoveDisruptionBudget(s.defaulted)
		if err != nil {
			return poolPlan{}, err
		}
		plan.budgets = append(plan.budgets, pdb)
	default:
		for _, p := range desired {
			plan.budgets = append(plan.budgets, p.PodDisruptionBudget)
		}
		// A zone pool that serves while no pool the spec asks for is
		// available keeps its budget.
		for _, dep := range plan.retiring {
			pdb, err := resources.PoolDisruptionBudget(s.defaulted, poolZone(mc, dep))
			if err != nil {
				return poolPlan{}, err
			}
			plan.budgets = append(plan.budgets, pdb)
		}
	}
	return plan, nil
}

// needsBudgetCheck reports whether the plan hangs on budgetsBlocked: a
// stale pool without zones that would go unless the zone pools' budgets
// cannot be applied.
func needsBudgetCheck(s *memcachedSync, stale []*appsv1.Deployment) bool {
	for _, dep := range stale {
		if poolZone(s.mc, dep) == "" && !keepServing(s, dep) {
			return true
		}
	}
	return false
}
