package metrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
)

var (
	instancesDesc = prometheus.NewDesc(
		"memcached_operator_instances",
		"Memcached objects in scope, by condition type and status (True, False, Unknown when the condition is missing).",
		[]string{"condition", "status"}, nil,
	)
	// instancesByReasonDesc tells apart what memcached_operator_instances
	// counts together: Available=False holds both a cache scaled to zero
	// and one that cannot serve, and Degraded=True every kind of problem.
	instancesByReasonDesc = prometheus.NewDesc(
		"memcached_operator_instances_by_reason",
		"Memcached objects in scope, by condition type, status and reason; a combination no Memcached has is not exported, except Available=False for MinimumReplicasUnavailable, which always is.",
		[]string{"condition", "status", "reason"}, nil,
	)
	// instancesByAccessDesc counts the caches by the access controls their
	// spec asks for, so that a dashboard can show how many any Pod may use.
	// It counts the spec, not the Pods: a control held back by a missing
	// Secret shows as Degraded, which instancesByReasonDesc counts.
	instancesByAccessDesc = prometheus.NewDesc(
		"memcached_operator_instances_by_access",
		"Memcached objects in scope, by the access controls their spec asks for: auth (spec.auth), tls (spec.tls), client_certificates (spec.tls.clientCA) and network_policy (spec.networkPolicy), each \"true\" or \"false\". A control asked for is not in effect while the Memcached is Degraded for it (its Secret or ConfigMap missing, the policy's name taken).",
		[]string{"auth", "tls", "client_certificates", "network_policy"}, nil,
	)
)

// instancesCollector counts Memcacheds by condition and by access control
// at scrape time, from the informer cache, so the gauges can never drift
// from what the cache holds and cost nothing between scrapes.
type instancesCollector struct {
	list func() ([]*cachev1beta1.Memcached, error)
}

// NewInstancesCollector returns a collector of memcached_operator_instances
// and its by_reason and by_access breakdowns over list, typically the
// controller's lister.
func NewInstancesCollector(list func() ([]*cachev1beta1.Memcached, error)) prometheus.Collector {
	return &instancesCollector{list: list}
}

func (c *instancesCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- instancesDesc
	ch <- instancesByReasonDesc
	ch <- instancesByAccessDesc
}

// access is one combination of the labels of instancesByAccessDesc.
type access struct{ auth, tls, clientCertificates, networkPolicy bool }

func accessOf(mc *cachev1beta1.Memcached) access {
	s := mc.Spec
	return access{
		auth:               s.Auth != nil,
		tls:                s.TLS != nil,
		clientCertificates: s.TLS != nil && s.TLS.ClientCA != nil,
		networkPolicy:      s.NetworkPolicy != nil,
	}
}

func (c *instancesCollector) Collect(ch chan<- prometheus.Metric) {
	items, err := c.list()
	if err != nil {
		ch <- prometheus.NewInvalidMetric(instancesDesc, err)
		ch <- prometheus.NewInvalidMetric(instancesByReasonDesc, err)
		ch <- prometheus.NewInvalidMetric(instancesByAccessDesc, err)
		return
	}
	types := []string{cachev1beta1.ConditionAvailable, cachev1beta1.ConditionProgressing, cachev1beta1.ConditionDegraded, cachev1beta1.ConditionImageVulnerable}
	counts := map[[2]string]float64{}
	for _, t := range types {
		for _, s := range []string{"True", "False", "Unknown"} {
			counts[[2]string{t, s}] = 0
		}
	}
	// The series an alert selects is there at zero, so that the alert's
	// expression has a value to compare whether or not a cache is down.
	reasons := map[[3]string]float64{{cachev1beta1.ConditionAvailable, string(metav1.ConditionFalse), cachev1beta1.ReasonMinimumReplicasUnavailable}: 0}
	// Every cache without any control is counted, even at zero, for the
	// same reason.
	accesses := map[access]float64{{}: 0}
	for _, mc := range items {
		for _, t := range types {
			status := "Unknown"
			for _, cond := range mc.Status.Conditions {
				if cond.Type == t {
					status = string(cond.Status)
					if cond.Reason != "" {
						reasons[[3]string{t, status, cond.Reason}]++
					}
				}
			}
			counts[[2]string{t, status}]++
		}
		accesses[accessOf(mc)]++
	}
	for k, v := range counts {
		ch <- prometheus.MustNewConstMetric(instancesDesc, prometheus.GaugeValue, v, k[0], k[1])
	}
	for k, v := range reasons {
		ch <- prometheus.MustNewConstMetric(instancesByReasonDesc, prometheus.GaugeValue, v, k[0], k[1], k[2])
	}
	for a, v := range accesses {
		ch <- prometheus.MustNewConstMetric(instancesByAccessDesc, prometheus.GaugeValue, v,
			strconv.FormatBool(a.auth), strconv.FormatBool(a.tls), strconv.FormatBool(a.clientCertificates), strconv.FormatBool(a.networkPolicy))
	}
}
