package main

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// takeoverTimings are the leader-election timings the takeovers are
// measured at: client-go's defaults, which are the operator's, and the
// fast hand-over's.
var takeoverTimings = []struct {
	name    string
	timings []string
}{
	{"15s, 10s, 2s (defaults)", []string{"--leader-elect-lease-duration=15s", "--leader-elect-renew-deadline=10s", "--leader-elect-retry-period=2s"}},
	{"6s, 4s, 400ms (fast hand-over)", fastElection},
}

// TakeoverResult is how long a warm follower took to lead, at each of
// takeoverTimings, reps times after its leader was killed and reps times
// after it was stopped.
type TakeoverResult struct {
	Repetitions int              `json:"repetitions"`
	Poll        string           `json:"poll"`
	Timings     []TakeoverTiming `json:"timings"`
	// WallSeconds is how long the takeovers took the bench, from the
	// start of their cluster.
	WallSeconds float64 `json:"wallSeconds"`
}

// TakeoverTiming is the takeovers at one set of leader-election timings.
type TakeoverTiming struct {
	Name  string   `json:"name"`
	Flags []string `json:"flags"`
	// KillSeconds is each time from a SIGKILL of the leader until its
	// follower reported itself leader: the killed leader's Lease had to
	// expire (the lease duration from the follower's last sight of a
	// renewal), then the follower's next retry took it.
	KillSeconds []float64 `json:"sigkillUntilLeadingSeconds"`
	// TermSeconds is each time from a SIGTERM of the leader until its
	// follower reported itself leader: the leader drained, released the
	// Lease, and the follower's next retry took it.
	TermSeconds []float64 `json:"sigtermUntilLeadingSeconds"`
}

// runTakeovers measures takeovers on a cluster of its own with no
// Memcacheds, since they depend on the Lease's timings and not on N (the
// hand-over phase measures a follower's syncs at N). At each timing, a
// leader runs; reps times, a warm follower starts and the leader is
// SIGKILLed, then another follower starts and the new leader is stopped
// with SIGTERM. The last leader is stopped with SIGTERM too, which
// releases the Lease for the next timing.
func runTakeovers(ctx context.Context, cfg Config, reps int) (*TakeoverResult, error) {
	began := time.Now()
	fmt.Printf("  [takeovers] %d after a SIGKILL and %d after a SIGTERM of the leader, at each of %d timings\n", reps, reps, len(takeoverTimings))
	e, err := newEnv(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer e.stop()
	r := &TakeoverResult{Repetitions: reps, Poll: handoverPoll.String()}
	for _, timing := range takeoverTimings {
		result := TakeoverTiming{Name: timing.name, Flags: leaderElection(timing.timings)}
		if err := takeovers(ctx, e, &result, reps); err != nil {
			return nil, fmt.Errorf("takeovers at %s: %w", timing.name, err)
		}
		r.Timings = append(r.Timings, result)
	}
	r.WallSeconds = time.Since(began).Seconds()
	return r, nil
}

// takeovers runs the takeovers of one timing, recording each in result.
// Every process it starts is stopped when it returns.
func takeovers(ctx context.Context, e *env, result *TakeoverTiming, reps int) error {
	var started []*operatorProc
	defer func() {
		for _, op := range started {
			op.stop()
		}
	}()
	launch := func() (*operatorProc, error) {
		op, err := e.launch(ctx, result.Flags...)
		if err == nil {
			started = append(started, op)
		}
		return op, err
	}
	leader, err := launch()
	if err != nil {
		return err
	}
	if err := leader.waitLeading(ctx); err != nil {
		return err
	}
	for i := range reps {
		for _, kill := range []bool{true, false} {
			follower, err := launch()
			if err != nil {
				return err
			}
			took, err := takeover(ctx, leader, follower, kill)
			if err != nil {
				return err
			}
			signal := "SIGTERM"
			if kill {
				signal = "SIGKILL"
				result.KillSeconds = append(result.KillSeconds, took.Seconds())
			} else {
				result.TermSeconds = append(result.TermSeconds, took.Seconds())
			}
			fmt.Printf("  [takeovers] %s, %d of %d: led %.2fs after the %s\n", result.Name, i+1, reps, took.Seconds(), signal)
			leader = follower
		}
	}
	return nil
}

// takeover waits until follower is warm, stops leader, with SIGKILL if
// kill and SIGTERM if not, and times until follower reports itself
// leader, to the resolution of handoverPoll.
func takeover(ctx context.Context, leader, follower *operatorProc, kill bool) (time.Duration, error) {
	if err := follower.waitLogged(ctx, cachesSyncedLine); err != nil {
		return 0, err
	}
	m, err := follower.metrics(ctx)
	if err != nil {
		return 0, err
	}
	if m.Sum(leaderStatus, nil) != 0 {
		return 0, fmt.Errorf("the follower leads while its leader runs")
	}
	start := time.Now()
	stopped := make(chan struct{})
	go func() {
		if kill {
			leader.kill()
		} else {
			leader.stop()
		}
		close(stopped)
	}()
	defer func() { <-stopped }()
	if err := follower.waitLeading(ctx); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

// waitLeading waits until the operator reports itself leader, scraping it
// every handoverPoll.
func (op *operatorProc) waitLeading(ctx context.Context) error {
	err := wait.PollUntilContextTimeout(ctx, handoverPoll, 10*time.Minute, true, func(ctx context.Context) (bool, error) {
		m, err := op.metrics(ctx)
		if err != nil {
			return false, err
		}
		return m.Sum(leaderStatus, nil) == 1, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the operator to report itself leader: %w", err)
	}
	return nil
}
