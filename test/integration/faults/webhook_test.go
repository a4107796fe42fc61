//go:build integration

package faults

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
	"github.com/kubelite/memcached-operator/pkg/conversion"
	"github.com/kubelite/memcached-operator/pkg/memlimit"
	"github.com/kubelite/memcached-operator/test/integration/framework"
)

// operatorLimit is the memory limit of the shipped operator container
// (artifacts/deploy/deployment.yaml): a peak above it is an OOM kill.
const operatorLimit = 256 << 20

// Where the shipped install keeps the webhook's certificate, and the CRD
// it serves.
const (
	webhookSecret = "memcached-operator-webhook-cert"
	crdName       = "memcacheds." + cachev1beta1.GroupName
)

// handConversionTo makes the operator started next the CRD's conversion
// webhook, listening on addr, as in a cluster, from a first start with no
// certificate, and returns the flags it needs for that: the package's
// webhook makes way, its Secret is deleted, and the CRD is handed over to
// addr's URL without a CA bundle, as docs/operations.md says to. The
// operator gets the shipped memory limit, as the shipped Deployment passes
// it. When the test ends, once that operator is gone, the CRD is handed
// back the same way and v1alpha1 reads must work steadily through the
// package's webhook.
//
// Tests that call it do not run in parallel: while they run, every
// v1alpha1 request goes to their operator, and the memory limit is given
// through the test process's environment.
func handConversionTo(t *testing.T, addr string) []string {
	t.Helper()
	url := "https://" + addr + conversion.Path
	hook := framework.PackageWebhook()
	hook.Stop()
	// Registered before the operator starts, so it runs once the operator
	// is gone.
	t.Cleanup(func() {
		patchConversion(t, map[string]any{"url": hook.URL, "service": nil, "caBundle": nil})
		if err := hook.Start(); err != nil {
			t.Fatalf("restarting the package's webhook: %v", err)
		}
		waitConversionSteady(t, "through the package's webhook again")
	})
	err := framework.Kube().CoreV1().Secrets(framework.OperatorNamespace).Delete(context.Background(), webhookSecret, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	patchConversion(t, map[string]any{"url": url, "service": nil, "caBundle": nil})
	t.Setenv(memlimit.EnvVar, strconv.Itoa(operatorLimit))
	return []string{"--webhook-bind-address=" + addr, "--webhook-url=" + url}
}

// patchConversion merge-patches the CRD's spec.conversion.webhook.clientConfig
// as an admin would.
func patchConversion(t *testing.T, clientConfig map[string]any) {
	t.Helper()
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"conversion": map[string]any{
		"strategy": "Webhook",
		"webhook":  map[string]any{"clientConfig": clientConfig, "conversionReviewVersions": []string{"v1"}},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	crds := apiextensionsclient.NewForConfigOrDie(framework.Cluster().Config).ApiextensionsV1().CustomResourceDefinitions()
	if _, err := crds.Patch(context.Background(), crdName, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatalf("patching the CRD's conversion: %v", err)
	}
}

// waitConversionSteady waits until creates through v1alpha1, which the
// apiserver converts through the CRD's webhook, have worked for 5 s
// without a failure.
func waitConversionSteady(t *testing.T, what string) {
	t.Helper()
	var since time.Time
	framework.EventuallyEvery(t, 50*time.Millisecond, 2*time.Minute, "v1alpha1 creates convert steadily "+what, func(ctx context.Context) (bool, string) {
		if err := framework.ConversionWorks(ctx); err != nil {
			since = time.Time{}
			return false, err.Error()
		}
		if since.IsZero() {
			since = time.Now()
		}
		return time.Since(since) >= 5*time.Second, "working since " + since.Format(time.RFC3339Nano)
	})
}

// waitAlphaReads waits until a v1alpha1 read of the Memcached, which the
// apiserver converts through the webhook, works.
func waitAlphaReads(t *testing.T, ns, name string) {
	t.Helper()
	framework.Eventually(t, time.Minute, "v1alpha1 reads work through the operator's webhook", func(ctx context.Context) (bool, string) {
		_, err := framework.Memcacheds().CacheV1alpha1().Memcacheds(ns).Get(ctx, name, metav1.GetOptions{})
		return err == nil, fmt.Sprint(err)
	})
}

// residentKiB reads a memory figure of a process from /proc, in KiB:
// VmRSS now, or VmHWM, the peak.
func residentKiB(t *testing.T, pid int, field string) int64 {
	t.Helper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			kib, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kib
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// TestFaultWebhookReadyOnlyWhenServing starts the binary with its webhook
// and no certificate yet, polls /readyz every 20 ms from its start, and
// the first time it says ready checks that the webhook serves: the webhook
// Service routes to ready replicas only (it must not publish not-ready
// addresses), so one that is ready must serve.
//
// It does not run in parallel: it takes the CRD's conversion from the
// package's webhook (handConversionTo).
func TestFaultWebhookReadyOnlyWhenServing(t *testing.T) {
	var svc corev1.Service
	framework.ReadManifest(t, "artifacts/deploy/webhook_service.yaml", &svc)
	if svc.Spec.PublishNotReadyAddresses {
		t.Error("the webhook Service publishes not-ready addresses: a new replica takes conversions from the moment it has an IP")
	}

	ns := framework.NewNamespace(t)
	addr, health := framework.FreeAddr(t), framework.FreeAddr(t)
	flags := handConversionTo(t, addr)
	// The health listener is on a port the test picked, so that /readyz is
	// polled from before the operator starts: StartOperator returns only
	// once /healthz answers, by when /readyz may have turned.
	sampled := make(chan readiness, 1)
	ctx, cancel := context.WithTimeout(context.Background(), framework.WaitLong)
	defer cancel()
	go func() { sampled <- firstReady(ctx, health, addr) }()
	framework.StartOperator(t, ns, append(flags, "--health-probe-bind-address="+health)...)
	r := <-sampled
	if !r.ready {
		t.Fatalf("not ready %s after the start: %s", framework.WaitLong, r.last)
	}
	if r.handshake != nil {
		t.Fatalf("/readyz said ready %s after the start, but a handshake with the webhook then failed: %v", r.after.Round(time.Millisecond), r.handshake)
	}
	t.Logf("ready %s after the start, after %d samples of which %d not ready", r.after.Round(time.Millisecond), r.samples, r.samples-1)
}

// readiness is what firstReady saw.
type readiness struct {
	ready bool
	// after is how long after the first sample /readyz first said ready,
	// after samples; last is the last answer that was not ready.
	after   time.Duration
	samples int
	last    string
	// handshake is the error of the TLS handshake with the webhook right
	// after /readyz first said ready.
	handshake error
}

// firstReady polls /readyz at health every 20 ms until it says ready or ctx
// ends, and then shakes hands with the webhook at addr: a webhook that
// serves keeps serving, since a certificate is never taken away, so one
// that fails then did not serve when /readyz answered. The handshake's
// timeout is generous: a webhook without a certificate fails the handshake
// at once, and only a slow machine takes long.
func firstReady(ctx context.Context, health, addr string) readiness {
	start := time.Now()
	var r readiness
	_ = wait.PollUntilContextCancel(ctx, 20*time.Millisecond, true, func(context.Context) (bool, error) {
		code, body := framework.GetWithToken("http://"+health+"/readyz", "")
		r.samples++
		r.ready = code == http.StatusOK
		if !r.ready {
			r.last = fmt.Sprintf("%d %.200s", code, body)
		}
		return r.ready, nil
	})
	if !r.ready {
		return r
	}
	r.after = time.Since(start)
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 30 * time.Second}, "tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // The test reads what is served.
	if err == nil {
		_ = conn.Close()
	}
	r.handshake = err
	return r
}
