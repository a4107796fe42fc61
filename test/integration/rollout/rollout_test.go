//go:build integration

// Package rollout tests how the Pods of a Memcached are replaced: a
// rollout keeps a Pod serving, a pause of the Memcached holds a running
// rollout and one made by hand is left alone, a ResourceQuota holds a
// rollout and the status says so, and after an operator upgrade the
// operator paces the rollouts of its new rendering with
// --max-concurrent-rollouts.
package rollout

import (
	"context"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
	"github.com/kubelite/memcached-operator/pkg/deployutil"
	"github.com/kubelite/memcached-operator/pkg/localcluster"
	"github.com/kubelite/memcached-operator/pkg/resources"
	"github.com/kubelite/memcached-operator/test/integration/framework"
)

// clusterZones are the zones of the package's fake nodes, one node each:
// the paced upgrade runs a Memcached with a pool in each.
var clusterZones = []string{"zone-a", "zone-b", "zone-c"}

func TestMain(m *testing.M) {
	framework.Main(m, framework.Config{Zones: clusterZones})
}

// TestIntegrationOneReplicaRolloutKeepsAReadyPod rolls a Memcached of one
// replica (a Pod annotation changes its template), its replacement Pod
// slow to start, and follows its Pods from before the change until the
// old Pod is gone: at every moment at least one Pod is Ready. Under a
// strategy that stops the old Pod before its replacement is Ready
// (maxUnavailable 1) the watch sees a moment with none.
//
// It cordons every node of the package's cluster, which would leave the
// Pods of any other test Pending meanwhile, so it does not run in
// parallel: Go runs it before the parallel tests start.
func TestIntegrationOneReplicaRolloutKeepsAReadyPod(t *testing.T) {
	ns := framework.NewNamespace(t)
	framework.StartOperator(t, ns)
	framework.CreateMemcached(t, ns, "cache", func(s *cachev1beta1.MemcachedSpec) { s.Replicas = ptr.To[int32](1) })
	mc := framework.WaitConverged(t, ns, "cache", metav1.ConditionTrue)
	ctx := context.Background()
	before, err := framework.GetDeployment(ctx, ns, "cache")
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
	// replacement stays Pending until the Deployment controller has synced
	// with it in place (its status counts it as updated), a sync that
	// scales the old ReplicaSet down if the strategy lets it, and until
	// each ReplicaSet's controller has acted on its spec, deleting the old
	// Pod if it was scaled down. A strategy that stops the old Pod first
	// has done so by then.
	cordonUntilCleanup(t)
	framework.PatchSpec(t, ns, "cache", `{"spec":{"pod":{"annotations":{"example.com/rollout":"1"}}}}`)
	framework.Eventually(t, framework.WaitLong, "the replacement Pod exists and the controllers have acted on it", func(ctx context.Context) (bool, string) {
		pods, _ := w.state()
		replacement := false
		for name := range pods {
			if _, old := oldPods[name]; !old {
				replacement = true
			}
		}
		dep, err := framework.GetDeployment(ctx, ns, "cache")
		if err != nil {
			return false, err.Error()
		}
		synced, sets, err := replicaSetsSynced(ctx, ns, dep)
		if err != nil {
			return false, err.Error()
		}
		return replacement && dep.Generation > before.Generation && dep.Status.ObservedGeneration == dep.Generation &&
				dep.Status.UpdatedReplicas == 1 && synced,
			fmt.Sprintf("Pods %v; Deployment generation %d status %+v; ReplicaSets %v", pods, dep.Generation, dep.Status, sets)
	})
	framework.SetUnschedulable(t, false)

	// Done when the Deployment has rolled out the new template and the
	// watch has seen the old Pod go and only its replacement remain.
	framework.Eventually(t, framework.WaitLong, "the rollout completes and the old Pod is gone", func(ctx context.Context) (bool, string) {
		dep, err := framework.GetDeployment(ctx, ns, "cache")
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
	list, err := framework.Kube().AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{LabelSelector: metav1.FormatLabelSelector(dep.Spec.Selector)})
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

// replicaSetsSynced reports whether the controller of every ReplicaSet
// the Deployment controls has acted on its current spec, and describes
// them.
func replicaSetsSynced(ctx context.Context, ns string, dep *appsv1.Deployment) (bool, []string, error) {
	list, err := framework.Kube().AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{LabelSelector: metav1.FormatLabelSelector(dep.Spec.Selector)})
	if err != nil {
		return false, nil, err
	}
	synced := true
	var sets []string
	for _, rs := range list.Items {
		if ref := metav1.GetControllerOf(&rs); ref == nil || ref.UID != dep.UID {
			continue
		}
		synced = synced && rs.Status.ObservedGeneration == rs.Generation
		sets = append(sets, fmt.Sprintf("%s: generation %d observed %d, replicas %d of %d", rs.Name, rs.Generation, rs.Status.ObservedGeneration, rs.Status.Replicas, ptr.Deref(rs.Spec.Replicas, 0)))
	}
	return synced, sets, nil
}

// assertNoWritesWhenSynced syncs the converged Memcached (a label, then
// two resync passes over the namespace) and fails the test if the
// operator writes anything meanwhile.
func assertNoWritesWhenSynced(t *testing.T, op *framework.Operator, ns, name, what string) {
	t.Helper()
	op.WaitQuiet(t)
	mark, before := len(op.Writes(t)), syncs(t, op)
	patch := fmt.Appendf(nil, `{"metadata":{"labels":{"touched":"%d"}}}`, time.Now().UnixNano())
	if _, err := framework.Memcacheds().CacheV1beta1().Memcacheds(ns).Patch(context.Background(), name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 30*time.Second, "the touched Memcached is synced", func(context.Context) (bool, string) {
		n := syncs(t, op)
		return n > before, fmt.Sprintf("%v syncs", n-before)
	})
	op.WaitTwoResyncs(t, memcachedsIn(t, ns))
	if w := op.Writes(t)[mark:]; len(w) > 0 {
		t.Errorf("%s: %d writes when synced: %v", what, len(w), w)
	}
}

// syncs is how many syncs op has finished; it fails the test if /metrics
// does not answer.
func syncs(t *testing.T, op *framework.Operator) float64 {
	t.Helper()
	n, err := op.Syncs()
	if err != nil {
		t.Fatalf("reading the operator's metrics: %v", err)
	}
	return n
}

// memcachedsIn counts the Memcacheds of ns, all of which its operator
// syncs on each resync.
func memcachedsIn(t *testing.T, ns string) int {
	t.Helper()
	list, err := framework.Memcacheds().CacheV1beta1().Memcacheds(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return len(list.Items)
}

// pauseWrites returns the writes of Deployments the operator sent as its
// pause manager, the field manager of spec.paused alone.
func pauseWrites(t *testing.T, op *framework.Operator) []localcluster.AuditEvent {
	t.Helper()
	return op.Requests(t, func(e localcluster.AuditEvent) bool {
		if !e.Write() || e.Resource() != "deployments" {
			return false
		}
		u, err := url.Parse(e.RequestURI)
		return err == nil && u.Query().Get("fieldManager") == resources.PauseManager
	})
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
//
// It cordons every node of the package's cluster, which would leave the
// Pods of any other test Pending meanwhile, so it does not run in
// parallel: Go runs it before the parallel tests start.
func TestIntegrationPauseHoldsRunningRollout(t *testing.T) {
	ns := framework.NewNamespace(t)
	op := framework.StartOperator(t, ns)
	ctx := context.Background()
	framework.CreateMemcached(t, ns, "cache", func(s *cachev1beta1.MemcachedSpec) { s.Replicas = ptr.To[int32](3) })
	framework.WaitConverged(t, ns, "cache", metav1.ConditionTrue)

	cordonUntilCleanup(t)
	framework.PatchSpec(t, ns, "cache", `{"spec":{"pod":{"annotations":{"example.com/rollout":"1"}}}}`)
	framework.Eventually(t, framework.WaitLong, "the rollout waits for its first new Pod", func(ctx context.Context) (bool, string) {
		dep, err := framework.GetDeployment(ctx, ns, "cache")
		if err != nil {
			return false, err.Error()
		}
		return dep.Status.ObservedGeneration == dep.Generation && dep.Status.UpdatedReplicas == 1 &&
				dep.Status.Replicas == 4 && dep.Status.AvailableReplicas == 3,
			fmt.Sprintf("generation %d, status %+v", dep.Generation, dep.Status)
	})

	framework.PatchSpec(t, ns, "cache", `{"spec":{"paused":true}}`)
	framework.Eventually(t, framework.WaitLong, "the Deployment is paused by the operator and the Memcached says Paused", func(ctx context.Context) (bool, string) {
		dep, err := framework.GetDeployment(ctx, ns, "cache")
		if err != nil {
			return false, err.Error()
		}
		mc, err := framework.GetMemcached(ctx, ns, "cache")
		if err != nil {
			return false, err.Error()
		}
		p := framework.Condition(mc, cachev1beta1.ConditionProgressing)
		return dep.Spec.Paused && deployutil.PausedBy(dep, resources.PauseManager) && p.Reason == cachev1beta1.ReasonPaused && p.ObservedGeneration == mc.Generation,
			fmt.Sprintf("Deployment paused %t (by the operator %t), Progressing %+v", dep.Spec.Paused, deployutil.PausedBy(dep, resources.PauseManager), p)
	})
	assertNoWritesWhenSynced(t, op, ns, "cache", "paused Memcached, its rollout paused")

	framework.SetUnschedulable(t, false)
	framework.Eventually(t, framework.WaitLong, "the new Pod is Ready and the Deployment controller has seen it", func(ctx context.Context) (bool, string) {
		dep, err := framework.GetDeployment(ctx, ns, "cache")
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
		dep, err := framework.GetDeployment(ctx, ns, "cache")
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

	framework.PatchSpec(t, ns, "cache", `{"spec":{"paused":false}}`)
	framework.WaitConverged(t, ns, "cache", metav1.ConditionTrue)
	dep, err := framework.GetDeployment(ctx, ns, "cache")
	if err != nil {
		t.Fatal(err)
	}
	if dep.Spec.Paused || deployutil.PausedBy(dep, resources.PauseManager) || !deployutil.Complete(dep, 3) {
		t.Errorf("after the unpause: Deployment paused %t (by the operator %t), status %+v; want resumed and complete",
			dep.Spec.Paused, deployutil.PausedBy(dep, resources.PauseManager), dep.Status)
	}
	if e := framework.NormalEvents(t, ns, "cache", "DriftRepaired"); len(e) > 0 {
		t.Errorf("the pause was repaired as drift: %v", e)
	}
	if w := pauseWrites(t, op); len(w) != 2 {
		t.Errorf("the pause manager's writes = %v, want two: the pause and the resume", w)
	}
}

// TestIntegrationHandPausedRolloutStaysPaused pauses a Memcached's
// Deployment by hand, as kubectl rollout pause does. The operator leaves
// that pause alone: the Memcached says DeploymentPaused; pausing and
// unpausing the Memcached neither pauses nor resumes the Deployment, which
// stays paused; a converged sync writes nothing. Resuming by hand ends it.
func TestIntegrationHandPausedRolloutStaysPaused(t *testing.T) {
	t.Parallel()
	ns := framework.NewNamespace(t)
	op := framework.StartOperator(t, ns)
	ctx := context.Background()
	framework.CreateMemcached(t, ns, "cache", func(s *cachev1beta1.MemcachedSpec) { s.Replicas = ptr.To[int32](1) })
	framework.WaitConverged(t, ns, "cache", metav1.ConditionTrue)

	if _, err := framework.Kube().AppsV1().Deployments(ns).Patch(ctx, "cache", types.StrategicMergePatchType, []byte(`{"spec":{"paused":true}}`), metav1.PatchOptions{FieldManager: "kubectl-rollout"}); err != nil {
		t.Fatal(err)
	}
	framework.WaitProgressing(t, ns, "cache", cachev1beta1.ReasonDeploymentPaused)
	framework.PatchSpec(t, ns, "cache", `{"spec":{"paused":true}}`)
	framework.WaitProgressing(t, ns, "cache", cachev1beta1.ReasonPaused)
	framework.PatchSpec(t, ns, "cache", `{"spec":{"paused":false}}`)
	framework.WaitProgressing(t, ns, "cache", cachev1beta1.ReasonDeploymentPaused)
	dep, err := framework.GetDeployment(ctx, ns, "cache")
	if err != nil {
		t.Fatal(err)
	}
	if !dep.Spec.Paused || deployutil.PausedBy(dep, resources.PauseManager) {
		t.Errorf("Deployment paused %t, by the operator %t; want paused by hand only", dep.Spec.Paused, deployutil.PausedBy(dep, resources.PauseManager))
	}
	// The Deployment is applied again on each spec change (its
	// generation annotation changes), by the operator's own manager; the
	// pause manager must not write.
	if w := pauseWrites(t, op); len(w) > 0 {
		t.Errorf("the operator paused or resumed the hand-paused Deployment: %v", w)
	}

	assertNoWritesWhenSynced(t, op, ns, "cache", "Memcached with a hand-paused rollout")

	if _, err := framework.Kube().AppsV1().Deployments(ns).Patch(ctx, "cache", types.StrategicMergePatchType, []byte(`{"spec":{"paused":false}}`), metav1.PatchOptions{FieldManager: "kubectl-rollout"}); err != nil {
		t.Fatal(err)
	}
	framework.WaitProgressing(t, ns, "cache", cachev1beta1.ReasonComplete)
}

// TestIntegrationRolloutWaitsForQuota rolls a Memcached of one replica in a
// namespace whose ResourceQuota has room for one Pod only: the surge Pod is
// refused, and the rollout waits with the old Pod serving and the
// Memcached Available and RollingOut. Once the quota has room for one Pod
// more, the rollout completes without anyone touching the Memcached.
func TestIntegrationRolloutWaitsForQuota(t *testing.T) {
	t.Parallel()
	ns := framework.NewNamespace(t)
	framework.StartOperator(t, ns)
	ctx := context.Background()
	framework.CreateMemcached(t, ns, "cache", func(s *cachev1beta1.MemcachedSpec) { s.Replicas = ptr.To[int32](1) })
	framework.WaitConverged(t, ns, "cache", metav1.ConditionTrue)

	quotas := framework.Kube().CoreV1().ResourceQuotas(ns)
	quota := &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "pods"},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("1")}},
	}
	if _, err := quotas.Create(ctx, quota, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Admission charges a quota only once its controller has counted
	// what the namespace uses.
	framework.Eventually(t, framework.WaitLong, "the quota counts the Pod", func(ctx context.Context) (bool, string) {
		q, err := quotas.Get(ctx, "pods", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		used := q.Status.Used[corev1.ResourcePods]
		return used.Value() == 1, fmt.Sprintf("status %+v", q.Status)
	})

	framework.PatchSpec(t, ns, "cache", `{"spec":{"pod":{"annotations":{"example.com/rollout":"1"}}}}`)
	framework.Eventually(t, framework.WaitLong, "the quota refuses the surge Pod", func(ctx context.Context) (bool, string) {
		events, err := framework.Kube().CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.kind=ReplicaSet,reason=FailedCreate"})
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
	framework.Eventually(t, framework.WaitLong, "the Memcached shows the waiting rollout", func(ctx context.Context) (bool, string) {
		mc, err := framework.GetMemcached(ctx, ns, "cache")
		if err != nil {
			return false, err.Error()
		}
		a, p := framework.Condition(mc, cachev1beta1.ConditionAvailable), framework.Condition(mc, cachev1beta1.ConditionProgressing)
		return mc.Status.ObservedGeneration == mc.Generation && a.Status == metav1.ConditionTrue && mc.Status.AvailableReplicas == 1 &&
				p.Status == metav1.ConditionTrue && p.Reason == cachev1beta1.ReasonRollingOut && mc.Status.UpdatedReplicas == 0,
			fmt.Sprintf("status %+v", mc.Status)
	})

	// A merge patch of spec.hard, which the quota controller's status
	// writes cannot conflict with.
	if _, err := quotas.Patch(ctx, "pods", types.MergePatchType, []byte(`{"spec":{"hard":{"pods":"2"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	mc := framework.WaitConverged(t, ns, "cache", metav1.ConditionTrue)
	if mc.Status.UpdatedReplicas != 1 {
		t.Errorf("after the quota grew: status %+v, want the rollout complete", mc.Status)
	}
}
