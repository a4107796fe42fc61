//go:build integration

package main

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	watchtools "k8s.io/client-go/tools/watch"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
)

// leaderStatus reads leader_election_master_status from an operator's
// /metrics: "1" leads, "0" follows, "" not yet known.
func leaderStatus(op *binaryOperator) string {
	m, err := op.scrape()
	if err != nil {
		return ""
	}
	v, ok := m.SumBy("leader_election_master_status", "name", nil)["memcached-operator"]
	if !ok {
		return ""
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

func waitLeader(t *testing.T, op *binaryOperator, what string) {
	t.Helper()
	eventually(t, 60*time.Second, what, func(context.Context) (bool, string) {
		s := leaderStatus(op)
		return s == "1", "leader_election_master_status=" + s
	})
}

func waitReady(t *testing.T, op *binaryOperator) {
	t.Helper()
	eventually(t, 60*time.Second, "readyz", func(context.Context) (bool, string) {
		code, body := get(op.healthAddr, "/readyz")
		return code == http.StatusOK, fmt.Sprintf("%d %s", code, body)
	})
}

// waitObserved waits until the status describes the current generation
// with the given Deployment replica count. It needs only the operator and
// the Deployment controller, not Pods becoming ready.
func waitObserved(t *testing.T, ns, name string, replicas int32) {
	t.Helper()
	eventually(t, waitLong, "status observes the spec", func(ctx context.Context) (bool, string) {
		mc, err := fetchMemcached(ctx, ns, name)
		if err != nil {
			return false, err.Error()
		}
		return mc.Status.ObservedGeneration == mc.Generation && mc.Status.Replicas == replicas, fmt.Sprintf("generation %d, status %+v", mc.Generation, mc.Status)
	})
}

// scaleAndTime patches the replicas and returns how long until the
// Deployment follows.
func scaleAndTime(t *testing.T, ns string, replicas int32, since time.Time) time.Duration {
	t.Helper()
	patch := []byte(fmt.Sprintf(`{"spec":{"replicas":%d}}`, replicas))
	if _, err := suite.mc.CacheV1beta1().Memcacheds(ns).Patch(context.Background(), "cache", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, waitLong, "Deployment follows the change", func(ctx context.Context) (bool, string) {
		dep, err := fetchDeployment(ctx, ns, "cache")
		if err != nil {
			return false, err.Error()
		}
		return *dep.Spec.Replicas == replicas, fmt.Sprintf("replicas %d", *dep.Spec.Replicas)
	})
	return time.Since(since)
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
			args := append([]string{"--leader-elect=true", "--leader-election-namespace=memcached-operator"}, timing.flags...)
			a := startBinary(t, args...)
			waitLeader(t, a, "first replica leads")
			history := watchLeaseHistory(t, "memcached-operator", "memcached-operator")
			first := history.first(t)
			b := startBinary(t, args...)
			waitReady(t, b)
			if s := leaderStatus(b); s != "0" {
				t.Fatalf("second replica leader status = %q, want 0 (a warm follower)", s)
			}

			ns := newNamespace(t)
			createMemcached(t, ns, "cache", nil)
			waitConverged(t, ns, "cache", metav1.ConditionTrue)

			killed := time.Now()
			a.kill()
			crash := scaleAndTime(t, ns, 2, killed)
			waitLeader(t, b, "follower takes over")
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

			c := startBinary(t, args...)
			waitReady(t, c)
			stopped := time.Now()
			if err := b.terminate(30 * time.Second); err != nil {
				t.Fatalf("leader after SIGTERM: %v", err)
			}
			graceful := scaleAndTime(t, ns, 1, stopped)
			waitLeader(t, c, "follower takes over after a graceful stop")
			t.Logf("takeover after SIGTERM of the leader: %s (lease released)", graceful.Round(100*time.Millisecond))
			// A released Lease is taken at the follower's next retry; one
			// that is not must first expire. The release is a write of its
			// own, with no holder, before the follower's.
			_, released, next := history.waitTakeover(t, taken.holder)
			if len(released) == 0 {
				t.Errorf("the stopped leader did not release the Lease: %q took it with no release in between", next.holder)
			}
			if !strings.Contains(b.logs(), "Stopped leading") {
				t.Errorf("stopped leader did not log that it stopped leading")
			}

			// The last replica stops with no follower to take over: its
			// Lease must be left with no holder, so the next replica to
			// start leads at once instead of waiting for it to expire.
			if err := c.terminate(30 * time.Second); err != nil {
				t.Fatalf("last replica after SIGTERM: %v", err)
			}
			lease, err := suite.kube.CoordinationV1().Leases("memcached-operator").Get(context.Background(), "memcached-operator", metav1.GetOptions{})
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
	leases := suite.kube.CoordinationV1().Leases(namespace)
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
	eventually(t, waitLong, "the Lease is taken from "+holder, func(context.Context) (bool, string) {
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

// TestIntegrationHealthAndMetrics checks /healthz, /readyz and /metrics of
// the binary. How /readyz follows an apiserver outage is a fault case:
// TestFaultAPIServerRestart.
func TestIntegrationHealthAndMetrics(t *testing.T) {
	op := startBinary(t, "--leader-elect=false", "-v=2")
	eventually(t, 30*time.Second, "healthz", func(context.Context) (bool, string) {
		code, body := get(op.healthAddr, "/healthz")
		return code == http.StatusOK, fmt.Sprintf("%d %s", code, body)
	})
	waitReady(t, op)

	ns := newNamespace(t)
	createMemcached(t, ns, "cache", nil)
	waitObserved(t, ns, "cache", 1)
	scaleAndTime(t, ns, 2, time.Now())
	waitObserved(t, ns, "cache", 2)

	m, err := op.scrape()
	if err != nil {
		t.Fatalf("/metrics: %v", err)
	}
	for _, name := range []string{
		"workqueue_depth", "workqueue_adds_total", "workqueue_queue_duration_seconds", "workqueue_work_duration_seconds",
		"workqueue_retries_total", "workqueue_unfinished_work_seconds", "workqueue_longest_running_processor_seconds",
		// Not rest_client_rate_limiter_duration_seconds: client-go observes
		// it only with a client limit, which is off by default.
		"rest_client_requests_total", "rest_client_request_duration_seconds",
		"memcached_operator_reconcile_total", "memcached_operator_reconcile_duration_seconds",
		"memcached_operator_spec_to_observed_seconds", "memcached_operator_instances",
		"go_goroutines", "process_resident_memory_bytes",
	} {
		if !m.Has(name) {
			t.Errorf("/metrics lacks %s", name)
		}
	}
	if v := m.Sum("workqueue_adds_total", map[string]string{"name": "memcached"}); v == 0 {
		t.Errorf("workqueue_adds_total{name=\"memcached\"} = 0, want the named queue's adds")
	}
	if n := m.Count("memcached_operator_spec_to_observed_seconds", nil); n == 0 {
		t.Errorf("spec_to_observed_seconds has no observations after a spec change")
	}
	if v := m.Sum("memcached_operator_instances", map[string]string{"condition": "Available", "status": "True"}); v == 0 {
		t.Errorf("instances{Available,True} = 0")
	}
	if code, _ := get(op.metricsAddr, "/debug/pprof/"); code == http.StatusOK {
		t.Errorf("pprof is served without --enable-profiling")
	}
}

// TestIntegrationNamespaceScope runs the operator with --namespace under
// the namespaced RBAC of artifacts/namespaced: it converges objects in its
// namespace, leaves others alone, and needs no cluster-wide permission.
func TestIntegrationNamespaceScope(t *testing.T) {
	const watched = "memcached" // The namespace artifacts/namespaced is written for.
	ctx := context.Background()
	// Cleanup deletes it without waiting, so a run before this one
	// (-count) may have left it terminating.
	eventually(t, 2*time.Minute, "namespace "+watched+" of an earlier run is gone", func(ctx context.Context) (bool, string) {
		_, err := suite.kube.CoreV1().Namespaces().Get(ctx, watched, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return true, ""
		case err != nil:
			return false, err.Error()
		}
		return false, "it still exists"
	})
	if _, err := suite.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: watched}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deleteNamespace(t, watched) })
	if err := suite.cluster.ApplyFiles(ctx, "artifacts/namespaced/rbac.yaml", "artifacts/namespaced/cluster.yaml"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = suite.kube.RbacV1().ClusterRoleBindings().Delete(context.Background(), "memcached-operator-auth-delegator", metav1.DeleteOptions{})
	})
	kubeconfig, err := suite.cluster.ServiceAccountKubeconfig(ctx, watched, "memcached-operator")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	other := newNamespace(t)
	createMemcached(t, other, "cache", nil)

	// Leader election on, as the namespaced install runs it: the Lease,
	// its watch and the Events all need the namespaced Role.
	// Secure metrics, as shipped: the reviews need the install's
	// cluster-wide grants, cluster.yaml.
	metricsAddr := freeAddr(t)
	op := startOperatorWith(t, cfg, "--namespace="+watched, "--leader-elect=true", "--leader-election-namespace="+watched,
		"--metrics-bind-address="+metricsAddr, "--metrics-secure=true")
	createMemcached(t, watched, "cache", func(s *cachev1beta1.MemcachedSpec) { s.Replicas = ptr.To[int32](2) })
	waitConverged(t, watched, "cache", metav1.ConditionTrue)
	settle(t, op)
	lease, err := suite.kube.CoordinationV1().Leases(watched).Get(ctx, "memcached-operator", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the namespaced operator's Lease: %v", err)
	}
	if ptr.Deref(lease.Spec.HolderIdentity, "") == "" {
		t.Errorf("the namespaced operator converged a Memcached without holding its Lease")
	}

	if code, body := getWithToken("https://"+metricsAddr+"/metrics", metricsReaderToken(t)); code != http.StatusOK {
		t.Errorf("the namespaced operator's /metrics for the metrics reader: %d %s", code, body)
	}

	mc, err := fetchMemcached(ctx, other, "cache")
	if err != nil {
		t.Fatal(err)
	}
	if mc.Status.ObservedGeneration != 0 || len(mc.Status.Conditions) != 0 {
		t.Errorf("Memcached outside --namespace was synced: %+v", mc.Status)
	}
	if _, err := fetchDeployment(ctx, other, "cache"); err == nil {
		t.Errorf("Deployment created outside --namespace")
	}
}

// TestIntegrationShutdown cancels an in-process operator that has work in
// flight and checks it returns within the shutdown timeout and leaves no
// goroutine behind.
func TestIntegrationShutdown(t *testing.T) {
	ns := newNamespace(t)
	defer goleak.VerifyNone(t,
		goleak.IgnoreCurrent(),
		// Idle keep-alive connections of client-go's shared transports.
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
		// The suite's conversion webhook (startSuiteWebhook) serves the
		// apiserver, which may open a connection to it at any time. The
		// operator under test serves nothing: testOptions turns off its
		// metrics, health and webhook listeners.
		goleak.IgnoreTopFunction("net/http.(*http2serverConn).serve"),
	)

	logger, _ := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logger))
	opts := testOptions()
	opts.shutdownTimeout = 5 * time.Second
	done := make(chan error, 1)
	reg := prometheus.NewRegistry()
	go func() {
		done <- runOperator(ctx, rest.CopyConfig(suite.operatorConfig), opts, reg)
	}()

	for i := range 5 {
		createMemcached(t, ns, fmt.Sprintf("cache-%d", i), nil)
	}
	// Cancel once the first sync has finished, while the others are being
	// synced or wait in the queue.
	eventually(t, 30*time.Second, "the operator syncs", func(context.Context) (bool, string) {
		return reconciles(reg) > 0, "no sync yet"
	})
	start := time.Now()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("runOperator returned %v", err)
		}
	case <-time.After(opts.shutdownTimeout + 10*time.Second):
		t.Fatalf("runOperator did not return within the shutdown timeout plus 10s")
	}
	t.Logf("shut down in %s", time.Since(start).Round(time.Millisecond))
}
