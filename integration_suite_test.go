//go:build integration

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	clientset "github.com/kubelite/memcached-operator/pkg/generated/clientset/versioned"
	"github.com/kubelite/memcached-operator/pkg/leader"
	"github.com/kubelite/memcached-operator/pkg/localcluster"
)

// The root's integration tests are the few that need the operator in this
// process; each file says why. Every other integration test drives the
// built binary from test/integration/<area>.
//
// suite is the control plane the root's tests share. The operator itself
// is started per test, under the ServiceAccount and RBAC that artifacts/
// ships, so every test also proves that RBAC is sufficient.
var suite struct {
	cluster *localcluster.Cluster
	// operatorConfig authenticates as the memcached-operator ServiceAccount.
	operatorConfig     *rest.Config
	operatorKubeconfig string
	kube               kubernetes.Interface
	mc                 clientset.Interface
	// webhook serves conversion for the whole suite; see startSuiteWebhook.
	webhook *suiteWebhook
}

// suiteZones are the zones of the suite's three fake nodes, one each.
var suiteZones = []string{"zone-a", "zone-b", "zone-c"}

// testResync is the resync period of in-process operators: short, so the
// steady-state test can cover whole periods.
const testResync = 4 * time.Second

func TestMain(m *testing.M) {
	os.Exit(runSuite(m))
}

func runSuite(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	cluster, err := localcluster.Start(ctx, localcluster.Config{
		ControllerManager: true, Scheduler: true, Kwok: true, Nodes: 3, Zones: suiteZones, Progress: os.Stderr,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting the local control plane:", err)
		return 1
	}
	defer cluster.Stop()
	// Ctrl-C or a kill by `go test -timeout` must not leave the cluster
	// directory behind; the processes die with us through Pdeathsig.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sig
		cluster.Stop()
		os.Exit(1)
	}()

	if err := cluster.ApplyFiles(ctx, "artifacts/crd", "artifacts/namespace.yaml", "artifacts/rbac"); err != nil {
		fmt.Fprintln(os.Stderr, "installing artifacts:", err)
		return 1
	}
	kubeconfig, err := cluster.ServiceAccountKubeconfig(ctx, "memcached-operator", "memcached-operator")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	suite.cluster = cluster
	suite.operatorKubeconfig = kubeconfig
	if suite.operatorConfig, err = clientcmd.BuildConfigFromFlags("", kubeconfig); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	suite.kube = kubernetes.NewForConfigOrDie(cluster.Config)
	suite.mc = clientset.NewForConfigOrDie(cluster.Config)
	if err := startSuiteWebhook(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "starting the conversion webhook:", err)
		return 1
	}
	defer suite.webhook.stop()
	return m.Run()
}

// request is one request an operator sent, as the apiserver answered it.
type request struct {
	// sent is when the request went out, at when its answer came back.
	sent, at            time.Time
	method, path, query string
	code                int
	// rbacDenied is a 403 from RBAC, as opposed to, say, a write into a
	// terminating namespace.
	rbacDenied bool
}

func (r request) String() string { return r.method + " " + r.path }

// write reports a request that changes state.
func (r request) write() bool { return r.method != http.MethodGet && r.method != http.MethodHead }

// requestLog records the requests an operator sends.
type requestLog struct {
	mu       sync.Mutex
	requests []request
}

func (l *requestLog) record(sent time.Time, req *http.Request, resp *http.Response) {
	r := request{sent: sent, at: time.Now(), method: req.Method, path: req.URL.Path, query: req.URL.RawQuery}
	if resp != nil {
		r.code = resp.StatusCode
		r.rbacDenied = resp.StatusCode == http.StatusForbidden && isRBACDenial(resp)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.requests = append(l.requests, r)
}

// Len is how many requests were sent so far, for marking a point in time.
func (l *requestLog) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.requests)
}

// Since returns the requests sent after mark (an earlier Len) that match.
func (l *requestLog) Since(mark int, match func(request) bool) []request {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []request
	for _, r := range l.requests[mark:] {
		if match(r) {
			out = append(out, r)
		}
	}
	return out
}

// Writes returns every write request.
func (l *requestLog) Writes() []request { return l.Since(0, request.write) }

// Forbidden returns every request RBAC denied.
func (l *requestLog) Forbidden() []request {
	return l.Since(0, func(r request) bool { return r.rbacDenied })
}

type recordingTransport struct {
	next http.RoundTripper
	log  *requestLog
}

// RoundTrip records the request unless the leader-election fence, which
// runOperator puts inside this wrapper, refused it: that one never left
// the process. sent is taken before the fence looks at the request, so a
// recorded write sent after the loss of leadership was seen is one the
// fence let through after it tripped.
func (t *recordingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	sent := time.Now()
	resp, err := t.next.RoundTrip(req)
	if errors.Is(err, leader.ErrFenced) {
		return resp, err
	}
	t.log.record(sent, req, resp)
	return resp, err
}

// isRBACDenial reads a 403 body and puts it back: only "cannot <verb>"
// denials are RBAC's; a write into a terminating namespace is also a 403.
func isRBACDenial(resp *http.Response) bool {
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	return err == nil && bytes.Contains(body, []byte(" cannot "))
}

// operator is an in-process operator started by a test.
type operator struct {
	requests *requestLog
	registry *prometheus.Registry
	// logs holds every log entry, for tests that check what was logged at
	// which level.
	logs ktesting.Underlier
	// allowForbidden is set by tests that revoke RBAC on purpose.
	allowForbidden bool
	// deletesPools is set by tests that take zone pools away, which the
	// operator deletes (syncPools).
	deletesPools bool
	// exited is closed when runOperator has returned, with err.
	exited chan struct{}
	err    error
	// wantErr is the error a test expects runOperator to return; nil
	// means it must return nil.
	wantErr error
	stop    func()
}

// Reconciles is the operator's memcached_operator_reconcile_total, summed
// over results, as /metrics would serve it.
func (op *operator) Reconciles() float64 { return reconciles(op.registry) }

// reconciles is memcached_operator_reconcile_total in reg, summed over
// results.
func reconciles(reg *prometheus.Registry) float64 {
	families, err := reg.Gather()
	if err != nil {
		return -1
	}
	var total float64
	for _, f := range families {
		if f.GetName() == "memcached_operator_reconcile_total" {
			for _, m := range f.GetMetric() {
				total += m.GetCounter().GetValue()
			}
		}
	}
	return total
}

// testOptions are the flags of an in-process operator: no listeners (tests
// run several; the suite's own webhook serves conversion), no leader
// election, a short resync unless flags set one.
func testOptions(flags ...string) *options {
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	opts := newOptions()
	opts.addFlags(fs)
	_ = fs.Parse(append([]string{"--metrics-bind-address=0", "--health-probe-bind-address=0", "--webhook-bind-address=0", "--leader-elect=false", "--kubeconfig=in-process"}, flags...))
	opts.complete(fs)
	if !fs.Changed("resync-period") {
		opts.resyncPeriod = testResync
	}
	return opts
}

// startOperatorWith runs an in-process operator with the given client
// configuration and extra flags.
func startOperatorWith(t *testing.T, base *rest.Config, flags ...string) *operator {
	t.Helper()
	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.BufferLogs(true)))
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logger))

	op := &operator{requests: &requestLog{}, logs: logger.GetSink().(ktesting.Underlier), exited: make(chan struct{})}
	opts := testOptions(flags...)
	cfg := rest.CopyConfig(base)
	opts.applyClientLimits(cfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return &recordingTransport{next: rt, log: op.requests} })

	op.registry = prometheus.NewRegistry()
	go func() {
		op.err = runOperator(ctx, cfg, opts, op.registry)
		close(op.exited)
	}()

	var once sync.Once
	op.stop = func() {
		once.Do(func() {
			cancel()
			select {
			case <-op.exited:
				if !errors.Is(op.err, op.wantErr) {
					t.Errorf("operator returned %v, want %v", op.err, op.wantErr)
				}
			case <-time.After(30 * time.Second):
				t.Errorf("operator did not stop within 30s")
			}
		})
	}
	t.Cleanup(func() {
		op.stop()
		if f := op.requests.Forbidden(); len(f) > 0 && !op.allowForbidden {
			t.Errorf("the shipped RBAC is not sufficient; Forbidden requests: %v", f)
		}
		// The operator deletes only the children that can go while
		// their Memcached stays: the NetworkPolicy once
		// spec.networkPolicy is unset (deleteNetworkPolicy), and the
		// pools the spec no longer asks for (syncPools), which only the
		// tests that take pools away allow. Every other child is
		// deleted by the garbage collector, so any other DELETE is a
		// bug.
		if d := op.requests.Since(0, func(r request) bool {
			return r.method == http.MethodDelete && !forNetworkPolicy(r) && !(op.deletesPools && forPoolChild(r))
		}); len(d) > 0 {
			t.Errorf("the operator sent DELETE requests other than of a NetworkPolicy or of a pool taken away: %v", d)
		}
	})
	return op
}

// forPoolChild reports a request for one Deployment, Service or
// PodDisruptionBudget, the children of a pool, by its path.
func forPoolChild(r request) bool {
	for _, kind := range []string{"/apis/apps/v1/namespaces/*/deployments/", "/api/v1/namespaces/*/services/", "/apis/policy/v1/namespaces/*/poddisruptionbudgets/"} {
		prefix, rest, _ := strings.Cut(kind, "*")
		if after, ok := strings.CutPrefix(r.path, prefix); ok && strings.Contains(after, rest) {
			return true
		}
	}
	return false
}

// forNetworkPolicy reports a request for one NetworkPolicy, by its path.
func forNetworkPolicy(r request) bool {
	return strings.HasPrefix(r.path, "/apis/networking.k8s.io/v1/namespaces/") && strings.Contains(r.path, "/networkpolicies/")
}

// newNamespace creates a namespace for one test and deletes it afterwards.
func newNamespace(t *testing.T) string {
	t.Helper()
	name := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	if len(name) > 50 {
		name = name[:50]
	}
	name = strings.Trim(name, "-") + fmt.Sprintf("-%d", time.Now().UnixNano()%100000)
	ctx := context.Background()
	if _, err := suite.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating namespace: %v", err)
	}
	t.Cleanup(func() { deleteNamespace(t, name) })
	return name
}

// deleteNamespace deletes the namespace's Memcacheds, releases them
// (releaseMemcacheds) and waits until they are gone, so that no later
// test's operator finds one. The namespace itself is deleted without
// waiting: kube-controller-manager starts on a deleted namespace only after
// a fixed 5-second grace period, and waiting for that in every test took a
// third of the suite. Deleting a namespace full of Memcacheds with the
// operator running is TestFaultNamespaceDeletion's case.
func deleteNamespace(t *testing.T, name string) {
	t.Helper()
	ctx := context.Background()
	// Also when the wait fails: a namespace left behind would hold its
	// objects until the suite's control plane stops.
	defer func() {
		if err := suite.kube.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Errorf("deleting namespace %s: %v", name, err)
		}
	}()
	if err := releaseMemcacheds(ctx, suite.mc, name); err != nil {
		t.Error(err)
		return
	}
	mcs := suite.mc.CacheV1beta1().Memcacheds(name)
	eventually(t, 2*time.Minute, "the Memcacheds of namespace "+name+" are deleted", func(ctx context.Context) (bool, string) {
		list, err := mcs.List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		var left []string
		for _, mc := range list.Items {
			left = append(left, fmt.Sprintf("%s finalizers=%v", mc.Name, mc.Finalizers))
		}
		return len(left) == 0, fmt.Sprintf("left: %v", left)
	})
}

// releaseMemcacheds deletes every Memcached in the namespace and removes
// their finalizers by hand, with the patch docs/operations.md gives for an
// uninstalled operator. Every Memcached an operator has synced carries the
// operator's finalizer, and a test's operator has often stopped before its
// cleanup runs (it was started after the namespace, or stopped by the
// test); one still running may finalize a Memcached first, and then the
// patch finds it gone. The children go with the garbage collector and the
// namespace.
func releaseMemcacheds(ctx context.Context, client clientset.Interface, ns string) error {
	mcs := client.CacheV1beta1().Memcacheds(ns)
	if err := mcs.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		return fmt.Errorf("deleting the Memcacheds of namespace %s: %w", ns, err)
	}
	list, err := mcs.List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing the Memcacheds of namespace %s: %w", ns, err)
	}
	for _, mc := range list.Items {
		if len(mc.Finalizers) == 0 {
			continue
		}
		_, err := mcs.Patch(ctx, mc.Name, types.JSONPatchType, []byte(`[{"op":"remove","path":"/metadata/finalizers"}]`), metav1.PatchOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("removing the finalizers of Memcached %s/%s: %w", ns, mc.Name, err)
		}
	}
	return nil
}

// eventually polls cond until it holds or the timeout passes, then fails
// the test with what cond last reported.
func eventually(t *testing.T, timeout time.Duration, what string, cond func(ctx context.Context) (bool, string)) {
	t.Helper()
	eventuallyEvery(t, 100*time.Millisecond, timeout, what, cond)
}

// eventuallyEvery is eventually, polling every interval.
func eventuallyEvery(t *testing.T, interval, timeout time.Duration, what string, cond func(ctx context.Context) (bool, string)) {
	t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(context.Background(), interval, timeout, true, func(context.Context) (bool, error) {
		// Each check gets its own deadline, so that the last one is not
		// cut short by the overall timeout and reports the real state.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		ok, detail := cond(ctx)
		last = detail
		return ok, nil
	})
	if err != nil {
		t.Fatalf("%s: not reached within %s; last: %s", what, timeout, last)
	}
}
