// Command bench measures memcached-operator at scale on the local control
// plane: converge time against a plain client-go floor, writes per object,
// memory, startup and idle CPU. It measures and prints; it asserts nothing.
// `make bench N=...` runs it; see docs/benchmarks.md for results.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"
)

func main() {
	var (
		sizes      = flag.String("n", "100,1000", "Comma-separated numbers of Memcacheds to measure at.")
		namespaces = flag.Int("namespaces", 10, "Namespaces the Memcacheds are spread over.")
		unrelated  = flag.Int("unrelated", 10000, "Unrelated Deployments created for the memory comparison; 0 skips it.")
		idle       = flag.Duration("idle", 60*time.Second, "Idle window for the CPU and resync measurement.")
		binary     = flag.String("bin", "bin/memcached-operator", "The operator binary to run.")
		outDir     = flag.String("out", "_output/bench", "Where the JSON results go.")
		clients    = flag.Int("client-concurrency", 32, "Concurrent requests the harness uses to create and change objects.")
		profile    = flag.Bool("profile", false, "Save a CPU profile of the operator during the unlimited converge and a heap profile over N converged objects to -out/{cpu,heap}-N<n>.pprof.")
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
		Date:    time.Now().UTC().Format(time.RFC3339),
		Machine: machine(),
		Parts:   []string{"etcd", "kube-apiserver"},
		Note:    "kube-controller-manager, kube-scheduler and kwok are left out: the operator's work does not need Pods.",
	}
	fmt.Printf("memcached-operator bench, %s, %s\nControl plane: %s (%s)\n\n", report.Date, report.Machine, strings.Join(report.Parts, ", "), report.Note)

	// Made first: profiles are written into it during the runs.
	if err := os.MkdirAll(*outDir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}

	ctx := context.Background()
	for _, n := range ns {
		cfg := Config{N: n, Namespaces: *namespaces, Unrelated: *unrelated, Idle: *idle, Binary: bin, ClientConcurrency: *clients, Workers: 4}
		if *profile {
			cfg.ProfileDir = *outDir
		}
		result, err := runSize(ctx, cfg)
		if err != nil {
			fmt.Fprintf(os.Stderr, "N=%d: %v\n", n, err)
			os.Exit(1)
		}
		report.Results = append(report.Results, result)
		printResult(result)
	}

	path := filepath.Join(*outDir, "bench-"+time.Now().UTC().Format("20060102T150405Z")+".json")
	data, _ := json.MarshalIndent(report, "", "  ")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("\nJSON: %s\n", path)
}

// Report is the JSON output.
type Report struct {
	Date    string   `json:"date"`
	Machine string   `json:"machine"`
	Parts   []string `json:"controlPlane"`
	Note    string   `json:"note"`
	Results []Result `json:"results"`
}

func machine() string {
	mem := "unknown memory"
	if data, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if strings.HasPrefix(line, "MemTotal:") {
				if kb, err := strconv.Atoi(strings.Fields(line)[1]); err == nil {
					mem = fmt.Sprintf("%.0f GiB", float64(kb)/1024/1024)
				}
			}
		}
	}
	return fmt.Sprintf("%d cores, %s, %s/%s, %s", runtime.NumCPU(), mem, runtime.GOOS, runtime.GOARCH, runtime.Version())
}
