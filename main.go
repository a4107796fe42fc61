// Command memcached-operator runs the Memcached controller: it watches
// Memcached objects of the cache.kubelite.io API group and keeps a
// Deployment and a headless Service for each.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/component-base/logs"
	logsapi "k8s.io/component-base/logs/api/v1"
	"k8s.io/klog/v2"

	// The JSON log format for --logging-format=json.
	_ "k8s.io/component-base/logs/json/register"
	// Metrics providers of client-go, served by /metrics: workqueue depth,
	// latency and retries; REST client requests by code and method,
	// latency and rate-limiter wait; leader-election status.
	_ "k8s.io/component-base/metrics/prometheus/clientgo/leaderelection"
	_ "k8s.io/component-base/metrics/prometheus/restclient"
	_ "k8s.io/component-base/metrics/prometheus/workqueue"

	"github.com/kubelite/memcached-operator/pkg/leader"
	"github.com/kubelite/memcached-operator/pkg/memlimit"
	"github.com/kubelite/memcached-operator/pkg/signals"
)

func main() {
	opts := newOptions()
	fs := pflag.NewFlagSet("memcached-operator", pflag.ExitOnError)
	opts.addFlags(fs)
	_ = fs.Parse(os.Args[1:]) // ExitOnError: Parse exits on bad flags.
	opts.complete(fs)

	if err := logsapi.ValidateAndApply(opts.logging, nil); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	defer logs.FlushLogs()
	// As the Kubernetes components do: at -v=1 the log starts with every
	// flag's value, defaults included.
	cliflag.PrintFlags(fs)

	ctx := signals.SetupSignalContext(context.Background())
	logger := klog.FromContext(ctx)
	memlimit.Set(logger)

	if err := run(ctx, opts); err != nil {
		logger.Error(err, "Exiting")
		klog.FlushAndExit(klog.ExitFlushTimeout, 1)
	}
	logger.Info("Stopped")
}

// run loads the client configuration and runs the operator until ctx is
// cancelled.
func run(ctx context.Context, opts *options) error {
	if err := opts.validate(); err != nil {
		return err
	}
	cfg, err := restConfig(opts)
	if err != nil {
		return err
	}
	err = runOperator(ctx, cfg, opts, prometheus.NewRegistry())
	if errors.Is(err, leader.ErrLostLeadership) {
		return fmt.Errorf("%w; exiting so the replica restarts clean", err)
	}
	return err
}

// restConfig loads --kubeconfig, then $KUBECONFIG, then the in-cluster
// configuration, and applies the client rate limits.
func restConfig(opts *options) (*rest.Config, error) {
	kubeconfig := opts.kubeconfig
	if kubeconfig == "" {
		kubeconfig = os.Getenv(clientcmd.RecommendedConfigPathEnvVar)
	}
	cfg, err := clientcmd.BuildConfigFromFlags(opts.masterURL, kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("loading client configuration: %w", err)
	}
	opts.applyClientLimits(cfg)
	cfg.UserAgent = controllerAgentName
	return cfg, nil
}

// applyClientLimits sets cfg's client-side rate limit from --kube-api-qps
// and --kube-api-burst; a negative QPS leaves client-go without a limiter.
func (o *options) applyClientLimits(cfg *rest.Config) {
	cfg.QPS, cfg.Burst = float32(o.qps), o.burst
}
