package main

import (
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
	"github.com/kubelite/memcached-operator/pkg/resources"
)

// TestPlanPools plans moves between pools from the spec and the pools'
// Deployments alone: which old pools keep serving, and which Services and
// budgets the sync applies and keeps.
func TestPlanPools(t *testing.T) {
	zones := func(z ...string) func(*cachev1beta1.MemcachedSpec) {
		return func(s *cachev1beta1.MemcachedSpec) { s.Zones = z }
	}
	type budget struct {
		name           string
		maxUnavailable int
	}
	tests := []struct {
		name string
		spec func(*cachev1beta1.MemcachedSpec)
		// available are the pools the spec asks for whose Deployment is
		// available, by zone; stale are the zones of the Deployments it
		// no longer asks for ("" for the pool without zones).
		available      []string
		stale          []string
		budgetsBlocked bool

		wantRetiring, wantRetire []string
		wantServices             []string
		wantKept                 []string
		wantBudgets              []budget
	}{{
		name:        "one pool, nothing stale",
		available:   []string{""},
		wantBudgets: []budget{{"cache", 1}},
	}, {
		name:         "a zone taken out while the others serve goes at once",
		spec:         zones("a", "b"),
		available:    []string{"a"},
		stale:        []string{"c"},
		wantRetire:   []string{"cache-c"},
		wantServices: []string{"cache-a", "cache-b"},
		wantKept:     []string{"cache-a", "cache-b"},
		wantBudgets:  []budget{{"cache-a", 1}, {"cache-b", 1}},
	}, {
		name:         "a zone taken out while no pool serves keeps serving, with its Service and budget",
		spec:         zones("a", "b"),
		stale:        []string{"c"},
		wantRetiring: []string{"cache-c"},
		wantServices: []string{"cache-a", "cache-b"},
		wantKept:     []string{"cache-a", "cache-b", "cache-c"},
		wantBudgets:  []budget{{"cache-a", 1}, {"cache-b", 1}, {"cache-c", 1}},
	}, {
		name:         "a move to zones keeps the one pool under the move budget until every zone is available",
		spec:         zones("a", "b"),
		available:    []string{"a"},
		stale:        []string{""},
		wantRetiring: []string{"cache"},
		wantServices: []string{"cache-a", "cache-b"},
		wantKept:     []string{"cache-a", "cache-b"},
		wantBudgets:  []budget{{"cache", 1}},
	}, {
		name:           "a move to zones whose budgets cannot be applied keeps the one pool",
		spec:           zones("a", "b"),
		available:      []string{"a", "b"},
		stale:          []string{""},
		budgetsBlocked: true,
		wantRetiring:   []string{"cache"},
		wantServices:   []string{"cache-a", "cache-b"},
		wantKept:       []string{"cache-a", "cache-b"},
		wantBudgets:    []budget{{"cache", 1}},
	}, {
		name:         "a move to zones ends once every zone is available",
		spec:         zones("a", "b"),
		available:    []string{"a", "b"},
		stale:        []string{""},
		wantRetire:   []string{"cache"},
		wantServices: []string{"cache-a", "cache-b"},
		wantKept:     []string{"cache-a", "cache-b"},
		wantBudgets:  []budget{{"cache-a", 1}, {"cache-b", 1}},
	}, {
		name:         "a move back to one pool keeps the zone pools and their Services",
		stale:        []string{"a", "b"},
		wantRetiring: []string{"cache-a", "cache-b"},
		wantKept:     []string{"cache-a", "cache-b"},
		wantBudgets:  []budget{{"cache", 1}},
	}, {
		name: "the move budget allows in all pools what the spec allows in one",
		spec: func(s *cachev1beta1.MemcachedSpec) {
			s.Replicas = ptr.To[int32](4)
			s.PodDisruptionBudget = &cachev1beta1.DisruptionBudget{MinAvailable: ptr.To(intstr.FromInt32(2))}
		},
		stale:        []string{"a"},
		wantRetiring: []string{"cache-a"},
		wantKept:     []string{"cache-a"},
		wantBudgets:  []budget{{"cache", 2}},
	}, {
		name:       "scaled to zero, every stale pool goes",
		spec:       func(s *cachev1beta1.MemcachedSpec) { s.Replicas = ptr.To[int32](0) },
		stale:      []string{"a"},
		wantRetire: []string{"cache-a"},
		// The spec's own budget, of minAvailable or maxUnavailable 1.
		wantBudgets: []budget{{"cache", 1}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mc := newMemcached("cache")
			if tt.spec != nil {
				tt.spec(&mc.Spec)
			}
			s := &memcachedSync{mc: mc, defaulted: resources.Default(mc)}
			var err error
			if s.desired, err = resources.Build(s.defaulted); err != nil {
				t.Fatal(err)
			}
			want := *s.defaulted.Spec.Replicas
			for _, p := range s.desired.Pools {
				dep := poolDeployment(mc, p.Zone, want, 0)
				if slices.Contains(tt.available, p.Zone) {
					dep = poolDeployment(mc, p.Zone, want, want)
				}
				s.pools = append(s.pools, poolState{zone: p.Zone, deployment: dep})
			}
			var stale []*appsv1.Deployment
			for _, zone := range tt.stale {
				stale = append(stale, poolDeployment(mc, zone, want, want))
			}

			plan, err := planPools(s, stale, tt.budgetsBlocked)
			if err != nil {
				t.Fatal(err)
			}
			if got := names(plan.retiring); !slices.Equal(got, tt.wantRetiring) {
				t.Errorf("retiring %v, want %v", got, tt.wantRetiring)
			}
			if got := names(plan.retire); !slices.Equal(got, tt.wantRetire) {
				t.Errorf("retire %v, want %v", got, tt.wantRetire)
			}
			var services []string
			for _, svc := range plan.services {
				services = append(services, *svc.Name)
			}
			if !slices.Equal(services, tt.wantServices) {
				t.Errorf("services %v, want %v", services, tt.wantServices)
			}
			var kept []string
			for name := range plan.keptServices {
				kept = append(kept, name)
			}
			slices.Sort(kept)
			if !slices.Equal(kept, tt.wantKept) {
				t.Errorf("kept Services %v, want %v", kept, tt.wantKept)
			}
			var budgets []budget
			for _, pdb := range plan.budgets {
				b := budget{name: *pdb.Name}
				if v := pdb.Spec.MaxUnavailable; v != nil {
					b.maxUnavailable = v.IntValue()
				} else {
					b.maxUnavailable = -1
				}
				budgets = append(budgets, b)
			}
			if !slices.Equal(budgets, tt.wantBudgets) {
				t.Errorf("budgets %v, want %v", budgets, tt.wantBudgets)
			}
		})
	}
}

// poolDeployment is the Deployment of mc's pool in zone with replicas of
// which available are available.
func poolDeployment(mc *cachev1beta1.Memcached, zone string, replicas, available int32) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: resources.PoolName(mc, zone), Namespace: mc.Namespace},
		Spec:       appsv1.DeploymentSpec{Replicas: ptr.To(replicas)},
		Status:     appsv1.DeploymentStatus{Replicas: replicas, UpdatedReplicas: replicas, AvailableReplicas: available},
	}
}

func names(deps []*appsv1.Deployment) []string {
	var out []string
	for _, d := range deps {
		out = append(out, d.Name)
	}
	return out
}
