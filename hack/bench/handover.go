package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// fastElection are the leader-election timings docs/operations.md
// recommends for a fast hand-over.
var fastElection = []string{
	"--leader-elect-lease-duration=6s",
	"--leader-elect-renew-deadline=4s",
	"--leader-elect-retry-period=400ms",
}

// leaderElection turns leader election on, on a Lease in the namespace
// default, at the given timings.
func leaderElection(timings []string) []string {
	return append([]string{"--leader-elect=true", "--leader-election-namespace=default"}, timings...)
}

// handoverFlags are the hand-over's: leader election at fastElection.
var handoverFlags = leaderElection(fastElection)

// leaderStatus is client-go's gauge of whether this process leads.
const leaderStatus = "leader_election_master_status"

// cachesSyncedLine is what client-go logs once the operator's informers
// have synced, which a follower does too: it keeps warm caches.
const cachesSyncedLine = `"Caches are synced" controller="memcached-operator"`

// handover runs a leader and a warm follower over the converged cluster,
// stops the leader with SIGTERM and times, from the follower's scrapes
// every handoverPoll, how long it took to lead, and from its election
// until its first sync and until it had synced all N with an empty queue.
// The follower is the operator the next phases find running.
func (s *sizeRun) handover(ctx context.Context, e *env) error {
	s.step("hand-over: a leader and a warm follower, then SIGTERM to the leader")
	e.stopOperator()
	leader, err := e.startOperator(ctx, handoverFlags...)
	if err != nil {
		return err
	}
	if err := leader.waitDrained(ctx, s.cfg.N); err != nil {
		return err
	}
	follower, err := e.launch(ctx, handoverFlags...)
	if err != nil {
		return err
	}
	e.op = follower // The leader is stopped below; env.stop ends the follower.
	if err := follower.waitLogged(ctx, cachesSyncedLine); err != nil {
		leader.stop()
		return err
	}
	base, err := follower.scrape(ctx)
	if err != nil {
		leader.stop()
		return err
	}
	if base.reconciles != 0 {
		leader.stop()
		return fmt.Errorf("the follower synced %.0f Memcacheds before it led", base.reconciles)
	}

	start := time.Now()
	stopped := make(chan struct{})
	go func() { leader.stop(); close(stopped) }()
	defer func() { <-stopped }()

	var elected, firstSync time.Duration
	err = wait.PollUntilContextTimeout(ctx, handoverPoll, 10*time.Minute, true, func(ctx context.Context) (bool, error) {
		m, err := follower.metrics(ctx)
		if err != nil {
			return false, err
		}
		now := time.Since(start)
		if elected == 0 && m.Sum(leaderStatus, nil) == 1 {
			elected = now
		}
		syncs := m.Sum(reconciles, nil)
		if firstSync == 0 && syncs > 0 {
			firstSync = now
		}
		return syncs >= float64(s.cfg.N) && m.Sum(workqueue, map[string]string{"name": workqueueName}) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the follower to lead and sync %d Memcacheds: %w", s.cfg.N, err)
	}
	drained := time.Since(start)
	if elected == 0 {
		return fmt.Errorf("the follower synced without reporting %s", leaderStatus)
	}
	s.r.Handover = &HandoverResult{
		ElectedSeconds:           elected.Seconds(),
		ElectionToFirstSync:      (firstSync - elected).Seconds(),
		ElectionToDrainedSeconds: (drained - elected).Seconds(),
		Poll:                     handoverPoll.String(),
		Flags:                    handoverFlags,
	}
	return nil
}

// handoverPoll is how often the hand-over scrapes the follower: the
// resolution of its figures.
const handoverPoll = 20 * time.Millisecond

// HandoverResult is the hand-over from a leader stopped with SIGTERM to a
// warm follower.
type HandoverResult struct {
	// ElectedSeconds is from the SIGTERM until the follower reported
	// itself leader: the leader's drain and release, and the follower's
	// next retry.
	ElectedSeconds float64 `json:"electedSeconds"`
	// ElectionToFirstSync and ElectionToDrainedSeconds are from the
	// follower's election until its first sync, and until it had synced N
	// Memcacheds with an empty queue. Neither includes a list: the
	// follower's caches were warm.
	ElectionToFirstSync      float64  `json:"electionToFirstSyncSeconds"`
	ElectionToDrainedSeconds float64  `json:"electionToDrainedSeconds"`
	Poll                     string   `json:"poll"`
	Flags                    []string `json:"flags"`
}

// waitLogged waits until the operator's log holds line.
func (op *operatorProc) waitLogged(ctx context.Context, line string) error {
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 10*time.Minute, true, func(context.Context) (bool, error) {
		if !op.running() {
			return false, op.failed(fmt.Errorf("the operator exited"))
		}
		data, err := os.ReadFile(op.logPath)
		if err != nil {
			return false, fmt.Errorf("reading the operator's log: %w", err)
		}
		return strings.Contains(string(data), line), nil
	})
	if err != nil {
		return fmt.Errorf("waiting for %s in %s: %w", line, op.logPath, err)
	}
	return nil
}
