package framework

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubelite/memcached-operator/pkg/localcluster"
	"github.com/kubelite/memcached-operator/pkg/metrics/scrape"
)

// Resync is the --resync-period of a test's operator unless the test sets
// one: short, so that a test can wait for whole resync passes.
const Resync = 4 * time.Second

// startTimeout bounds the wait for a started operator's listeners.
const startTimeout = 2 * time.Minute

// scrapeTimeout bounds a scrape of /metrics: generous, for a machine loaded
// by a flood of requests or by other packages' control planes. No test
// asserts how fast the operator answers.
const scrapeTimeout = 30 * time.Second

// Operator is the operator binary, run by one test.
type Operator struct {
	// Namespace is the one namespace the operator watches; empty for an
	// operator of the whole cluster.
	Namespace string
	// User is the name its requests carry: OperatorUser, unless the test
	// runs it under another ServiceAccount (--kubeconfig). Empty when it
	// runs as the admin, whose requests the audit log does not record.
	User string

	cmd    *exec.Cmd
	log    *syncBuffer
	exited chan struct{}
	// MetricsAddr and HealthAddr are where /metrics and /healthz listen,
	// read from the operator's log; empty when the flags turned a
	// listener off.
	MetricsAddr, HealthAddr string
	// secure is set when /metrics is HTTPS, scraped as the metrics
	// reader.
	secure bool
	// ready is set once Launch saw the operator's listeners answer.
	ready bool
	// started is when the process was started: requests before it are
	// another operator's.
	started time.Time
	// AllowForbidden is set by tests that revoke RBAC on purpose.
	AllowForbidden bool
	// DeletesPools is set by tests that take zone pools away, whose
	// children the operator deletes.
	DeletesPools bool
}

// servingAddr reads the address a listener bound from the line the
// operator logs once it is bound, in the text or the JSON format:
//
//	I0102 15:04:05.000000 1234 listener.go:NNN] "Serving" listener="metrics" address="127.0.0.1:40123"
//	{"ts":1767316245000.1,"caller":"serving/listener.go:NNN","msg":"Serving","v":0,"listener":"metrics","address":"127.0.0.1:40123"}
func servingAddr(log, listener string) string {
	for _, re := range []string{
		`"Serving" .*\blistener="` + listener + `" .*\baddress="([^"]+)"`,
		`"msg":"Serving".*"listener":"` + listener + `".*"address":"([^"]+)"`,
	} {
		if m := regexp.MustCompile(re).FindStringSubmatch(log); m != nil {
			return m[1]
		}
	}
	return ""
}

// StartOperator starts the operator binary under the shipped ServiceAccount,
// watching ns only, with /metrics over plain HTTP on a port it picks
// itself, and returns once /healthz answers. args come last and override.
//
// When the test ends the operator is killed, and the test fails if the
// operator raced, was refused a request by RBAC, or deleted a child it
// never deletes (see checkRequests).
func StartOperator(t *testing.T, ns string, args ...string) *Operator {
	t.Helper()
	return StartOperatorBinary(t, env.binary, ns, args...)
}

// StartOperatorBinary is StartOperator with another build of the operator
// (BuildBinary).
func StartOperatorBinary(t *testing.T, binary, ns string, args ...string) *Operator {
	t.Helper()
	all := []string{"--namespace=" + ns}
	if !slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--resync-period") }) {
		all = append(all, "--resync-period="+Resync.String())
	}
	op := Launch(t, binary, append(all, args...)...)
	op.Namespace = ns
	return op
}

// Launch starts binary with the framework's listener and client flags and
// args, and no namespace of its own: StartOperator is the usual way. It
// returns once /healthz answers, or, with that listener off, /metrics.
//
// /metrics is plain HTTP unless args say --metrics-secure=true: a scrape
// of the secure listener costs a TokenReview and a SubjectAccessReview,
// writes that tests count. Metrics then scrapes as the metrics reader
// (MetricsReaderToken).
func Launch(t *testing.T, binary string, args ...string) *Operator {
	t.Helper()
	op := &Operator{User: OperatorUser, log: &syncBuffer{}, exited: make(chan struct{})}
	all := append([]string{
		"--kubeconfig=" + env.kubeconfig,
		"--leader-elect=false",
		// The operator binds ports it picks: a port picked here could be
		// taken before it binds it.
		"--metrics-bind-address=127.0.0.1:0",
		"--metrics-secure=false",
		"--health-probe-bind-address=127.0.0.1:0",
		// The package's webhook serves conversion.
		"--webhook-bind-address=0",
		"--logging-format=text",
	}, args...)
	op.secure = flagValue(all, "--metrics-secure") == "true"
	if flagValue(all, "--kubeconfig") == env.cluster.KubeconfigPath {
		op.User = ""
	}
	op.cmd = exec.Command(binary, all...)
	op.cmd.Stdout, op.cmd.Stderr = op.log, op.log
	op.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	op.started = time.Now()
	if err := op.cmd.Start(); err != nil {
		t.Fatalf("starting the operator: %v", err)
	}
	go func() {
		_ = op.cmd.Wait() // The exit status is read from ProcessState.
		close(op.exited)
	}()
	t.Cleanup(func() {
		op.Kill()
		op.checkRequests(t)
		if strings.Contains(op.Log(), "WARNING: DATA RACE") {
			t.Errorf("the operator raced")
		}
		if t.Failed() {
			t.Logf("operator %d log:\n%s", op.cmd.Process.Pid, op.Log())
		}
	})
	// The metrics listener is bound before the health listener.
	metricsOff := flagValue(all, "--metrics-bind-address") == "0"
	healthOff := flagValue(all, "--health-probe-bind-address") == "0"
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, startTimeout, true, func(ctx context.Context) (bool, error) {
		if !op.Running() {
			return false, errors.New("the process ended")
		}
		log := op.Log()
		if op.MetricsAddr == "" && !metricsOff {
			op.MetricsAddr = servingAddr(log, "metrics")
		}
		if op.HealthAddr == "" && !healthOff {
			op.HealthAddr = servingAddr(log, "health")
		}
		switch {
		case !healthOff:
			if op.HealthAddr == "" {
				return false, nil
			}
			code, _ := op.Get(op.HealthAddr, "/healthz")
			return code == http.StatusOK, nil
		case !metricsOff:
			if op.MetricsAddr == "" {
				return false, nil
			}
			_, err := op.Metrics()
			return err == nil, nil
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("waiting for the operator's listeners: %v\n%s", err, op.Log())
	}
	op.ready = true
	return op
}

// flagValue is the value the last --name=value in args gives, as pflag
// reads it.
func flagValue(args []string, name string) string {
	v := ""
	for _, a := range args {
		if after, ok := strings.CutPrefix(a, name+"="); ok {
			v = after
		}
	}
	return v
}

// Log is everything the operator wrote so far.
func (op *Operator) Log() string { return op.log.String() }

// Running reports whether the process has not exited.
func (op *Operator) Running() bool {
	select {
	case <-op.exited:
		return false
	default:
		return true
	}
}

// Kill ends the operator with SIGKILL, as a crash would, and waits until it
// is gone.
func (op *Operator) Kill() {
	_ = op.cmd.Process.Kill()
	<-op.exited
}

// Terminate sends SIGTERM and waits up to bound for the process to exit,
// returning its exit error (nil for status 0).
func (op *Operator) Terminate(bound time.Duration) error {
	if err := op.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	select {
	case <-op.exited:
		if !op.cmd.ProcessState.Success() {
			return fmt.Errorf("exited with %s", op.cmd.ProcessState)
		}
		return nil
	case <-time.After(bound):
		return fmt.Errorf("did not exit within %s of SIGTERM", bound)
	}
}

// Metrics scrapes the operator's /metrics, as the metrics reader when the
// listener is secure. It waits up to scrapeTimeout for the answer.
func (op *Operator) Metrics() (scrape.Metrics, error) {
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	if !op.secure {
		return scrape.Get(ctx, "http://"+op.MetricsAddr+"/metrics")
	}
	token, err := metricsReaderToken()
	if err != nil {
		return nil, err
	}
	return scrape.Source{URL: "https://" + op.MetricsAddr + "/metrics", Token: token, Client: InsecureClient}.Get(ctx)
}

// Get returns the status code and the body of a GET of path on one of the
// operator's listeners, over HTTPS with the metrics reader's token for a
// secure /metrics; the code is 0 when the listener did not answer.
func (op *Operator) Get(addr, path string) (int, string) {
	if addr == op.MetricsAddr && op.secure {
		token, err := metricsReaderToken()
		if err != nil {
			return 0, err.Error()
		}
		return GetWithToken("https://"+addr+path, token)
	}
	return GetWithToken("http://"+addr+path, "")
}

// Syncs is how many syncs the operator has finished:
// memcached_operator_reconcile_total, summed over results.
func (op *Operator) Syncs() (float64, error) {
	m, err := op.Metrics()
	if err != nil {
		return 0, err
	}
	return m.Sum("memcached_operator_reconcile_total", nil), nil
}

// Requests returns the requests of this operator that match, from the
// apiserver's audit log: those its User sent, since the operator
// started, for objects in its namespace. Two operators in one namespace
// are told apart only by time; tests that run two say how.
//
// The apiserver logs a request once it has answered it, so count requests
// after their effect is visible, not as soon as they are sent.
func (op *Operator) Requests(t *testing.T, match func(localcluster.AuditEvent) bool) []localcluster.AuditEvent {
	t.Helper()
	if op.User == "" {
		t.Fatal("the operator runs as the admin, whose requests the audit log does not record")
	}
	events, err := env.audit.Events(func(e localcluster.AuditEvent) bool {
		return e.User.Username == op.User && !e.RequestReceivedTimestamp.Time.Before(op.started) &&
			(op.Namespace == "" || e.Namespace() == op.Namespace) && match(e)
	})
	if err != nil {
		t.Fatalf("reading the audit log: %v", err)
	}
	return events
}

// Writes returns the operator's write requests (see Requests).
func (op *Operator) Writes(t *testing.T) []localcluster.AuditEvent {
	t.Helper()
	return op.Requests(t, localcluster.AuditEvent.Write)
}

// checkRequests fails the test if RBAC refused the operator a request, or
// if it sent a DELETE other than of a NetworkPolicy, which it deletes once
// spec.networkPolicy is unset, or (for tests that take zone pools away, with
// DeletesPools) of a pool's children. Every other child is deleted by the
// garbage collector, so any other DELETE is a bug.
//
// An operator run as the admin is not checked: its requests are not in the
// audit log, and the admin may do anything.
func (op *Operator) checkRequests(t *testing.T) {
	t.Helper()
	if !op.ready || op.User == "" {
		return
	}
	// A running operator lists and watches its namespace at once, so an
	// empty log means the checks below would see nothing: the audit
	// policy does not cover op.User.
	if len(op.Requests(t, func(localcluster.AuditEvent) bool { return true })) == 0 {
		t.Errorf("the audit log has no request of %s: its RBAC and DELETE checks cannot see anything", op.User)
		return
	}
	if !op.AllowForbidden {
		if f := op.Requests(t, localcluster.AuditEvent.RBACDenied); len(f) > 0 {
			t.Errorf("the shipped RBAC is not sufficient; Forbidden requests: %v", f)
		}
	}
	deletes := op.Requests(t, func(e localcluster.AuditEvent) bool {
		if e.Verb != "delete" || e.Resource() == "networkpolicies" {
			return false
		}
		pool := e.Resource() == "deployments" || e.Resource() == "services" || e.Resource() == "poddisruptionbudgets"
		return !(op.DeletesPools && pool)
	})
	if len(deletes) > 0 {
		t.Errorf("the operator sent DELETE requests other than of a NetworkPolicy or of a pool taken away: %v", deletes)
	}
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

// WaitReady waits until the operator's health listener answers /readyz
// with 200.
func (op *Operator) WaitReady(t *testing.T) {
	t.Helper()
	Eventually(t, WaitLong, "/readyz", func(context.Context) (bool, string) {
		code, body := op.Get(op.HealthAddr, "/readyz")
		return code == http.StatusOK, fmt.Sprintf("%d %s", code, body)
	})
}

// FreeAddr picks a port on the loopback address for a listener the
// operator binds, when the test must know it before the operator starts:
// one outside the kernel's ephemeral range, which outgoing connections
// could take before the operator binds it.
func FreeAddr(t *testing.T) string {
	t.Helper()
	port, err := localcluster.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
}
