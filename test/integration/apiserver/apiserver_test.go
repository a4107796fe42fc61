//go:build integration

package apiserver

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
	"github.com/kubelite/memcached-operator/pkg/localcluster"
	"github.com/kubelite/memcached-operator/test/integration/framework"
)

// TestFaultAPIServerRestart stops kube-apiserver for 30 seconds, with etcd
// kept up, while the operator binary runs; a spec change is made just
// before the stop and another right after the restart. Expected: the
// operator does not exit, /readyz goes false during the outage and true
// after, and both changes converge without an operator restart.
func TestFaultAPIServerRestart(t *testing.T) {
	const outage = 30 * time.Second
	ns := framework.NewNamespace(t)
	op := framework.StartOperator(t, ns, "-v=2")
	// A restarted apiserver refuses requests until its RBAC cache has
	// synced; checked below instead.
	op.AllowForbidden = true
	op.WaitReady(t)
	framework.CreateMemcached(t, ns, "cache", nil)
	waitObserved(t, ns, "cache", 1)

	framework.PatchSpec(t, ns, "cache", `{"spec":{"replicas":2}}`)
	down := time.Now()
	framework.Cluster().StopAPIServer()
	framework.Eventually(t, outage, "readyz turns false during the outage", func(context.Context) (bool, string) {
		code, body := op.Get(op.HealthAddr, "/readyz")
		return code == http.StatusServiceUnavailable, fmt.Sprintf("%d %s", code, body)
	})
	notReady := time.Since(down)
	if code, _ := op.Get(op.HealthAddr, "/healthz"); code != http.StatusOK {
		t.Errorf("healthz failed during the outage; the kubelet would restart the operator for nothing")
	}
	// The rest of the outage: the fault held, not a wait for a condition.
	time.Sleep(outage - time.Since(down))
	if err := framework.Cluster().StartAPIServer(context.Background()); err != nil {
		t.Fatalf("restarting the apiserver: %v", err)
	}
	t.Cleanup(func() { waitNodesReady(t) })
	up := time.Now()
	framework.PatchSpec(t, ns, "cache", `{"spec":{"memory":"128Mi"}}`)
	framework.Eventually(t, framework.WaitLong, "both changes converge", func(ctx context.Context) (bool, string) {
		mc, err := framework.GetMemcached(ctx, ns, "cache")
		if err != nil {
			return false, err.Error()
		}
		ok, detail := deploymentMatches(ctx, ns, "cache", 2, 128)
		return ok && mc.Status.ObservedGeneration == mc.Generation && mc.Status.Replicas == 2,
			fmt.Sprintf("generation %d, status %+v; Deployment %s", mc.Generation, mc.Status, detail)
	})
	reconverged := time.Since(up)
	op.WaitReady(t)
	ready := time.Since(up)
	t.Logf("apiserver down %s: /readyz false after %s; after the restart both changes converged in %s, /readyz true after %s",
		outage, notReady.Round(100*time.Millisecond), reconverged.Round(100*time.Millisecond), ready.Round(100*time.Millisecond))
	if exited := framework.Cluster().Exited(); len(exited) > 0 {
		t.Errorf("control-plane parts did not survive the apiserver restart: %v", exited)
	}
	if !op.Running() {
		t.Fatalf("the operator exited during the outage")
	}
	// The write of the change made before the stop may meet the warm-up.
	if refused := warmUpRefusals(t, op, down, up); len(refused) > 0 {
		t.Logf("RBAC refused %d requests in the apiserver's warm-up: %v", len(refused), refused)
	}
}

// TestFaultRelist makes every informer relist: the apiserver is stopped,
// etcd is compacted to its current revision, and the apiserver starts
// again with an empty watch cache, so resuming a watch from the old
// resourceVersion fails with 410 Gone. Right after the restart, while the
// informers reconnect, one Memcached's Deployment and another Memcached
// (with the Orphan policy) are deleted. Expected: neither delete is
// missed, and the objects that did not change get zero writes.
func TestFaultRelist(t *testing.T) {
	ns := framework.NewNamespace(t)
	op := framework.StartOperator(t, ns)
	// A restarted apiserver refuses requests until its RBAC cache has
	// synced; checked below instead.
	op.AllowForbidden = true
	ctx := context.Background()
	// Zero replicas: Pods would change status while the fake nodes miss
	// heartbeats during the restart, and those changes are not the point.
	zero := func(s *cachev1beta1.MemcachedSpec) { s.Replicas = ptr.To[int32](0) }
	framework.CreateMemcached(t, ns, "lose-deployment", zero)
	framework.CreateMemcached(t, ns, "deleted", func(s *cachev1beta1.MemcachedSpec) {
		zero(s)
		s.DeletionPolicy = cachev1beta1.DeletionPolicyOrphan
	})
	unchanged := []string{"unchanged-0", "unchanged-1", "unchanged-2"}
	for _, name := range unchanged {
		framework.CreateMemcached(t, ns, name, zero)
	}
	for _, name := range append([]string{"lose-deployment", "deleted"}, unchanged...) {
		framework.WaitConverged(t, ns, name, metav1.ConditionFalse)
		// Available=False says nothing of the rollout: on a loaded machine
		// the Deployment controller may observe a Deployment seconds after
		// the first status write, and the status write that follows would
		// land after the mark below, as if the relist had caused it.
		framework.WaitProgressing(t, ns, name, cachev1beta1.ReasonComplete)
	}
	op.WaitQuiet(t)
	oldDep, err := framework.GetDeployment(ctx, ns, "lose-deployment")
	if err != nil {
		t.Fatal(err)
	}
	mark := len(op.Writes(t))

	// A write that no informer of the operator's watches, right before the
	// stop: the compaction's revision is then newer than any revision an
	// informer has seen, through a bookmark too, so that every one of them
	// must relist. Without it, a bookmark that reached an informer after
	// the last write let it resume its watch at the compacted revision.
	if _, err := framework.Kube().CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "revision-"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	down := time.Now()
	framework.Cluster().StopAPIServer()
	rev, err := framework.Cluster().CompactEtcd(ctx)
	if err != nil {
		t.Fatalf("compacting etcd: %v", err)
	}
	if err := framework.Cluster().StartAPIServer(ctx); err != nil {
		t.Fatalf("restarting the apiserver: %v", err)
	}
	t.Cleanup(func() { waitNodesReady(t) })
	up := time.Now()
	if err := framework.Kube().AppsV1().Deployments(ns).Delete(ctx, "lose-deployment", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := framework.Memcacheds().CacheV1beta1().Memcacheds(ns).Delete(ctx, "deleted", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	framework.Eventually(t, framework.WaitLong, "the deleted Deployment is recreated", func(ctx context.Context) (bool, string) {
		dep, err := framework.GetDeployment(ctx, ns, "lose-deployment")
		if err != nil {
			return false, err.Error()
		}
		return dep.UID != oldDep.UID, "still the old Deployment"
	})
	framework.Eventually(t, framework.WaitLong, "the deleted Memcached is finalized and gone", func(ctx context.Context) (bool, string) {
		_, err := framework.GetMemcached(ctx, ns, "deleted")
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	orphan, err := framework.GetDeployment(ctx, ns, "deleted")
	if err != nil || len(orphan.OwnerReferences) != 0 {
		t.Errorf("the Orphan-policy Deployment should remain without owner: %v, %+v", err, orphan)
	}
	framework.WaitConverged(t, ns, "lose-deployment", metav1.ConditionFalse)
	op.WaitQuiet(t)
	recovered := time.Since(up)

	// The requests with which an informer fills its cache, received after
	// the stop: a watch that resumed from an old resourceVersion is
	// neither.
	lists := op.Requests(t, func(e localcluster.AuditEvent) bool {
		return fills(e) && e.RequestReceivedTimestamp.After(down)
	})
	for _, resource := range []string{"memcacheds", "deployments", "services"} {
		if !slices.ContainsFunc(lists, func(e localcluster.AuditEvent) bool { return e.Resource() == resource }) {
			t.Errorf("the %s informer did not relist after the compaction; lists: %v", resource, lists)
		}
	}
	writes := op.Writes(t)[mark:]
	for _, name := range unchanged {
		// The Memcached, its status and its children, which share its
		// name.
		if w := slices.DeleteFunc(slices.Clone(writes), func(e localcluster.AuditEvent) bool { return e.Name() != name }); len(w) > 0 {
			t.Errorf("relist caused writes for unchanged %s: %v", name, w)
		}
	}
	// Nothing changed but the two deletes, which the operator sees only
	// once its informers have relisted: it has nothing to write in the
	// warm-up.
	for _, e := range warmUpRefusals(t, op, down, up) {
		if e.Write() {
			t.Errorf("RBAC refused the write %s at %s, in the apiserver's warm-up after the restart at %s", e, e.StageTimestamp.Format(time.StampMilli), up.Format(time.StampMilli))
		}
	}
	t.Logf("etcd compacted at revision %d; %d relisting requests; both deletes handled and reconverged %s after the restart; %d writes in all, none for the %d unchanged objects: %v",
		rev, len(lists), recovered.Round(100*time.Millisecond), len(writes), len(unchanged), writes)
}

// fills reports a request with which an informer (re)fills its cache: a
// LIST, or a watch that starts with the current state (client-go's
// WatchList).
func fills(e localcluster.AuditEvent) bool {
	if e.Verb == "list" {
		return true
	}
	u, err := url.Parse(e.RequestURI)
	return err == nil && e.Verb == "watch" && u.Query().Get("sendInitialEvents") == "true"
}

// warmUpRefusals returns the requests RBAC refused the operator, and fails
// the test for any answered outside the apiserver's warm-up, from its stop
// to 30 seconds after its restart: a restarted apiserver serves requests
// before its RBAC cache has synced, and refuses them until it has.
func warmUpRefusals(t *testing.T, op *framework.Operator, down, up time.Time) []localcluster.AuditEvent {
	t.Helper()
	refused := op.Requests(t, localcluster.AuditEvent.RBACDenied)
	for _, e := range refused {
		if at := e.StageTimestamp.Time; at.Before(down) || at.After(up.Add(30*time.Second)) {
			t.Errorf("RBAC refused %s at %s, outside the apiserver's warm-up after the restart at %s", e, at.Format(time.StampMilli), up.Format(time.StampMilli))
		}
	}
	return refused
}

// waitObserved waits until the status describes the current generation
// with the given Deployment replica count. It needs only the operator and
// the Deployment controller, not Pods becoming ready.
func waitObserved(t *testing.T, ns, name string, replicas int32) {
	t.Helper()
	framework.Eventually(t, framework.WaitLong, "status observes the spec", func(ctx context.Context) (bool, string) {
		mc, err := framework.GetMemcached(ctx, ns, name)
		if err != nil {
			return false, err.Error()
		}
		return mc.Status.ObservedGeneration == mc.Generation && mc.Status.Replicas == replicas, fmt.Sprintf("generation %d, status %+v", mc.Generation, mc.Status)
	})
}

// deploymentMatches reports whether the Deployment runs replicas of
// memcached with -m memoryMiB, and describes it otherwise.
func deploymentMatches(ctx context.Context, ns, name string, replicas, memoryMiB int32) (bool, string) {
	dep, err := framework.GetDeployment(ctx, ns, name)
	if err != nil {
		return false, err.Error()
	}
	args := dep.Spec.Template.Spec.Containers[0].Args
	i := slices.Index(args, "-m")
	ok := *dep.Spec.Replicas == replicas && i >= 0 && i+1 < len(args) && args[i+1] == strconv.Itoa(int(memoryMiB))
	return ok, fmt.Sprintf("replicas %d, args %v", *dep.Spec.Replicas, args)
}

// waitNodesReady waits for the fake nodes to report Ready again. While the
// apiserver is down, kwok cannot renew their status; the node lifecycle
// controller then marks them Unknown, and Pods on them stop being ready.
// Tests after an outage would otherwise start on a degraded cluster.
func waitNodesReady(t *testing.T) {
	t.Helper()
	framework.Eventually(t, 3*time.Minute, "the nodes are Ready again", func(ctx context.Context) (bool, string) {
		nodes, err := framework.Kube().CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		var notReady []string
		for _, n := range nodes.Items {
			ready := slices.ContainsFunc(n.Status.Conditions, func(c corev1.NodeCondition) bool {
				return c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue
			})
			if !ready || len(n.Spec.Taints) > 0 {
				notReady = append(notReady, n.Name)
			}
		}
		return len(notReady) == 0, fmt.Sprintf("not ready or tainted: %v", notReady)
	})
}
