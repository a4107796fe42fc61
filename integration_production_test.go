//go:build integration

package main

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
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
	eventually(t, 90*time.Second, "Deployment follows the change", func(ctx context.Context) (bool, string) {
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
// hand-over. A SIGKILLed leader is replaced after its Lease expires; a
// leader stopped with SIGTERM releases the Lease and is replaced within a
// retry period; the last replica to stop leaves the Lease without holder.
// The takeover times are bounded, each bound derived from the timings,
// and logged for docs/operations.md.
func TestIntegrationLeaderElection(t *testing.T) {
	timings := []struct {
		name                       string
		flags                      []string
		leaseDuration, retryPeriod time.Duration
	}{
		{name: "client-go defaults", leaseDuration: 15 * time.Second, retryPeriod: 2 * time.Second},
		{
			name:          "recommended for a fast hand-over",
			flags:         []string{"--leader-elect-lease-duration=6s", "--leader-elect-renew-deadline=4s", "--leader-elect-retry-period=400ms"},
			leaseDuration: 6 * time.Second, retryPeriod: 400 * time.Millisecond,
		},
	}
	// A candidate tries to acquire the Lease every retry period, stretched
	// by client-go's jitter (factor 1.2) to at most 2.2 of them. The
	// allowance covers the rest of a takeover (the old leader's drain and
	// release after SIGTERM, the new leader's sync and the Deployment
	// apply) on a slow 2-core machine under -race.
	const allowance = 2 * time.Second
	for _, timing := range timings {
		t.Run(timing.name, func(t *testing.T) {
			args := append([]string{"--leader-elect=true", "--leader-election-namespace=memcached-operator"}, timing.flags...)
			a := startBinary(t, args...)
			waitLeader(t, a, "first replica leads")
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
			// The follower counts the lease duration from when it saw the
			// killed leader's last renewal, at its next try after it, and
			// takes the Lease at its first try after that: the lease
			// duration and two jittered retry periods.
			retry := timing.retryPeriod * 22 / 10
			if bound := timing.leaseDuration + 2*retry + allowance; crash > bound {
				t.Errorf("crash takeover took %s, want at most %s (lease duration %s, two jittered retry periods of %s, allowance %s)", crash, bound, timing.leaseDuration, retry, allowance)
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
			// that is not must first expire.
			if bound := retry + allowance; graceful > bound || graceful >= crash {
				t.Errorf("graceful takeover took %s, want at most %s (a jittered retry period %s, allowance %s) and less than the crash takeover %s: the Lease was not released", graceful, bound, retry, allowance, crash)
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
