//go:build integration

package main

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

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
