package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"
)

// Config is one size to measure.
type Config struct {
	N                 int
	Namespaces        int
	Unrelated         int
	Junk              int
	Idle              time.Duration
	Binary            string
	ClientConcurrency int
	Workers           int
	// Rollout runs every part of the control plane and measures real
	// rollouts (rollout.go) instead of the phases runSize lists.
	Rollout bool
	// PodReadyDelay is how long, with Rollout, a scheduled Pod takes to
	// become Ready.
	PodReadyDelay time.Duration
	// ProfileDir, if set, receives a CPU profile of the operator taken
	// during the converge with a client rate limit, which runs the same
	// code as the default converge and leaves its CPU figure without the
	// profiler's overhead, and a heap profile of a fresh start over N
	// converged objects.
	ProfileDir string
}

// phase is one measurement on a cluster. It records its figures in the
// sizeRun and leaves the operator running or stopped for the next phase.
type phase struct {
	name string
	run  func(context.Context, *env) error
}

// runSize measures one N on five fresh clusters, each stopped, with its
// operator, however its phases end. Both converges start from an empty
// cluster: the first with the operator's default flags, the second with a
// client rate limit. Each floor gets a cluster of its own, so that it
// writes into a cluster like the one each converge wrote into, not one
// that already holds a converge's objects: the third holds only the N
// Memcacheds, created untimed, and the fourth starts empty, as the
// converges do. The fifth times the recovery after refusals
// (recovery.go), which starts empty too.
func runSize(ctx context.Context, cfg Config) (Result, error) {
	s := &sizeRun{cfg: cfg, began: time.Now(), r: Result{N: cfg.N}}
	err := s.onCluster(ctx, []phase{
		{"converge, default flags", s.convergeDefault},
		{"spec change", s.specChange},
		{"idle", s.idle},
		{"restart", s.restart},
		{"hand-over", s.handover},
		{"restart with unrelated Deployments", s.unrelated},
		{"restart with labelled junk", s.junk},
	})
	if err == nil {
		err = s.onCluster(ctx, []phase{
			{"heap, empty", s.heapEmpty},
			{"converge, " + strings.Join(limitedQPS, " "), s.convergeLimited},
			{"heap", s.heap},
		})
	}
	if err == nil {
		err = s.onCluster(ctx, []phase{{"floor", s.floor}})
	}
	if err == nil {
		err = s.onCluster(ctx, []phase{{"floor with the creates", s.floorCreates}})
	}
	if err == nil {
		err = s.onCluster(ctx, []phase{{"recovery after refusals", s.recovery}})
	}
	s.r.WallSeconds = time.Since(s.began).Seconds()
	if err != nil {
		return s.r, err
	}
	s.step("done")
	return s.r, nil
}

// sizeRun is the measurement of one N: its configuration, the figures so
// far and the clock the progress lines show.
type sizeRun struct {
	cfg   Config
	began time.Time
	r     Result
}

// onCluster runs phases in order on a fresh cluster, until one fails.
func (s *sizeRun) onCluster(ctx context.Context, phases []phase) error {
	e, err := newEnv(ctx, s.cfg)
	if err != nil {
		return err
	}
	defer e.stop()
	for _, p := range phases {
		if err := p.run(ctx, e); err != nil {
			return fmt.Errorf("%s: %w", p.name, err)
		}
	}
	return nil
}

// step prints a progress line with the time since the run began.
func (s *sizeRun) step(format string, args ...any) {
	fmt.Printf("  [N=%d %6.1fs] "+format+"\n", append([]any{s.cfg.N, time.Since(s.began).Seconds()}, args...)...)
}

// convergeDefault starts the operator with its default flags and times
// the converge of N new Memcacheds, with the requests and CPU it took.
func (s *sizeRun) convergeDefault(ctx context.Context, e *env) error {
	op, err := e.startOperator(ctx)
	if err != nil {
		return err
	}
	before, err := op.scrape(ctx)
	if err != nil {
		return err
	}
	s.step("creating %d Memcacheds over %d namespaces", s.cfg.N, s.cfg.Namespaces)
	c, err := s.converge(ctx, e, op)
	if err != nil {
		return err
	}
	after, err := op.scrape(ctx)
	if err != nil {
		return err
	}
	s.r.CreatesDefaultSeconds, s.r.ConvergeDefaultSeconds, s.r.ConvergeDefaultCPUSeconds = c.createsDone, c.seconds, c.cpuSeconds
	s.r.WritesPerObjectScratch = perObject(after.writesSince(before), s.cfg.N)
	s.r.ReadsPerObjectScratch = (after.reads - before.reads) / float64(s.cfg.N)
	s.step("converged in %.1fs", c.seconds)
	return nil
}

// convergence is what one converge from scratch took, in seconds from the
// first create.
type convergence struct {
	// createsDone is when the harness's last create returned.
	createsDone float64
	// seconds is when every Memcached had observed its generation and had
	// its Deployment and Service.
	seconds float64
	// cpuSeconds is the operator's CPU time meanwhile.
	cpuSeconds float64
}

// converge creates the N Memcacheds and waits until op has converged them.
func (s *sizeRun) converge(ctx context.Context, e *env, op *operatorProc) (convergence, error) {
	cpu0, err := op.cpuSeconds()
	if err != nil {
		return convergence{}, err
	}
	start := time.Now()
	if err := e.createMemcacheds(ctx, memcachedPrefix, nil); err != nil {
		return convergence{}, err
	}
	c := convergence{createsDone: time.Since(start).Seconds()}
	if err := e.tracker.waitConverged(ctx, memcachedPrefix, 1, s.cfg.N); err != nil {
		return convergence{}, err
	}
	c.seconds = time.Since(start).Seconds()
	cpu1, err := op.cpuSeconds()
	if err != nil {
		return convergence{}, err
	}
	c.cpuSeconds = cpu1 - cpu0
	return c, nil
}

// specChange patches the spec of every Memcached, which moves each to
// generation 2, and times the converge with the writes it took.
func (s *sizeRun) specChange(ctx context.Context, e *env) error {
	s.step("changing the spec of every Memcached")
	before, err := e.op.scrape(ctx)
	if err != nil {
		return err
	}
	start := time.Now()
	if err := e.patchAll(ctx, memcachedPrefix, `{"spec":{"memory":"96Mi"}}`); err != nil {
		return err
	}
	if err := e.tracker.waitConverged(ctx, memcachedPrefix, 2, s.cfg.N); err != nil {
		return err
	}
	s.r.SpecChangeSeconds = time.Since(start).Seconds()
	after, err := e.op.scrape(ctx)
	if err != nil {
		return err
	}
	s.r.WritesPerObjectSpecChange = perObject(after.writesSince(before), s.cfg.N)
	return nil
}

// idle waits for the operator to settle, then counts its CPU time and
// writes over cfg.Idle, a window that covers resyncs; and takes its peak
// RSS so far.
func (s *sizeRun) idle(ctx context.Context, e *env) error {
	s.step("idle for %s (resync period %s)", s.cfg.Idle, resyncPeriod)
	op := e.op
	if err := op.waitIdle(ctx); err != nil {
		return err
	}
	before, err := op.scrape(ctx)
	if err != nil {
		return err
	}
	cpu0, err := op.cpuSeconds()
	if err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(s.cfg.Idle):
	}
	cpu1, err := op.cpuSeconds()
	if err != nil {
		return err
	}
	after, err := op.scrape(ctx)
	if err != nil {
		return err
	}
	s.r.IdleCPUSeconds = cpu1 - cpu0
	s.r.IdleSeconds = s.cfg.Idle.Seconds()
	s.r.WritesIdle = after.writesSince(before)
	if s.r.PeakRSSBytes, err = op.peakRSS(); err != nil {
		return err
	}
	s.r.SettledRSSBytes, err = op.rss()
	return err
}

// restart starts the operator again over the converged cluster and times
// it until its caches have synced and its queue has drained; it counts
// the writes and syncs of the start once the operator has settled, so
// that late syncs are included.
func (s *sizeRun) restart(ctx context.Context, e *env) error {
	s.step("restarting the operator over the converged cluster")
	e.stopOperator()
	start := time.Now()
	op, err := e.startOperator(ctx)
	if err != nil {
		return err
	}
	base, err := op.scrape(ctx) // Process-local counters start at zero.
	if err != nil {
		return err
	}
	if err := op.waitDrained(ctx, s.cfg.N); err != nil {
		return err
	}
	s.r.StartupSeconds = time.Since(start).Seconds()
	if err := op.waitIdle(ctx); err != nil {
		return err
	}
	settled, err := op.scrape(ctx)
	if err != nil {
		return err
	}
	s.r.StartupWrites = settled.writesSince(base)
	s.r.StartupSyncs = settled.reconciles
	return nil
}

// unrelated creates cfg.Unrelated Deployments the operator does not own,
// with the operator stopped, and takes the heap of a start over them. The
// baseline is the heap phase on the second cluster, which has none.
func (s *sizeRun) unrelated(ctx context.Context, e *env) error {
	if s.cfg.Unrelated == 0 {
		return nil
	}
	s.step("creating %d unrelated Deployments and restarting", s.cfg.Unrelated)
	e.stopOperator()
	if err := e.createUnrelated(ctx, s.cfg.Unrelated); err != nil {
		return err
	}
	op, err := e.startOperator(ctx)
	if err != nil {
		return err
	}
	if err := op.waitDrained(ctx, s.cfg.N); err != nil {
		return err
	}
	if s.r.HeapWithUnrelated, err = op.settledHeap(ctx, ""); err != nil {
		return err
	}
	s.r.UnrelatedDeployments = s.cfg.Unrelated
	return nil
}

// junkBytes is what each junk Deployment carries, half in an annotation and
// half in its Pod template: most of the 256 KiB the apiserver allows an
// object's annotations, and the same again elsewhere than the annotations.
const junkBytes = 200 * 1024

// junk takes the heap of a start, creates cfg.Junk Deployments that carry
// the operator's labels (so its informers cache them), a large annotation
// and a large Pod template, and takes the heap of a start over them: what
// anyone who may create a Deployment can make the operator hold.
func (s *sizeRun) junk(ctx context.Context, e *env) error {
	if s.cfg.Junk == 0 {
		return nil
	}
	s.step("taking the heap before %d labelled junk Deployments", s.cfg.Junk)
	op, err := e.startOperator(ctx)
	if err != nil {
		return err
	}
	if err := op.waitDrained(ctx, s.cfg.N); err != nil {
		return err
	}
	if s.r.HeapBeforeJunk, err = op.settledHeap(ctx, ""); err != nil {
		return err
	}
	e.stopOperator()
	s.step("creating %d labelled junk Deployments of %d KiB and restarting", s.cfg.Junk, junkBytes/1024)
	if err := e.createJunk(ctx, s.cfg.Junk, junkBytes); err != nil {
		return err
	}
	if op, err = e.startOperator(ctx); err != nil {
		return err
	}
	if err := op.waitDrained(ctx, s.cfg.N); err != nil {
		return err
	}
	if s.r.HeapWithJunk, err = op.settledHeap(ctx, ""); err != nil {
		return err
	}
	s.r.JunkObjects = s.cfg.Junk
	return nil
}

// convergeLimited starts the operator with a client rate limit and times
// the converge of N new Memcacheds, profiling its CPU if asked.
func (s *sizeRun) convergeLimited(ctx context.Context, e *env) error {
	op, err := e.startOperator(ctx, limitedQPS...)
	if err != nil {
		return err
	}
	s.step("converging with a client rate limit, %s", strings.Join(limitedQPS, " "))
	profiled := make(chan error, 1)
	if s.cfg.ProfileDir != "" {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel() // Ends the profile if the converge fails first.
		go func() { profiled <- op.cpuProfile(ctx, s.cfg.ProfileDir, s.cfg.N) }()
	} else {
		profiled <- nil
	}
	c, err := s.converge(ctx, e, op)
	if err != nil {
		return err
	}
	s.r.CreatesLimitedSeconds, s.r.ConvergeLimitedSeconds, s.r.ConvergeLimitedCPUSeconds = c.createsDone, c.seconds, c.cpuSeconds
	if err := <-profiled; err != nil {
		return fmt.Errorf("CPU profile: %w", err)
	}
	// Late syncs finish before the heap phase restarts the operator.
	return op.waitIdle(ctx)
}

// heap starts the operator afresh over the N converged objects and takes
// its heap in use once the start has drained, the baseline of the
// comparison with unrelated Deployments on the first cluster.
func (s *sizeRun) heap(ctx context.Context, e *env) error {
	op, err := e.startOperator(ctx)
	if err != nil {
		return err
	}
	if err := op.waitDrained(ctx, s.cfg.N); err != nil {
		return err
	}
	saveTo := ""
	if s.cfg.ProfileDir != "" {
		saveTo = filepath.Join(s.cfg.ProfileDir, fmt.Sprintf("heap-N%d.pprof", s.cfg.N))
	}
	if s.r.HeapInuseBytes, err = op.settledHeap(ctx, saveTo); err != nil {
		return err
	}
	s.r.HeapBytesPerObject = s.r.HeapInuseBytes / float64(s.cfg.N)
	s.r.HeapAddedPerObject = (s.r.HeapInuseBytes - s.r.HeapEmptyBytes) / float64(s.cfg.N)
	return nil
}

// heapEmpty starts the operator on the fresh cluster, before any
// Memcached exists, and takes its heap in use: what it holds whatever N is
// (its clients, schemes, metrics and empty caches), which the heap per
// Memcached leaves out.
func (s *sizeRun) heapEmpty(ctx context.Context, e *env) error {
	op, err := e.startOperator(ctx)
	if err != nil {
		return err
	}
	if err := op.waitDrained(ctx, 0); err != nil {
		return err
	}
	s.r.HeapEmptyBytes, err = op.settledHeap(ctx, "")
	return err
}

// floor creates the N Memcacheds, untimed and with no operator, and times
// the operator's writes for them from plain client-go.
func (s *sizeRun) floor(ctx context.Context, e *env) error {
	s.step("floor: creating %d Memcacheds, untimed", s.cfg.N)
	if err := e.createMemcacheds(ctx, memcachedPrefix, nil); err != nil {
		return err
	}
	s.step("floor: the operator's writes from plain client-go, no client limit")
	var err error
	s.r.FloorSeconds, err = e.floorWrites(ctx)
	return err
}

// floorCreates times the harness's creates of the N Memcacheds, as each
// converge makes them, together with the operator's writes for each from
// plain client-go, begun as soon as its create returns.
func (s *sizeRun) floorCreates(ctx context.Context, e *env) error {
	s.step("floor: creating %d Memcacheds and making the operator's writes for each from plain client-go, no client limit", s.cfg.N)
	var err error
	s.r.FloorCreatesDoneSeconds, s.r.FloorWithCreatesSeconds, err = e.floorWithCreates(ctx)
	return err
}
