//go:build integration

package rollout

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
	"github.com/kubelite/memcached-operator/pkg/deployutil"
	"github.com/kubelite/memcached-operator/pkg/resources"
	"github.com/kubelite/memcached-operator/test/integration/framework"
)

// pacedCaches is how many Memcacheds the paced upgrade moves to the new
// rendering.
const pacedCaches = 20

// deferOperatorRollouts is the annotation with which a Memcached opts out
// of the rollouts an operator upgrade causes, spelt as docs/api.md gives
// it to users: the test sets it as they do, from outside the operator's
// package.
const deferOperatorRollouts = "cache.kubelite.io/defer-operator-rollouts"

// TestIntegrationPacedOperatorUpgrade upgrades the operator binary to a
// build whose rendering differs, with the default
// --max-concurrent-rollouts of 1, over 20 converged Memcacheds of one
// replica, one with a pool in each of three zones, and one opted out of
// operator rollouts:
//
//   - no two Deployments roll at once, not even two zone pools of one
//     Memcached, and all end on the new template;
//   - a spec change made while they wait reaches its Deployment at once;
//   - the opted-out one keeps its template until its spec changes;
//   - the old build, leading again, changes no child and no Pod.
//
// The operators run one after the other, as leadership moves between
// builds in a rolling upgrade of the operator's Deployment. Each watches
// the test's namespace alone, and --max-concurrent-rollouts counts the
// rollouts of one operator, so the pacing shows within the namespace.
func TestIntegrationPacedOperatorUpgrade(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := framework.NewNamespace(t)
	nextBin := framework.BuildBinary(t, "renderingnext")

	// A new Pod counts as available, and its Deployment's rollout as done,
	// minReadySeconds after it is Ready: a pacer that freed the slot on
	// Ready would start the next rollout within them, and the watch below
	// would see two at once. 3 seconds show that, where the default 10
	// would only make the test longer.
	shortMinReady := func(s *cachev1beta1.MemcachedSpec) { s.MinReadySeconds = ptr.To[int32](3) }
	names := make([]string, pacedCaches)
	for i := range names {
		names[i] = fmt.Sprintf("paced-%02d", i)
		framework.CreateMemcached(t, ns, names[i], shortMinReady)
	}
	const optedOut, changed = "opted-out", "paced-19"
	mc := &cachev1beta1.Memcached{ObjectMeta: metav1.ObjectMeta{Name: optedOut, Namespace: ns,
		Annotations: map[string]string{deferOperatorRollouts: "true"}}}
	if _, err := framework.Memcacheds().CacheV1beta1().Memcacheds(ns).Create(ctx, mc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	const zoned = "paced-zones"
	framework.CreateMemcached(t, ns, zoned, func(s *cachev1beta1.MemcachedSpec) {
		shortMinReady(s)
		s.Zones = clusterZones
	})
	var zonePools []string
	for _, zone := range clusterZones {
		zonePools = append(zonePools, zoned+"-"+zone)
	}
	all := append(slices.Clone(names), optedOut, zoned)

	old := framework.StartOperator(t, ns)
	for _, name := range all {
		framework.WaitConverged(t, ns, name, metav1.ConditionTrue)
	}
	if err := old.Terminate(time.Minute); err != nil {
		t.Fatalf("stopping the old build: %v", err)
	}
	before := deploymentsByName(t, ns)
	for _, name := range append(append(slices.Clone(names), optedOut), zonePools...) {
		if got, want := before[name].Annotations[resources.RenderingAnnotation], strconv.Itoa(resources.RenderingVersion); got != want {
			t.Fatalf("Deployment %s has rendering %q before the upgrade, want %s", name, got, want)
		}
	}

	rolling := watchRollouts(t, ns, changed, optedOut)
	start := time.Now()
	next := framework.StartOperatorBinary(t, nextBin, ns)

	// A spec change while the others wait for their turn is applied at
	// once.
	framework.Eventually(t, framework.WaitLong, "Memcacheds queue for a rollout slot", func(ctx context.Context) (bool, string) {
		n := countProgressing(t, ns, names, cachev1beta1.ReasonOperatorRolloutQueued)
		return n >= pacedCaches/2, fmt.Sprintf("%d queued", n)
	})
	// The operator writes the status meanwhile, so the update retries
	// on a Conflict with the Memcached as it then is.
	changedMC := updateSpec(t, ns, changed, func(s *cachev1beta1.MemcachedSpec) {
		s.Pod = &cachev1beta1.PodOverrides{Labels: map[string]string{"tier": "changed"}}
	})
	// It is applied with no slot: the check after the wait, that other
	// Memcacheds still queue, shows it did not wait its turn.
	framework.Eventually(t, framework.WaitLong, "the spec change reaches its Deployment", func(ctx context.Context) (bool, string) {
		d, err := framework.GetDeployment(ctx, ns, changed)
		if err != nil {
			return false, err.Error()
		}
		gen := d.Annotations[resources.GenerationAnnotation]
		return gen == strconv.FormatInt(changedMC.Generation, 10) && d.Spec.Template.Labels["tier"] == "changed", "generation " + gen
	})
	if n := countProgressing(t, ns, names, cachev1beta1.ReasonOperatorRolloutQueued); n == 0 {
		t.Errorf("every operator rollout had run by the time the spec change was applied; the test shows nothing about it not waiting")
	}

	for _, name := range append(slices.Clone(names), zonePools...) {
		framework.Eventually(t, 5*time.Minute, name+" runs the new rendering", func(ctx context.Context) (bool, string) {
			d, err := framework.GetDeployment(ctx, ns, name)
			if err != nil {
				return false, err.Error()
			}
			return d.Annotations[resources.RenderingAnnotation] == strconv.Itoa(resources.RenderingVersion+1) && preStopSeconds(d) == 6 && deployutil.Complete(d, 1),
				fmt.Sprintf("rendering %s, preStop %d, status %+v", d.Annotations[resources.RenderingAnnotation], preStopSeconds(d), d.Status)
		})
	}
	took := time.Since(start)
	most := rolling.most()
	t.Logf("%d Memcacheds and %d zone pools moved to the new rendering in %s; at most %d Deployments rolled at once", pacedCaches, len(zonePools), took.Round(100*time.Millisecond), most)
	if most > 1 {
		t.Errorf("%d Deployments rolled at once for the operator's change, want at most 1 (--max-concurrent-rollouts)", most)
	}
	if most == 0 {
		t.Errorf("no rollout was seen; the test proves nothing")
	}

	// The opted-out Memcached kept its template, and says why.
	if d := deploymentsByName(t, ns)[optedOut]; d.Generation != before[optedOut].Generation || preStopSeconds(d) != 5 {
		t.Errorf("the opted-out Memcached's Deployment changed: generation %d → %d, preStop %ds", before[optedOut].Generation, d.Generation, preStopSeconds(d))
	}
	framework.WaitProgressing(t, ns, optedOut, cachev1beta1.ReasonOperatorRolloutDeferred)
	updateSpec(t, ns, optedOut, func(s *cachev1beta1.MemcachedSpec) { s.Threads = 8 })
	framework.Eventually(t, framework.WaitLong, "the opted-out Memcached takes the new template with its spec change", func(ctx context.Context) (bool, string) {
		d, err := framework.GetDeployment(ctx, ns, optedOut)
		if err != nil {
			return false, err.Error()
		}
		return preStopSeconds(d) == 6, fmt.Sprintf("preStop %d", preStopSeconds(d))
	})
	for _, name := range all {
		framework.WaitConverged(t, ns, name, metav1.ConditionTrue)
	}
	if err := next.Terminate(time.Minute); err != nil {
		t.Fatalf("stopping the new build: %v", err)
	}

	// The old build leads again: it leaves every child as the new one
	// applied it, and says so.
	upgraded := deploymentsByName(t, ns)
	pods := podUIDs(t, ns)
	again := framework.StartOperator(t, ns)
	for _, name := range all {
		framework.Eventually(t, framework.WaitLong, name+" reports the newer rendering", func(ctx context.Context) (bool, string) {
			mc, err := framework.GetMemcached(ctx, ns, name)
			if err != nil {
				return false, err.Error()
			}
			cond := meta.FindStatusCondition(mc.Status.Conditions, cachev1beta1.ConditionDegraded)
			return cond != nil && cond.Status == metav1.ConditionTrue && cond.Reason == cachev1beta1.ReasonRenderedByNewerOperator,
				fmt.Sprintf("Degraded %+v", cond)
		})
	}
	// Its writes are read once two resync passes have found nothing more to
	// do. The Deployments' resourceVersions are not compared: their
	// controller still writes their status while the rollouts' last old
	// Pods terminate (status.terminatingReplicas).
	again.WaitTwoResyncs(t, len(all))
	for _, e := range again.Writes(t) {
		if r := e.Resource(); r != "memcacheds/status" && r != "events" {
			t.Errorf("the old build, leading again, sent %s; it writes only statuses and Events", e)
		}
	}
	for name, d := range deploymentsByName(t, ns) {
		if d.Generation != upgraded[name].Generation || preStopSeconds(d) != preStopSeconds(upgraded[name]) {
			t.Errorf("Deployment %s changed while the old build led: generation %d → %d, preStop %ds → %ds",
				name, upgraded[name].Generation, d.Generation, preStopSeconds(upgraded[name]), preStopSeconds(d))
		}
	}
	if after := podUIDs(t, ns); !slices.Equal(after, pods) {
		t.Errorf("Pods changed while the old build led: %d before, %d after", len(pods), len(after))
	}
}

// rolloutWatch follows the Deployments of a namespace and counts how
// many roll out at once.
type rolloutWatch struct {
	mu      sync.Mutex
	rolling map[string]bool
	peak    int
}

func (w *rolloutWatch) most() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.peak
}

// watchRollouts counts, until the test ends, the Deployments of ns whose
// rollout has not completed, but for those named in except.
func watchRollouts(t *testing.T, ns string, except ...string) *rolloutWatch {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	list, err := framework.Kube().AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w := &rolloutWatch{rolling: map[string]bool{}}
	observe := func(d *appsv1.Deployment) {
		if slices.Contains(except, d.Name) {
			return
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		w.rolling[d.Name] = !deployutil.Complete(d, ptr.Deref(d.Spec.Replicas, 1))
		n := 0
		for _, r := range w.rolling {
			if r {
				n++
			}
		}
		w.peak = max(w.peak, n)
	}
	for i := range list.Items {
		observe(&list.Items[i])
	}
	watcher, err := framework.Kube().AppsV1().Deployments(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for ev := range watcher.ResultChan() {
			if d, ok := ev.Object.(*appsv1.Deployment); ok && ev.Type != watch.Deleted {
				observe(d)
			}
		}
	}()
	t.Cleanup(watcher.Stop)
	return w
}

// countProgressing counts the named Memcacheds whose Progressing has reason.
func countProgressing(t *testing.T, ns string, names []string, reason string) int {
	t.Helper()
	list, err := framework.Memcacheds().CacheV1beta1().Memcacheds(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, mc := range list.Items {
		cond := meta.FindStatusCondition(mc.Status.Conditions, cachev1beta1.ConditionProgressing)
		if slices.Contains(names, mc.Name) && cond != nil && cond.Reason == reason {
			n++
		}
	}
	return n
}

// deploymentsByName lists the namespace's Deployments by name.
func deploymentsByName(t *testing.T, ns string) map[string]*appsv1.Deployment {
	t.Helper()
	list, err := framework.Kube().AppsV1().Deployments(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*appsv1.Deployment{}
	for i := range list.Items {
		out[list.Items[i].Name] = &list.Items[i]
	}
	return out
}

// podUIDs lists the UIDs of the namespace's Pods, sorted, but for those
// being deleted: a Pod of a finished rollout may linger a moment.
func podUIDs(t *testing.T, ns string) []types.UID {
	t.Helper()
	list, err := framework.Kube().CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var uids []types.UID
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			uids = append(uids, p.UID)
		}
	}
	slices.Sort(uids)
	return uids
}
