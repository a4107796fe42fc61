package leader

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
)

// ErrLostLeadership is returned when the Lease was lost. The caller should
// exit with a non-zero status, so the replica restarts clean instead of
// running on with stopped workers.
var ErrLostLeadership = errors.New("lost leadership")

// Config names the Lease and its timings, as the --leader-elect-* flags
// give them.
type Config struct {
	// Namespace and Name of the Lease.
	Namespace, Name string
	// LeaseDuration is how long followers wait after the last renewal
	// before taking over; RenewDeadline how long the leader keeps trying
	// to renew before it gives up; RetryPeriod how often candidates try.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
}

// Run runs lead while this replica holds the Lease. On ctx cancellation it
// lets lead drain first and only then releases the Lease, so the next
// leader never overlaps with in-flight syncs. Losing the Lease returns
// ErrLostLeadership.
func Run(ctx context.Context, kubeClient kubernetes.Interface, cfg Config, watchdog *leaderelection.HealthzAdaptor, lead func(context.Context) error) error {
	logger := klog.FromContext(ctx)
	host, err := os.Hostname()
	if err != nil {
		return fmt.Errorf("getting hostname for the leader-election identity: %w", err)
	}
	identity := host + "_" + string(uuid.NewUUID())
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, cfg.Namespace, cfg.Name,
		kubeClient.CoreV1(), kubeClient.CoordinationV1(), resourcelock.ResourceLockConfig{Identity: identity})
	if err != nil {
		return fmt.Errorf("creating the leader-election lock: %w", err)
	}

	// The elector runs on its own context, cancelled only after lead has
	// returned, because cancelling it is what releases the Lease.
	electionCtx, stopElection := context.WithCancel(context.WithoutCancel(ctx))
	defer stopElection()
	leadDone := make(chan error, 1)
	started := make(chan struct{})
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   cfg.LeaseDuration,
		RenewDeadline:   cfg.RenewDeadline,
		RetryPeriod:     cfg.RetryPeriod,
		ReleaseOnCancel: true,
		Name:            cfg.Name,
		WatchDog:        watchdog,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(leading context.Context) {
				// Workers stop on SIGTERM (ctx) or when leadership ends.
				runCtx, cancel := context.WithCancel(ctx)
				stop := context.AfterFunc(leading, cancel)
				close(started)
				err := lead(runCtx)
				stop()
				cancel()
				leadDone <- err
			},
			OnStoppedLeading: func() {
				logger.Info("Stopped leading")
			},
			OnNewLeader: func(current string) {
				if current != identity {
					logger.Info("Following", "leader", current)
				}
			},
		},
	})
	if err != nil {
		return fmt.Errorf("configuring leader election: %w", err)
	}
	logger.Info("Waiting to lead", "lease", cfg.Namespace+"/"+cfg.Name, "identity", identity)
	electionDone := make(chan struct{})
	go func() {
		elector.Run(electionCtx)
		close(electionDone)
	}()

	select {
	case <-ctx.Done():
		select {
		case <-started:
			err = <-leadDone
		default:
		}
		stopElection()
		<-electionDone
		return err
	case <-electionDone:
		// The elector only returns on its own when renewing failed.
		return ErrLostLeadership
	}
}
