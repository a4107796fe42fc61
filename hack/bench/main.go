// Command bench measures memcached-operator at scale on the local control
// plane: converge time against a plain client-go floor, writes per object,
// memory, startup and CPU, and leader-election takeovers. It measures and
// prints; it asserts nothing. `make bench N=...` runs it; see
// docs/benchmarks.md for results.
//
// The files are the bench's concerns: phases.go lists the timed phases of
// one N, env.go sets up a cluster and its objects, floor.go times the
// plain client-go floor, operator.go runs the operator binary, scrape.go
// reads its /metrics, tracker.go tells when the cluster has converged,
// handover.go and takeover.go time a follower taking over, recovery.go
// times the converge once refused Deployments are admitted again, rollout.go
// measures real rollouts and report.go prints and saves the figures.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/kubelite/memcached-operator/pkg/localcluster"
	"github.com/kubelite/memcached-operator/pkg/signals"
)

func main() {
	var (
		sizes      = flag.String("n", "100,1000", "Comma-separated numbers of Memcacheds to measure at.")
		namespaces = flag.Int("namespaces", 10, "Namespaces the Memcacheds are spread over.")
		unrelated  = flag.Int("unrelated", 10000, "Unrelated Deployments created for the memory comparison; 0 skips it.")
		junk       = flag.Int("junk", 0, "Deployments with the operator's label and 200 KiB of junk (an annotation and an environment variable) created for the memory comparison; 0 skips it.")
		idle       = flag.Duration("idle", 60*time.Second, "Idle window for the CPU and resync measurement.")
		binary     = flag.String("bin", "bin/memcached-operator", "The operator binary to run.")
		outDir     = flag.String("out", "_output/bench", "Where the JSON results go.")
		clients    = flag.Int("client-concurrency", 32, "Concurrent requests the harness uses to create and change objects.")
		rollout    = flag.Bool("rollout", false, "Measure real rollouts instead: with kube-controller-manager, kube-scheduler and kwok, count the operator's writes per object until every Memcached is Available, and for a spec change that replaces every Pod.")
		podReady   = flag.Duration("pod-ready-delay", 0, "With -rollout, how long a scheduled Pod takes to become Ready; 0 is at once.")
		profile    = flag.Bool("profile", false, "Save a CPU profile of the operator during the rate-limited converge and a heap profile over N converged objects to -out/{cpu,heap}-N<n>.pprof.")
		takeovers  = flag.Int("takeovers", 3, "Times each leader-election takeover (after a SIGKILL and after a SIGTERM of the leader, at two timings) is measured, once per run on a cluster of its own; 0 skips them. Not with -rollout.")
	)
	flag.Parse()

	var ns []int
	for _, s := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "bad -n value %q\n", s)
			os.Exit(2)
		}
		ns = append(ns, n)
	}
	bin, err := filepath.Abs(*binary)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}

	report := Report{
		Date:              time.Now().UTC().Format(time.RFC3339),
		Machine:           machine(),
		GoVersion:         runtime.Version(),
		KubernetesVersion: localcluster.KubernetesVersion,
		GitCommit:         gitCommit(),
		Flags:             os.Args[1:],
		Parts:             []string{"etcd", "kube-apiserver"},
		Note:              "kube-controller-manager, kube-scheduler and kwok are left out: the operator's work does not need Pods.",
	}
	run := runSize
	if *rollout {
		report.Parts = append(report.Parts, "kube-controller-manager", "kube-scheduler", "kwok")
		report.Note = "Real rollouts: the controllers' client limits are raised so that they keep pace (rolloutArgs in hack/bench/rollout.go)."
		run = runRollout
	}
	fmt.Printf("memcached-operator bench, %s, %s\nCommit %s, Kubernetes %s, flags %q\nControl plane: %s (%s)\n\n",
		report.Date, report.Machine, report.GitCommit, report.KubernetesVersion, report.Flags, strings.Join(report.Parts, ", "), report.Note)

	// Made first: profiles are written into it during the runs.
	if err := os.MkdirAll(*outDir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}

	// Ctrl-C cancels the run; runSize then stops its clusters and the
	// operator before the bench exits, as on any other error.
	ctx := signals.SetupSignalContext(context.Background())
	if *takeovers > 0 && !*rollout {
		cfg := Config{Namespaces: 1, Binary: bin, ClientConcurrency: *clients, Workers: 4}
		if report.Takeovers, err = runTakeovers(ctx, cfg, *takeovers); err != nil {
			fmt.Fprintf(os.Stderr, "takeovers: %v\n", err)
			os.Exit(1)
		}
		printTakeovers(report.Takeovers)
	}
	for _, n := range ns {
		cfg := Config{N: n, Namespaces: *namespaces, Unrelated: *unrelated, Junk: *junk, Idle: *idle, Binary: bin, ClientConcurrency: *clients, Workers: 4, Rollout: *rollout, PodReadyDelay: *podReady}
		if *profile {
			cfg.ProfileDir = *outDir
		}
		result, err := run(ctx, cfg)
		if err != nil {
			fmt.Fprintf(os.Stderr, "N=%d: %v\n", n, err)
			os.Exit(1)
		}
		report.Results = append(report.Results, result)
		printResult(result)
	}

	path, err := report.write(*outDir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("\nJSON: %s\n", path)
}
