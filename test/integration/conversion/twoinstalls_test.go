//go:build integration

package conversion

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/rest"

	clientset "github.com/kubelite/memcached-operator/pkg/generated/clientset/versioned"
	"github.com/kubelite/memcached-operator/test/integration/framework"
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
		framework.CreateMemcached(t, ns, fmt.Sprintf("cache-%d", i), nil)
	}
	// Without client-side rate limiting, so that the load is as steady as
	// the apiserver allows.
	cfg := rest.CopyConfig(framework.Cluster().Config)
	cfg.QPS, cfg.Burst = -1, 0
	mc := clientset.NewForConfigOrDie(cfg)
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
	framework.Eventually(t, framework.WaitLong, fmt.Sprintf("%d more v1alpha1 requests", n), func(context.Context) (bool, string) {
		return l.requests.Load() >= want, fmt.Sprintf("%d of %d", l.requests.Load(), want)
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

// watchConversionTargets records every conversion target the CRD shows
// from now until the test ends.
func watchConversionTargets(t *testing.T) func() []string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	crds := apiextensionsclient.NewForConfigOrDie(framework.Cluster().Config)
	w, err := crds.ApiextensionsV1().CustomResourceDefinitions().Watch(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", crdName).String(),
	})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	var mu sync.Mutex
	var targets []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			crd, ok := ev.Object.(*apiextensionsv1.CustomResourceDefinition)
			if !ok {
				continue
			}
			target := conversionTarget(crd)
			mu.Lock()
			if len(targets) == 0 || targets[len(targets)-1] != target {
				targets = append(targets, target)
			}
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		cancel()
		w.Stop()
		<-done
	})
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), targets...)
	}
}

// TestIntegrationConversionTwoInstalls runs a second install beside the
// package's webhook, which manages the CRD's conversion, under v1alpha1
// load: the second one, the operator binary, serves its own webhook, in
// its own namespace, where no Service fronts it (as a namespaced install's
// default flags would), and may write the CRD. It must leave the CRD to
// the first, say so in its log, and never take a turn at it while both
// renew their certificates; and the namespaced install's shipped RBAC must
// not let it write the CRD at all.
func TestIntegrationConversionTwoInstalls(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := framework.NewNamespace(t)
	targets := watchConversionTargets(t)
	load := startConversionLoad(t, ns, 5, 2)
	load.waitRequests(t, 50)

	// The second install's own RBAC is not what this test is about: it
	// runs as the admin, with certificates short enough that it rechecks
	// the CRD every 20 s, as the package's webhook does. It watches a
	// namespace of its own, which holds no Memcached, and keeps its
	// Secret there.
	install := framework.NewNamespace(t)
	second := framework.StartOperator(t, install,
		"--kubeconfig="+framework.Cluster().KubeconfigPath,
		"--webhook-bind-address="+framework.FreeAddr(t),
		"--webhook-namespace="+install,
		"--webhook-ca-validity="+webhookCAValidity,
		"--webhook-cert-validity="+webhookCertValidity)
	// Both renew their serving certificates every 20 s: two renewals of
	// each are two syncs at which either could take a turn.
	renewals := func(ns string) func(ctx context.Context) (bool, string) {
		var seen [][]byte
		return func(ctx context.Context) (bool, string) {
			s, err := framework.Kube().CoreV1().Secrets(ns).Get(ctx, webhookSecret, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			if len(seen) == 0 || string(seen[len(seen)-1]) != string(s.Data[corev1.TLSCertKey]) {
				seen = append(seen, s.Data[corev1.TLSCertKey])
			}
			return len(seen) >= 3, fmt.Sprintf("%d serving certificates", len(seen))
		}
	}
	first, other := renewals(framework.OperatorNamespace), renewals(install)
	framework.Eventually(t, 2*time.Minute, "both installs renew their serving certificates twice", func(ctx context.Context) (bool, string) {
		ok1, d1 := first(ctx)
		ok2, d2 := other(ctx)
		return ok1 && ok2, "first " + d1 + ", second " + d2
	})
	if !strings.Contains(second.Log(), "another install's webhook") {
		t.Errorf("the second install did not log that the CRD's conversion is another install's")
	}
	load.check(t, "beside a second install")
	if got, url := targets(), framework.PackageWebhook().URL; len(got) != 1 || got[0] != url {
		t.Errorf("the CRD's conversion went to %v, want only the package's webhook %s", got, url)
	}

	t.Run("the namespaced install may not write the CRD", func(t *testing.T) {
		if err := framework.Cluster().ApplyFiles(ctx, framework.Path("artifacts/namespaced/cluster.yaml")); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			err := framework.Kube().RbacV1().ClusterRoleBindings().Delete(context.Background(), "memcached-operator-auth-delegator", metav1.DeleteOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("deleting ClusterRoleBinding memcached-operator-auth-delegator: %v", err)
			}
		})
		for _, verb := range []string{"get", "patch"} {
			review, err := framework.Kube().AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
				User:   "system:serviceaccount:memcached:memcached-operator",
				Groups: []string{"system:serviceaccounts", "system:serviceaccounts:memcached", "system:authenticated"},
				ResourceAttributes: &authorizationv1.ResourceAttributes{
					Group: apiextensionsv1.GroupName, Resource: "customresourcedefinitions", Name: crdName, Verb: verb,
				},
			}}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if review.Status.Allowed {
				t.Errorf("the namespaced install may %s the CRD", verb)
			}
		}
	})
}
