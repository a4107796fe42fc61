// Command localup brings up the local control plane of pkg/localcluster,
// installs manifests, and either waits for Ctrl-C or runs a command against
// the cluster and stops everything when the command ends. hack/local-up.sh
// and `make run` drive it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"

	"github.com/kubelite/memcached-operator/pkg/localcluster"
)

type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

func main() {
	var apply stringList
	var kubeconfigOut string
	var minimal bool
	flag.Var(&apply, "apply", "A YAML file or directory to apply once the cluster is up; repeatable, applied in order.")
	flag.StringVar(&kubeconfigOut, "kubeconfig-out", "", "Also copy the admin kubeconfig to this path.")
	flag.BoolVar(&minimal, "minimal", false, "Run only etcd and kube-apiserver (no Pods become Ready).")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "Usage: %s [flags] [-- command args...]\n\nWith a command, runs it with KUBECONFIG set to the cluster and stops the cluster when it exits.\nWithout one, waits for Ctrl-C.\n\n", os.Args[0])
		flag.PrintDefaults()
	}
	flag.Parse()

	if err := run(apply, kubeconfigOut, minimal, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "local-up:", err)
		os.Exit(1)
	}
}

func run(apply []string, kubeconfigOut string, minimal bool, command []string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	cfg := localcluster.Full()
	if minimal {
		cfg = localcluster.Config{}
	}
	cfg.Progress = os.Stderr
	cluster, err := localcluster.Start(ctx, cfg)
	if err != nil {
		return err
	}
	defer func() {
		fmt.Fprintln(os.Stderr, ">> Stopping the local control plane")
		cluster.Stop()
	}()

	if len(apply) > 0 {
		fmt.Fprintf(os.Stderr, ">> Applying %s\n", strings.Join(apply, ", "))
		if err := cluster.ApplyFiles(ctx, apply...); err != nil {
			return err
		}
	}
	kubeconfig := cluster.KubeconfigPath
	if kubeconfigOut != "" {
		data, err := os.ReadFile(cluster.KubeconfigPath)
		if err != nil {
			return err
		}
		if err := os.WriteFile(kubeconfigOut, data, 0o600); err != nil {
			return err
		}
		kubeconfig = kubeconfigOut
	}
	fmt.Fprintf(os.Stderr, ">> Kubernetes %s is up (%s)\n", localcluster.KubernetesVersion, strings.Join(cluster.Parts(), ", "))
	fmt.Fprintf(os.Stderr, ">> export KUBECONFIG=%s\n", kubeconfig)
	fmt.Fprintf(os.Stderr, ">> Watch the Memcacheds go Available: KUBECONFIG=%s kubectl get memcacheds --all-namespaces --watch\n", kubeconfig)

	if len(command) == 0 {
		fmt.Fprintln(os.Stderr, ">> Press Ctrl-C to stop")
		<-ctx.Done()
		return nil
	}

	cmd := exec.Command(command[0], command[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		return commandError(err)
	case <-ctx.Done():
		// Ctrl-C reaches the command through the terminal's process group
		// too; SIGTERM covers the case where we were signalled alone.
		_ = cmd.Process.Signal(syscall.SIGTERM)
		return commandError(<-exited)
	}
}

func commandError(err error) error {
	var exit *exec.ExitError
	if errors.As(err, &exit) && exit.Exited() && exit.ExitCode() == 0 {
		return nil
	}
	if errors.As(err, &exit) && !exit.Exited() {
		return nil // Ended by our signal.
	}
	return err
}
