package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	kubeinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	clientset "github.com/kubelite/memcached-operator/pkg/generated/clientset/versioned"
	informers "github.com/kubelite/memcached-operator/pkg/generated/informers/externalversions"
	"github.com/kubelite/memcached-operator/pkg/metrics"
	"github.com/kubelite/memcached-operator/pkg/resources"
)

// errLostLeadership ends the process with a non-zero status, so the
// replica restarts clean instead of running on with stopped workers.
var errLostLeadership = errors.New("lost leadership")

// runOperator runs the whole operator until ctx is cancelled: listeners,
// informers (warm even while following), leader election and the
// controller. On cancellation it drains the queue within the shutdown
// timeout, releases the Lease, stops the listeners and returns nil. The
// integration tests call it to run the operator in-process with the same
// wiring as the binary.
func runOperator(ctx context.Context, cfg *rest.Config, opts *options, reg *prometheus.Registry) error {
	logger := klog.FromContext(ctx)

	kubeClient, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("building Kubernetes clientset: %w", err)
	}
	memcachedClient, err := clientset.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("building Memcached clientset: %w", err)
	}

	m, err := metrics.New(reg)
	if err != nil {
		return fmt.Errorf("registering metrics: %w", err)
	}
	scopes, factories := newInformers(kubeClient, memcachedClient, opts)
	controller, err := NewController(ctx, kubeClient, memcachedClient, scopes, m, clock.RealClock{})
	if err != nil {
		return err
	}
	if err := reg.Register(metrics.NewInstancesCollector(controller.memcachedLister.List)); err != nil {
		return fmt.Errorf("registering metrics: %w", err)
	}

	var watchdog *leaderelection.HealthzAdaptor
	if opts.leaderElect {
		watchdog = leaderelection.NewLeaderHealthzAdaptor(opts.renewDeadline)
	}
	h := newHealth(watchdog)
	healthLn, err := listen(ctx, "health", opts.healthProbeBindAddress, h.handler())
	if err != nil {
		return err
	}
	defer healthLn.shutdown(ctx)
	metricsLn, err := listen(ctx, "metrics", opts.metricsBindAddress, metricsHandler(reg, opts.enableProfiling))
	if err != nil {
		return err
	}
	defer metricsLn.shutdown(ctx)

	// Informers and the apiserver probe outlive ctx: syncs that drain after
	// SIGTERM still read the caches.
	background, stopBackground := context.WithCancel(context.WithoutCancel(ctx))
	defer func() {
		stopBackground()
		for _, f := range factories {
			f.Shutdown()
		}
	}()
	go h.probeAPIServer(background, kubeClient.Discovery())
	for _, f := range factories {
		f.Start(background.Done())
	}
	if !cache.WaitForNamedCacheSync(controllerAgentName, ctx.Done(), controller.cachesSynced...) {
		return nil // Cancelled before the caches synced.
	}
	h.synced.Store(true)

	if !opts.leaderElect {
		return controller.Run(ctx, opts.workers, opts.shutdownTimeout)
	}
	return runWithLeaderElection(ctx, kubeClient, opts, watchdog, func(ctx context.Context) error {
		logger.Info("Leading; starting workers")
		return controller.Run(ctx, opts.workers, opts.shutdownTimeout)
	})
}

// factory is what the generated and client-go informer factories share.
type factory interface {
	Start(stopCh <-chan struct{})
	Shutdown()
}

// newInformers builds one informer scope per watched namespace (or one for
// all namespaces). Child informers only list objects with the operator's
// managed-by label, so unrelated Deployments and Services are never cached,
// and every informer drops managedFields before caching: the controller
// compares values, not field ownership.
func newInformers(kubeClient kubernetes.Interface, memcachedClient clientset.Interface, opts *options) ([]InformerScope, []factory) {
	namespaces := opts.namespaces
	if len(namespaces) == 0 {
		namespaces = []string{metav1.NamespaceAll}
	}
	managedBy := resources.LabelManagedBy + "=" + resources.ManagedBy
	var scopes []InformerScope
	var factories []factory
	for _, ns := range namespaces {
		mcFactory := informers.NewSharedInformerFactoryWithOptions(memcachedClient, opts.resyncPeriod,
			informers.WithNamespace(ns), informers.WithTransform(stripManagedFields))
		kubeFactory := kubeinformers.NewSharedInformerFactoryWithOptions(kubeClient, opts.resyncPeriod,
			kubeinformers.WithNamespace(ns),
			kubeinformers.WithTransform(stripManagedFields),
			kubeinformers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = managedBy }))
		scopes = append(scopes, InformerScope{
			Namespace:   ns,
			Memcacheds:  mcFactory.Cache().V1alpha1().Memcacheds(),
			Deployments: kubeFactory.Apps().V1().Deployments(),
			Services:    kubeFactory.Core().V1().Services(),
		})
		factories = append(factories, mcFactory, kubeFactory)
	}
	return scopes, factories
}

// stripManagedFields is an informer transform that drops managedFields,
// typically the largest part of a cached object, which nothing here reads.
func stripManagedFields(obj any) (any, error) {
	if accessor, ok := obj.(metav1.ObjectMetaAccessor); ok {
		accessor.GetObjectMeta().SetManagedFields(nil)
	}
	return obj, nil
}

// runWithLeaderElection runs lead while this replica holds the Lease. On
// ctx cancellation it lets lead drain first and only then releases the
// Lease, so the next leader never overlaps with in-flight syncs. Losing the
// Lease returns errLostLeadership.
func runWithLeaderElection(ctx context.Context, kubeClient kubernetes.Interface, opts *options, watchdog *leaderelection.HealthzAdaptor, lead func(context.Context) error) error {
	logger := klog.FromContext(ctx)
	host, err := os.Hostname()
	if err != nil {
		return fmt.Errorf("getting hostname for the leader-election identity: %w", err)
	}
	identity := host + "_" + string(uuid.NewUUID())
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, opts.leaderElectionNamespace, opts.leaderElectionID,
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
		LeaseDuration:   opts.leaseDuration,
		RenewDeadline:   opts.renewDeadline,
		RetryPeriod:     opts.retryPeriod,
		ReleaseOnCancel: true,
		Name:            opts.leaderElectionID,
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
	logger.Info("Waiting to lead", "lease", opts.leaderElectionNamespace+"/"+opts.leaderElectionID, "identity", identity)
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
		return errLostLeadership
	}
}
