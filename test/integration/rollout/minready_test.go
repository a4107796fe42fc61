//go:build integration

package rollout

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
	"github.com/kubelite/memcached-operator/pkg/resources"
	"github.com/kubelite/memcached-operator/test/integration/framework"
)

// TestIntegrationMinReadySeconds runs a Memcached of two replicas with
// spec.minReadySeconds 12. Expected:
//   - the Deployment carries it;
//   - Available turns True no sooner than 12 seconds after the first Pod
//     turned Ready, and a rollout is Complete no sooner than 12 seconds
//     after its last new Pod did: the operator counts a Pod as the
//     Deployment controller does, available once it has been Ready that
//     long;
//   - changing it to 0 changes the Deployment's spec and nothing of its
//     Pods: no new ReplicaSet, the same Pod template hash, the same Pods.
//
// The bounds compare timestamps the cluster wrote (a Pod's Ready
// condition, a Memcached's condition), not how long the test waited, so
// a slow machine only makes the gaps longer.
func TestIntegrationMinReadySeconds(t *testing.T) {
	t.Parallel()
	const minReady = 12
	ns := framework.NewNamespace(t)
	framework.StartOperator(t, ns)
	framework.CreateMemcached(t, ns, "cache", func(s *cachev1beta1.MemcachedSpec) {
		s.Replicas = ptr.To[int32](2)
		s.MinReadySeconds = ptr.To[int32](minReady)
	})
	mc := framework.WaitConverged(t, ns, "cache", metav1.ConditionTrue)
	ctx := context.Background()
	dep, err := framework.GetDeployment(ctx, ns, "cache")
	if err != nil {
		t.Fatal(err)
	}
	if dep.Spec.MinReadySeconds != minReady {
		t.Fatalf("the Deployment's minReadySeconds = %d, want %d", dep.Spec.MinReadySeconds, minReady)
	}
	firstReady := slices.MinFunc(readySince(t, ns, ""), time.Time.Compare)
	available := framework.Condition(mc, cachev1beta1.ConditionAvailable).LastTransitionTime.Time
	if available.Before(firstReady.Add(minReady * time.Second)) {
		t.Errorf("Available turned True at %s, less than %ds after the first Pod turned Ready at %s", available, minReady, firstReady)
	}

	// A rollout: each new Pod counts once it has been Ready for
	// minReadySeconds, and the rollout is complete only then.
	oldHash := templateHashOfPods(t, ns)
	framework.PatchSpec(t, ns, "cache", `{"spec":{"pod":{"annotations":{"example.com/rollout":"1"}}}}`)
	mc = framework.WaitConverged(t, ns, "cache", metav1.ConditionTrue)
	newReady := readySince(t, ns, oldHash)
	if len(newReady) != 2 {
		t.Fatalf("%d Pods of the new template are Ready after the rollout, want 2", len(newReady))
	}
	lastReady := slices.MaxFunc(newReady, time.Time.Compare)
	complete := framework.Condition(mc, cachev1beta1.ConditionProgressing).LastTransitionTime.Time
	if complete.Before(lastReady.Add(minReady * time.Second)) {
		t.Errorf("the rollout was Complete at %s, less than %ds after its last Pod turned Ready at %s", complete, minReady, lastReady)
	}

	// minReadySeconds is outside the Pod template: changing it rolls
	// nothing. Once the Deployment controller has observed the change it
	// has made any new ReplicaSet it would make.
	before, err := framework.GetDeployment(ctx, ns, "cache")
	if err != nil {
		t.Fatal(err)
	}
	// The rollout's old Pods are deleted by then, but may still be there:
	// wait until they are gone, so that both snapshots hold the same Pods.
	framework.Eventually(t, framework.WaitLong, "only the rollout's 2 Pods remain", func(ctx context.Context) (bool, string) {
		list, err := framework.Kube().CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		return len(list.Items) == 2, fmt.Sprintf("%d Pods", len(list.Items))
	})
	sets := replicaSetUIDs(t, ns)
	pods := podUIDs(t, ns)
	updateSpec(t, ns, "cache", func(s *cachev1beta1.MemcachedSpec) { s.MinReadySeconds = ptr.To[int32](0) })
	var after *appsv1.Deployment
	framework.Eventually(t, framework.WaitLong, "the Deployment controller observes minReadySeconds 0", func(ctx context.Context) (bool, string) {
		var err error
		if after, err = framework.GetDeployment(ctx, ns, "cache"); err != nil {
			return false, err.Error()
		}
		return after.Spec.MinReadySeconds == 0 && after.Status.ObservedGeneration == after.Generation,
			fmt.Sprintf("minReadySeconds %d, generation %d, observed %d", after.Spec.MinReadySeconds, after.Generation, after.Status.ObservedGeneration)
	})
	framework.WaitConverged(t, ns, "cache", metav1.ConditionTrue)
	if b, a := before.Annotations[resources.TemplateHashAnnotation], after.Annotations[resources.TemplateHashAnnotation]; a != b {
		t.Errorf("the Pod template hash changed from %s to %s", b, a)
	}
	if got := replicaSetUIDs(t, ns); !slices.Equal(got, sets) {
		t.Errorf("ReplicaSets %v after the change, want %v: a new one rolls the Pods", got, sets)
	}
	if got := podUIDs(t, ns); !slices.Equal(got, pods) {
		t.Errorf("Pods %v after the change, want %v", got, pods)
	}
}

// readySince returns when each Pod of the namespace that is not being
// deleted, and whose pod-template-hash is not notHash, turned Ready, by
// the lastTransitionTime its node wrote.
func readySince(t *testing.T, ns, notHash string) []time.Time {
	t.Helper()
	list, err := framework.Kube().CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []time.Time
	for _, p := range list.Items {
		if p.DeletionTimestamp != nil || (notHash != "" && p.Labels[appsv1.DefaultDeploymentUniqueLabelKey] == notHash) {
			continue
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				out = append(out, c.LastTransitionTime.Time)
			}
		}
	}
	if len(out) == 0 {
		t.Fatalf("no Ready Pod in %s", ns)
	}
	return out
}

// templateHashOfPods returns the pod-template-hash of the namespace's
// Pods, and fails unless they all have the same.
func templateHashOfPods(t *testing.T, ns string) string {
	t.Helper()
	list, err := framework.Kube().CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	hashes := map[string]bool{}
	for _, p := range list.Items {
		hashes[p.Labels[appsv1.DefaultDeploymentUniqueLabelKey]] = true
	}
	if len(hashes) != 1 {
		t.Fatalf("the Pods of %s have pod-template-hashes %v, want one", ns, hashes)
	}
	for h := range hashes {
		return h
	}
	return ""
}

// replicaSetUIDs lists the UIDs of the namespace's ReplicaSets, sorted.
func replicaSetUIDs(t *testing.T, ns string) []string {
	t.Helper()
	list, err := framework.Kube().AppsV1().ReplicaSets(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var uids []string
	for _, rs := range list.Items {
		uids = append(uids, string(rs.UID))
	}
	slices.Sort(uids)
	return uids
}
