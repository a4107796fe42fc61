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
	op, err := e.startOperator(ctx)
	if err != nil {
		return err
	}
	before, err := op.scrape(ctx)
	if err != nil {
		return err
	}
	s.step("creating %d Memcacheds over %d namespaces on %d fake nodes", s.cfg.N, s.cfg.Namespaces, s.r.Rollout.Nodes)
	start := time.Now()
	if err := e.createMemcacheds(ctx, memcachedPrefix); err != nil {
		return err
	}
	if err := e.tracker.waitRolledOut(ctx, memcachedPrefix, 1, s.cfg.N); err != nil {
		return err
	}
	seconds := time.Since(start).Seconds()
	s.r.Rollout.ScratchSeconds = seconds
	if err := op.waitIdle(ctx); err != nil {
		return err
	}
	after, err := op.scrape(ctx)
	if err != nil {
		return err
	}
	s.r.Rollout.WritesPerObjectScratch = perObject(after.writesSince(before), s.cfg.N)
	s.r.Rollout.SyncsPerObjectScratch = (after.reconciles - before.reconciles) / float64(s.cfg.N)
	s.step("every Memcached Available after %.1fs", seconds)
	return nil
}

// rolloutSpecChange changes the memory of every Memcached, which changes
// the Pod template, and counts the writes until every rollout is Complete
// and the operator has settled.
func (s *sizeRun) rolloutSpecChange(ctx context.Context, e *env) error {
	s.step("changing the spec of every Memcached, which replaces its Pod")
	before, err := e.op.scrape(ctx)
	if err != nil {
		return err
	}
	start := time.Now()
	if err := e.patchAll(ctx, memcachedPrefix, `{"spec":{"memory":"96Mi"}}`); err != nil {
		return err
	}
	if err := e.tracker.waitRolledOut(ctx, memcachedPrefix, 2, s.cfg.N); err != nil {
		return err
	}
	seconds := time.Since(start).Seconds()
	s.r.Rollout.SpecChangeSeconds = seconds
	if err := e.op.waitIdle(ctx); err != nil {
		return err
	}
	after, err := e.op.scrape(ctx)
	if err != nil {
		return err
	}
	s.r.Rollout.WritesPerObjectSpecChange = perObject(after.writesSince(before), s.cfg.N)
	s.r.Rollout.SyncsPerObjectSpecChange = (after.reconciles - before.reconciles) / float64(s.cfg.N)
	s.step("every rollout Complete after %.1fs", seconds)
	return nil
}
