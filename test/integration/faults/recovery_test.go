//go:build integration

package faults

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
	clientset "github.com/kubelite/memcached-operator/pkg/generated/clientset/versioned"
	"github.com/kubelite/memcached-operator/test/integration/framework"
)

// TestFaultMassRecovery refuses the Deployments of 100 Memcacheds, as a
// webhook that is down or a policy would, for 30 seconds after each has
// failed once, then allows them. Every key fails many times meanwhile, and
// its backoff reaches the per-key cap (--max-retry-delay). Once the cause
// is gone, all must converge by themselves, without an edit and without a
// resync.
//
// How long that takes at 1,000 and more, next to a converge from scratch,
// is a figure of make bench ("recovery once the refusal is lifted");
// TestRateLimiterBoundsRecoveryWhateverN proves the cap on the limiter the
// controller uses.
func TestFaultMassRecovery(t *testing.T) {
	t.Parallel()
	const (
		n        = 100
		outage   = 30 * time.Second
		maxDelay = 10 * time.Second
	)
	_, mcs := framework.Unthrottled()
	refused := framework.NewNamespace(t)
	framework.ReleaseAtEnd(t, mcs, refused)
	unblock := framework.DenyDeployments(t, refused)
	// No resync: it would sync every failing key every few seconds,
	// whatever its backoff, and the keys would recover without a retry.
	framework.StartOperator(t, refused, "--max-retry-delay="+maxDelay.String(), "--resync-period=0")
	createMany(t, mcs, refused, n)
	framework.EventuallyEvery(t, listInterval, 2*time.Minute, "every Memcached shows the refusal", func(ctx context.Context) (bool, string) {
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
	// The outage itself, from the moment every key has failed: the fault
	// held, not a wait for a condition. Each key fails again at every
	// retry, its backoff doubling from 5 ms, and passes the cap after
	// about 20 s.
	time.Sleep(outage)

	unblock()
	framework.WaitDeploymentCreate(t, refused, func(err error) bool { return err == nil })
	allowedAt := time.Now()
	waitAllConverged(t, mcs, refused, n, 10*time.Minute)
	t.Logf("after %s of refusals, %d Memcacheds converged %s after the cause was gone", outage, n, time.Since(allowedAt).Round(100*time.Millisecond))
}

// listInterval is how often the test lists its Memcacheds: a list of a
// hundred is about 200 KB of JSON, which at framework.Eventually's 100 ms
// would take a core from the tests running beside it.
const listInterval = 2 * time.Second

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
	framework.EventuallyEvery(t, listInterval, timeout, fmt.Sprintf("all %d Memcacheds of %s converge", n, ns), func(ctx context.Context) (bool, string) {
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
