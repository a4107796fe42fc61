//go:build integration

package main

// TestIntegrationLostLeaseStopsWritesAtOnce runs the operator in this
// process: it proves that no write leaves the process after the loss of
// the Lease is seen, and only a transport inside the leader fence knows
// when each write was sent. The apiserver's audit log has when a write
// arrived, which for one sent just before the loss can come after it.

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
// loss it must send no write at all; it must see it through its watch on
// the Lease, not at its renew deadline; and it must then exit without
// waiting on any timer. The leader's timers are set far beyond the test's
// waits, so that a wait for one of them fails the test whatever the
// machine's load, without a bound on how long anything took.
func TestIntegrationLostLeaseStopsWritesAtOnce(t *testing.T) {
	const leaseNamespace = "memcached-operator"
	leaseName := fmt.Sprintf("steal-%d", time.Now().UnixNano()%100000)
	// Without the watch, the loss is seen only when renewing has failed
	// for the renew deadline; each renewal comes a retry period after the
	// last; and a stop that drained the queue would wait up to the
	// shutdown timeout. Each is longer than stopWait.
	const stopWait = 2 * time.Minute
	timers := []string{"--leader-elect-lease-duration=30m", "--leader-elect-renew-deadline=20m",
		"--leader-elect-retry-period=10m", "--shutdown-timeout=30m"}
	op := startOperatorWith(t, suite.operatorConfig, append([]string{"--leader-elect=true",
		"--leader-election-namespace=" + leaseNamespace, "--leader-election-id=" + leaseName}, timers...)...)
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
	case <-time.After(stopWait):
		t.Fatalf("the old leader did not exit within %s of losing its Lease: it waited for a timer (%s)", stopWait, strings.Join(timers, " "))
	}
	exitedAfter := time.Since(stolen)

	var seen time.Time
	var cause string
	for _, e := range op.logs.GetBuffer().Data() {
		if strings.HasPrefix(e.Message, "Lost leadership") {
			seen, cause = e.Timestamp, fmt.Sprint(logValue(e.ParameterKVList, "cause"))
			break
		}
	}
	if seen.IsZero() {
		t.Fatal(`the old leader never logged "Lost leadership"`)
	}
	before := op.requests.Since(0, func(r request) bool { return r.write() && r.sent.Before(stolen) })
	window := op.requests.Since(0, func(r request) bool { return r.write() && !r.sent.Before(stolen) && !r.sent.After(seen) })
	after := op.requests.Since(0, func(r request) bool { return r.write() && r.sent.After(seen) })
	t.Logf("loss seen %s after the steal (%s); exited after %s; writes: %d before the steal, %d between the steal and its detection, %d after",
		seen.Sub(stolen).Round(time.Millisecond), cause, exitedAfter.Round(time.Millisecond), len(before), len(window), len(after))
	if len(before) == 0 {
		t.Fatal("the leader sent no writes during the burst; the test proves nothing")
	}
	if len(after) > 0 {
		t.Errorf("the old leader sent %d writes after it saw the loss: %v", len(after), after)
	}
	// The watch names the new holder; the elector, at its renew deadline,
	// says only that it could not renew.
	if !strings.Contains(cause, `"thief"`) {
		t.Errorf("the loss was seen as %q, want the watch's report of the new holder %q", cause, "thief")
	}
}

// logValue returns the value logged under key in a key/value list, or nil.
func logValue(kvs []any, key string) any {
	for i := 0; i+1 < len(kvs); i += 2 {
		if kvs[i] == key {
			return kvs[i+1]
		}
	}
	return nil
}
