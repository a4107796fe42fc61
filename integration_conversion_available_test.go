//go:build integration

package main

// Conversion stays available: v1alpha1 requests, which need the webhook
// because v1beta1 is stored, keep succeeding through a deleted certificate
// Secret. The test runs its webhooks in this process: it slows one
// replica's watch of the Secret through that replica's own client
// transport, to hold open the window in which the replicas disagree about
// the certificate, which nothing outside the process can time. Some of
// these tests reach the webhook
// through an in-cluster Service: kwok runs no containers, so the Service
// has no selector, and an EndpointSlice the test writes points it at
// listeners on this machine (the local apiserver resolves a Service to an
// EndpointSlice address, see pkg/localcluster).

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	"github.com/kubelite/memcached-operator/pkg/localcluster"
)

// Where the shipped install keeps the webhook's certificate, and the
// Service the shipped CRD names.
const (
	webhookNamespace = "memcached-operator"
	webhookSecret    = "memcached-operator-webhook-cert"
	webhookService   = "memcached-operator-webhook"
)

// conversionLoad sends v1alpha1 lists and gets from a few goroutines,
// without pause, until stopped, and counts what failed.
type conversionLoad struct {
	requests, failures, x509 atomic.Int64

	mu sync.Mutex
	// errs holds the first few distinct failures, for the report.
	errs []string

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// startConversionLoad creates objects Memcacheds in ns through v1beta1,
// the storage version, and reads them through v1alpha1 from workers
// goroutines. It stops when the test ends, if not before.
func startConversionLoad(t *testing.T, ns string, objects, workers int) *conversionLoad {
	t.Helper()
	for i := range objects {
		createMemcached(t, ns, fmt.Sprintf("cache-%d", i), nil)
	}
	_, mc := unthrottled(t)
	ctx, cancel := context.WithCancel(context.Background())
	l := &conversionLoad{cancel: cancel}
	for w := range workers {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for i := w; ; i++ {
				var err error
				if i%2 == 0 {
					_, err = mc.CacheV1alpha1().Memcacheds(ns).List(ctx, metav1.ListOptions{})
				} else {
					_, err = mc.CacheV1alpha1().Memcacheds(ns).Get(ctx, fmt.Sprintf("cache-%d", i%objects), metav1.GetOptions{})
				}
				if ctx.Err() != nil {
					return
				}
				l.record(err)
				time.Sleep(5 * time.Millisecond)
			}
		}()
	}
	t.Cleanup(l.stop)
	return l
}

func (l *conversionLoad) record(err error) {
	l.requests.Add(1)
	if err == nil {
		return
	}
	l.failures.Add(1)
	// The apiserver wraps the webhook call's error in an InternalError;
	// only its text says what the TLS handshake found.
	if strings.Contains(err.Error(), "x509") {
		l.x509.Add(1)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.errs) < 5 {
		l.errs = append(l.errs, time.Now().Format("15:04:05.000")+" "+err.Error())
	}
}

// stop ends the load and waits for its goroutines.
func (l *conversionLoad) stop() {
	l.cancel()
	l.wg.Wait()
}

// check stops the load and fails the test if too few requests went out or
// any failed.
func (l *conversionLoad) check(t *testing.T, what string) {
	t.Helper()
	l.stop()
	t.Logf("%s: %d v1alpha1 requests, %d failed, %d of them with x509 errors", what, l.requests.Load(), l.failures.Load(), l.x509.Load())
	if l.requests.Load() < 100 {
		t.Errorf("%s: only %d requests", what, l.requests.Load())
	}
	if l.failures.Load() > 0 {
		l.mu.Lock()
		defer l.mu.Unlock()
		t.Errorf("%s: %d of %d v1alpha1 requests failed; first: %s", what, l.failures.Load(), l.requests.Load(), strings.Join(l.errs, "\n"))
	}
}

// waitRequests waits until the load has sent n more requests, so that each
// phase of a test runs under it.
func (l *conversionLoad) waitRequests(t *testing.T, n int64) {
	t.Helper()
	want := l.requests.Load() + n
	eventually(t, time.Minute, fmt.Sprintf("%d more v1alpha1 requests", n), func(context.Context) (bool, string) {
		return l.requests.Load() >= want, fmt.Sprintf("%d of %d", l.requests.Load(), want)
	})
}

// testWebhook is one replica's conversion webhook with the operator's own
// wiring (startWebhook), beside the suite's.
type testWebhook struct {
	addr string
	logs ktesting.Underlier
	stop func()
}

// startTestWebhook serves conversion on addr with cfg's identity and
// flags. A leader also manages the certificate and the CRD, as the leader
// of an install does. It stops when the test ends, if not before.
func startTestWebhook(t *testing.T, cfg *rest.Config, addr string, lead bool, flags ...string) *testWebhook {
	t.Helper()
	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.BufferLogs(true)))
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logger))
	w := &testWebhook{addr: addr, logs: logger.GetSink().(ktesting.Underlier)}
	opts := testOptions(append([]string{"--webhook-bind-address=" + w.addr}, flags...)...)
	hook, err := startWebhook(ctx, ctx, opts, kubernetes.NewForConfigOrDie(cfg), apiextensionsclient.NewForConfigOrDie(cfg))
	if err != nil {
		cancel()
		t.Fatalf("starting a webhook: %v", err)
	}
	if lead {
		hook.manage(ctx)
	}
	var once sync.Once
	w.stop = func() {
		once.Do(func() {
			cancel()
			hook.shutdown(context.Background())
		})
	}
	t.Cleanup(w.stop)
	return w
}

// crdClient is the admin's client for the CRD.
func crdClient(t *testing.T) apiextensionsclient.Interface {
	t.Helper()
	return apiextensionsclient.NewForConfigOrDie(suite.cluster.Config)
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
	if _, err := crdClient(t).ApiextensionsV1().CustomResourceDefinitions().Patch(context.Background(), crdName, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatalf("patching the CRD's conversion: %v", err)
	}
}

// takeConversionFromSuite stops the suite's webhook for the rest of the
// test. When the test ends the CRD is handed back to it without a CA
// bundle, which it claims, and v1alpha1 reads must work steadily through
// it again.
func takeConversionFromSuite(t *testing.T) {
	t.Helper()
	suite.webhook.stop()
	t.Cleanup(func() {
		patchConversion(t, map[string]any{"url": suite.webhook.url, "service": nil, "caBundle": nil})
		if err := suite.webhook.start(); err != nil {
			t.Fatalf("restarting the suite's webhook: %v", err)
		}
		waitConversionSteady(t, "through the suite's webhook again")
	})
}

// conversionTarget names where the CRD sends conversion: its URL, or its
// Service as namespace/name.
func conversionTarget(crd *apiextensionsv1.CustomResourceDefinition) string {
	conv := crd.Spec.Conversion
	switch {
	case conv == nil || conv.Webhook == nil || conv.Webhook.ClientConfig == nil:
		return "none"
	case conv.Webhook.ClientConfig.URL != nil:
		return *conv.Webhook.ClientConfig.URL
	case conv.Webhook.ClientConfig.Service != nil:
		return conv.Webhook.ClientConfig.Service.Namespace + "/" + conv.Webhook.ClientConfig.Service.Name
	}
	return "none"
}

// newestCA returns the first certificate of the Secret's ca.crt, the CA
// that signs, and whether the Secret's serving certificate is signed by it.
func newestCA(s *corev1.Secret) (*x509.Certificate, bool) {
	cas, err := certutil.ParseCertsPEM(s.Data["ca.crt"])
	if err != nil {
		return nil, false
	}
	leaves, err := certutil.ParseCertsPEM(s.Data[corev1.TLSCertKey])
	if err != nil {
		return cas[0], false
	}
	return cas[0], leaves[0].CheckSignatureFrom(cas[0]) == nil
}

// deleteWebhookSecret deletes the webhook's Secret, waits until the leader
// has made a new one whose new CA signs the serving certificate, and
// returns that CA.
func deleteWebhookSecret(t *testing.T) *x509.Certificate {
	t.Helper()
	ctx := context.Background()
	old, err := suite.kube.CoreV1().Secrets(webhookNamespace).Get(ctx, webhookSecret, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	oldCA, _ := newestCA(old)
	if err := suite.kube.CoreV1().Secrets(webhookNamespace).Delete(ctx, webhookSecret, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: deleted the webhook's Secret", time.Now().Format("15:04:05.000"))
	var ca *x509.Certificate
	eventually(t, time.Minute, "a new CA signs the serving certificate", func(ctx context.Context) (bool, string) {
		s, err := suite.kube.CoreV1().Secrets(webhookNamespace).Get(ctx, webhookSecret, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		var signed bool
		ca, signed = newestCA(s)
		return ca != nil && !ca.Equal(oldCA) && signed, fmt.Sprintf("new CA %v, serving certificate signed by it %v", ca != nil && !ca.Equal(oldCA), signed)
	})
	return ca
}

// serves reports whether the listener at addr serves a certificate for
// serverName that one of roots signed.
func serves(ctx context.Context, addr, serverName string, roots *x509.CertPool) error {
	dialer := &tls.Dialer{Config: &tls.Config{ServerName: serverName, RootCAs: roots, MinVersion: tls.VersionTLS12}}
	conn, err := dialer.DialContext(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("%s: %w", addr, err)
	}
	return conn.Close()
}

// deleteSecretsUnderLoad deletes the webhook's Secret times times under
// conversion load in a new namespace, each time waiting until every
// replica, at addrs, serves a certificate for serverName from the new CA
// and the load has sent 200 more requests, and fails if any request
// failed.
func deleteSecretsUnderLoad(t *testing.T, what string, addrs []string, serverName string, times int) {
	t.Helper()
	ns := newNamespace(t)
	load := startConversionLoad(t, ns, 5, 3)
	load.waitRequests(t, 50)
	for range times {
		pool := x509.NewCertPool()
		pool.AddCert(deleteWebhookSecret(t))
		eventually(t, time.Minute, "every replica serves the new CA's certificate", func(ctx context.Context) (bool, string) {
			for _, addr := range addrs {
				if err := serves(ctx, addr, serverName, pool); err != nil {
					return false, err.Error()
				}
			}
			return true, ""
		})
		load.waitRequests(t, 200)
	}
	load.check(t, what)
}

// waitConversionSteady waits until v1alpha1 lists have worked for 5 s in a
// row. A CRD whose conversion settings changed twice in quick succession,
// as on a hand-over (the bundle removed, then written by the new webhook),
// can fail a few requests in the apiserver for a moment after the first
// success, until it has rebuilt its storage for the latest settings.
func waitConversionSteady(t *testing.T, what string) {
	t.Helper()
	var since time.Time
	eventuallyEvery(t, 50*time.Millisecond, 2*time.Minute, "v1alpha1 reads work steadily "+what, func(ctx context.Context) (bool, string) {
		if _, err := suite.mc.CacheV1alpha1().Memcacheds("default").List(ctx, metav1.ListOptions{}); err != nil {
			since = time.Time{}
			return false, err.Error()
		}
		if since.IsZero() {
			since = time.Now()
		}
		return time.Since(since) >= 5*time.Second, "working since " + since.Format(time.RFC3339Nano)
	})
}

// TestFaultConversionSecretDeleted deletes the conversion webhook's
// Secret, CA key and all, under steady v1alpha1 load, three times with the
// webhook at a URL and three times behind a Service with two replicas, the
// follower seeing the Secret 2 s late: not one request may fail while the
// leader makes a new CA and serving certificate. Each replica serves the
// certificate it has until it loads the next one, and the apiserver, which
// opens connections to either replica, must trust both meanwhile.
func TestFaultConversionSecretDeleted(t *testing.T) {
	t.Run("webhook at a URL", func(t *testing.T) {
		host, _, err := net.SplitHostPort(suite.webhook.addr)
		if err != nil {
			t.Fatal(err)
		}
		deleteSecretsUnderLoad(t, "the suite's webhook at "+suite.webhook.url, []string{suite.webhook.addr}, host, 3)
	})
	t.Run("webhook behind a Service", func(t *testing.T) {
		addrs := serveThroughService(t, 2)
		deleteSecretsUnderLoad(t, "two replicas behind Service "+webhookNamespace+"/"+webhookService, addrs, webhookServerName, 3)
	})
}

// webhookServerName is the name the apiserver expects in the certificate of
// a webhook behind the shipped Service.
const webhookServerName = webhookService + "." + webhookNamespace + ".svc"

// serveThroughService replaces the suite's webhook, until the test ends,
// with replicas webhooks of the shipped install reached through the
// Service the shipped CRD names: a selector-less Service and one
// EndpointSlice per replica (each listens on its own port). The first
// replica leads. It hands the CRD over as re-applying the shipped CRD
// does, with no CA bundle, and waits until every replica serves a
// certificate the CRD trusts and v1alpha1 reads work steadily. The suite's
// webhook gets the CRD back the same way when the test ends. It returns
// the replicas' addresses.
func serveThroughService(t *testing.T, replicas int) []string {
	t.Helper()
	ctx := context.Background()
	takeConversionFromSuite(t)
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: webhookService, Namespace: webhookNamespace},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{
			Name: "webhook", Port: 443, TargetPort: intstr.FromString("webhook"),
		}}},
	}
	if _, err := suite.kube.CoreV1().Services(webhookNamespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := suite.kube.CoreV1().Services(webhookNamespace).Delete(context.Background(), webhookService, metav1.DeleteOptions{}); err != nil {
			t.Errorf("deleting the webhook Service: %v", err)
		}
	})
	patchConversion(t, map[string]any{"url": nil, "caBundle": nil, "service": map[string]any{
		"namespace": webhookNamespace, "name": webhookService, "path": "/convert", "port": 443,
	}})
	host := hostIP(t)
	var addrs []string
	for i := range replicas {
		port, err := localcluster.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		// Followers see the Secret change 2 s late, as a replica whose
		// watch is slow or reconnecting does.
		cfg := rest.CopyConfig(suite.operatorConfig)
		if i > 0 {
			cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
				return &laggingSecretWatch{next: rt, lag: 2 * time.Second}
			})
		}
		addr := net.JoinHostPort(host, strconv.Itoa(port))
		startTestWebhook(t, cfg, addr, i == 0)
		addrs = append(addrs, addr)
		slice := &discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{
				Name: fmt.Sprintf("%s-replica-%d", webhookService, i), Namespace: webhookNamespace,
				Labels: map[string]string{discoveryv1.LabelServiceName: webhookService, discoveryv1.LabelManagedBy: "memcached-operator-tests"},
			},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{host}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
			Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("webhook"), Port: ptr.To(int32(port)), Protocol: ptr.To(corev1.ProtocolTCP)}},
		}
		if _, err := suite.kube.DiscoveryV1().EndpointSlices(webhookNamespace).Create(ctx, slice, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := suite.kube.DiscoveryV1().EndpointSlices(webhookNamespace).Delete(context.Background(), slice.Name, metav1.DeleteOptions{}); err != nil {
				t.Errorf("deleting EndpointSlice %s: %v", slice.Name, err)
			}
		})
	}
	// Every replica, not just the one the apiserver happens to reach,
	// serves a certificate for the Service that the CRD trusts.
	eventually(t, time.Minute, "every replica serves a certificate the CRD trusts", func(ctx context.Context) (bool, string) {
		crd, err := crdClient(t).ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crdName, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		if target := conversionTarget(crd); target != webhookNamespace+"/"+webhookService {
			return false, "the CRD points at " + target
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(crd.Spec.Conversion.Webhook.ClientConfig.CABundle) {
			return false, "no CA bundle in the CRD"
		}
		for _, addr := range addrs {
			if err := serves(ctx, addr, webhookServerName, pool); err != nil {
				return false, err.Error()
			}
		}
		return true, ""
	})
	waitConversionSteady(t, "through the Service")
	return addrs
}

// laggingSecretWatch delivers what a watch of Secrets streams lag late,
// each chunk as long after it arrived.
type laggingSecretWatch struct {
	next http.RoundTripper
	lag  time.Duration
}

func (l *laggingSecretWatch) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := l.next.RoundTrip(req)
	if err != nil || req.URL.Query().Get("watch") != "true" || !strings.HasSuffix(req.URL.Path, "/secrets") {
		return resp, err
	}
	body := resp.Body
	pr, pw := io.Pipe()
	go func() {
		defer body.Close()
		buf := make([]byte, 32*1024)
		for {
			n, err := body.Read(buf)
			at := time.Now().Add(l.lag)
			chunk := append([]byte(nil), buf[:n]...)
			time.Sleep(time.Until(at))
			if _, werr := pw.Write(chunk); werr != nil {
				return
			}
			if err != nil {
				pw.CloseWithError(err)
				return
			}
		}
	}()
	resp.Body = &lagBody{PipeReader: pr, body: body}
	return resp, nil
}

// lagBody closes the watch's own body along with the pipe, so that the
// goroutine forwarding it ends when the watch does.
type lagBody struct {
	*io.PipeReader
	body io.Closer
}

func (b *lagBody) Close() error {
	_ = b.PipeReader.Close()
	return b.body.Close()
}

// hostIP is an IPv4 address of this machine outside the loopback range,
// which an EndpointSlice may not name.
func hostIP(t *testing.T) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if ipnet, ok := a.(*net.IPNet); ok && ipnet.IP.To4() != nil && !ipnet.IP.IsLoopback() {
			return ipnet.IP.String()
		}
	}
	t.Fatal("this machine has no IPv4 address outside the loopback range")
	return ""
}
