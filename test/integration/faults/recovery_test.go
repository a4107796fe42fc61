//go:build integration

package faults

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
	clientset "github.com/kubelite/memcached-operator/pkg/generated/clientset/versioned"
	"github.com/kubelite/memcached-operator/test/integration/framework"
)

// TestFaultMassRecovery refuses the Deployments of 1,000 Memcacheds for 60
// seconds, as a webhook that is down or a policy would, then allows them.
// Every key fails many times meanwhile. Once the cause is gone, all must
// converge by themselves, without an edit. How long that takes is logged
// next to the time 1,000 Memcacheds take to converge from scratch,
// measured first in a namespace of their own: each key is retried within
// the per-key cap (--max-retry-delay) of its last failure, so the recovery
// takes about that cap plus the converge, where a limiter shared by all
// keys would make the last of them wait N/10 s behind the others (100 s
// here). The test does not bound it, since a loaded machine stretches
// both; TestRateLimiterBoundsRecoveryWhateverN proves the cap on the
// limiter the controller uses.
//
// The Memcacheds have no replicas, so that what is measured is the
// operator's work and not kwok's Pods.
//
// It does not run in parallel: two thousand Memcacheds synced by 16
// workers take the machine's cores, which the figures it logs measure.
func TestFaultMassRecovery(t *testing.T) {
	const (
		n        = 1000
		outage   = 60 * time.Second
		maxDelay = 10 * time.Second
	)
	_, mcs := framework.Unthrottled()
	baseline, refused := framework.NewNamespace(t), framework.NewNamespace(t)
	releaseAtEnd(t, mcs, baseline, refused)
	// The operator as released, not under the race detector, and 16
	// workers: the converge must take well under the N/10 s a limiter
	// shared by all keys would add, for the figures this test logs to tell
	// the two apart. Under -race, 1,000 converge in minutes. No resync: a
	// pass over 2,000 Memcacheds every few seconds would take the cores
	// too.
	framework.StartOperatorBinary(t, framework.ReleaseBinary(t), baseline, "--namespace="+refused,
		"--workers=16", "--max-retry-delay="+maxDelay.String(), "--resync-period=0")

	start := time.Now()
	createMany(t, mcs, baseline, n)
	waitAllConverged(t, mcs, baseline, n, 5*time.Minute)
	converge := time.Since(start)
	t.Logf("%d Memcacheds converged from scratch in %s", n, converge.Round(100*time.Millisecond))

	unblock := denyByPolicy(t, refused)
	blockedAt := time.Now()
	createMany(t, mcs, refused, n)
	eventuallyEvery(t, listInterval, 2*time.Minute, "every Memcached shows the refusal", func(ctx context.Context) (bool, string) {
		list, err := mcs.CacheV1beta1().Memcacheds(refused).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		denied := 0
		for i := range list.Items {
			if c := framework.Condition(&list.Items[i], cachev1beta1.ConditionDegraded); c.Reason == cachev1beta1.ReasonAdmissionDenied {
				denied++
			}
		}
		return denied == n, fmt.Sprintf("%d of %d show AdmissionDenied", denied, n)
	})
	// The outage itself: the window during which every retry is refused.
	time.Sleep(outage - time.Since(blockedAt))

	unblock()
	framework.WaitDeploymentCreate(t, refused, func(err error) bool { return err == nil })
	allowedAt := time.Now()
	waitAllConverged(t, mcs, refused, n, 10*time.Minute)
	t.Logf("after %s of refusals, %d Memcacheds converged %s after the cause was gone (the cap %s plus the converge from scratch: %s)",
		outage, n, time.Since(allowedAt).Round(100*time.Millisecond), maxDelay, (maxDelay + converge).Round(100*time.Millisecond))
}

// listInterval is how often the test lists its 1,000 Memcacheds. A list
// of them is about 2 MB of JSON: at framework.Eventually's 100 ms the
// test's own polling would take most of the 2 cores it measures the
// operator on.
const listInterval = 2 * time.Second

// eventuallyEvery is framework.Eventually polling every interval.
func eventuallyEvery(t *testing.T, interval, timeout time.Duration, what string, cond func(ctx context.Context) (bool, string)) {
	t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(context.Background(), interval, timeout, true, func(context.Context) (bool, error) {
		// Each check gets its own deadline, so that the last one is not
		// cut short by the overall timeout and reports the real state.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		ok, detail := cond(ctx)
		last = detail
		return ok, nil
	})
	if err != nil {
		t.Fatalf("%s: not reached within %s; last: %s", what, timeout, last)
	}
}

// createMany creates n Memcacheds without replicas in ns, 16 at a time.
func createMany(t *testing.T, mcs clientset.Interface, ns string, n int) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	names := make(chan string)
	for range 16 {
		wg.Go(func() {
			for name := range names {
				mc := &cachev1beta1.Memcached{
					ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
					Spec:       cachev1beta1.MemcachedSpec{Replicas: ptr.To[int32](0)},
				}
				if _, err := mcs.CacheV1beta1().Memcacheds(ns).Create(context.Background(), mc, metav1.CreateOptions{}); err != nil {
					errs <- fmt.Errorf("creating %s/%s: %w", ns, name, err)
				}
			}
		})
	}
	for i := range n {
		names <- fmt.Sprintf("cache-%d", i)
	}
	close(names)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// waitAllConverged waits up to timeout until each of the n Memcacheds in
// ns has its children and a status of its current generation without a
// problem (Degraded=False): the operator's part of a converge. Their
// rollouts are not waited for: kube-controller-manager's client limit
// paces those, at about 5 Deployments a second here.
func waitAllConverged(t *testing.T, mcs clientset.Interface, ns string, n int, timeout time.Duration) {
	t.Helper()
	eventuallyEvery(t, listInterval, timeout, fmt.Sprintf("all %d Memcacheds of %s converge", n, ns), func(ctx context.Context) (bool, string) {
		list, err := mcs.CacheV1beta1().Memcacheds(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		var pending []string
		for i := range list.Items {
			mc := &list.Items[i]
			if d := framework.Condition(mc, cachev1beta1.ConditionDegraded); mc.Status.ObservedGeneration != mc.Generation || d.Status != metav1.ConditionFalse {
				pending = append(pending, mc.Name+" "+d.Reason)
			}
		}
		if len(list.Items) != n {
			return false, fmt.Sprintf("%d of %d exist", len(list.Items), n)
		}
		return len(pending) == 0, fmt.Sprintf("%d pending, e.g. %s", len(pending), strings.Join(pending[:min(3, len(pending))], ", "))
	})
}

// deploymentWrites is an admission rule for Deployment writes.
var deploymentWrites = admissionregistrationv1.RuleWithOperations{
	Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
	Rule: admissionregistrationv1.Rule{
		APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"deployments"},
	},
}

// denyByPolicy has an admission policy refuse every create and update of a
// Deployment in ns, and returns what removes it.
func denyByPolicy(t *testing.T, ns string) func() {
	remove := framework.DenyInNamespace(t, "freeze-"+ns, ns, deploymentWrites, "caches are frozen in this namespace")
	framework.WaitDeploymentCreate(t, ns, func(err error) bool { return err != nil && strings.Contains(err.Error(), "caches are frozen") })
	return remove
}
