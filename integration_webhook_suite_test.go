//go:build integration

package main

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/kubelite/memcached-operator/pkg/localcluster"
)

// Certificate lifetimes of the suite's webhook: short, so that the serving
// certificate is renewed about every 20 s and the CA every 80 s while the
// tests run, and TestIntegrationConversionSurvivesRotation sees both
// within a minute or two.
const (
	suiteWebhookCAValidity   = 2 * time.Minute
	suiteWebhookCertValidity = 30 * time.Second
)

// suiteWebhook is the conversion webhook with the operator's own wiring
// (startWebhook), run once for the suite under the shipped ServiceAccount,
// outside the cluster as `make run` runs it: the CRD gets its URL. Every
// request through v1alpha1, which the conversion tests send, goes through
// it, as in a cluster where the operator runs. Tests that take it down
// restart it.
type suiteWebhook struct {
	addr string
	url  string

	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
}

func startSuiteWebhook(ctx context.Context) error {
	port, err := localcluster.FreePort()
	if err != nil {
		return err
	}
	w := &suiteWebhook{addr: "127.0.0.1:" + strconv.Itoa(port)}
	w.url = "https://" + w.addr + "/convert"
	suite.webhook = w
	if err := w.start(); err != nil {
		return err
	}
	// The CRD is ready for v1beta1 once a v1beta1 list answers.
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := suite.mc.CacheV1beta1().Memcacheds("default").List(ctx, metav1.ListOptions{})
		return err == nil, nil
	})
}

// start runs the webhook until stop.
func (w *suiteWebhook) start() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), klog.Background().WithName("suite-webhook").V(2)))
	opts := testOptions(
		"--webhook-bind-address="+w.addr,
		"--webhook-url="+w.url,
		"--webhook-ca-validity="+suiteWebhookCAValidity.String(),
		"--webhook-cert-validity="+suiteWebhookCertValidity.String(),
	)
	kube, err := kubernetes.NewForConfig(suite.operatorConfig)
	if err != nil {
		cancel()
		return err
	}
	crds, err := apiextensionsclient.NewForConfig(suite.operatorConfig)
	if err != nil {
		cancel()
		return err
	}
	hook, err := startWebhook(ctx, ctx, opts, kube, crds)
	if err != nil {
		cancel()
		return fmt.Errorf("webhook: %w", err)
	}
	hook.manage(ctx)
	done := make(chan struct{})
	go func() {
		<-ctx.Done()
		hook.shutdown(context.Background())
		close(done)
	}()
	w.cancel, w.done = cancel, done
	return nil
}

// stop ends the webhook and waits until its listener is closed.
func (w *suiteWebhook) stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cancel == nil {
		return
	}
	w.cancel()
	<-w.done
	w.cancel = nil
}
