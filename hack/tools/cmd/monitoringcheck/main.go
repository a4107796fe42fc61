// Command monitoringcheck checks artifacts/monitoring against the metrics
// that really exist, so that an alert cannot silently watch a name nobody
// serves. It parses the PrometheusRule with Prometheus's own rule parser,
// strictly, parses every rule expression and every dashboard query with
// the PromQL parser, and checks the metric name of every selector in them:
//
//   - a name of the memcached exporter must be in the list taken from the
//     exporter's release (hack/monitoring/memcached-exporter.txt);
//   - every other name is the operator's and must be in
//     hack/monitoring/operator-metrics.txt, which TestIntegrationMonitoring
//     checks against the /metrics of a running operator. -update rewrites
//     that list from what the rules and the dashboard use.
//
// It is built from the tools module so that the Prometheus server module
// never enters the operator's dependency graph.
package main

import (
	"flag"
	"fmt"
	"os"
)

// config names the files to check.
type config struct {
	rules        string
	dashboard    string
	exporterList string
	operatorList string
	// update rewrites operatorList instead of comparing with it.
	update bool
}

func main() {
	var cfg config
	flag.StringVar(&cfg.rules, "rules", "artifacts/monitoring/prometheusrule.yaml", "PrometheusRule to check")
	flag.StringVar(&cfg.dashboard, "dashboard", "artifacts/monitoring/dashboard.json", "Grafana dashboard to check")
	flag.StringVar(&cfg.exporterList, "exporter-metrics", "hack/monitoring/memcached-exporter.txt", "metric names the memcached exporter serves")
	flag.StringVar(&cfg.operatorList, "operator-metrics", "hack/monitoring/operator-metrics.txt", "operator metric names the rules and the dashboard use")
	flag.BoolVar(&cfg.update, "update", false, "rewrite -operator-metrics instead of comparing with it")
	flag.Parse()

	problems := run(cfg)
	for _, p := range problems {
		fmt.Fprintln(os.Stderr, p)
	}
	if len(problems) > 0 {
		os.Exit(1)
	}
}
