//go:build integration

package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"k8s.io/utils/ptr"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
	"github.com/kubelite/memcached-operator/pkg/deployutil"
	"github.com/kubelite/memcached-operator/pkg/resources"
)

// readyPods follows how many Pods of a selector are Ready, event by event
// in the order the apiserver wrote them, from a List taken before the
// change under test. A Pod counts as Ready while its Ready condition is
// True and it is not being deleted: a Pod that is being deleted leaves the
// Service's endpoints and DNS records at once, so no client finds it any
// more, even while its preStop delay keeps it serving.
type readyPods struct {
	mu sync.Mutex
	// pods are the Pods that exist, by name, and whether each is Ready.
	pods map[string]bool
	// fewest is the fewest Ready Pods at any moment seen, and fewestAt
	// the Pods at the first such moment.
	fewest   int
	fewestAt string
	// deleted are the Pods whose deletion the watch delivered.
	deleted []string
	// err is why the watch ended early, if it did.
	err error
	// transitions lists each change of the count of Ready Pods, for the log.
	transitions []string
	stop        func()
}

// watchReadyPods lists the Pods of selector in ns and follows them until
// the test ends or stop is called.
func watchReadyPods(t *testing.T, ns, selector string) *readyPods {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pods := suite.kube.CoreV1().Pods(ns)
	list, err := pods.List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	w := &readyPods{pods: map[string]bool{}}
	for i := range list.Items {
		w.pods[list.Items[i].Name] = podServes(&list.Items[i])
	}
	w.fewest = w.readyLocked()
	w.fewestAt = w.describeLocked()
	w.transitions = []string{fmt.Sprintf("start: %d Ready %s", w.fewest, w.fewestAt)}
	// The retry watcher resumes from the last resourceVersion it
	// delivered if the watch closes, so no event is lost or reordered.
	rw, err := watchtools.NewRetryWatcherWithContext(ctx, list.ResourceVersion, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, options metav1.ListOptions) (watch.Interface, error) {
			options.LabelSelector = selector
			return pods.Watch(ctx, options)
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
			w.observe(ev)
		}
	}()
	var once sync.Once
	w.stop = func() {
		once.Do(func() {
			rw.Stop()
			cancel()
			<-done
		})
	}
	t.Cleanup(w.stop)
	return w
}

// podServes reports whether a Pod is Ready and not being deleted.
func podServes(p *corev1.Pod) bool {
	return p.DeletionTimestamp == nil && slices.ContainsFunc(p.Status.Conditions, func(c corev1.PodCondition) bool {
		return c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue
	})
}

func (w *readyPods) observe(ev watch.Event) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch ev.Type {
	case watch.Added, watch.Modified, watch.Deleted:
		p, ok := ev.Object.(*corev1.Pod)
		if !ok {
			return
		}
		before := w.readyLocked()
		if ev.Type == watch.Deleted {
			delete(w.pods, p.Name)
			w.deleted = append(w.deleted, p.Name)
		} else {
			w.pods[p.Name] = podServes(p)
		}
		n := w.readyLocked()
		if n != before {
			w.transitions = append(w.transitions, fmt.Sprintf("%s %s: %d Ready %s", ev.Type, p.Name, n, w.describeLocked()))
		}
		if n < w.fewest {
			w.fewest, w.fewestAt = n, w.describeLocked()
		}
	case watch.Error:
		if w.err == nil {
			w.err = fmt.Errorf("watch error: %v", ev.Object)
		}
	}
}

func (w *readyPods) readyLocked() int {
	n := 0
	for _, ready := range w.pods {
		if ready {
			n++
		}
	}
	return n
}

// describeLocked lists the Pods with their readiness.
func (w *readyPods) describeLocked() string {
	var out []string
	for name, ready := range w.pods {
		out = append(out, fmt.Sprintf("%s=%t", name, ready))
	}
	slices.Sort(out)
	return "[" + strings.Join(out, " ") + "]"
}

// state returns the Pods that exist and whether each is Ready, and the
// Pods the watch saw deleted.
func (w *readyPods) state() (map[string]bool, []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	pods := make(map[string]bool, len(w.pods))
	for k, v := range w.pods {
		pods[k] = v
	}
	return pods, slices.Clone(w.deleted)
}

// TestIntegrationOneReplicaRolloutKeepsAReadyPod rolls a Memcached of one
// replica (a Pod annotation changes its template), its replacement Pod
// slow to start, and follows its Pods from before the change until the
// old Pod is gone: at every moment at least one Pod is Ready. Under a
// strategy that stops the old Pod before its replacement is Ready
// (maxUnavailable 1) the watch sees a moment with none.
func TestIntegrationOneReplicaRolloutKeepsAReadyPod(t *testing.T) {
	startOperator(t)
	ns := newNamespace(t)
	createMemcached(t, ns, "cache", func(s *cachev1beta1.MemcachedSpec) { s.Replicas = ptr.To[int32](1) })
	mc := waitConverged(t, ns, "cache", metav1.ConditionTrue)
	ctx := context.Background()
	before, err := fetchDeployment(ctx, ns, "cache")
	if err != nil {
		t.Fatal(err)
	}

	w := watchReadyPods(t, ns, mc.Status.Selector)
	oldPods, _ := w.state()
	if len(oldPods) != 1 {
		t.Fatalf("Pods before the rollout = %v, want one", oldPods)
	}
	// kwok makes a scheduled Pod Ready at once, where a node takes
	// seconds to pull and start it. Cordoned nodes stand in for that: the
	// replacement stays Pending for two seconds, time enough for a
	// strategy that stops the old Pod first to do so.
	setUnschedulable(t, true)
	t.Cleanup(func() { setUnschedulable(t, false) })
	patchSpec(t, suite.mc, ns, "cache", `{"spec":{"pod":{"annotations":{"example.com/rollout":"1"}}}}`)
	eventually(t, waitLong, "the replacement Pod exists", func(ctx context.Context) (bool, string) {
		pods, _ := w.state()
		for name := range pods {
			if _, old := oldPods[name]; !old {
				return true, ""
			}
		}
		return false, fmt.Sprintf("Pods %v", pods)
	})
	time.Sleep(2 * time.Second)
	setUnschedulable(t, false)

	// Done when the Deployment has rolled out the new template and the
	// watch has seen the old Pod go and only its replacement remain.
	eventually(t, waitLong, "the rollout completes and the old Pod is gone", func(ctx context.Context) (bool, string) {
		dep, err := fetchDeployment(ctx, ns, "cache")
		if err != nil {
			return false, err.Error()
		}
		pods, deleted := w.state()
		var newReady int
		for name, ready := range pods {
			if _, old := oldPods[name]; !old && ready {
				newReady++
			}
		}
		oldGone := true
		for name := range oldPods {
			oldGone = oldGone && slices.Contains(deleted, name)
		}
		return dep.Generation > before.Generation && deployutil.Complete(dep, 1) && oldGone && len(pods) == 1 && newReady == 1,
			fmt.Sprintf("Deployment generation %d status %+v; Pods %v, deleted %v", dep.Generation, dep.Status, pods, deleted)
	})
	w.stop()
	w.mu.Lock()
	defer w.mu.Unlock()
	t.Logf("Ready Pods through the rollout:\n%s", strings.Join(w.transitions, "\n"))
	if w.err != nil {
		t.Fatalf("the Pod watch failed: %v", w.err)
	}
	if w.fewest < 1 {
		t.Errorf("at one moment %d Pods were Ready: %s", w.fewest, w.fewestAt)
	}
}

// revisionAnnotation is the Deployment controller's revision number of a
// Deployment and of each of its ReplicaSets.
const revisionAnnotation = "deployment.kubernetes.io/revision"

// replicaSetReplicas returns spec.replicas of each ReplicaSet the
// Deployment controls, by its revision.
func replicaSetReplicas(ctx context.Context, ns string, dep *appsv1.Deployment) (map[string]int32, error) {
	list, err := suite.kube.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{LabelSelector: metav1.FormatLabelSelector(dep.Spec.Selector)})
	if err != nil {
		return nil, err
	}
	out := map[string]int32{}
	for _, rs := range list.Items {
		if ref := metav1.GetControllerOf(&rs); ref != nil && ref.UID == dep.UID {
			out[rs.Annotations[revisionAnnotation]] = ptr.Deref(rs.Spec.Replicas, 0)
		}
	}
	return out, nil
}

// assertNoWritesWhenSynced syncs the converged Memcached (a label, then
// two resync passes) and fails the test if the operator writes anything.
func assertNoWritesWhenSynced(t *testing.T, op *operator, ns, name, what string) {
	t.Helper()
	settle(t, op)
	mark, syncs := op.requests.Len(), op.Reconciles()
	patch := fmt.Appendf(nil, `{"metadata":{"labels":{"touched":"%d"}}}`, time.Now().UnixNano())
	if _, err := suite.mc.CacheV1beta1().Memcacheds(ns).Patch(context.Background(), name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the touched Memcached is synced", func(context.Context) (bool, string) {
		return op.Reconciles() > syncs, fmt.Sprintf("%v syncs", op.Reconciles()-syncs)
	})
	waitTwoResyncs(t, op.syncs, memcachedsIn(t))
	if w := op.requests.Since(mark, request.write); len(w) > 0 {
		t.Errorf("%s: %d writes when synced: %v", what, len(w), w)
	}
}

// TestIntegrationPauseHoldsRunningRollout pauses a Memcached of three
// replicas in the middle of a rollout and checks that the rollout stops:
// with every node cordoned, the rollout's first new Pod stays Pending
// (maxUnavailable 0 keeps the three old ones), the Memcached is paused,
// and its Deployment is paused by the operator's pause manager. Once the
// nodes are schedulable again the new Pod becomes Ready, and the paused
// Deployment takes no further step: one updated replica, the old
// ReplicaSet still at three. Meanwhile the operator sends no write. After
// the Memcached is unpaused, the operator resumes the rollout and it
// completes, with no drift repaired along the way.
func TestIntegrationPauseHoldsRunningRollout(t *testing.T) {
	op := startOperator(t)
	ns := newNamespace(t)
	ctx := context.Background()
	createMemcached(t, ns, "cache", func(s *cachev1beta1.MemcachedSpec) { s.Replicas = ptr.To[int32](3) })
	waitConverged(t, ns, "cache", metav1.ConditionTrue)

	setUnschedulable(t, true)
	t.Cleanup(func() { setUnschedulable(t, false) })
	patchSpec(t, suite.mc, ns, "cache", `{"spec":{"pod":{"annotations":{"example.com/rollout":"1"}}}}`)
	eventually(t, waitLong, "the rollout waits for its first new Pod", func(ctx context.Context) (bool, string) {
		dep, err := fetchDeployment(ctx, ns, "cache")
		if err != nil {
			return false, err.Error()
		}
		return dep.Status.ObservedGeneration == dep.Generation && dep.Status.UpdatedReplicas == 1 &&
				dep.Status.Replicas == 4 && dep.Status.AvailableReplicas == 3,
			fmt.Sprintf("generation %d, status %+v", dep.Generation, dep.Status)
	})

	patchSpec(t, suite.mc, ns, "cache", `{"spec":{"paused":true}}`)
	eventually(t, waitLong, "the Deployment is paused by the operator and the Memcached says Paused", func(ctx context.Context) (bool, string) {
		dep, err := fetchDeployment(ctx, ns, "cache")
		if err != nil {
			return false, err.Error()
		}
		mc, err := fetchMemcached(ctx, ns, "cache")
		if err != nil {
			return false, err.Error()
		}
		p := condition(mc, cachev1beta1.ConditionProgressing)
		return dep.Spec.Paused && deployutil.PausedBy(dep, resources.PauseManager) && p.Reason == cachev1beta1.ReasonPaused && p.ObservedGeneration == mc.Generation,
			fmt.Sprintf("Deployment paused %t (by the operator %t), Progressing %+v", dep.Spec.Paused, deployutil.PausedBy(dep, resources.PauseManager), p)
	})
	assertNoWritesWhenSynced(t, op, ns, "cache", "paused Memcached, its rollout paused")

	setUnschedulable(t, false)
	eventually(t, waitLong, "the new Pod is Ready and the Deployment controller has seen it", func(ctx context.Context) (bool, string) {
		dep, err := fetchDeployment(ctx, ns, "cache")
		if err != nil {
			return false, err.Error()
		}
		return dep.Status.ObservedGeneration == dep.Generation && dep.Status.AvailableReplicas == 4,
			fmt.Sprintf("generation %d, status %+v", dep.Generation, dep.Status)
	})
	// An unpaused Deployment takes its next step, scaling the old
	// ReplicaSet down, in the sync that writes that status; a few more
	// seconds are margin.
	deadline := time.Now().Add(3 * time.Second)
	for {
		dep, err := fetchDeployment(ctx, ns, "cache")
		if err != nil {
			t.Fatal(err)
		}
		sets, err := replicaSetReplicas(ctx, ns, dep)
		if err != nil {
			t.Fatal(err)
		}
		if want := map[string]int32{"1": 3, "2": 1}; dep.Status.UpdatedReplicas != 1 || dep.Status.Replicas != 4 || !maps.Equal(sets, want) {
			t.Fatalf("the paused rollout went on: Deployment status %+v, ReplicaSet replicas by revision %v, want %v", dep.Status, sets, want)
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}

	patchSpec(t, suite.mc, ns, "cache", `{"spec":{"paused":false}}`)
	waitConverged(t, ns, "cache", metav1.ConditionTrue)
	dep, err := fetchDeployment(ctx, ns, "cache")
	if err != nil {
		t.Fatal(err)
	}
	if dep.Spec.Paused || deployutil.PausedBy(dep, resources.PauseManager) || !deployutil.Complete(dep, 3) {
		t.Errorf("after the unpause: Deployment paused %t (by the operator %t), status %+v; want resumed and complete",
			dep.Spec.Paused, deployutil.PausedBy(dep, resources.PauseManager), dep.Status)
	}
	if e := normalEvents(t, ns, "cache", "DriftRepaired"); len(e) > 0 {
		t.Errorf("the pause was repaired as drift: %v", e)
	}
	if w := pauseWrites(op); len(w) != 2 {
		t.Errorf("the pause manager's writes = %v, want two: the pause and the resume", w)
	}
}

// pauseWrites returns the writes the operator's pause manager sent.
func pauseWrites(op *operator) []request {
	return op.requests.Since(0, func(r request) bool {
		return r.write() && strings.Contains(r.path, "/deployments/") &&
			strings.Contains(r.query, "fieldManager="+resources.PauseManager)
	})
}

// normalEvents returns the Normal Events about the Memcached with reason.
func normalEvents(t *testing.T, ns, name, reason string) []string {
	t.Helper()
	list, err := suite.kube.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{
		FieldSelector: "involvedObject.kind=Memcached,involvedObject.name=" + name + ",reason=" + reason + ",type=Normal",
	})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range list.Items {
		out = append(out, e.Message)
	}
	return out
}

// TestIntegrationHandPausedRolloutStaysPaused pauses a Memcached's
// Deployment by hand, as kubectl rollout pause does. The operator leaves
// that pause alone: the Memcached says DeploymentPaused; pausing and
// unpausing the Memcached neither pauses nor resumes the Deployment, which
// stays paused; a converged sync writes nothing. Resuming by hand ends it.
func TestIntegrationHandPausedRolloutStaysPaused(t *testing.T) {
	op := startOperator(t)
	ns := newNamespace(t)
	ctx := context.Background()
	createMemcached(t, ns, "cache", func(s *cachev1beta1.MemcachedSpec) { s.Replicas = ptr.To[int32](1) })
	waitConverged(t, ns, "cache", metav1.ConditionTrue)

	if _, err := suite.kube.AppsV1().Deployments(ns).Patch(ctx, "cache", types.StrategicMergePatchType, []byte(`{"spec":{"paused":true}}`), metav1.PatchOptions{FieldManager: "kubectl-rollout"}); err != nil {
		t.Fatal(err)
	}
	waitProgressing(t, ns, "cache", cachev1beta1.ReasonDeploymentPaused)
	patchSpec(t, suite.mc, ns, "cache", `{"spec":{"paused":true}}`)
	waitProgressing(t, ns, "cache", cachev1beta1.ReasonPaused)
	patchSpec(t, suite.mc, ns, "cache", `{"spec":{"paused":false}}`)
	waitProgressing(t, ns, "cache", cachev1beta1.ReasonDeploymentPaused)
	dep, err := fetchDeployment(ctx, ns, "cache")
	if err != nil {
		t.Fatal(err)
	}
	if !dep.Spec.Paused || deployutil.PausedBy(dep, resources.PauseManager) {
		t.Errorf("Deployment paused %t, by the operator %t; want paused by hand only", dep.Spec.Paused, deployutil.PausedBy(dep, resources.PauseManager))
	}
	// The Deployment is applied again on each spec change (its
	// generation annotation changes), by the operator's own manager; the
	// pause manager must not write.
	if w := pauseWrites(op); len(w) > 0 {
		t.Errorf("the operator paused or resumed the hand-paused Deployment: %v", w)
	}

	assertNoWritesWhenSynced(t, op, ns, "cache", "Memcached with a hand-paused rollout")

	if _, err := suite.kube.AppsV1().Deployments(ns).Patch(ctx, "cache", types.StrategicMergePatchType, []byte(`{"spec":{"paused":false}}`), metav1.PatchOptions{FieldManager: "kubectl-rollout"}); err != nil {
		t.Fatal(err)
	}
	waitProgressing(t, ns, "cache", cachev1beta1.ReasonComplete)
}

// TestIntegrationRolloutWaitsForQuota rolls a Memcached of one replica in a
// namespace whose ResourceQuota has room for one Pod only: the surge Pod is
// refused, and the rollout waits with the old Pod serving and the
// Memcached Available and RollingOut. Once the quota has room for one Pod
// more, the rollout completes without anyone touching the Memcached.
func TestIntegrationRolloutWaitsForQuota(t *testing.T) {
	startOperator(t)
	ns := newNamespace(t)
	ctx := context.Background()
	createMemcached(t, ns, "cache", func(s *cachev1beta1.MemcachedSpec) { s.Replicas = ptr.To[int32](1) })
	waitConverged(t, ns, "cache", metav1.ConditionTrue)

	quotas := suite.kube.CoreV1().ResourceQuotas(ns)
	quota := &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "pods"},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("1")}},
	}
	if _, err := quotas.Create(ctx, quota, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Admission charges a quota only once its controller has counted
	// what the namespace uses.
	eventually(t, waitLong, "the quota counts the Pod", func(ctx context.Context) (bool, string) {
		q, err := quotas.Get(ctx, "pods", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		used := q.Status.Used[corev1.ResourcePods]
		return used.Value() == 1, fmt.Sprintf("status %+v", q.Status)
	})

	patchSpec(t, suite.mc, ns, "cache", `{"spec":{"pod":{"annotations":{"example.com/rollout":"1"}}}}`)
	eventually(t, waitLong, "the quota refuses the surge Pod", func(ctx context.Context) (bool, string) {
		events, err := suite.kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.kind=ReplicaSet,reason=FailedCreate"})
		if err != nil {
			return false, err.Error()
		}
		for _, e := range events.Items {
			if strings.Contains(e.Message, "exceeded quota") {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d FailedCreate Events", len(events.Items))
	})
	eventually(t, waitLong, "the Memcached shows the waiting rollout", func(ctx context.Context) (bool, string) {
		mc, err := fetchMemcached(ctx, ns, "cache")
		if err != nil {
			return false, err.Error()
		}
		a, p := condition(mc, cachev1beta1.ConditionAvailable), condition(mc, cachev1beta1.ConditionProgressing)
		return mc.Status.ObservedGeneration == mc.Generation && a.Status == metav1.ConditionTrue && mc.Status.AvailableReplicas == 1 &&
				p.Status == metav1.ConditionTrue && p.Reason == cachev1beta1.ReasonRollingOut && mc.Status.UpdatedReplicas == 0,
			fmt.Sprintf("status %+v", mc.Status)
	})

	quota.Spec.Hard[corev1.ResourcePods] = resource.MustParse("2")
	if _, err := quotas.Update(ctx, quota, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	mc := waitConverged(t, ns, "cache", metav1.ConditionTrue)
	if mc.Status.UpdatedReplicas != 1 {
		t.Errorf("after the quota grew: status %+v, want the rollout complete", mc.Status)
	}
}
