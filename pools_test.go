package main

import (
	"context"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	core "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
	"github.com/kubelite/memcached-operator/pkg/resources"
)

// pools is what a fake apiserver holds of a Memcached's children, by name.
type pools struct {
	deployments map[string]*appsv1.Deployment
	services    map[string]*corev1.Service
	pdbs        map[string]*policyv1.PodDisruptionBudget
}

// syncPoolsOnce runs one sync of mc over the children held, and returns
// the write actions and the children the fake apiserver holds afterwards.
func syncPoolsOnce(t *testing.T, mc *cachev1beta1.Memcached, held pools) ([]core.Action, pools) {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	f := newFixture(t)
	f.addMemcached(mc)
	for _, name := range sortedKeys(held.deployments) {
		f.addDeployment(held.deployments[name])
	}
	for _, name := range sortedKeys(held.services) {
		f.addService(held.services[name])
	}
	for _, name := range sortedKeys(held.pdbs) {
		f.addPDB(held.pdbs[name])
	}
	c := f.newController(ctx)
	// A problem the status shows, such as an object in the way, is an
	// outcome the test checks; any other failure is not.
	if o := c.syncHandler(ctx, cache.MetaObjectToName(mc)); o.err != nil && !o.shown() {
		t.Fatalf("sync: %v", o.err)
	}
	return writes(f.kubeClient.Actions()), childrenIn(ctx, t, f.kubeClient, mc.Namespace)
}

// childrenIn lists the children the fake apiserver holds.
func childrenIn(ctx context.Context, t *testing.T, client *k8sfake.Clientset, ns string) pools {
	t.Helper()
	out := pools{deployments: map[string]*appsv1.Deployment{}, services: map[string]*corev1.Service{}, pdbs: map[string]*policyv1.PodDisruptionBudget{}}
	deps, err := client.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range deps.Items {
		out.deployments[deps.Items[i].Name] = &deps.Items[i]
	}
	svcs, err := client.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range svcs.Items {
		out.services[svcs.Items[i].Name] = &svcs.Items[i]
	}
	pdbs, err := client.PolicyV1().PodDisruptionBudgets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range pdbs.Items {
		out.pdbs[pdbs.Items[i].Name] = &pdbs.Items[i]
	}
	return out
}

// withAvailable sets the status of every Deployment held to all of its
// replicas updated and available, as the Deployment controller would.
func (p pools) withAvailable(names ...string) pools {
	for _, name := range names {
		d := p.deployments[name]
		n := ptr.Deref(d.Spec.Replicas, 1)
		d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: n, ReadyReplicas: n, AvailableReplicas: n, UpdatedReplicas: n}
	}
	return p
}

func (p pools) names() (deps, svcs, pdbs []string) {
	return sortedKeys(p.deployments), sortedKeys(p.services), sortedKeys(p.pdbs)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// deletes names the objects the actions delete, as resource/name.
func deletes(actions []core.Action) []string {
	var out []string
	for _, a := range actions {
		if d, ok := a.(core.DeleteAction); ok {
			out = append(out, d.GetResource().Resource+"/"+d.GetName())
		}
	}
	slices.Sort(out)
	return out
}

func withZones(zones ...string) *cachev1beta1.Memcached {
	mc := newMemcached("cache")
	mc.Spec.Zones = zones
	return mc
}

// TestSyncZonesBuildsAPoolPerZone checks the children of a Memcached with
// two zones: a Deployment, Service and budget per zone, the Memcached's
// Service over all of them, and no pool without zone.
func TestSyncZonesBuildsAPoolPerZone(t *testing.T) {
	_, held := syncPoolsOnce(t, withZones("a", "b"), pools{})
	deps, svcs, pdbs := held.names()
	if want := []string{"cache-a", "cache-b"}; !slices.Equal(deps, want) || !slices.Equal(pdbs, want) {
		t.Errorf("Deployments %v and budgets %v, want %v for both", deps, pdbs, want)
	}
	if want := []string{"cache", "cache-a", "cache-b"}; !slices.Equal(svcs, want) {
		t.Errorf("Services %v, want %v", svcs, want)
	}
	for _, zone := range []string{"a", "b"} {
		dep := held.deployments["cache-"+zone]
		if got := dep.Spec.Template.Spec.NodeSelector[corev1.LabelTopologyZone]; got != zone {
			t.Errorf("Deployment cache-%s runs its Pods in zone %q", zone, got)
		}
		if got := dep.Spec.Selector.MatchLabels[resources.ZoneLabel]; got != zone {
			t.Errorf("Deployment cache-%s selects zone %q", zone, got)
		}
		if got := held.services["cache-"+zone].Spec.Selector[resources.ZoneLabel]; got != zone {
			t.Errorf("Service cache-%s selects zone %q", zone, got)
		}
		if got := held.pdbs["cache-"+zone].Spec.Selector.MatchLabels[resources.ZoneLabel]; got != zone {
			t.Errorf("PodDisruptionBudget cache-%s selects zone %q", zone, got)
		}
	}
	if _, ok := held.services["cache"].Spec.Selector[resources.ZoneLabel]; ok {
		t.Errorf("Service cache selects one zone: %v", held.services["cache"].Spec.Selector)
	}
}

// TestSyncRetiresPools changes spec.zones of a converged Memcached whose
// pools are available, syncs once, makes the new pools the case names
// available, syncs again, and checks what the two syncs deleted and what
// is left. Every Pod stays covered by exactly one budget.
func TestSyncRetiresPools(t *testing.T) {
	tests := []struct {
		name       string
		from, to   []string
		available  []string // Deployments of the new spec made available
		wantDelete []string
		wantDeps   []string
		wantPDBs   []string
		// moveFirst syncs a spec without zones in between, whose pool
		// does not become available.
		moveFirst bool
	}{{
		name: "a zone taken out goes at once",
		from: []string{"a", "b"}, to: []string{"a"},
		wantDelete: []string{"deployments/cache-b", "poddisruptionbudgets/cache-b", "services/cache-b"},
		wantDeps:   []string{"cache-a"}, wantPDBs: []string{"cache-a"},
	}, {
		name: "a zone added leaves the others",
		from: []string{"a"}, to: []string{"a", "b"},
		wantDeps: []string{"cache-a", "cache-b"}, wantPDBs: []string{"cache-a", "cache-b"},
	}, {
		name:     "to zones: the pool without zones serves while the zone pools start",
		to:       []string{"a", "b"},
		wantDeps: []string{"cache", "cache-a", "cache-b"}, wantPDBs: []string{"cache"},
	}, {
		name: "to zones: one zone pool available is not enough",
		to:   []string{"a", "b"}, available: []string{"cache-a"},
		wantDeps: []string{"cache", "cache-a", "cache-b"}, wantPDBs: []string{"cache"},
	}, {
		name: "to zones: the pool without zones goes once every zone pool is available",
		to:   []string{"a", "b"}, available: []string{"cache-a", "cache-b"},
		wantDelete: []string{"deployments/cache", "poddisruptionbudgets/cache"},
		wantDeps:   []string{"cache-a", "cache-b"}, wantPDBs: []string{"cache-a", "cache-b"},
	}, {
		name: "a zone taken out stays while no other pool is available",
		from: []string{"a", "b"}, to: []string{"c"},
		wantDeps: []string{"cache-a", "cache-b", "cache-c"}, wantPDBs: []string{"cache-a", "cache-b", "cache-c"},
	}, {
		name: "a zone taken out goes once another pool is available",
		from: []string{"a", "b"}, to: []string{"b", "c"}, available: []string{"cache-b"},
		wantDelete: []string{"deployments/cache-a", "poddisruptionbudgets/cache-a", "services/cache-a"},
		wantDeps:   []string{"cache-b", "cache-c"}, wantPDBs: []string{"cache-b", "cache-c"},
	}, {
		name: "a chained move keeps the last pool that serves",
		from: []string{"a"}, to: []string{"b"}, moveFirst: true,
		wantDeps: []string{"cache", "cache-a", "cache-b"}, wantPDBs: []string{"cache"},
	}, {
		name:       "back to one pool: the zone pools serve, under its budget",
		from:       []string{"a", "b"},
		wantDelete: []string{"poddisruptionbudgets/cache-a", "poddisruptionbudgets/cache-b"},
		wantDeps:   []string{"cache", "cache-a", "cache-b"}, wantPDBs: []string{"cache"},
	}, {
		name: "back to one pool: the zone pools go once it is available",
		from: []string{"a", "b"}, available: []string{"cache"},
		wantDelete: []string{"deployments/cache-a", "deployments/cache-b", "poddisruptionbudgets/cache-a", "poddisruptionbudgets/cache-b", "services/cache-a", "services/cache-b"},
		wantDeps:   []string{"cache"}, wantPDBs: []string{"cache"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Converge on the old spec, every pool available.
			before := withZones(tt.from...)
			_, converged := syncPoolsOnce(t, before, pools{})
			converged = converged.withAvailable(sortedKeys(converged.deployments)...)
			// The new spec creates its pools; make the ones the case
			// names available, then sync again.
			after := withZones(tt.to...)
			after.Generation = 2
			if tt.moveFirst {
				between := withZones()
				between.Generation = 2
				_, converged = syncPoolsOnce(t, between, converged)
				after.Generation = 3
			}
			first, held := syncPoolsOnce(t, after, converged)
			held = held.withAvailable(tt.available...)
			for _, name := range sortedKeys(held.deployments) {
				if !slices.Contains(tt.available, name) && !slices.Contains(resourcesOf(before), name) {
					held.deployments[name].Status = appsv1.DeploymentStatus{}
				}
			}
			second, after2 := syncPoolsOnce(t, after, held)
			if got := deletes(append(first, second...)); !slices.Equal(got, tt.wantDelete) {
				t.Errorf("deleted %v, want %v", got, tt.wantDelete)
			}
			deps, _, pdbs := after2.names()
			if !slices.Equal(deps, tt.wantDeps) || !slices.Equal(pdbs, tt.wantPDBs) {
				t.Errorf("Deployments %v and budgets %v, want %v and %v", deps, pdbs, tt.wantDeps, tt.wantPDBs)
			}
		})
	}
}

// resourcesOf names the Deployments of mc's pools.
func resourcesOf(mc *cachev1beta1.Memcached) []string {
	var out []string
	for _, zone := range resources.Zones(resources.Default(mc)) {
		out = append(out, resources.PoolName(mc, zone))
	}
	return out
}

// TestSyncMoveWaitsForABudgetInTheWay moves a Memcached to zones whose
// pools are available while an object it may not take over holds the name
// of one zone's budget: the pool without zones keeps serving under its own
// budget, and the status says what is in the way.
func TestSyncMoveWaitsForABudgetInTheWay(t *testing.T) {
	_, converged := syncPoolsOnce(t, withZones(), pools{})
	converged = converged.withAvailable("cache")
	after := withZones("a", "b")
	after.Generation = 2
	_, held := syncPoolsOnce(t, after, converged)
	held = held.withAvailable("cache-a", "cache-b")
	held.pdbs["cache-b"] = &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "cache-b", Namespace: after.Namespace, UID: "someone-elses"}}

	actions, left := syncPoolsOnce(t, after, held)
	if got := deletes(actions); len(got) > 0 {
		t.Errorf("deleted %v while a budget's name is taken, want nothing", got)
	}
	deps, _, pdbs := left.names()
	if want := []string{"cache", "cache-a", "cache-b"}; !slices.Equal(deps, want) {
		t.Errorf("Deployments %v, want %v", deps, want)
	}
	if want := []string{"cache", "cache-b"}; !slices.Equal(pdbs, want) {
		t.Errorf("budgets %v, want the pool without zones' and the one in the way, %v", pdbs, want)
	}
}

// TestStatusWhileAPoolIsKept checks the status of a Memcached whose new
// pools are not available while a pool the spec no longer asks for serves.
func TestStatusWhileAPoolIsKept(t *testing.T) {
	mc := withZones("b")
	serving := deploymentWithStatus(2, 2, 2, 2, 2, corev1.ConditionTrue)
	serving.Name = "cache-a"
	starting := deploymentWithStatus(2, 2, 0, 0, 0, corev1.ConditionTrue)
	starting.Name = "cache-b"
	down := deploymentWithStatus(2, 2, 0, 0, 0, corev1.ConditionTrue)
	down.Name = "cache"
	s := &memcachedSync{mc: mc, defaulted: resources.Default(mc), pools: []poolState{{zone: "b", deployment: starting}}, retiring: []*appsv1.Deployment{down, serving}}
	status := computeStatus(s, metav1.Now())
	if a := statusCondition(status, cachev1beta1.ConditionAvailable); a.Status != metav1.ConditionTrue {
		t.Errorf("Available = %s (%s), want True while cache-a serves", a.Status, a.Message)
	}
	if p := statusCondition(status, cachev1beta1.ConditionProgressing); p.Reason != cachev1beta1.ReasonRollingOut || !strings.Contains(p.Message, "Moving to zone pools") {
		t.Errorf("Progressing = %s: %s, want RollingOut and the move", p.Reason, p.Message)
	}
	s.retiring = []*appsv1.Deployment{down}
	if a := statusCondition(computeStatus(s, metav1.Now()), cachev1beta1.ConditionAvailable); a.Status != metav1.ConditionFalse {
		t.Errorf("Available = %s (%s), want False when no pool serves", a.Status, a.Message)
	}
}

func statusCondition(status cachev1beta1.MemcachedStatus, condType string) metav1.Condition {
	if c := meta.FindStatusCondition(status.Conditions, condType); c != nil {
		return *c
	}
	return metav1.Condition{}
}

// TestSyncZonePoolNameOfAnotherMemcached: Memcached cache with zone a
// wants the pool name cache-a, whose Service another Memcached, cache-a,
// controls. The status names no endpoint of that Service, and the
// message names the Memcached that holds it; the Service cache, which
// cache controls, keeps its endpoint.
func TestSyncZonePoolNameOfAnotherMemcached(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	mc := withZones("a")
	other := newMemcached("cache-a")
	other.UID = "uid-of-cache-a"
	f := newFixture(t)
	f.addMemcached(mc)
	f.addMemcached(other)
	f.addService(&corev1.Service{ObjectMeta: metav1.ObjectMeta{
		Name: "cache-a", Namespace: mc.Namespace, Labels: resources.Labels(other),
		OwnerReferences: []metav1.OwnerReference{resources.ControllerRef(other)},
	}})
	c := f.newController(ctx)
	if o := c.syncHandler(ctx, cache.MetaObjectToName(mc)); o.err != nil && !o.shown() {
		t.Fatalf("sync: %v", o.err)
	}
	got, err := f.client.CacheV1beta1().Memcacheds(mc.Namespace).Get(ctx, mc.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Status.Zones) != 1 || got.Status.Zones[0].Endpoint != "" {
		t.Errorf("status.zones = %+v, want zone a without an endpoint", got.Status.Zones)
	}
	if want := "cache.default.svc:11211"; got.Status.Endpoint != want {
		t.Errorf("status.endpoint = %q, want %q", got.Status.Endpoint, want)
	}
	d := statusCondition(got.Status, cachev1beta1.ConditionDegraded)
	if d.Reason != cachev1beta1.ReasonResourceExists || !strings.Contains(d.Message, "belongs to Memcached cache-a") {
		t.Errorf("Degraded = %s: %s, want ResourceExists naming Memcached cache-a", d.Reason, d.Message)
	}
}

// TestSyncMoveBudgetProtectsTheServingPool: during a move to zones, the
// one budget selects the Pods of every pool; with minAvailable 2 and 3
// replicas it allows 1 disruption over all of them, as in the serving
// pool alone, not 12 - 2. Once the move is over, the zone budgets carry
// the spec's minAvailable.
func TestSyncMoveBudgetProtectsTheServingPool(t *testing.T) {
	withBudget := func(mc *cachev1beta1.Memcached) *cachev1beta1.Memcached {
		mc.Spec.Replicas = ptr.To[int32](3)
		mc.Spec.PodDisruptionBudget = &cachev1beta1.DisruptionBudget{MinAvailable: ptr.To(intstr.FromInt32(2))}
		return mc
	}
	_, converged := syncPoolsOnce(t, withBudget(withZones()), pools{})
	converged = converged.withAvailable("cache")
	if pdb := converged.pdbs["cache"]; pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.IntValue() != 2 {
		t.Fatalf("before the move: budget %+v, want the spec's minAvailable 2", pdb.Spec)
	}
	after := withBudget(withZones("a", "b", "c"))
	after.Generation = 2
	_, moving := syncPoolsOnce(t, after, converged)
	pdb := moving.pdbs["cache"]
	if pdb == nil || pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.IntValue() != 1 || pdb.Spec.MinAvailable != nil {
		t.Fatalf("during the move: budget %+v, want maxUnavailable 1 over every Pod", pdb)
	}
	if _, _, pdbs := moving.names(); !slices.Equal(pdbs, []string{"cache"}) {
		t.Errorf("budgets %v during the move, want only cache's", pdbs)
	}
	moving = moving.withAvailable("cache-a", "cache-b", "cache-c")
	_, moved := syncPoolsOnce(t, after, moving)
	for _, zone := range []string{"a", "b", "c"} {
		if pdb := moved.pdbs["cache-"+zone]; pdb == nil || pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.IntValue() != 2 {
			t.Errorf("after the move: budget of zone %s %+v, want minAvailable 2", zone, pdb)
		}
	}
}

// TestSyncAdoptsAnOrphanedPoolToRetireIt: a Memcached recreated with zones
// over the pool an earlier one orphaned (deletionPolicy Orphan) adopts its
// Deployment and budget, and then keeps them as the previous pool of a
// move: serving, and the only budget, until the zone pool is available,
// when both go.
func TestSyncAdoptsAnOrphanedPoolToRetireIt(t *testing.T) {
	_, orphaned := syncPoolsOnce(t, withZones(), pools{})
	orphaned = orphaned.withAvailable("cache")
	orphaned.deployments["cache"].OwnerReferences = nil
	orphaned.pdbs["cache"].OwnerReferences = nil
	delete(orphaned.services, "cache")

	actions, adopted := syncPoolsOnce(t, withZones("a"), orphaned)
	if got := deletes(actions); len(got) > 0 {
		t.Errorf("deleted %v while adopting, want nothing", got)
	}
	for name, obj := range map[string]metav1.Object{"Deployment": adopted.deployments["cache"], "PodDisruptionBudget": adopted.pdbs["cache"]} {
		if ref := metav1.GetControllerOf(obj); ref == nil || ref.UID != withZones().UID {
			t.Errorf("orphaned %s has controller %+v, want the Memcached", name, ref)
		}
	}

	_, moving := syncPoolsOnce(t, withZones("a"), adopted)
	if deps, _, pdbs := moving.names(); !slices.Equal(deps, []string{"cache", "cache-a"}) || !slices.Equal(pdbs, []string{"cache"}) {
		t.Errorf("during the move: Deployments %v and budgets %v, want cache kept serving and its budget alone", deps, pdbs)
	}
	moving = moving.withAvailable("cache-a")
	_, moved := syncPoolsOnce(t, withZones("a"), moving)
	if deps, _, pdbs := moved.names(); !slices.Equal(deps, []string{"cache-a"}) || !slices.Equal(pdbs, []string{"cache-a"}) {
		t.Errorf("after the move: Deployments %v and budgets %v, want the zone pool's alone", deps, pdbs)
	}
}
