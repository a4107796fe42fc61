package framework

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// LaunchOn starts binary against the control plane kubeconfig reaches
// instead of the package's: a test of an upgrade in place installs the
// previous release, whose CRD differs, on a cluster of its own. binary gets
// only flags that the previous release knows too (no leader election,
// plain-HTTP /metrics and the health listener on ports it picks, the text
// log format), then args, which override. It watches every namespace
// unless args say otherwise. LaunchOn returns once /metrics answers.
//
// Requests and Writes read the package's audit log, which never sees this
// operator: count its requests from its /metrics instead. When the test
// ends the operator is killed, and the test fails if it raced; its log is
// printed if the test failed.
func LaunchOn(t *testing.T, binary, kubeconfig string, args ...string) *Operator {
	t.Helper()
	op := &Operator{log: &syncBuffer{}, exited: make(chan struct{})}
	all := append([]string{
		"--kubeconfig=" + kubeconfig,
		"--leader-elect=false",
		"--metrics-bind-address=127.0.0.1:0",
		"--metrics-secure=false",
		"--health-probe-bind-address=127.0.0.1:0",
		"--logging-format=text",
	}, args...)
	op.cmd = exec.Command(binary, all...)
	op.cmd.Stdout, op.cmd.Stderr = op.log, op.log
	op.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	op.started = time.Now()
	if err := op.cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", binary, err)
	}
	go func() {
		_ = op.cmd.Wait() // The exit status is read from ProcessState.
		close(op.exited)
	}()
	t.Cleanup(func() {
		op.Kill()
		if strings.Contains(op.Log(), "WARNING: DATA RACE") {
			t.Errorf("the operator raced")
		}
		if t.Failed() {
			t.Logf("operator %d (%s) log:\n%s", op.cmd.Process.Pid, binary, op.Log())
		}
	})
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, startTimeout, true, func(ctx context.Context) (bool, error) {
		if !op.Running() {
			return false, errors.New("the process ended")
		}
		if op.MetricsAddr == "" || op.HealthAddr == "" {
			log := op.Log()
			op.MetricsAddr, op.HealthAddr = servingAddr(log, "metrics"), servingAddr(log, "health")
			return false, nil
		}
		_, err := op.Metrics()
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("waiting for the listeners of %s: %v", binary, err)
	}
	return op
}
