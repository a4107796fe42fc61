//go:build integration

package install

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubelite/memcached-operator/test/integration/framework"
)

// TestIntegrationHealthAndMetrics checks /healthz, /readyz and /metrics of
// the binary. How /readyz follows an apiserver outage is a fault case:
// TestFaultAPIServerRestart.
func TestIntegrationHealthAndMetrics(t *testing.T) {
	t.Parallel()
	ns := framework.NewNamespace(t)
	op := framework.StartOperator(t, ns, "-v=2")
	framework.Eventually(t, framework.WaitLong, "healthz", func(context.Context) (bool, string) {
		code, body := op.Get(op.HealthAddr, "/healthz")
		return code == http.StatusOK, fmt.Sprintf("%d %s", code, body)
	})
	op.WaitReady(t)

	framework.CreateMemcached(t, ns, "cache", nil)
	waitObserved(t, ns, "cache", 1)
	scaleAndTime(t, ns, 2, time.Now())
	waitObserved(t, ns, "cache", 2)

	m, err := op.Metrics()
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
	// Available turns True minReadySeconds after the Pods are Ready, and
	// the gauge reads the operator's cache of the status it wrote.
	framework.Eventually(t, framework.WaitLong, "instances{Available,True} counts the Memcached", func(context.Context) (bool, string) {
		m, err := op.Metrics()
		if err != nil {
			return false, err.Error()
		}
		v := m.Sum("memcached_operator_instances", map[string]string{"condition": "Available", "status": "True"})
		return v == 1, fmt.Sprintf("instances{Available,True} = %v", v)
	})
	if code, _ := op.Get(op.MetricsAddr, "/debug/pprof/"); code == http.StatusOK {
		t.Errorf("pprof is served without --enable-profiling")
	}
}

// TestIntegrationMetricsNeedAuthorization runs two replicas as shipped:
// /metrics over HTTPS behind delegated authentication and authorization.
// Both the leader and the follower must refuse a request without a token
// (401) and one whose user lacks RBAC (403), and serve the shipped
// metrics-reader role (200); pprof stays out of that role's reach, and
// plain HTTP gets no metrics.
func TestIntegrationMetricsNeedAuthorization(t *testing.T) {
	t.Parallel()
	ns := framework.NewNamespace(t)
	lease := leaseFor(t, ns)
	args := []string{"--leader-elect=true", "--leader-election-namespace=" + framework.OperatorNamespace, "--leader-election-id=" + lease, "--metrics-secure=true", "--enable-profiling"}
	leader := framework.StartOperator(t, ns, args...)
	waitLeader(t, leader, lease, "first replica leads")
	follower := framework.StartOperator(t, ns, args...)
	follower.WaitReady(t)
	if s := leaderStatus(follower, lease); s != "0" {
		t.Fatalf("second replica leader status = %q, want 0", s)
	}
	ctx := context.Background()
	nobody, err := framework.Cluster().ServiceAccountToken(ctx, "monitoring", "nobody")
	if err != nil {
		t.Fatal(err)
	}
	reader := framework.MetricsReaderToken(t)

	for name, op := range map[string]*framework.Operator{"leader": leader, "follower": follower} {
		t.Run(name, func(t *testing.T) {
			base := "https://" + op.MetricsAddr
			cases := []struct {
				what, url, token string
				want             int
			}{
				{"no token", base + "/metrics", "", http.StatusUnauthorized},
				{"a token the apiserver does not know", base + "/metrics", "not-a-token", http.StatusUnauthorized},
				{"a ServiceAccount without RBAC", base + "/metrics", nobody, http.StatusForbidden},
				{"the metrics reader", base + "/metrics", reader, http.StatusOK},
				{"the metrics reader on pprof", base + "/debug/pprof/", reader, http.StatusForbidden},
			}
			for _, c := range cases {
				if code, body := framework.GetWithToken(c.url, c.token); code != c.want {
					t.Errorf("%s: %d, want %d (%s)", c.what, code, c.want, body)
				}
			}
			if _, err := op.Metrics(); err != nil {
				t.Errorf("scrape as the metrics reader: %v", err)
			}
			if code, _ := framework.GetWithToken("http://"+op.MetricsAddr+"/metrics", ""); code == http.StatusOK {
				t.Errorf("plain HTTP to the secure listener got metrics")
			}
		})
	}
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

// scaleAndTime patches the replicas and returns how long until the
// Deployment follows.
func scaleAndTime(t *testing.T, ns string, replicas int32, since time.Time) time.Duration {
	t.Helper()
	patch := []byte(fmt.Sprintf(`{"spec":{"replicas":%d}}`, replicas))
	if _, err := framework.Memcacheds().CacheV1beta1().Memcacheds(ns).Patch(context.Background(), "cache", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, framework.WaitLong, "Deployment follows the change", func(ctx context.Context) (bool, string) {
		dep, err := framework.GetDeployment(ctx, ns, "cache")
		if err != nil {
			return false, err.Error()
		}
		return *dep.Spec.Replicas == replicas, fmt.Sprintf("replicas %d", *dep.Spec.Replicas)
	})
	return time.Since(since)
}
