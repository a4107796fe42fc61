package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
)

var instancesDesc = prometheus.NewDesc(
	"memcached_operator_instances",
	"Memcached objects in scope, by condition type and status (True, False, Unknown when the condition is missing).",
	[]string{"condition", "status"}, nil,
)

// instancesCollector counts Memcacheds by condition at scrape time, from
// the informer cache, so the gauge can never drift from what the cache
// holds and costs nothing between scrapes.
type instancesCollector struct {
	list func() ([]*cachev1beta1.Memcached, error)
}

// NewInstancesCollector returns a collector of memcached_operator_instances
// over list, typically the controller's lister.
func NewInstancesCollector(list func() ([]*cachev1beta1.Memcached, error)) prometheus.Collector {
	return &instancesCollector{list: list}
}

func (c *instancesCollector) Describe(ch chan<- *prometheus.Desc) { ch <- instancesDesc }

func (c *instancesCollector) Collect(ch chan<- prometheus.Metric) {
	items, err := c.list()
	if err != nil {
		ch <- prometheus.NewInvalidMetric(instancesDesc, err)
		return
	}
	types := []string{cachev1beta1.ConditionAvailable, cachev1beta1.ConditionProgressing, cachev1beta1.ConditionDegraded}
	counts := map[[2]string]float64{}
	for _, t := range types {
		for _, s := range []string{"True", "False", "Unknown"} {
			counts[[2]string{t, s}] = 0
		}
	}
	for _, mc := range items {
		for _, t := range types {
			status := "Unknown"
			for _, cond := range mc.Status.Conditions {
				if cond.Type == t {
					status = string(cond.Status)
				}
			}
			counts[[2]string{t, status}]++
		}
	}
	for k, v := range counts {
		ch <- prometheus.MustNewConstMetric(instancesDesc, prometheus.GaugeValue, v, k[0], k[1])
	}
}
