//go:build integration

// Package zones tests Memcacheds spread over zones: a pool per zone, each
// with its own Deployment, Service and budget, on its zone's nodes; moves
// between one pool and zone pools that keep the cache Available; a zone
// without nodes, a pool name taken by another Memcached, the budget during
// a move, and the adoption of an orphaned pool.
package zones

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"k8s.io/utils/ptr"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
	"github.com/kubelite/memcached-operator/pkg/resources"
	"github.com/kubelite/memcached-operator/test/integration/framework"
)

// clusterZones are the zones of the package's fake nodes, one node each.
// zone-d, which some tests ask for, has none.
var clusterZones = []string{"zone-a", "zone-b", "zone-c"}

func TestMain(m *testing.M) {
	framework.Main(m, framework.Config{Zones: clusterZones})
}

// TestIntegrationZonePools runs a Memcached with two of the package's three
// zones: each pool's Pods run on its zone's node only, each zone Service
// selects its zone's Pods only, the Memcached's Service selects them all,
// and the status lists both zones. Taking a zone out deletes its pool and
// leaves the other's Pods as they were.
func TestIntegrationZonePools(t *testing.T) {
	t.Parallel()
	ns := framework.NewNamespace(t)
	op := framework.StartOperator(t, ns)
	op.DeletesPools = true
	ctx := context.Background()
	zones := []string{"zone-a", "zone-b"}
	framework.CreateMemcached(t, ns, "cache", func(s *cachev1beta1.MemcachedSpec) {
		s.Replicas, s.Zones = ptr.To[int32](2), zones
	})
	mc := framework.WaitConverged(t, ns, "cache", metav1.ConditionTrue)

	var want []cachev1beta1.ZoneStatus
	for _, zone := range zones {
		want = append(want, cachev1beta1.ZoneStatus{Name: zone, Replicas: 2, ReadyReplicas: 2, AvailableReplicas: 2, UpdatedReplicas: 2,
			Endpoint: fmt.Sprintf("cache-%s.%s.svc:11211", zone, ns)})
	}
	if !slices.Equal(mc.Status.Zones, want) {
		t.Errorf("status.zones = %+v, want %+v", mc.Status.Zones, want)
	}
	if mc.Status.Replicas != 2 || mc.Status.AvailableReplicas != 2 {
		t.Errorf("status counts %d replicas, %d available; want 2 and 2, per zone", mc.Status.Replicas, mc.Status.AvailableReplicas)
	}

	all := podsOf(t, ns, labels.SelectorFromSet(resources.SelectorLabels(mc)))
	if len(all) != 4 {
		t.Fatalf("%d Pods, want 2 in each of 2 zones", len(all))
	}
	byZone := map[string][]string{}
	for _, zone := range zones {
		svc, err := framework.Kube().CoreV1().Services(ns).Get(ctx, "cache-"+zone, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("the Service of %s: %v", zone, err)
		}
		selected := podsOf(t, ns, labels.SelectorFromSet(svc.Spec.Selector))
		if len(selected) != 2 {
			t.Errorf("Service %s selects %d Pods, want the 2 of its zone", svc.Name, len(selected))
		}
		for _, p := range selected {
			node, err := framework.Kube().CoreV1().Nodes().Get(ctx, p.Spec.NodeName, metav1.GetOptions{})
			if err != nil {
				t.Fatalf("Pod %s: node %q: %v", p.Name, p.Spec.NodeName, err)
			}
			if got := node.Labels[corev1.LabelTopologyZone]; got != zone {
				t.Errorf("Pod %s of %s runs on node %s in zone %q", p.Name, zone, node.Name, got)
			}
			byZone[zone] = append(byZone[zone], string(p.UID))
		}
	}
	svc, err := framework.Kube().CoreV1().Services(ns).Get(ctx, "cache", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(podsOf(t, ns, labels.SelectorFromSet(svc.Spec.Selector))); n != 4 {
		t.Errorf("Service cache selects %d Pods, want all 4", n)
	}
	// The Pods of a zone pool are covered by the zone's budget alone.
	if _, err := framework.Kube().PolicyV1().PodDisruptionBudgets(ns).Get(ctx, "cache", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("PodDisruptionBudget cache: %v, want NotFound", err)
	}
	if _, err := framework.GetDeployment(ctx, ns, "cache"); !apierrors.IsNotFound(err) {
		t.Errorf("Deployment cache: %v, want NotFound", err)
	}

	patchZones(t, ns, "cache", []string{"zone-a"})
	framework.Eventually(t, framework.WaitLong, "the pool of zone-b is gone", func(ctx context.Context) (bool, string) {
		var left []string
		if _, err := framework.GetDeployment(ctx, ns, "cache-zone-b"); !apierrors.IsNotFound(err) {
			left = append(left, fmt.Sprintf("Deployment: %v", err))
		}
		if _, err := framework.Kube().CoreV1().Services(ns).Get(ctx, "cache-zone-b", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			left = append(left, fmt.Sprintf("Service: %v", err))
		}
		if _, err := framework.Kube().PolicyV1().PodDisruptionBudgets(ns).Get(ctx, "cache-zone-b", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			left = append(left, fmt.Sprintf("PodDisruptionBudget: %v", err))
		}
		return len(left) == 0, strings.Join(left, "; ")
	})
	mc = framework.WaitConverged(t, ns, "cache", metav1.ConditionTrue)
	if len(mc.Status.Zones) != 1 || mc.Status.Zones[0].Name != "zone-a" {
		t.Errorf("status.zones = %+v, want zone-a alone", mc.Status.Zones)
	}
	var still []string
	for _, p := range podsOf(t, ns, labels.SelectorFromSet(resources.PoolSelectorLabels(mc, "zone-a"))) {
		still = append(still, string(p.UID))
	}
	slices.Sort(still)
	slices.Sort(byZone["zone-a"])
	if !slices.Equal(still, byZone["zone-a"]) {
		t.Errorf("zone-a's Pods changed when zone-b was taken out: %v, then %v", byZone["zone-a"], still)
	}
}

// TestIntegrationZonePoolMoves moves a Memcached from one pool to three
// zone pools and back, and requires Available to hold at every write of
// the Memcached meanwhile, its status writes and the spec changes alike:
// the previous pool serves until the new ones are available.
func TestIntegrationZonePoolMoves(t *testing.T) {
	t.Parallel()
	ns := framework.NewNamespace(t)
	op := framework.StartOperator(t, ns)
	op.DeletesPools = true
	ctx := context.Background()
	framework.CreateMemcached(t, ns, "cache", func(s *cachev1beta1.MemcachedSpec) { s.Replicas = ptr.To[int32](2) })
	framework.WaitConverged(t, ns, "cache", metav1.ConditionTrue)
	available := watchAvailable(t, ns, "cache")

	patchZones(t, ns, "cache", clusterZones)
	framework.Eventually(t, framework.WaitLong, "the Memcached runs zone pools alone", func(ctx context.Context) (bool, string) {
		mc, err := framework.GetMemcached(ctx, ns, "cache")
		if err != nil {
			return false, err.Error()
		}
		_, err = framework.GetDeployment(ctx, ns, "cache")
		return apierrors.IsNotFound(err) && len(mc.Status.Zones) == 3 && mc.Status.ObservedGeneration == mc.Generation &&
				framework.Condition(mc, cachev1beta1.ConditionProgressing).Reason == cachev1beta1.ReasonComplete,
			fmt.Sprintf("Deployment cache: %v; status %+v", err, mc.Status)
	})
	if _, err := framework.Kube().PolicyV1().PodDisruptionBudgets(ns).Get(ctx, "cache", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("PodDisruptionBudget cache after the move to zones: %v, want NotFound", err)
	}

	patchZones(t, ns, "cache", nil)
	framework.Eventually(t, framework.WaitLong, "the Memcached runs one pool again", func(ctx context.Context) (bool, string) {
		mc, err := framework.GetMemcached(ctx, ns, "cache")
		if err != nil {
			return false, err.Error()
		}
		var left []string
		for _, zone := range clusterZones {
			if _, err := framework.GetDeployment(ctx, ns, "cache-"+zone); !apierrors.IsNotFound(err) {
				left = append(left, "cache-"+zone)
			}
		}
		return len(left) == 0 && len(mc.Status.Zones) == 0 && mc.Status.AvailableReplicas == 2 && mc.Status.ObservedGeneration == mc.Generation &&
				framework.Condition(mc, cachev1beta1.ConditionProgressing).Reason == cachev1beta1.ReasonComplete,
			fmt.Sprintf("Deployments left %v; status %+v", left, mc.Status)
	})
	if seen, lost := available(); len(lost) > 0 {
		t.Errorf("Available was not True at %d of the %d writes of the Memcached during the moves: %v", len(lost), seen, lost)
	} else {
		t.Logf("Available held at all %d writes of the Memcached during the moves", seen)
	}
}

// TestIntegrationZoneWithoutNodes asks for a zone no node is in: its Pods
// stay Pending, and the status names the zone.
func TestIntegrationZoneWithoutNodes(t *testing.T) {
	t.Parallel()
	ns := framework.NewNamespace(t)
	framework.StartOperator(t, ns)
	framework.CreateMemcached(t, ns, "cache", func(s *cachev1beta1.MemcachedSpec) { s.Zones = []string{"zone-a", "zone-d"} })
	framework.Eventually(t, framework.WaitLong, "the status names zone-d", func(ctx context.Context) (bool, string) {
		mc, err := framework.GetMemcached(ctx, ns, "cache")
		if err != nil {
			return false, err.Error()
		}
		a := framework.Condition(mc, cachev1beta1.ConditionAvailable)
		ok := len(mc.Status.Zones) == 2 && mc.Status.Zones[0].AvailableReplicas == 1 && mc.Status.Zones[1].AvailableReplicas == 0 &&
			a.Status == metav1.ConditionFalse && strings.Contains(a.Message, "zone zone-d: no Pod is available") && !strings.Contains(a.Message, "zone-a")
		return ok, fmt.Sprintf("status %+v", mc.Status)
	})
	pods := podsOf(t, ns, labels.SelectorFromSet(map[string]string{resources.ZoneLabel: "zone-d"}))
	if len(pods) != 1 || pods[0].Status.Phase != corev1.PodPending || pods[0].Spec.NodeName != "" {
		t.Errorf("zone-d's Pods: %d, want one Pending and unscheduled: %+v", len(pods), pods)
	}
}

// TestIntegrationZoneNamesRefused checks that the CRD refuses a zone whose
// pool name would not be a Service name, with a message that names the
// zone; the apiserver's error names the Memcached.
func TestIntegrationZoneNamesRefused(t *testing.T) {
	t.Parallel()
	ns := framework.NewNamespace(t)
	for _, tt := range []struct{ name, zone, want string }{
		{name: "cache", zone: "Zone_A", want: "zone Zone_A cannot name a pool"},
		{name: strings.Repeat("c", 40), zone: strings.Repeat("z", 23), want: "and zone " + strings.Repeat("z", 23) + " makes it longer"},
	} {
		mc := &cachev1beta1.Memcached{ObjectMeta: metav1.ObjectMeta{Name: tt.name, Namespace: ns}, Spec: cachev1beta1.MemcachedSpec{Zones: []string{"zone-a", tt.zone}}}
		_, err := framework.Memcacheds().CacheV1beta1().Memcacheds(ns).Create(context.Background(), mc, metav1.CreateOptions{})
		if !apierrors.IsInvalid(err) {
			t.Errorf("%s with zone %s: %v, want Invalid", tt.name, tt.zone, err)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, tt.want) || !strings.Contains(msg, `"`+tt.name+`"`) || strings.Contains(msg, "zone-a") {
			t.Errorf("%s with zone %s: %v, want a message that names the Memcached, has %q and does not name zone-a", tt.name, tt.zone, err, tt.want)
		}
	}
}

// patchZones sets spec.zones, or with nil removes it.
func patchZones(t *testing.T, ns, name string, zones []string) {
	t.Helper()
	body, err := json.Marshal(map[string]any{"spec": map[string]any{"zones": zones}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := framework.Memcacheds().CacheV1beta1().Memcacheds(ns).Patch(context.Background(), name, types.MergePatchType, body, metav1.PatchOptions{}); err != nil {
		t.Fatalf("setting spec.zones to %v: %v", zones, err)
	}
}

// podsOf lists the Pods of a selector.
func podsOf(t *testing.T, ns string, selector labels.Selector) []corev1.Pod {
	t.Helper()
	list, err := framework.Kube().CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: selector.String()})
	if err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// watchAvailable follows every write of the Memcached from now on, event
// by event in the order the apiserver made them, and returns a function
// that reports how many it saw and those at which Available was not True.
func watchAvailable(t *testing.T, ns, name string) func() (int, []string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	client := framework.Memcacheds().CacheV1beta1().Memcacheds(ns)
	mc, err := client.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	var mu sync.Mutex
	var seen int
	var lost []string
	rw, err := watchtools.NewRetryWatcherWithContext(ctx, mc.ResourceVersion, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, options metav1.ListOptions) (watch.Interface, error) {
			options.FieldSelector = "metadata.name=" + name
			return client.Watch(ctx, options)
		},
	})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range rw.ResultChan() {
			mc, ok := ev.Object.(*cachev1beta1.Memcached)
			if !ok {
				continue
			}
			mu.Lock()
			seen++
			if a := meta.FindStatusCondition(mc.Status.Conditions, cachev1beta1.ConditionAvailable); a == nil || a.Status != metav1.ConditionTrue {
				lost = append(lost, fmt.Sprintf("generation %d: %+v", mc.Generation, a))
			}
			mu.Unlock()
		}
	}()
	stop := sync.OnceFunc(func() {
		rw.Stop()
		cancel()
		<-done
	})
	t.Cleanup(stop)
	return func() (int, []string) {
		stop()
		mu.Lock()
		defer mu.Unlock()
		return seen, slices.Clone(lost)
	}
}

// TestIntegrationZonePoolNameTaken creates Memcached zc-zone-a first, then
// Memcached zc with zone zone-a, whose pool wants the same name: zc
// reports ResourceExists naming zc-zone-a, and its status names no
// endpoint of a Service it does not control. Its Service zc, which it
// does control, keeps its endpoint.
func TestIntegrationZonePoolNameTaken(t *testing.T) {
	t.Parallel()
	ns := framework.NewNamespace(t)
	framework.StartOperator(t, ns)
	framework.CreateMemcached(t, ns, "zc-zone-a", nil)
	framework.WaitConverged(t, ns, "zc-zone-a", metav1.ConditionTrue)
	framework.CreateMemcached(t, ns, "zc", func(s *cachev1beta1.MemcachedSpec) { s.Zones = []string{"zone-a"} })

	var mc *cachev1beta1.Memcached
	framework.Eventually(t, framework.WaitLong, "zc reports ResourceExists naming Memcached zc-zone-a", func(ctx context.Context) (bool, string) {
		var err error
		if mc, err = framework.GetMemcached(ctx, ns, "zc"); err != nil {
			return false, err.Error()
		}
		d := framework.Condition(mc, cachev1beta1.ConditionDegraded)
		return mc.Status.ObservedGeneration == mc.Generation && d.Reason == cachev1beta1.ReasonResourceExists &&
			strings.Contains(d.Message, "belongs to Memcached zc-zone-a"), fmt.Sprintf("%+v", d)
	})
	if len(mc.Status.Zones) != 1 || mc.Status.Zones[0].Name != "zone-a" {
		t.Fatalf("status.zones = %+v, want zone-a's entry", mc.Status.Zones)
	}
	if e := mc.Status.Zones[0].Endpoint; e != "" {
		t.Errorf("status.zones[zone-a].endpoint = %q, the Service of Memcached zc-zone-a", e)
	}
	if want := "zc." + ns + ".svc:11211"; mc.Status.Endpoint != want {
		t.Errorf("status.endpoint = %q, want %q, the Service zc controls", mc.Status.Endpoint, want)
	}
	svc, err := framework.Kube().CoreV1().Services(ns).Get(context.Background(), "zc-zone-a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ref := metav1.GetControllerOf(svc); ref == nil || ref.Name != "zc-zone-a" {
		t.Errorf("Service zc-zone-a is controlled by %+v, want Memcached zc-zone-a", ref)
	}
}

// TestIntegrationZoneMoveBudget moves a Memcached of 3 replicas with
// minAvailable 2 to zones, one of which has no node, so the move never
// ends and the pool without zones keeps serving. Its budget, the only one,
// then selects the Pods of every pool, and the disruption controller must
// allow at most 1 eviction over all of them, as minAvailable 2 allows in
// the serving pool alone; counted over every Pod, minAvailable 2 would
// allow 4.
func TestIntegrationZoneMoveBudget(t *testing.T) {
	t.Parallel()
	ns := framework.NewNamespace(t)
	framework.StartOperator(t, ns)
	ctx := context.Background()
	framework.CreateMemcached(t, ns, "cache", func(s *cachev1beta1.MemcachedSpec) {
		s.Replicas = ptr.To[int32](3)
		s.PodDisruptionBudget = &cachev1beta1.DisruptionBudget{MinAvailable: ptr.To(intstr.FromInt32(2))}
	})
	framework.WaitConverged(t, ns, "cache", metav1.ConditionTrue)
	patchZones(t, ns, "cache", []string{"zone-a", "zone-d"})

	framework.Eventually(t, framework.WaitLong, "zone-a's pool available while zone-d's has no node", func(ctx context.Context) (bool, string) {
		dep, err := framework.Kube().AppsV1().Deployments(ns).Get(ctx, "cache-zone-a", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return dep.Status.AvailableReplicas == 3, fmt.Sprintf("%d of 3 available", dep.Status.AvailableReplicas)
	})
	var pdb *policyv1.PodDisruptionBudget
	framework.Eventually(t, framework.WaitLong, "the disruption controller has counted every Pod under the move's budget", func(ctx context.Context) (bool, string) {
		var err error
		if pdb, err = framework.Kube().PolicyV1().PodDisruptionBudgets(ns).Get(ctx, "cache", metav1.GetOptions{}); err != nil {
			return false, err.Error()
		}
		return pdb.Spec.MaxUnavailable != nil && pdb.Status.ObservedGeneration == pdb.Generation && pdb.Status.ExpectedPods == 9 && pdb.Status.CurrentHealthy == 6,
			fmt.Sprintf("spec %+v, generation %d observed %d, %d expected, %d healthy", pdb.Spec, pdb.Generation, pdb.Status.ObservedGeneration, pdb.Status.ExpectedPods, pdb.Status.CurrentHealthy)
	})
	if pdb.Spec.MinAvailable != nil || pdb.Spec.MaxUnavailable.IntValue() != 1 {
		t.Errorf("the move's budget is %+v, want maxUnavailable 1, what minAvailable 2 allows in one pool of 3", pdb.Spec)
	}
	if pdb.Status.DisruptionsAllowed > 1 {
		t.Errorf("the budget over every Pod of the move (%+v) allows %d evictions, more than the 1 minAvailable 2 allows in the serving pool", pdb.Spec, pdb.Status.DisruptionsAllowed)
	}
	for _, name := range []string{"cache-zone-a", "cache-zone-d"} {
		if _, err := framework.Kube().PolicyV1().PodDisruptionBudgets(ns).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("budget %s exists during the move, over Pods the budget cache selects: %v", name, err)
		}
	}
}

// TestIntegrationZonesAdoptOrphanedPool deletes a Memcached without zones
// with deletionPolicy Orphan, then creates it again with a zone: the new
// one adopts the orphaned Deployment and budget, serves from them until
// its zone pool is available, then retires them, and ends with the zone
// pool's budget alone over its Pods.
func TestIntegrationZonesAdoptOrphanedPool(t *testing.T) {
	t.Parallel()
	ns := framework.NewNamespace(t)
	op := framework.StartOperator(t, ns)
	op.DeletesPools = true
	ctx := context.Background()
	framework.CreateMemcached(t, ns, "cache", func(s *cachev1beta1.MemcachedSpec) { s.DeletionPolicy = cachev1beta1.DeletionPolicyOrphan })
	framework.WaitConverged(t, ns, "cache", metav1.ConditionTrue)
	if err := framework.Memcacheds().CacheV1beta1().Memcacheds(ns).Delete(ctx, "cache", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, framework.WaitLong, "the Memcached is gone and its Deployment orphaned", func(ctx context.Context) (bool, string) {
		if _, err := framework.GetMemcached(ctx, ns, "cache"); !apierrors.IsNotFound(err) {
			return false, fmt.Sprintf("the Memcached: %v", err)
		}
		dep, err := framework.Kube().AppsV1().Deployments(ns).Get(ctx, "cache", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return metav1.GetControllerOf(dep) == nil, fmt.Sprintf("controller %+v", metav1.GetControllerOf(dep))
	})

	framework.CreateMemcached(t, ns, "cache", func(s *cachev1beta1.MemcachedSpec) { s.Zones = []string{"zone-a"} })
	framework.WaitConverged(t, ns, "cache", metav1.ConditionTrue)
	framework.Eventually(t, framework.WaitLong, "the orphaned pool retired, the zone pool's budget alone", func(ctx context.Context) (bool, string) {
		deps, err := framework.Kube().AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		pdbs, err := framework.Kube().PolicyV1().PodDisruptionBudgets(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		var names []string
		for _, d := range deps.Items {
			if d.DeletionTimestamp == nil {
				names = append(names, "deployment/"+d.Name)
			}
		}
		for _, p := range pdbs.Items {
			if p.DeletionTimestamp == nil {
				names = append(names, "pdb/"+p.Name)
			}
		}
		slices.Sort(names)
		return slices.Equal(names, []string{"deployment/cache-zone-a", "pdb/cache-zone-a"}), fmt.Sprintf("%v", names)
	})
	// The orphans went by adoption and retirement, not otherwise. Events
	// are sent in the background, so they are waited for.
	framework.Eventually(t, framework.WaitLong, "an Adopted Event for the orphaned Deployment and budget", func(ctx context.Context) (bool, string) {
		events := framework.NormalEvents(t, ns, "cache", "Adopted")
		for _, kind := range []string{"Deployment", "PodDisruptionBudget"} {
			if !slices.ContainsFunc(events, func(e string) bool { return strings.Contains(e, "orphaned "+kind+" cache,") }) {
				return false, fmt.Sprintf("none for the %s among %v", kind, events)
			}
		}
		return true, ""
	})
}
