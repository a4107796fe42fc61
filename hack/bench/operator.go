package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubelite/memcached-operator/pkg/metrics/scrape"
)

// resyncPeriod is the operator's --resync-period in the bench: short, so
// the idle window covers resyncs.
const resyncPeriod = 20 * time.Second

// limitQPS and limitBurst are a client-side rate limit, the operator's
// default until 2026-12-01; by default it has none. The second converge
// runs with it (limitedQPS), to show what a limit costs.
const (
	limitQPS   = 200
	limitBurst = 400
)

var limitedQPS = []string{fmt.Sprintf("--kube-api-qps=%d", limitQPS), fmt.Sprintf("--kube-api-burst=%d", limitBurst)}

// Timing of the operator process: startTimeout bounds the wait for
// /metrics after a start, and stopGrace the wait for a SIGTERM'd operator
// to exit, above its 30 s --shutdown-timeout for draining syncs.
const (
	startTimeout = 30 * time.Second
	stopGrace    = 40 * time.Second
)

// operatorProc is the operator binary under measurement.
type operatorProc struct {
	cmd     *exec.Cmd
	logPath string
	// addr is the host:port the metrics listener bound, as the operator
	// logged it.
	addr string
	// exited is closed once the process has been waited for; cmd's
	// ProcessState is set from then on.
	exited chan struct{}
}

// servingLine matches the line the operator logs, in the text log format,
// once its metrics listener is bound (serving.Listen in pkg/serving/listener.go):
//
//	I0102 15:04:05.000000 1234 listener.go:NNN] "Serving" listener="metrics" address="127.0.0.1:40123"
//
// Other key/value pairs may come between, should the logger gain some.
var servingLine = regexp.MustCompile(`"Serving" .*\blistener="metrics" .*\baddress="([^"]+)"`)

// startOperator stops the running operator, if any, and starts the
// binary against the cluster with the bench's flags plus extra. It returns
// once /metrics answers.
//
// The operator picks its own metrics port: it binds 127.0.0.1:0 and the
// bench reads the address from the operator's "Serving" log line. Picking
// a free port here and passing it would leave a window between closing
// the bench's probe listener and the operator binding the port, in which
// anything else on the machine (the control plane picking its own ports,
// a second bench) could take it; the operator would then fail to start,
// or, worse, the bench would scrape someone else's /metrics (etcd serves
// one). A port the operator bound itself cannot be taken. --logging-format=text pins the
// format the line is read in, though it is the default.
func (e *env) startOperator(ctx context.Context, extra ...string) (*operatorProc, error) {
	e.stopOperator()
	op, err := e.launch(ctx, extra...)
	if err != nil {
		return nil, err
	}
	e.op = op
	return op, nil
}

// launch starts the binary against the cluster with the bench's flags plus
// extra, next to any operator already running, and returns once its
// /metrics answers. The caller stops it.
func (e *env) launch(ctx context.Context, extra ...string) (*operatorProc, error) {
	e.starts++
	args := append([]string{
		"--kubeconfig=" + e.cluster.KubeconfigPath,
		"--leader-elect=false",
		"--metrics-bind-address=127.0.0.1:0",
		// Plain HTTP: each scrape of the secure listener would add a
		// TokenReview and a SubjectAccessReview to the POSTs the bench
		// counts as writes.
		"--metrics-secure=false",
		// Nothing in the bench reads v1beta1, and the bench's cluster has
		// no garbage collector or namespace controller that would.
		"--webhook-bind-address=0",
		"--health-probe-bind-address=0",
		"--resync-period=" + resyncPeriod.String(),
		"--workers=" + strconv.Itoa(e.cfg.Workers),
		"--enable-profiling",
		"--logging-format=text",
	}, extra...)
	op := &operatorProc{
		cmd:     exec.Command(e.cfg.Binary, args...),
		logPath: filepath.Join(e.cluster.Dir, fmt.Sprintf("operator-%d.log", e.starts)),
		exited:  make(chan struct{}),
	}
	logFile, err := os.Create(op.logPath)
	if err != nil {
		return nil, fmt.Errorf("creating the operator's log: %w", err)
	}
	op.cmd.Stdout, op.cmd.Stderr = logFile, logFile
	// The kernel kills the operator if the bench dies without stopping it.
	op.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := op.cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", e.cfg.Binary, err)
	}
	go func() {
		_ = op.cmd.Wait() // The exit status is read from cmd.ProcessState.
		_ = logFile.Close()
		close(op.exited)
	}()

	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, startTimeout, true, func(ctx context.Context) (bool, error) {
		if !op.running() {
			return false, errors.New("the process ended")
		}
		if op.addr == "" {
			data, err := os.ReadFile(op.logPath)
			if err != nil {
				return false, fmt.Errorf("reading the operator's log: %w", err)
			}
			m := servingLine.FindSubmatch(data)
			if m == nil {
				return false, nil
			}
			op.addr = string(m[1])
		}
		_, err := scrape.Get(ctx, op.url("/metrics"))
		return err == nil, nil // Not serving yet; startTimeout bounds the wait.
	})
	if err != nil {
		what := "the operator's /metrics at " + op.addr
		if op.addr == "" {
			what = "the operator to log its metrics address"
		}
		err = op.failed(fmt.Errorf("waiting for %s: %w", what, err))
		op.stop()
		return nil, err
	}
	return op, nil
}

// stopOperator stops the running operator, if any.
func (e *env) stopOperator() {
	if e.op != nil {
		e.op.stop()
		e.op = nil
	}
}

// stop sends SIGTERM and waits for the operator to exit, killing it after
// stopGrace.
func (op *operatorProc) stop() {
	if !op.running() {
		return
	}
	_ = op.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-op.exited:
	case <-time.After(stopGrace):
		_ = op.cmd.Process.Kill()
		<-op.exited
	}
}

// kill ends the operator with SIGKILL, as a crash would: it drains
// nothing and leaves its Lease to expire.
func (op *operatorProc) kill() {
	if !op.running() {
		return
	}
	_ = op.cmd.Process.Kill()
	<-op.exited
}

func (op *operatorProc) running() bool {
	select {
	case <-op.exited:
		return false
	default:
		return true
	}
}

// failed returns err, adding, if the operator has exited, how it ended and
// the end of its log: a dead operator, rather than the request that found
// it dead, is then the reason to report. A request can fail a moment
// before the process is reaped, so failed waits a second for that.
func (op *operatorProc) failed(err error) error {
	select {
	case <-op.exited:
	case <-time.After(time.Second):
		return err
	}
	return fmt.Errorf("%w (the operator exited: %s)\n--- last lines of %s ---\n%s", err, op.cmd.ProcessState, op.logPath, tail(op.logPath, 20))
}

// tail returns the last lines of the file at path.
func tail(path string, lines int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	all := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	return strings.Join(all[max(0, len(all)-lines):], "\n")
}

func (op *operatorProc) url(path string) string { return "http://" + op.addr + path }

// profileSeconds is how much of the rate-limited converge the CPU profile
// covers; it starts with the first create.
const profileSeconds = 10

// cpuProfile saves a CPU profile from the operator's pprof endpoint (the
// bench runs it with --enable-profiling) to dir/cpu-N<n>.pprof.
func (op *operatorProc) cpuProfile(ctx context.Context, dir string, n int) error {
	return op.save(ctx, op.url(fmt.Sprintf("/debug/pprof/profile?seconds=%d", profileSeconds)), filepath.Join(dir, fmt.Sprintf("cpu-N%d.pprof", n)))
}

// settledHeap forces a GC through the heap profile endpoint and returns
// the heap in use, so the figure is what the caches hold rather than
// garbage not yet collected. The profile is saved to saveTo unless that is
// empty.
func (op *operatorProc) settledHeap(ctx context.Context, saveTo string) (float64, error) {
	if err := op.save(ctx, op.url("/debug/pprof/heap?gc=1"), saveTo); err != nil {
		return 0, fmt.Errorf("heap profile: %w", err)
	}
	s, err := op.scrape(ctx)
	if err != nil {
		return 0, err
	}
	return s.heapInuse, nil
}

// save fetches url and writes the body to path, or discards it if path is
// empty.
func (op *operatorProc) save(ctx context.Context, url, path string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return op.failed(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	if path == "" {
		if _, err := io.Copy(io.Discard, resp.Body); err != nil {
			return op.failed(fmt.Errorf("GET %s: %w", url, err))
		}
		return nil
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		_ = f.Close()
		return op.failed(fmt.Errorf("GET %s: %w", url, err))
	}
	return f.Close()
}

// peakRSS is the process's peak resident set size (VmHWM), in bytes.
func (op *operatorProc) peakRSS() (float64, error) { return op.statusBytes("VmHWM") }

// rss is the process's resident set size now (VmRSS), in bytes.
func (op *operatorProc) rss() (float64, error) { return op.statusBytes("VmRSS") }

// statusBytes reads a size in kB from /proc/<pid>/status.
func (op *operatorProc) statusBytes(field string) (float64, error) {
	data, err := op.readProc("status")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(data, "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseFloat(strings.Fields(rest)[0], 64)
			if err != nil {
				return 0, fmt.Errorf("%s in /proc/%d/status: %w", field, op.cmd.Process.Pid, err)
			}
			return kb * 1024, nil
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, op.cmd.Process.Pid)
}

// cpuSeconds is the process's user plus system CPU time.
func (op *operatorProc) cpuSeconds() (float64, error) {
	data, err := op.readProc("stat")
	if err != nil {
		return 0, err
	}
	// Fields 14 and 15 (utime, stime), counted after the command name,
	// which is in parentheses and may hold spaces.
	fields := strings.Fields(data[strings.LastIndexByte(data, ')')+1:])
	if len(fields) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat has %d fields after the command", op.cmd.Process.Pid, len(fields))
	}
	utime, err := strconv.ParseFloat(fields[11], 64)
	if err != nil {
		return 0, fmt.Errorf("utime in /proc/%d/stat: %w", op.cmd.Process.Pid, err)
	}
	stime, err := strconv.ParseFloat(fields[12], 64)
	if err != nil {
		return 0, fmt.Errorf("stime in /proc/%d/stat: %w", op.cmd.Process.Pid, err)
	}
	return (utime + stime) / 100, nil // USER_HZ is 100 on Linux.
}

// readProc reads /proc/<pid>/<name> of the running operator. An operator
// that has exited is an error, not a file of zeros: its pid may be gone
// or taken by another process.
func (op *operatorProc) readProc(name string) (string, error) {
	if !op.running() {
		return "", op.failed(fmt.Errorf("reading /proc/%d/%s", op.cmd.Process.Pid, name))
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", op.cmd.Process.Pid, name))
	if err != nil {
		return "", op.failed(err)
	}
	return string(data), nil
}
