//go:build integration

package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kubelite/memcached-operator/pkg/leader"
)

// TestIntegrationLostLeaseStopsWritesAtOnce steals the Lease (another
// holderIdentity, as a new leader would write) while the leader works
// through a burst of spec changes. From the moment the old leader sees the
// loss it must send no write at all, and it must see it within a watch
// event, not at its renew deadline.
func TestIntegrationLostLeaseStopsWritesAtOnce(t *testing.T) {
	const leaseNamespace = "memcached-operator"
	leaseName := fmt.Sprintf("steal-%d", time.Now().UnixNano()%100000)
	op := startOperatorWith(t, suite.operatorConfig, "--leader-elect=true",
		"--leader-election-namespace="+leaseNamespace, "--leader-election-id="+leaseName)
	op.wantErr = leader.ErrLostLeadership
	leases := suite.kube.CoordinationV1().Leases(leaseNamespace)
	t.Cleanup(func() { _ = leases.Delete(context.Background(), leaseName, metav1.DeleteOptions{}) })

	ns := newNamespace(t)
	const caches = 20
	for i := range caches {
		createMemcached(t, ns, fmt.Sprintf("cache-%d", i), nil)
	}
	eventually(t, waitLong, "the operator leads and has synced every Memcached", func(ctx context.Context) (bool, string) {
		list, err := suite.mc.CacheV1beta1().Memcacheds(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		synced := 0
		for _, mc := range list.Items {
			if mc.Status.ObservedGeneration == mc.Generation {
				synced++
			}
		}
		return synced == caches, fmt.Sprintf("%d of %d synced", synced, caches)
	})

	// The burst: every Memcached's spec changes over and over, so the
	// leader always has syncs to run and writes to send.
	burstMark := op.requests.Len()
	burstCtx, stopBurst := context.WithCancel(context.Background())
	var burst sync.WaitGroup
	burst.Go(func() {
		for round := 0; burstCtx.Err() == nil; round++ {
			for i := range caches {
				patch := fmt.Sprintf(`{"spec":{"replicas":%d}}`, 1+round%3)
				_, _ = suite.mc.CacheV1beta1().Memcacheds(ns).Patch(burstCtx, fmt.Sprintf("cache-%d", i), "application/merge-patch+json", []byte(patch), metav1.PatchOptions{})
			}
		}
	})
	defer func() {
		stopBurst()
		burst.Wait()
	}()
	// The steal must catch the leader at work: wait until it has sent a
	// write per Memcached for the burst's changes.
	eventually(t, waitLong, "the leader writes for the burst", func(context.Context) (bool, string) {
		n := len(op.requests.Since(burstMark, func(r request) bool { return r.write() && strings.Contains(r.path, "/namespaces/"+ns+"/") }))
		return n >= caches, fmt.Sprintf("%d writes since the burst started", n)
	})

	lease, err := leases.Get(context.Background(), leaseName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	lease.Spec.HolderIdentity = ptr.To("thief")
	lease.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
	lease.Spec.LeaseDurationSeconds = ptr.To[int32](300)
	if _, err := leases.Update(context.Background(), lease, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	stolen := time.Now()

	select {
	case <-op.exited:
	case <-time.After(30 * time.Second):
		t.Fatal("the old leader did not exit within 30s of losing its Lease")
	}
	exitedAfter := time.Since(stolen)

	var seen time.Time
	for _, e := range op.logs.GetBuffer().Data() {
		if strings.HasPrefix(e.Message, "Lost leadership") {
			seen = e.Timestamp
			break
		}
	}
	if seen.IsZero() {
		t.Fatal(`the old leader never logged "Lost leadership"`)
	}
	before := op.requests.Since(0, func(r request) bool { return r.write() && r.sent.Before(stolen) })
	window := op.requests.Since(0, func(r request) bool { return r.write() && !r.sent.Before(stolen) && !r.sent.After(seen) })
	after := op.requests.Since(0, func(r request) bool { return r.write() && r.sent.After(seen) })
	timing := testOptions()
	t.Logf("loss seen %s after the steal (renew deadline %s); exited after %s; writes: %d before the steal, %d between the steal and its detection, %d after",
		seen.Sub(stolen).Round(time.Millisecond), timing.renewDeadline, exitedAfter.Round(time.Millisecond), len(before), len(window), len(after))
	if len(before) == 0 {
		t.Fatal("the leader sent no writes during the burst; the test proves nothing")
	}
	if len(after) > 0 {
		t.Errorf("the old leader sent %d writes after it saw the loss: %v", len(after), after)
	}
	// Without the watch the elector notices only when its renew deadline
	// (10s) has passed.
	if d := seen.Sub(stolen); d > 2*time.Second {
		t.Errorf("the loss was seen %s after the steal; a watch event should take well under 2s", d)
	}
	// From the loss to the exit nothing waits on a timer: the syncs and
	// their requests are cancelled, the queue is dropped without the drain
	// (up to --shutdown-timeout, 30s), writes are fenced, and the elector,
	// whose loop wakes once a retry period (2s), stops when cancelled
	// rather than at its next wake-up. Bound: one retry period, as if it
	// did wait for that wake-up, plus 1s for a slow 2-core machine under
	// -race. Waiting for the renew deadline (10s), the lease to expire
	// (15s) or a drain would exceed it.
	if d, bound := stolen.Add(exitedAfter).Sub(seen), timing.retryPeriod+time.Second; d > bound {
		t.Errorf("the old leader exited %s after it saw the loss, want at most %s: the stop waited for something", d.Round(time.Millisecond), bound)
	}
}
