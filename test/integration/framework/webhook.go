package framework

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cachev1alpha1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1alpha1"
	"github.com/kubelite/memcached-operator/pkg/localcluster"
)

// Webhook is the operator binary run once per package as the conversion
// webhook, outside the cluster as `make run` runs it: the CRD gets its
// URL. It watches the operator's own namespace, which holds no Memcached,
// so it reconciles nothing a test owns. Every request through v1alpha1
// goes through it, as in a cluster where the operator runs.
type Webhook struct {
	// URL is where the apiserver calls it.
	URL  string
	addr string

	mu     sync.Mutex
	cmd    *exec.Cmd
	log    *syncBuffer
	exited chan struct{}
}

// StartWebhook starts the package's conversion webhook on a free port.
func StartWebhook() (*Webhook, error) {
	port, err := localcluster.FreePort()
	if err != nil {
		return nil, err
	}
	w := &Webhook{addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port))}
	w.URL = "https://" + w.addr + "/convert"
	return w, w.Start()
}

// PackageWebhook is the webhook Main started.
func PackageWebhook() *Webhook { return env.webhook }

// Start runs the webhook until Stop and returns once conversion works
// through it; it is a no-op while it runs. A start that fails leaves
// nothing running, so the next Start tries afresh.
func (w *Webhook) Start() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cmd != nil {
		return nil
	}
	w.log, w.exited = &syncBuffer{}, make(chan struct{})
	w.cmd = exec.Command(env.binary, append([]string{
		"--kubeconfig=" + env.kubeconfig,
		"--leader-elect=false",
		"--namespace=" + OperatorNamespace,
		"--metrics-bind-address=0",
		"--health-probe-bind-address=0",
		"--webhook-bind-address=" + w.addr,
		"--webhook-url=" + w.URL,
	}, env.webhookArgs...)...)
	w.cmd.Stdout, w.cmd.Stderr = w.log, w.log
	w.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := w.cmd.Start(); err != nil {
		w.cmd = nil
		return err
	}
	exited := w.exited
	cmd := w.cmd
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	if err := w.waitConverting(exited); err != nil {
		_ = cmd.Process.Kill()
		<-exited
		w.cmd = nil
		return err
	}
	return nil
}

// waitConverting waits until a create through v1alpha1 is converted: the
// webhook serves, it has written its URL and CA bundle into the CRD, and
// the apiserver has taken them up. Accepting connections is not enough:
// until the CRD carries its new CA bundle, the apiserver refuses its
// certificate.
func (w *Webhook) waitConverting(exited chan struct{}) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var last error
	for {
		select {
		case <-exited:
			return fmt.Errorf("the webhook exited:\n%s", w.log.String())
		case <-ctx.Done():
			return fmt.Errorf("conversion through the webhook on %s did not work within 2 minutes (last: %v):\n%s", w.addr, last, w.log.String())
		case <-time.After(200 * time.Millisecond):
		}
		if last = ConversionWorks(ctx); last == nil {
			return nil
		}
	}
}

// ConversionWorks creates a Memcached through v1alpha1 as a dry run, which
// the apiserver converts to the stored v1beta1 through the CRD's webhook
// and stores nothing. A list would not do: an empty one converts nothing.
func ConversionWorks(ctx context.Context) error {
	probe := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Name: "conversion-probe"}}
	_, err := env.mc.CacheV1alpha1().Memcacheds(metav1.NamespaceDefault).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	return err
}

// Stop ends the webhook with SIGTERM and waits until it has exited. It is a
// no-op on the nil Webhook of a Bare package.
func (w *Webhook) Stop() {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cmd == nil {
		return
	}
	_ = w.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-w.exited:
	case <-time.After(time.Minute):
		_ = w.cmd.Process.Kill()
		<-w.exited
	}
	w.cmd = nil
}

// Log is what the webhook wrote since it last started.
func (w *Webhook) Log() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.log == nil {
		return ""
	}
	return w.log.String()
}
