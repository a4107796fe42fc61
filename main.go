// Command memcached-operator runs the Memcached controller: it watches
// Memcached objects of the cache.kubelite.io API group and keeps a
// Deployment and a headless Service for each.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	kubeinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	clientset "github.com/kubelite/memcached-operator/pkg/generated/clientset/versioned"
	informers "github.com/kubelite/memcached-operator/pkg/generated/informers/externalversions"
	"github.com/kubelite/memcached-operator/pkg/metrics"
	"github.com/kubelite/memcached-operator/pkg/signals"
)

// options are the command-line flags.
type options struct {
	kubeconfig   string
	masterURL    string
	workers      int
	qps          float64
	burst        int
	resyncPeriod time.Duration
}

func (o *options) addFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "Path to a kubeconfig. Defaults to $KUBECONFIG, then to the in-cluster configuration.")
	fs.StringVar(&o.masterURL, "master", "", "The address of the Kubernetes API server. Overrides any value in kubeconfig.")
	fs.IntVar(&o.workers, "workers", 4, "Number of Memcached objects synced in parallel.")
	// client-go's own default of 5 QPS would take minutes to converge a
	// thousand objects, which each need a few writes.
	fs.Float64Var(&o.qps, "kube-api-qps", 50, "Queries per second to the API server. A negative value disables client-side rate limiting.")
	fs.IntVar(&o.burst, "kube-api-burst", 100, "Burst of queries to the API server above --kube-api-qps.")
	fs.DurationVar(&o.resyncPeriod, "resync-period", 10*time.Hour, "How often every Memcached is synced again even without a change. Syncs of converged objects send no writes.")
}

func (o *options) validate() error {
	var errs []error
	if o.workers < 1 {
		errs = append(errs, fmt.Errorf("--workers must be at least 1, got %d", o.workers))
	}
	if o.qps > 0 && o.burst < 1 {
		errs = append(errs, fmt.Errorf("--kube-api-burst must be at least 1, got %d", o.burst))
	}
	if o.resyncPeriod < 0 {
		errs = append(errs, fmt.Errorf("--resync-period must not be negative, got %s", o.resyncPeriod))
	}
	return errors.Join(errs...)
}

func main() {
	klog.InitFlags(nil)
	var opts options
	opts.addFlags(flag.CommandLine)
	flag.Parse()

	ctx := signals.SetupSignalContext(context.Background())
	logger := klog.FromContext(ctx)

	if err := run(ctx, opts); err != nil {
		logger.Error(err, "Exiting")
		klog.FlushAndExit(klog.ExitFlushTimeout, 1)
	}
	klog.Flush()
}

// run loads the client configuration and runs the operator until ctx is
// cancelled.
func run(ctx context.Context, opts options) error {
	if err := opts.validate(); err != nil {
		return err
	}
	cfg, err := restConfig(opts)
	if err != nil {
		return err
	}
	m, err := metrics.New(prometheus.NewRegistry())
	if err != nil {
		return fmt.Errorf("registering metrics: %w", err)
	}
	return runOperator(ctx, cfg, opts, m)
}

// runOperator builds the clients, informers and controller from cfg and runs
// them until ctx is cancelled. The integration tests call it to run the
// operator in-process with the same wiring as the binary.
func runOperator(ctx context.Context, cfg *rest.Config, opts options, m *metrics.Metrics) error {
	kubeClient, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("building Kubernetes clientset: %w", err)
	}
	memcachedClient, err := clientset.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("building Memcached clientset: %w", err)
	}

	kubeInformerFactory := kubeinformers.NewSharedInformerFactory(kubeClient, opts.resyncPeriod)
	memcachedInformerFactory := informers.NewSharedInformerFactory(memcachedClient, opts.resyncPeriod)

	controller, err := NewController(ctx, kubeClient, memcachedClient,
		memcachedInformerFactory.Cache().V1alpha1().Memcacheds(),
		kubeInformerFactory.Apps().V1().Deployments(),
		kubeInformerFactory.Core().V1().Services(),
		m)
	if err != nil {
		return err
	}

	kubeInformerFactory.Start(ctx.Done())
	memcachedInformerFactory.Start(ctx.Done())
	defer kubeInformerFactory.Shutdown()
	defer memcachedInformerFactory.Shutdown()

	return controller.Run(ctx, opts.workers)
}

// restConfig loads --kubeconfig, then $KUBECONFIG, then the in-cluster
// configuration, and applies the client rate limits.
func restConfig(opts options) (*rest.Config, error) {
	kubeconfig := opts.kubeconfig
	if kubeconfig == "" {
		kubeconfig = os.Getenv(clientcmd.RecommendedConfigPathEnvVar)
	}
	cfg, err := clientcmd.BuildConfigFromFlags(opts.masterURL, kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("loading client configuration: %w", err)
	}
	cfg.QPS = float32(opts.qps)
	cfg.Burst = opts.burst
	cfg.UserAgent = controllerAgentName
	return cfg, nil
}
