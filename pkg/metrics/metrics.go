package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Results of a sync, the values of the result label.
const (
	// ResultSuccess: the Memcached is converged as far as the operator can
	// take it.
	ResultSuccess = "success"
	// ResultError: a transient failure, retried with per-key backoff.
	ResultError = "error"
	// ResultTerminal: a failure that retrying cannot fix, such as an
	// invalid spec. Not retried until the Memcached changes.
	ResultTerminal = "terminal"
	// ResultRequeued: blocked by something the operator gets no event
	// about, such as a foreign object holding a child's name; synced again
	// after a fixed delay.
	ResultRequeued = "requeued"
)

// Metrics are the reconcile metrics of one controller.
type Metrics struct {
	reconcileTotal    *prometheus.CounterVec
	reconcileDuration prometheus.Histogram
	specToObserved    prometheus.Histogram
}

// New creates the metrics and registers them with reg.
func New(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		reconcileTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "memcached_operator",
			Name:      "reconcile_total",
			Help:      "Syncs of Memcached objects by result: success; error (transient, retried with backoff); terminal (reported on the object, not retried until it changes); requeued (blocked by an object the operator gets no events about, synced again after a minute).",
		}, []string{"result"}),
		reconcileDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "memcached_operator",
			Name:      "reconcile_duration_seconds",
			Help:      "Time one sync of a Memcached takes.",
			Buckets:   prometheus.ExponentialBuckets(0.0001, 4, 10),
		}),
		specToObserved: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "memcached_operator",
			Name:      "spec_to_observed_seconds",
			Help:      "Time from the controller seeing a new metadata.generation of a Memcached to status.observedGeneration reaching it.",
			Buckets:   prometheus.ExponentialBuckets(0.01, 2.5, 12),
		}),
	}
	for _, c := range []prometheus.Collector{m.reconcileTotal, m.reconcileDuration, m.specToObserved} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	for _, r := range []string{ResultSuccess, ResultError, ResultTerminal, ResultRequeued} {
		m.reconcileTotal.WithLabelValues(r)
	}
	return m, nil
}

// ObserveReconcile records one sync.
func (m *Metrics) ObserveReconcile(result string, d time.Duration) {
	m.reconcileTotal.WithLabelValues(result).Inc()
	m.reconcileDuration.Observe(d.Seconds())
}

// ObserveSpecToObserved records how long a generation took to be observed.
func (m *Metrics) ObserveSpecToObserved(d time.Duration) {
	m.specToObserved.Observe(d.Seconds())
}

// Reconciles returns how many syncs have finished, whatever their result.
func (m *Metrics) Reconciles() float64 {
	var total float64
	for _, r := range []string{ResultSuccess, ResultError, ResultTerminal, ResultRequeued} {
		total += counterValue(m.reconcileTotal.WithLabelValues(r))
	}
	return total
}

func counterValue(c prometheus.Counter) float64 {
	var out dto.Metric
	if err := c.Write(&out); err != nil {
		return 0
	}
	return out.GetCounter().GetValue()
}
