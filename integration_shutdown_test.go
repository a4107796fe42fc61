//go:build integration

package main

// TestIntegrationShutdown runs the operator in this process: that it
// leaves no goroutine behind once runOperator returns can only be seen
// from inside the process (goleak).

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
)

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
