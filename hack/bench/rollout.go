package main

import (
	"context"
	"time"
)

// RolloutResult is what real rollouts cost the operator: on a cluster
// where kube-controller-manager rolls the Deployments out, kube-scheduler
// places the Pods and kwok makes them Ready, so each Deployment's status
// changes several times and each change may be reflected in the
// Memcached's status.
type RolloutResult struct {
	// Nodes is how many fake nodes held the Pods.
	Nodes int `json:"nodes"`
	// PodReadyDelay is how long kwok took to make a scheduled Pod Ready.
	PodReadyDelay string `json:"podReadyDelay"`
	// ScratchSeconds is when, from the first create, every Memcached had
	// observed generation 1 and reported its rollout Complete and itself
	// Available.
	ScratchSeconds float64 `json:"scratchSeconds"`
	// WritesPerObjectScratch counts every write from the first create
	// until the operator had settled after the last rollout completed.
	WritesPerObjectScratch map[string]float64 `json:"writesPerObjectFromScratch"`
	// SpecChangeSeconds is the same from the first patch, at generation 2.
	SpecChangeSeconds         float64            `json:"specChangeSeconds"`
	WritesPerObjectSpecChange map[string]float64 `json:"writesPerObjectSpecChange"`
	// SyncsPerObjectScratch and SyncsPerObjectSpecChange are the syncs
	// over the same windows: how often the operator looked, next to how
	// often it wrote.
	SyncsPerObjectScratch    float64 `json:"syncsPerObjectFromScratch"`
	SyncsPerObjectSpecChange float64 `json:"syncsPerObjectSpecChange"`
}

// rolloutNodes is how many fake nodes N Memcacheds of one replica need:
// each node takes 500 Pods, a rolling update briefly runs two Pods per
// Memcached, and two nodes more leave the scheduler room.
func rolloutNodes(n int) int {
	return 2*n/500 + 2
}

// rolloutArgs raise the controllers' client limits (20 and 50 queries per
// second by default) so that kube-controller-manager and kube-scheduler
// keep pace with N Deployments, and the operator's writes, not theirs,
// are what the phases wait on.
var rolloutArgs = map[string][]string{
	"kube-controller-manager": {"--kube-api-qps=1000", "--kube-api-burst=2000", "--concurrent-deployment-syncs=20", "--concurrent-replicaset-syncs=20"},
	"kube-scheduler":          {"--kube-api-qps=1000", "--kube-api-burst=2000"},
}

// runRollout measures one N on a fresh cluster that runs every part: the
// writes and syncs from the creation of N Memcacheds until each is
// Available and its rollout Complete, and the same for a spec change that
// replaces every Pod.
func runRollout(ctx context.Context, cfg Config) (Result, error) {
	s := &sizeRun{cfg: cfg, began: time.Now(), r: Result{N: cfg.N, Rollout: &RolloutResult{Nodes: rolloutNodes(cfg.N), PodReadyDelay: cfg.PodReadyDelay.String()}}}
	err := s.onCluster(ctx, []phase{
		{"rollout from scratch", s.rolloutScratch},
		{"rollout of a spec change", s.rolloutSpecChange},
	})
	s.r.WallSeconds = time.Since(s.began).Seconds()
	if err != nil {
		return s.r, err
	}
	s.step("done")
	return s.r, nil
}

// rolloutScratch creates the N Memcacheds with the operator at its default
// flags and counts its writes until every one is Available with its
// rollout Complete and the operator has settled.
func (s *sizeRun) rolloutScratch(ctx context.Context, e *env) error {
	if _, err := e.startOperator(ctx); err != nil {
		return err
	}
	s.step("creating %d Memcacheds over %d namespaces on %d fake nodes", s.cfg.N, s.cfg.Namespaces, s.r.Rollout.Nodes)
	c, err := s.measureRollout(ctx, e, 1, func(ctx context.Context) error {
		return e.createMemcacheds(ctx, memcachedPrefix, nil)
	})
	if err != nil {
		return err
	}
	r := s.r.Rollout
	r.ScratchSeconds, r.WritesPerObjectScratch, r.SyncsPerObjectScratch = c.seconds, c.writes, c.syncs
	s.step("every Memcached Available after %.1fs", c.seconds)
	return nil
}

// rolloutSpecChange changes the memory of every Memcached, which changes
// the Pod template, and counts the writes until every rollout is Complete
// and the operator has settled.
func (s *sizeRun) rolloutSpecChange(ctx context.Context, e *env) error {
	s.step("changing the spec of every Memcached, which replaces its Pod")
	c, err := s.measureRollout(ctx, e, 2, func(ctx context.Context) error {
		return e.patchAll(ctx, memcachedPrefix, `{"spec":{"memory":"96Mi"}}`)
	})
	if err != nil {
		return err
	}
	r := s.r.Rollout
	r.SpecChangeSeconds, r.WritesPerObjectSpecChange, r.SyncsPerObjectSpecChange = c.seconds, c.writes, c.syncs
	s.step("every rollout Complete after %.1fs", c.seconds)
	return nil
}

// rolloutCost is what one rollout of every Memcached took: seconds from
// the change until the last had rolled out, and the operator's writes, by
// method, and syncs per object until it had settled.
type rolloutCost struct {
	seconds float64
	writes  map[string]float64
	syncs   float64
}

// measureRollout makes the change with the running operator, waits until
// every Memcached has rolled out generation gen and the operator has
// settled, and returns what that took.
func (s *sizeRun) measureRollout(ctx context.Context, e *env, gen int64, change func(context.Context) error) (rolloutCost, error) {
	before, err := e.op.scrape(ctx)
	if err != nil {
		return rolloutCost{}, err
	}
	start := time.Now()
	if err := change(ctx); err != nil {
		return rolloutCost{}, err
	}
	if err := e.tracker.waitRolledOut(ctx, memcachedPrefix, gen, s.cfg.N); err != nil {
		return rolloutCost{}, err
	}
	c := rolloutCost{seconds: time.Since(start).Seconds()}
	if err := e.op.waitIdle(ctx); err != nil {
		return rolloutCost{}, err
	}
	after, err := e.op.scrape(ctx)
	if err != nil {
		return rolloutCost{}, err
	}
	c.writes = perObject(after.writesSince(before), s.cfg.N)
	c.syncs = (after.reconciles - before.reconciles) / float64(s.cfg.N)
	return c, nil
}
