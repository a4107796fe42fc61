//go:build integration

package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubelite/memcached-operator/pkg/localcluster"
	"github.com/kubelite/memcached-operator/pkg/metrics/scrape"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// operatorBinary builds bin/memcached-operator the way `make build` does,
// once per test run.
func operatorBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "memcached-operator-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "memcached-operator")
		buildErr = buildOperator(binPath)
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// buildOperator builds the operator of this tree into bin, statically as
// `make build` does, with the build tags given.
func buildOperator(bin string, tags ...string) error {
	cmd := exec.Command("go", "build", "-trimpath", "-tags", strings.Join(tags, ","), "-o", bin, ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building the binary (tags %v): %v\n%s", tags, err, out)
	}
	return nil
}

// binaryOperator is the operator running as a separate process.
type binaryOperator struct {
	cmd         *exec.Cmd
	log         *syncBuffer
	exited      chan error
	metricsAddr string
	healthAddr  string
	// metricsToken is sent to a secure metrics listener; empty for plain
	// HTTP.
	metricsToken string
	// env is added to the test's environment for the process.
	env []string
}

// startBinary starts the built operator under the shipped ServiceAccount
// with its listeners on free ports. It is killed when the test ends; the
// log is printed if the test failed.
//
// Its /metrics is plain HTTP unless args say --metrics-secure=true: a
// scrape of the secure listener costs a TokenReview and a
// SubjectAccessReview, POSTs that rest_client_requests_total counts
// alongside the writes that many tests count. The secure listener has its
// own test, TestIntegrationMetricsNeedAuthorization.
func startBinary(t *testing.T, args ...string) *binaryOperator {
	t.Helper()
	op := newBinaryOperator(t)
	if slices.Contains(args, "--metrics-secure=true") {
		op.metricsToken = metricsReaderToken(t)
	}
	all := append([]string{
		"--kubeconfig=" + suite.operatorKubeconfig,
		"--webhook-bind-address=0", // The suite's webhook serves conversion.
	}, args...)
	op.start(t, operatorBinary(t), all...)
	return op
}

// newBinaryOperator prepares an operator process with its listeners on free
// ports, plain HTTP for /metrics; start runs it.
func newBinaryOperator(t *testing.T) *binaryOperator {
	t.Helper()
	return &binaryOperator{log: &syncBuffer{}, exited: make(chan error, 1), metricsAddr: freeAddr(t), healthAddr: freeAddr(t)}
}

// start runs bin with the listener flags and args. It is killed when the
// test ends; the log is printed if the test failed.
func (op *binaryOperator) start(t *testing.T, bin string, args ...string) {
	t.Helper()
	all := append([]string{
		"--metrics-bind-address=" + op.metricsAddr,
		"--metrics-secure=false",
		"--health-probe-bind-address=" + op.healthAddr,
	}, args...)
	op.cmd = exec.Command(bin, all...)
	op.cmd.Stdout, op.cmd.Stderr = op.log, op.log
	if op.env != nil {
		op.cmd.Env = append(os.Environ(), op.env...)
	}
	op.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := op.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { op.exited <- op.cmd.Wait() }()
	t.Cleanup(func() {
		_ = op.cmd.Process.Kill()
		if t.Failed() {
			t.Logf("operator %d log:\n%s", op.cmd.Process.Pid, op.logs())
		}
	})
}

func (op *binaryOperator) logs() string { return op.log.String() }

// terminate sends SIGTERM and waits up to bound for a zero exit.
func (op *binaryOperator) terminate(bound time.Duration) error {
	if err := op.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	select {
	case err := <-op.exited:
		return err
	case <-time.After(bound):
		return fmt.Errorf("did not exit within %s", bound)
	}
}

// kill sends SIGKILL and waits for the process to go.
func (op *binaryOperator) kill() {
	_ = op.cmd.Process.Kill()
	<-op.exited
}

// get returns the status code and body of a GET on one of the listeners.
func get(addr, path string) (int, string) {
	client := http.Client{Timeout: 2 * time.Second}
	resp, err := client.Get("http://" + addr + path)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// scrape reads the operator's /metrics, as the metrics reader when the
// listener is secure; an error means it did not answer.
func (op *binaryOperator) scrape() (scrape.Metrics, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if op.metricsToken == "" {
		return scrape.Get(ctx, "http://"+op.metricsAddr+"/metrics")
	}
	return scrape.Source{URL: "https://" + op.metricsAddr + "/metrics", Token: op.metricsToken, Client: insecureClient}.Get(ctx)
}

// insecureClient skips verifying the operator's self-signed metrics
// certificate, as a Prometheus scrape configuration for it does.
var insecureClient = &http.Client{
	Timeout:   5 * time.Second,
	Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, //nolint:gosec // The operator's generated certificate.
}

var (
	metricsReaderOnce  sync.Once
	metricsReaderValue string
	metricsReaderErr   error
)

// metricsReaderToken returns the token of monitoring/prometheus, a
// ServiceAccount bound to the shipped memcached-operator-metrics-reader
// ClusterRole, as a user would bind their Prometheus.
func metricsReaderToken(t *testing.T) string {
	t.Helper()
	metricsReaderOnce.Do(func() {
		ctx := context.Background()
		_, err := suite.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "monitoring"}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			metricsReaderErr = err
			return
		}
		_, err = suite.kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "prometheus-memcached-operator-metrics"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "memcached-operator-metrics-reader"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "monitoring", Name: "prometheus"}},
		}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			metricsReaderErr = err
			return
		}
		metricsReaderValue, metricsReaderErr = suite.cluster.ServiceAccountToken(ctx, "monitoring", "prometheus")
	})
	if metricsReaderErr != nil {
		t.Fatalf("setting up the metrics reader: %v", metricsReaderErr)
	}
	return metricsReaderValue
}

// freeAddr picks a port outside the kernel's ephemeral range, which
// outgoing connections could take before the operator binds it.
func freeAddr(t *testing.T) string {
	t.Helper()
	port, err := localcluster.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
}

// syncBuffer is a bytes.Buffer safe for a process writing and a test
// reading.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
