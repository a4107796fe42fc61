package main

import (
	"context"
	"fmt"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/transport"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/kubelite/memcached-operator/pkg/childcache"
	clientset "github.com/kubelite/memcached-operator/pkg/generated/clientset/versioned"
	informers "github.com/kubelite/memcached-operator/pkg/generated/informers/externalversions"
	"github.com/kubelite/memcached-operator/pkg/intern"
	"github.com/kubelite/memcached-operator/pkg/leader"
	"github.com/kubelite/memcached-operator/pkg/metrics"
	"github.com/kubelite/memcached-operator/pkg/resources"
	"github.com/kubelite/memcached-operator/pkg/serving"
)

// runOperator runs the whole operator until ctx is cancelled: listeners,
// informers (warm even while following), leader election and the
// controller. On cancellation it drains the queue within the shutdown
// timeout, releases the Lease, stops the listeners and returns nil. The
// integration tests call it to run the operator in-process with the same
// wiring as the binary.
func runOperator(ctx context.Context, cfg *rest.Config, opts *options, reg *prometheus.Registry) error {
	logger := klog.FromContext(ctx)

	// The metrics listener's token and access reviews are creates, but not
	// the controller's writes: every replica answers scrapes, so its
	// client stays outside the fence. Anyone who can reach the port
	// decides how many reviews are asked for, so the client has a rate
	// limiter of its own (serving.ReviewConfig), which no other client
	// waits on.
	reviewClient, err := kubernetes.NewForConfig(withUserAgent(serving.ReviewConfig(cfg), "metrics-auth"))
	if err != nil {
		return fmt.Errorf("building the review clientset: %w", err)
	}
	// With leader election, every other client sits behind the fence, so
	// that a replica that lost the Lease sends no write at all
	// (leader.Fence). The fence is the innermost of cfg's wrappers: one
	// already on cfg (the integration tests' request recorder) sees a
	// write refused rather than sent, and none can send one past it.
	var fence *leader.Fence
	if opts.leaderElect {
		fence = &leader.Fence{}
		cfg = rest.CopyConfig(cfg)
		cfg.WrapTransport = transport.Wrappers(fence.Wrap, cfg.WrapTransport)
	}
	kubeClient, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("building Kubernetes clientset: %w", err)
	}
	// The Lease is renewed through a client of its own, as
	// kube-controller-manager does: with --kube-api-qps set, the
	// controller's writes cannot hold the renewals in their client-side
	// limiter. Behind the fence like every other client.
	leaderClient, err := kubernetes.NewForConfig(withUserAgent(cfg, "leader-election"))
	if err != nil {
		return fmt.Errorf("building the leader-election clientset: %w", err)
	}
	memcachedClient, err := clientset.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("building Memcached clientset: %w", err)
	}
	crdClient, err := apiextensionsclient.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("building CRD clientset: %w", err)
	}

	m, err := metrics.New(reg)
	if err != nil {
		return fmt.Errorf("registering metrics: %w", err)
	}
	scopes, factories := newInformers(kubeClient, memcachedClient, opts)
	controller, err := NewController(ctx, kubeClient, memcachedClient, scopes, m, clock.RealClock{}, opts.maxRetryDelay, opts.maxConcurrentRollouts)
	if err != nil {
		return err
	}
	controller.claimGrace = opts.extstoreClaimGrace
	if err := reg.Register(metrics.NewInstancesCollector(controller.memcachedLister.List)); err != nil {
		return fmt.Errorf("registering metrics: %w", err)
	}

	var watchdog *leaderelection.HealthzAdaptor
	if opts.leaderElect {
		watchdog = leaderelection.NewLeaderHealthzAdaptor(opts.renewDeadline)
	}
	h := serving.NewHealth(watchdog)
	metricsLn, err := listenMetrics(ctx, opts, serving.MetricsHandler(reg, opts.enableProfiling), reviewClient)
	if err != nil {
		return err
	}
	defer metricsLn.Shutdown(ctx)

	// Informers, the apiserver probe and the webhook's certificates outlive
	// ctx: syncs that drain after SIGTERM still read the caches.
	background, stopBackground := context.WithCancel(context.WithoutCancel(ctx))
	defer func() {
		stopBackground()
		for _, f := range factories {
			f.Shutdown()
		}
	}()
	webhook, err := startWebhook(ctx, background, opts, kubeClient, crdClient)
	if err != nil {
		return err
	}
	defer webhook.shutdown(ctx)
	// The webhook Service routes to ready replicas only, so a replica is
	// ready once its webhook has a certificate to serve.
	h.Serves(webhook.ln)
	healthLn, err := serving.Listen(ctx, "health", opts.healthProbeBindAddress, h.Handler())
	if err != nil {
		return err
	}
	defer healthLn.Shutdown(ctx)
	go h.ProbeAPIServer(background, kubeClient.Discovery())
	for _, f := range factories {
		f.Start(background.Done())
	}
	go func() {
		if !cache.WaitForCacheSync(background.Done(), controller.childrenSynced...) {
			return
		}
		h.MarkChildrenSynced()
		if cache.WaitForNamedCacheSync(controllerAgentName, background.Done(), controller.cachesSynced...) {
			h.MarkSynced()
		}
	}()

	// Nothing here waits for the caches before leading: during an upgrade,
	// listing Memcacheds in the new storage version may need conversion,
	// and so the webhook's certificate (startWebhook puts it in place on
	// every replica), before the caches can fill. The controller's Run
	// waits for them.
	if !opts.leaderElect {
		webhook.manage(ctx)
		return controller.Run(ctx, context.Background(), opts.workers, opts.shutdownTimeout)
	}
	election := leader.Config{
		Namespace:     opts.leaderElectionNamespace,
		Name:          opts.leaderElectionID,
		LeaseDuration: opts.leaseDuration,
		RenewDeadline: opts.renewDeadline,
		RetryPeriod:   opts.retryPeriod,
	}
	return leader.Run(ctx, leaderClient, election, watchdog, fence, func(ctx, lost context.Context) error {
		logger.Info("Leading; starting workers")
		webhook.manage(ctx)
		return controller.Run(ctx, lost, opts.workers, opts.shutdownTimeout)
	})
}

// withUserAgent returns a copy of cfg whose user agent names what the
// client is for, so that the apiserver's audit log tells the operator's
// clients apart. (client-go's rest.AddUserAgent changes cfg itself and
// drops the operator's own name.)
func withUserAgent(cfg *rest.Config, purpose string) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	if cfg.UserAgent == "" {
		cfg.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	cfg.UserAgent += "/" + purpose
	return cfg
}

// listenMetrics serves /metrics, and pprof with --enable-profiling, over
// HTTPS behind delegated authentication and authorization, or over plain
// HTTP without --metrics-secure.
func listenMetrics(ctx context.Context, opts *options, h http.Handler, reviews kubernetes.Interface) (*serving.Listener, error) {
	if !opts.metricsSecure {
		return serving.Listen(ctx, "metrics", opts.metricsBindAddress, h)
	}
	return serving.ListenSecure(ctx, "metrics", opts.metricsBindAddress, h, serving.SecureConfig{
		CertFile: opts.metricsCertFile,
		KeyFile:  opts.metricsKeyFile,
		Kube:     reviews,
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
// and every informer trims what it caches (pkg/childcache).
func newInformers(kubeClient kubernetes.Interface, memcachedClient clientset.Interface, opts *options) ([]childcache.InformerScope, []factory) {
	namespaces := opts.namespaces
	if len(namespaces) == 0 {
		namespaces = []string{metav1.NamespaceAll}
	}
	managedBy := resources.LabelManagedBy + "=" + resources.ManagedBy
	// One table for every cache, so that equal argument and resource
	// lists are stored once whichever informer decodes them.
	table := intern.New(intern.DefaultCapacity)
	var scopes []childcache.InformerScope
	var factories []factory
	for _, ns := range namespaces {
		mcFactory := informers.NewSharedInformerFactoryWithOptions(memcachedClient, opts.resyncPeriod,
			informers.WithNamespace(ns), informers.WithTransform(childcache.Memcached(table)))
		// No resync for the children: the handler drops theirs, and each
		// Memcached's own resync covers its children.
		kubeFactory := kubeinformers.NewSharedInformerFactoryWithOptions(kubeClient, 0,
			kubeinformers.WithNamespace(ns),
			kubeinformers.WithTransform(childcache.Child(table)),
			kubeinformers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = managedBy }))
		// Secrets carry no label of ours: a Memcached names any Secret of
		// its namespace. Of each, only the keys the sync checks for are
		// cached, and not their data: of the auth file only its verdict,
		// of the client CA bundle only its CAs' fingerprints.
		secretFactory := kubeinformers.NewSharedInformerFactoryWithOptions(kubeClient, 0,
			kubeinformers.WithNamespace(ns),
			kubeinformers.WithTransform(secretTransform()))
		// ConfigMaps likewise, for spec.tls.clientCA.configMapName.
		configMapFactory := kubeinformers.NewSharedInformerFactoryWithOptions(kubeClient, 0,
			kubeinformers.WithNamespace(ns),
			kubeinformers.WithTransform(configMapTransform()))
		// The extstore claims, which the ephemeral volume controller
		// creates with the labels of the Pods' volume claim template.
		claimFactory := kubeinformers.NewSharedInformerFactoryWithOptions(kubeClient, 0,
			kubeinformers.WithNamespace(ns),
			kubeinformers.WithTransform(childcache.Claim()),
			kubeinformers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = managedBy }))
		scopes = append(scopes, childcache.InformerScope{
			Namespace:            ns,
			Memcacheds:           mcFactory.Cache().V1beta1().Memcacheds(),
			Deployments:          kubeFactory.Apps().V1().Deployments(),
			Services:             kubeFactory.Core().V1().Services(),
			PodDisruptionBudgets: kubeFactory.Policy().V1().PodDisruptionBudgets(),
			NetworkPolicies:      kubeFactory.Networking().V1().NetworkPolicies(),
			Secrets:              secretFactory.Core().V1().Secrets(),
			ConfigMaps:           configMapFactory.Core().V1().ConfigMaps(),
			Claims:               claimFactory.Core().V1().PersistentVolumeClaims(),
		})
		factories = append(factories, mcFactory, kubeFactory, secretFactory, configMapFactory, claimFactory)
	}
	return scopes, factories
}
