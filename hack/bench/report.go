package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Result holds every figure for one N. Every figure was measured: a run
// that cannot take one (the operator died, /metrics stopped answering)
// fails instead of recording a zero.
type Result struct {
	N int `json:"n"`

	// WallSeconds is how long the bench took for this N, all its
	// clusters included.
	WallSeconds float64 `json:"wallSeconds"`

	ConvergeDefaultSeconds float64 `json:"convergeDefaultSeconds"`
	ConvergeLimitedSeconds float64 `json:"convergeLimitedSeconds"`
	// CreatesDefaultSeconds and CreatesLimitedSeconds are when, within
	// each converge, the harness's last create of a Memcached returned.
	// Creating the Memcacheds is part of the converge time, and it shares
	// the apiserver with the operator's writes.
	CreatesDefaultSeconds float64 `json:"createsDoneDefaultSeconds"`
	CreatesLimitedSeconds float64 `json:"createsDoneLimitedSeconds"`
	// ConvergeDefaultCPUSeconds and ConvergeLimitedCPUSeconds are the
	// operator process's user plus system CPU time during each converge,
	// from the first create until the cluster had converged: what the
	// operator's own work costs, next to how long the control plane took.
	// With -profile the second includes the CPU profiler's overhead.
	ConvergeDefaultCPUSeconds float64 `json:"convergeDefaultCPUSeconds"`
	ConvergeLimitedCPUSeconds float64 `json:"convergeLimitedCPUSeconds"`
	// FloorSeconds is the time plain client-go takes for the operator's
	// writes with the operator's concurrency and no client limit, the N
	// Memcacheds having been created before the clock started: what the
	// control plane itself allows for the writes alone.
	FloorSeconds float64 `json:"floorSeconds"`
	// FloorWithCreatesSeconds is the same writes' time when each begins as
	// soon as the harness's create of its Memcached returns, timed from
	// the first create as the converges are; FloorCreatesDoneSeconds is
	// when the last create returned. No operator can converge faster than
	// this floor.
	FloorWithCreatesSeconds float64 `json:"floorWithCreatesSeconds"`
	FloorCreatesDoneSeconds float64 `json:"floorCreatesDoneSeconds"`

	WritesPerObjectScratch    map[string]float64 `json:"writesPerObjectFromScratch"`
	WritesPerObjectSpecChange map[string]float64 `json:"writesPerObjectSpecChange"`
	WritesIdle                map[string]float64 `json:"writesDuringIdleWithResyncs"`
	ReadsPerObjectScratch     float64            `json:"readsPerObjectFromScratch"`
	SpecChangeSeconds         float64            `json:"specChangeSeconds"`

	PeakRSSBytes float64 `json:"peakRSSBytes"`
	// SettledRSSBytes is the same process's resident set at the end of
	// the idle window, after the converge and the spec change.
	SettledRSSBytes    float64 `json:"settledRSSBytes"`
	HeapInuseBytes     float64 `json:"heapInuseBytes"`
	HeapBytesPerObject float64 `json:"heapBytesPerObject"`
	// HeapEmptyBytes is the heap in use of a start with no Memcacheds, and
	// HeapAddedPerObject what each Memcached adds to it: (HeapInuseBytes -
	// HeapEmptyBytes) / N.
	HeapEmptyBytes       float64 `json:"heapInuseBytesEmpty"`
	HeapAddedPerObject   float64 `json:"heapAddedBytesPerObject"`
	HeapWithUnrelated    float64 `json:"heapInuseBytesWithUnrelatedDeployments"`
	UnrelatedDeployments int     `json:"unrelatedDeployments"`
	// HeapBeforeJunk and HeapWithJunk are the heap in use of a start
	// before and after JunkObjects labelled Deployments with a large
	// annotation were created, on the same cluster.
	HeapBeforeJunk float64 `json:"heapInuseBytesBeforeJunk"`
	HeapWithJunk   float64 `json:"heapInuseBytesWithJunk"`
	JunkObjects    int     `json:"junkObjects"`

	StartupSeconds float64            `json:"startupSeconds"`
	StartupWrites  map[string]float64 `json:"startupWrites"`
	// StartupSyncs is how many syncs the restart ran; N when each
	// Memcached is synced once.
	StartupSyncs float64 `json:"startupSyncs"`

	IdleCPUSeconds float64 `json:"idleCPUSeconds"`
	IdleSeconds    float64 `json:"idleWindowSeconds"`

	Handover *HandoverResult `json:"handover,omitempty"`

	Recovery *RecoveryResult `json:"recoveryAfterRefusals,omitempty"`

	// Rollout holds the figures of -rollout, which measures nothing else.
	Rollout *RolloutResult `json:"rollout,omitempty"`
}

// Report is the JSON output.
type Report struct {
	Date    string `json:"date"`
	Machine string `json:"machine"`
	// GoVersion built the bench; the operator binary is built by the same
	// `make bench`.
	GoVersion         string   `json:"goVersion"`
	KubernetesVersion string   `json:"kubernetesVersion"`
	GitCommit         string   `json:"gitCommit"`
	Flags             []string `json:"flags"`
	Parts             []string `json:"controlPlane"`
	Note              string   `json:"note"`
	Results           []Result `json:"results"`
	// Takeovers is measured once per run, on a cluster of its own
	// (takeover.go); nil with -takeovers 0 and with -rollout.
	Takeovers *TakeoverResult `json:"takeovers,omitempty"`
}

// gitCommit is the checked-out commit, with "-dirty" when the work tree
// differs from it, so a figure can be traced to the code it measured.
func gitCommit() string {
	out, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		return "unknown: " + err.Error()
	}
	commit := strings.TrimSpace(string(out))
	if err := exec.Command("git", "diff", "--quiet", "HEAD").Run(); err != nil {
		commit += "-dirty"
	}
	return commit
}

// write saves the report as dir/bench-<UTC time>.json and returns the path.
func (r Report) write(dir string) (string, error) {
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return "", fmt.Errorf("encoding the report: %w", err)
	}
	path := filepath.Join(dir, "bench-"+time.Now().UTC().Format("20060102T150405Z")+".json")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return "", fmt.Errorf("writing the report: %w", err)
	}
	return path, nil
}

// machine describes where the bench ran: cores, memory, OS and Go.
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

func printResult(r Result) {
	if r.Rollout != nil {
		printRollout(r.N, r.Rollout)
		fmt.Printf("  %-44s %10.1fs\n", "bench wall clock for this N", r.WallSeconds)
		return
	}
	ratio := func(a, b float64) string {
		if b == 0 {
			return "n/a"
		}
		return fmt.Sprintf("%.2fx", a/b)
	}
	perMemcached := func(cpuSeconds float64) float64 { return 1000 * cpuSeconds / float64(r.N) }
	fmt.Printf("\nN = %d\n", r.N)
	limited := fmt.Sprintf("client limit %d/%d", limitQPS, limitBurst)
	fmt.Printf("  %-44s %10.1fs\n", "floor, writes only (plain client-go)", r.FloorSeconds)
	fmt.Printf("  %-44s %10.1fs   (creates done at %.1fs)\n", "floor with the creates (plain client-go)", r.FloorWithCreatesSeconds, r.FloorCreatesDoneSeconds)
	fmt.Printf("  %-44s %10.1fs   ratio to the floors %s, with the creates %s   (creates done at %.1fs)\n", "converge, default flags", r.ConvergeDefaultSeconds,
		ratio(r.ConvergeDefaultSeconds, r.FloorSeconds), ratio(r.ConvergeDefaultSeconds, r.FloorWithCreatesSeconds), r.CreatesDefaultSeconds)
	fmt.Printf("  %-44s %10.1fs   ratio to the floors %s, with the creates %s   (creates done at %.1fs)\n", "converge, "+limited, r.ConvergeLimitedSeconds,
		ratio(r.ConvergeLimitedSeconds, r.FloorSeconds), ratio(r.ConvergeLimitedSeconds, r.FloorWithCreatesSeconds), r.CreatesLimitedSeconds)
	fmt.Printf("  %-44s %10.2fs   %.2f ms per Memcached\n", "operator CPU, converge, default flags", r.ConvergeDefaultCPUSeconds, perMemcached(r.ConvergeDefaultCPUSeconds))
	fmt.Printf("  %-44s %10.2fs   %.2f ms per Memcached\n", "operator CPU, converge, "+limited, r.ConvergeLimitedCPUSeconds, perMemcached(r.ConvergeLimitedCPUSeconds))
	fmt.Printf("  %-44s %10.2f   %v\n", "writes per object, from scratch", sum(r.WritesPerObjectScratch), r.WritesPerObjectScratch)
	fmt.Printf("  %-44s %10.2f\n", "reads (GET) per object, from scratch", r.ReadsPerObjectScratch)
	fmt.Printf("  %-44s %10.2f   %v (%.1fs)\n", "writes per object, one spec change", sum(r.WritesPerObjectSpecChange), r.WritesPerObjectSpecChange, r.SpecChangeSeconds)
	fmt.Printf("  %-44s %10.0f   over %.0fs with resyncs every %s\n", "writes while idle (resyncs)", sum(r.WritesIdle), r.IdleSeconds, resyncPeriod)
	fmt.Printf("  %-44s %10.1f MiB   %s the settled RSS of %.1f MiB\n", "peak RSS (VmHWM)", r.PeakRSSBytes/(1<<20), ratio(r.PeakRSSBytes, r.SettledRSSBytes), r.SettledRSSBytes/(1<<20))
	fmt.Printf("  %-44s %10.1f MiB   %.1f KiB per Memcached; %.1f KiB each over the %.1f MiB of an empty start\n", "heap in use after restart, GC'd",
		r.HeapInuseBytes/(1<<20), r.HeapBytesPerObject/1024, r.HeapAddedPerObject/1024, r.HeapEmptyBytes/(1<<20))
	if r.UnrelatedDeployments > 0 && r.HeapInuseBytes > 0 {
		fmt.Printf("  %-44s %10.1f MiB   %+.1f%% with %d unrelated Deployments\n", "heap in use with unrelated Deployments", r.HeapWithUnrelated/(1<<20), 100*(r.HeapWithUnrelated-r.HeapInuseBytes)/r.HeapInuseBytes, r.UnrelatedDeployments)
	}
	if r.JunkObjects > 0 {
		fmt.Printf("  %-44s %10.1f MiB   %+.1f MiB over %.1f MiB with %d labelled junk Deployments (%.1f KiB each)\n", "heap in use with labelled junk",
			r.HeapWithJunk/(1<<20), (r.HeapWithJunk-r.HeapBeforeJunk)/(1<<20), r.HeapBeforeJunk/(1<<20), r.JunkObjects,
			(r.HeapWithJunk-r.HeapBeforeJunk)/float64(r.JunkObjects)/1024)
	}
	fmt.Printf("  %-44s %10.1fs   writes %v, %.0f syncs\n", "restart: caches synced and queue drained", r.StartupSeconds, r.StartupWrites, r.StartupSyncs)
	if h := r.Handover; h != nil {
		fmt.Printf("  %-44s %10.2fs   then %.2fs to its first sync, %.2fs until all %d synced (polled every %s)\n",
			"hand-over: SIGTERM until the follower leads", h.ElectedSeconds, h.ElectionToFirstSync, h.ElectionToDrainedSeconds, r.N, h.Poll)
	}
	fmt.Printf("  %-44s %10.2fs   over %.0fs\n", "idle CPU", r.IdleCPUSeconds, r.IdleSeconds)
	if rc := r.Recovery; rc != nil {
		fmt.Printf("  %-44s %10.1fs   after %.0fs of refused Deployments; the cap %.0fs plus the converge from scratch is %.1fs\n",
			"recovery once the refusal is lifted", rc.Seconds, rc.OutageSeconds, rc.MaxRetryDelaySeconds, rc.MaxRetryDelaySeconds+r.ConvergeDefaultSeconds)
	}
	fmt.Printf("  %-44s %10.1fs\n", "bench wall clock for this N", r.WallSeconds)
}

func printTakeovers(r *TakeoverResult) {
	fmt.Printf("\nTakeovers by a warm follower (scraped every %s): until it leads, the median of %d\n", r.Poll, r.Repetitions)
	for _, t := range r.Timings {
		fmt.Printf("  %s\n", t.Name)
		for _, row := range []struct {
			what    string
			seconds []float64
		}{
			{"leader SIGKILLed", t.KillSeconds},
			{"leader stopped with SIGTERM", t.TermSeconds},
		} {
			fmt.Printf("  %-44s %10.2fs   %.2f–%.2fs\n", "  "+row.what, median(row.seconds), slices.Min(row.seconds), slices.Max(row.seconds))
		}
	}
	fmt.Printf("  %-44s %10.1fs\n", "bench wall clock for the takeovers", r.WallSeconds)
}

// median is the middle value of xs, or the mean of the two middle ones.
func median(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func printRollout(n int, r *RolloutResult) {
	fmt.Printf("\nN = %d, real rollouts on %d fake nodes, Pods Ready %s after scheduling\n", n, r.Nodes, r.PodReadyDelay)
	fmt.Printf("  %-44s %10.1fs\n", "from scratch until Available and Complete", r.ScratchSeconds)
	fmt.Printf("  %-44s %10.2f   %v, %.2f syncs per object\n", "writes per object, from scratch", sum(r.WritesPerObjectScratch), r.WritesPerObjectScratch, r.SyncsPerObjectScratch)
	fmt.Printf("  %-44s %10.1fs\n", "spec change until Complete", r.SpecChangeSeconds)
	fmt.Printf("  %-44s %10.2f   %v, %.2f syncs per object\n", "writes per object, one rolling spec change", sum(r.WritesPerObjectSpecChange), r.WritesPerObjectSpecChange, r.SyncsPerObjectSpecChange)
}

func sum(m map[string]float64) float64 {
	var s float64
	for _, v := range m {
		s += v
	}
	return s
}

// perObject divides every count in m by n.
func perObject(m map[string]float64, n int) map[string]float64 {
	out := map[string]float64{}
	for k, v := range m {
		out[k] = v / float64(n)
	}
	return out
}
