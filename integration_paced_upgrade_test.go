//go:build integration

package main

import (
	"context"
	"fmt"
	"path/filepath"
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
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
	"github.com/kubelite/memcached-operator/pkg/deployutil"
	"github.com/kubelite/memcached-operator/pkg/resources"
)

// pacedCaches is how many Memcacheds the paced upgrade moves to the new
// rendering.
const pacedCaches = 20

// nextRenderingBinary builds the operator with the renderingnext tag: one
// rendering newer than the default build, whose Pod templates differ in
// the default preStop delay.
func nextRenderingBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "memcached-operator-next")
	if err := buildOperator(bin, "renderingnext"); err != nil {
		t.Fatal(err)
	}
	return bin
}

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
// builds in a rolling upgrade of the operator's Deployment.
func TestIntegrationPacedOperatorUpgrade(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	nextBin := nextRenderingBinary(t)
	args := []string{"--kubeconfig=" + suite.operatorKubeconfig, "--webhook-bind-address=0", "--leader-elect=false", "--namespace=" + ns}

	names := make([]string, pacedCaches)
	for i := range names {
		names[i] = fmt.Sprintf("paced-%02d", i)
		createMemcached(t, ns, names[i], nil)
	}
	const optedOut, changed = "opted-out", "paced-19"
	mc := &cachev1beta1.Memcached{ObjectMeta: metav1.ObjectMeta{Name: optedOut, Namespace: ns,
		Annotations: map[string]string{DeferOperatorRolloutsAnnotation: "true"}}}
	if _, err := suite.mc.CacheV1beta1().Memcacheds(ns).Create(ctx, mc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	const zoned = "paced-zones"
	createMemcached(t, ns, zoned, func(s *cachev1beta1.MemcachedSpec) { s.Zones = suiteZones })
	var zonePools []string
	for _, zone := range suiteZones {
		zonePools = append(zonePools, zoned+"-"+zone)
	}
	all := append(slices.Clone(names), optedOut, zoned)

	old := newBinaryOperator(t)
	old.start(t, operatorBinary(t), args...)
	for _, name := range all {
		waitConverged(t, ns, name, metav1.ConditionTrue)
	}
	if err := old.terminate(30 * time.Second); err != nil {
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
	next := newBinaryOperator(t)
	next.start(t, nextBin, args...)

	// A spec change while the others wait for their turn is applied at
	// once.
	eventually(t, waitLong, "Memcacheds queue for a rollout slot", func(ctx context.Context) (bool, string) {
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
	eventually(t, waitLong, "the spec change reaches its Deployment", func(ctx context.Context) (bool, string) {
		d, err := fetchDeployment(ctx, ns, changed)
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
		eventually(t, 5*time.Minute, name+" runs the new rendering", func(ctx context.Context) (bool, string) {
			d, err := fetchDeployment(ctx, ns, name)
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
	waitProgressing(t, ns, optedOut, cachev1beta1.ReasonOperatorRolloutDeferred)
	updateSpec(t, ns, optedOut, func(s *cachev1beta1.MemcachedSpec) { s.Threads = 8 })
	eventually(t, waitLong, "the opted-out Memcached takes the new template with its spec change", func(ctx context.Context) (bool, string) {
		d, err := fetchDeployment(ctx, ns, optedOut)
		if err != nil {
			return false, err.Error()
		}
		return preStopSeconds(d) == 6, fmt.Sprintf("preStop %d", preStopSeconds(d))
	})
	for _, name := range all {
		waitConverged(t, ns, name, metav1.ConditionTrue)
	}
	if err := next.terminate(30 * time.Second); err != nil {
		t.Fatalf("stopping the new build: %v", err)
	}

	// The old build leads again: it leaves every child as the new one
	// applied it, and says so.
	upgraded := deploymentsByName(t, ns)
	pods := podUIDs(t, ns)
	again := newBinaryOperator(t)
	again.start(t, operatorBinary(t), args...)
	for _, name := range all {
		eventually(t, waitLong, name+" reports the newer rendering", func(ctx context.Context) (bool, string) {
			mc, err := fetchMemcached(ctx, ns, name)
			if err != nil {
				return false, err.Error()
			}
			cond := meta.FindStatusCondition(mc.Status.Conditions, cachev1beta1.ConditionDegraded)
			return cond != nil && cond.Status == metav1.ConditionTrue && cond.Reason == cachev1beta1.ReasonRenderedByNewerOperator,
				fmt.Sprintf("Degraded %+v", cond)
		})
	}
	for name, d := range deploymentsByName(t, ns) {
		if d.ResourceVersion != upgraded[name].ResourceVersion {
			t.Errorf("the old build changed Deployment %s (generation %d → %d)", name, upgraded[name].Generation, d.Generation)
		}
	}
	if after := podUIDs(t, ns); !slices.Equal(after, pods) {
		t.Errorf("Pods changed while the old build led: %d before, %d after", len(pods), len(after))
	}
}

// updateSpec changes the spec of a Memcached with an update, read again
// and retried on a Conflict, and returns the Memcached as updated.
func updateSpec(t *testing.T, ns, name string, change func(*cachev1beta1.MemcachedSpec)) *cachev1beta1.Memcached {
	t.Helper()
	var updated *cachev1beta1.Memcached
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		mc, err := fetchMemcached(context.Background(), ns, name)
		if err != nil {
			return err
		}
		change(&mc.Spec)
		updated, err = suite.mc.CacheV1beta1().Memcacheds(ns).Update(context.Background(), mc, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("updating the spec of %s: %v", name, err)
	}
	return updated
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
	list, err := suite.kube.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
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
	watcher, err := suite.kube.AppsV1().Deployments(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
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
	list, err := suite.mc.CacheV1beta1().Memcacheds(ns).List(context.Background(), metav1.ListOptions{})
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

func deploymentsByName(t *testing.T, ns string) map[string]*appsv1.Deployment {
	t.Helper()
	list, err := suite.kube.AppsV1().Deployments(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*appsv1.Deployment{}
	for i := range list.Items {
		out[list.Items[i].Name] = &list.Items[i]
	}
	return out
}

// podUIDs lists the UIDs of the namespace's Pods, sorted.
func podUIDs(t *testing.T, ns string) []types.UID {
	t.Helper()
	list, err := suite.kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var uids []types.UID
	for _, p := range list.Items {
		uids = append(uids, p.UID)
	}
	slices.Sort(uids)
	return uids
}

// preStopSeconds is the memcached container's preStop sleep, 0 if none.
func preStopSeconds(d *appsv1.Deployment) int64 {
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name == resources.MemcachedContainerName && c.Lifecycle != nil && c.Lifecycle.PreStop != nil && c.Lifecycle.PreStop.Sleep != nil {
			return c.Lifecycle.PreStop.Sleep.Seconds
		}
	}
	return 0
}
