package leader

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/uuid"
	coordinationinformers "k8s.io/client-go/informers/coordination/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
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

// Run runs lead while this replica holds the Lease. lead gets two
// contexts: ctx, cancelled on a graceful stop (SIGTERM), after which lead
// may drain its work, and lost, cancelled the moment leadership is lost,
// after which lead must stop at once. On a graceful stop Run releases the
// Lease only after lead has returned, so the next leader never overlaps
// with in-flight work. On a loss it trips fence (if not nil) first, so
// nothing this process still has in flight writes again, waits for lead
// and returns ErrLostLeadership.
//
// Leadership counts as lost when the elector gives up renewing, or when the
// watch on the Lease shows another holder (a takeover, or someone editing
// holderIdentity), which the elector itself would only notice when its
// renew deadline passed.
func Run(ctx context.Context, kubeClient kubernetes.Interface, cfg Config, watchdog *leaderelection.HealthzAdaptor, fence *Fence, lead func(ctx, lost context.Context) error) error {
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

	lost, markLost := context.WithCancelCause(context.WithoutCancel(ctx))
	defer markLost(nil)
	var loseOnce sync.Once
	loseLeadership := func(cause error) {
		loseOnce.Do(func() {
			if fence != nil {
				fence.Trip()
			}
			markLost(cause)
			logger.Info("Lost leadership; stopping at once", "cause", cause)
		})
	}

	// A graceful stop and the start of leadership can race: the elector
	// may win the Lease while ctx is being cancelled. mu orders them, so
	// that lead either never starts or is waited for.
	var mu sync.Mutex
	stopping, leading := false, false
	stop := func() (wasLeading bool) {
		mu.Lock()
		defer mu.Unlock()
		stopping = true
		return leading
	}

	// The elector runs on its own context, cancelled only after lead has
	// returned, because cancelling it is what releases the Lease.
	electionCtx, stopElection := context.WithCancel(context.WithoutCancel(ctx))
	defer stopElection()
	leadDone := make(chan error, 1)
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   cfg.LeaseDuration,
		RenewDeadline:   cfg.RenewDeadline,
		RetryPeriod:     cfg.RetryPeriod,
		ReleaseOnCancel: true,
		Name:            cfg.Name,
		WatchDog:        watchdog,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(leadingCtx context.Context) {
				mu.Lock()
				if stopping {
					mu.Unlock()
					return
				}
				leading = true
				mu.Unlock()
				// leadingCtx ends only when the elector stops renewing:
				// after a graceful stop lead has returned by then.
				stopAfter := context.AfterFunc(leadingCtx, func() { loseLeadership(errors.New("the Lease could not be renewed")) })
				watchCtx, stopWatch := context.WithCancel(leadingCtx)
				go watchLease(watchCtx, kubeClient, cfg, identity, loseLeadership)
				err := lead(ctx, lost)
				stopWatch()
				stopAfter()
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
		if stop() {
			err = <-leadDone
		}
		stopElection()
		<-electionDone
	case <-lost.Done():
		<-leadDone
		stopElection()
		<-electionDone
	case err = <-leadDone:
		// lead gave up on its own; so does this replica.
		stop()
		stopElection()
		<-electionDone
	case <-electionDone:
		// The elector returns on its own only after leading, when it
		// could not renew; lead is told to stop and waited for.
		loseLeadership(errors.New("the Lease could not be renewed"))
		if stop() {
			<-leadDone
		}
	}
	if lost.Err() != nil {
		return ErrLostLeadership
	}
	return err
}

// watchLease calls lose when the Lease shows a holder other than identity,
// or goes away, until ctx ends. The handler runs on the informer's one
// delivery goroutine, so confirmed needs no lock.
func watchLease(ctx context.Context, kubeClient kubernetes.Interface, cfg Config, identity string, lose func(error)) {
	informer := coordinationinformers.NewFilteredLeaseInformer(kubeClient, cfg.Namespace, 0, cache.Indexers{},
		func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", cfg.Name).String()
		})
	// Only events after one that shows this replica as the holder count:
	// a watch cache that lags could first replay the previous holder's
	// release. The leader renews every retry period, so one comes soon.
	confirmed := false
	_, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if lease, ok := obj.(*coordinationv1.Lease); ok && ptr.Deref(lease.Spec.HolderIdentity, "") == identity {
				confirmed = true
			}
		},
		UpdateFunc: func(_, obj any) {
			lease, ok := obj.(*coordinationv1.Lease)
			if !ok {
				return
			}
			switch holder := ptr.Deref(lease.Spec.HolderIdentity, ""); {
			case holder == identity:
				confirmed = true
			case confirmed:
				lose(fmt.Errorf("the Lease is now held by %q", holder))
			}
		},
		DeleteFunc: func(any) {
			if confirmed {
				lose(errors.New("the Lease was deleted"))
			}
		},
	})
	if err != nil {
		klog.FromContext(ctx).Error(err, "Not watching the Lease; a takeover is seen only at the next renewal")
		return
	}
	informer.Run(ctx.Done())
}
