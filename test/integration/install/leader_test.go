//go:build integration

package install

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"k8s.io/utils/ptr"

	"github.com/kubelite/memcached-operator/test/integration/framework"
)

// leaderStatus reads leader_election_master_status for the Lease lease from
// an operator's /metrics: "1" leads, "0" follows, "" not yet known.
func leaderStatus(op *framework.Operator, lease string) string {
	m, err := op.Metrics()
	if err != nil {
		return ""
	}
	v, ok := m.SumBy("leader_election_master_status", "name", nil)[lease]
	if !ok {
		return ""
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

func waitLeader(t *testing.T, op *framework.Operator, lease, what string) {
	t.Helper()
	framework.Eventually(t, framework.WaitLong, what, func(context.Context) (bool, string) {
		s := leaderStatus(op, lease)
		return s == "1", "leader_election_master_status=" + s
	})
}

// leaseFor names a leader-election Lease for the test's operators, in the
// namespace the shipped Role lets them write Leases in, and deletes it when
// the test ends.
func leaseFor(t *testing.T, ns string) string {
	t.Helper()
	name := "lease-" + ns
	if len(name) > 63 {
		name = name[:63]
	}
	t.Cleanup(func() {
		_ = framework.Kube().CoordinationV1().Leases(framework.OperatorNamespace).Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	return name
}

// TestIntegrationLeaderElection runs operator processes with leader
// election, at client-go's default timings (15s lease, 10s renew, 2s retry)
// and at the shorter ones docs/operations.md recommends for a faster
// hand-over. A SIGKILLed leader is replaced once its Lease has expired; a
// leader stopped with SIGTERM releases the Lease, so its follower need not
// wait for it to expire; the last replica to stop leaves the Lease without
// holder. Each takeover is read from the Lease's own history, so no bound
// on how long it took is needed: the takeover times are logged, and make
// bench measures them (hack/bench/takeover.go).
func TestIntegrationLeaderElection(t *testing.T) {
	timings := []struct {
		name          string
		flags         []string
		leaseDuration time.Duration
	}{
		{name: "client-go defaults", leaseDuration: 15 * time.Second},
		{
			name:          "recommended for a fast hand-over",
			flags:         []string{"--leader-elect-lease-duration=6s", "--leader-elect-renew-deadline=4s", "--leader-elect-retry-period=400ms"},
			leaseDuration: 6 * time.Second,
		},
	}
	for _, timing := range timings {
		t.Run(timing.name, func(t *testing.T) {
			t.Parallel()
			ns := framework.NewNamespace(t)
			leaseName := leaseFor(t, ns)
			args := append([]string{"--leader-elect=true", "--leader-election-namespace=" + framework.OperatorNamespace, "--leader-election-id=" + leaseName}, timing.flags...)
			a := framework.StartOperator(t, ns, args...)
			waitLeader(t, a, leaseName, "first replica leads")
			history := watchLeaseHistory(t, framework.OperatorNamespace, leaseName)
			first := history.first(t)
			b := framework.StartOperator(t, ns, args...)
			b.WaitReady(t)
			if s := leaderStatus(b, leaseName); s != "0" {
				t.Fatalf("second replica leader status = %q, want 0 (a warm follower)", s)
			}

			framework.CreateMemcached(t, ns, "cache", nil)
			framework.WaitConverged(t, ns, "cache", metav1.ConditionTrue)

			killed := time.Now()
			a.Kill()
			crash := scaleAndTime(t, ns, 2, killed)
			waitLeader(t, b, leaseName, "follower takes over")
			t.Logf("takeover after SIGKILL of the leader: %s (change made right after the kill reconciled)", crash.Round(100*time.Millisecond))
			last, crashReleased, taken := history.waitTakeover(t, first.holder)
			if len(crashReleased) > 0 {
				t.Errorf("the Lease was released after the leader was killed: %+v", crashReleased)
			}
			// The follower takes the Lease once the lease duration has
			// passed since it first saw the last renewal. client-go tells
			// renewals apart by their record in JSON, where the renew time
			// has whole seconds, so that is the first renewal it saw in
			// the last one's second, written no earlier than the start of
			// that second: a lower bound, which no load can break.
			if expired := last.renew.Truncate(time.Second).Add(timing.leaseDuration); taken.acquire.Before(expired) {
				t.Errorf("the follower took the Lease at %s, before it expired at %s (last renewed at %s, lease duration %s)",
					taken.acquire.Format(time.StampMilli), expired.Format(time.StampMilli), last.renew.Format(time.StampMilli), timing.leaseDuration)
			}

			c := framework.StartOperator(t, ns, args...)
			c.WaitReady(t)
			stopped := time.Now()
			if err := b.Terminate(time.Minute); err != nil {
				t.Fatalf("leader after SIGTERM: %v", err)
			}
			graceful := scaleAndTime(t, ns, 1, stopped)
			waitLeader(t, c, leaseName, "follower takes over after a graceful stop")
			t.Logf("takeover after SIGTERM of the leader: %s (lease released)", graceful.Round(100*time.Millisecond))
			// A released Lease is taken at the follower's next retry; one
			// that is not must first expire. The release is a write of its
			// own, with no holder, before the follower's.
			_, released, next := history.waitTakeover(t, taken.holder)
			if len(released) == 0 {
				t.Errorf("the stopped leader did not release the Lease: %q took it with no release in between", next.holder)
			}
			if !strings.Contains(b.Log(), "Stopped leading") {
				t.Errorf("stopped leader did not log that it stopped leading")
			}

			// The last replica stops with no follower to take over: its
			// Lease must be left with no holder, so the next replica to
			// start leads at once instead of waiting for it to expire.
			if err := c.Terminate(time.Minute); err != nil {
				t.Fatalf("last replica after SIGTERM: %v", err)
			}
			lease, err := framework.Kube().CoordinationV1().Leases(framework.OperatorNamespace).Get(context.Background(), leaseName, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if holder := ptr.Deref(lease.Spec.HolderIdentity, ""); holder != "" {
				t.Errorf("Lease holder after a graceful exit = %q, want empty", holder)
			}
		})
	}
}

// leaseRecord is one state of a leader-election Lease: its holder ("" once
// released) and the times the holder wrote.
type leaseRecord struct {
	holder         string
	acquire, renew time.Time
}

// leaseHistory is every state of one Lease, in the apiserver's order, from
// the state it had when the watch started.
type leaseHistory struct {
	mu      sync.Mutex
	records []leaseRecord
	err     error
}

// watchLeaseHistory records the states of the Lease namespace/name until
// the test ends. The Lease must exist. The retry watcher resumes from the
// last resourceVersion it delivered if the watch closes, so no state is
// lost or reordered.
func watchLeaseHistory(t *testing.T, namespace, name string) *leaseHistory {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	leases := framework.Kube().CoordinationV1().Leases(namespace)
	lease, err := leases.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	h := &leaseHistory{}
	h.add(lease)
	rw, err := watchtools.NewRetryWatcherWithContext(ctx, lease.ResourceVersion, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, options metav1.ListOptions) (watch.Interface, error) {
			options.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
			return leases.Watch(ctx, options)
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
			switch lease, ok := ev.Object.(*coordinationv1.Lease); {
			case ev.Type == watch.Error:
				h.fail(fmt.Errorf("watching the Lease: %v", ev.Object))
			case ev.Type == watch.Deleted:
				h.fail(fmt.Errorf("the Lease was deleted"))
			case ok:
				h.add(lease)
			}
		}
	}()
	t.Cleanup(func() {
		rw.Stop()
		cancel()
		<-done
	})
	return h
}

func (h *leaseHistory) add(lease *coordinationv1.Lease) {
	r := leaseRecord{holder: ptr.Deref(lease.Spec.HolderIdentity, "")}
	if lease.Spec.AcquireTime != nil {
		r.acquire = lease.Spec.AcquireTime.Time
	}
	if lease.Spec.RenewTime != nil {
		r.renew = lease.Spec.RenewTime.Time
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.records = append(h.records, r)
}

func (h *leaseHistory) fail(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.err == nil {
		h.err = err
	}
}

// first is the state the Lease had when the watch started; it must have a
// holder.
func (h *leaseHistory) first(t *testing.T) leaseRecord {
	t.Helper()
	h.mu.Lock()
	r := h.records[0]
	h.mu.Unlock()
	if r.holder == "" {
		t.Fatal("the Lease has no holder")
	}
	return r
}

// waitTakeover waits until the history shows the Lease taken from holder
// by another, and returns holder's last state, the releases in between
// (states without holder) and the new holder's first state.
func (h *leaseHistory) waitTakeover(t *testing.T, holder string) (last leaseRecord, released []leaseRecord, taken leaseRecord) {
	t.Helper()
	var err error
	framework.Eventually(t, framework.WaitLong, "the Lease is taken from "+holder, func(context.Context) (bool, string) {
		h.mu.Lock()
		defer h.mu.Unlock()
		if err = h.err; err != nil {
			return true, ""
		}
		from := slices.IndexFunc(h.records, func(r leaseRecord) bool { return r.holder == holder })
		if from < 0 {
			return false, fmt.Sprintf("%d states, none held by %s", len(h.records), holder)
		}
		released = nil
		for _, r := range h.records[from:] {
			switch r.holder {
			case holder:
				last, released = r, nil
			case "":
				released = append(released, r)
			default:
				taken = r
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d states, the last held by %q", len(h.records), h.records[len(h.records)-1].holder)
	})
	if err != nil {
		t.Fatal(err)
	}
	return last, released, taken
}
