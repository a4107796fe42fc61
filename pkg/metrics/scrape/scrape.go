package scrape

import (
	"context"
	"fmt"
	"io"
	"net/http"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Metrics is a parsed Prometheus text exposition, by family name.
type Metrics map[string]*dto.MetricFamily

// Parse reads the text exposition format. Any syntax error, including a
// body cut short, is an error: a partial parse would read as counters that
// went back to zero.
func Parse(r io.Reader) (Metrics, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("parsing the metrics text format: %w", err)
	}
	return Metrics(families), nil
}

// Get fetches url (e.g. "http://127.0.0.1:8080/metrics") with ctx and
// parses it; a non-200 status is an error.
func Get(ctx context.Context, url string) (Metrics, error) {
	return Source{URL: url}.Get(ctx)
}

// Source is an endpoint to scrape and how to reach it.
type Source struct {
	URL string
	// Token, if set, is sent as a bearer token, as Prometheus sends its
	// ServiceAccount's token to a secure endpoint.
	Token string
	// Client defaults to http.DefaultClient; a secure endpoint with a
	// self-signed certificate needs one that trusts it.
	Client *http.Client
}

// Get fetches the source with ctx and parses it; a non-200 status is an
// error. It asks for the text format, the only one Parse reads.
func (s Source) Get(ctx context.Context) (Metrics, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL, nil)
	if err != nil {
		return nil, fmt.Errorf("scraping %s: %w", s.URL, err)
	}
	req.Header.Set("Accept", string(expfmt.NewFormat(expfmt.TypeTextPlain)))
	if s.Token != "" {
		req.Header.Set("Authorization", "Bearer "+s.Token)
	}
	client := s.Client
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scraping: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scraping %s: %s", s.URL, resp.Status)
	}
	m, err := Parse(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("scraping %s: %w", s.URL, err)
	}
	return m, nil
}

// Has reports whether the family exists. A family that is missing and one
// whose samples sum to zero read the same through Sum; Has tells them
// apart, for a caller that must not mistake a renamed metric for an idle
// one.
func (m Metrics) Has(name string) bool {
	_, ok := m[name]
	return ok
}

// SeriesNames returns the name of every series the exposition holds, as
// PromQL selects them: a histogram family foo is foo_bucket, foo_sum and
// foo_count, a summary foo, foo_sum and foo_count, any other family its
// own name. A rule that selects foo_bucket needs the family foo to be a
// histogram, which the family's name alone does not say.
func (m Metrics) SeriesNames() map[string]bool {
	names := map[string]bool{}
	for name, mf := range m {
		switch mf.GetType() {
		case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
			names[name+"_bucket"] = true
			names[name+"_sum"] = true
			names[name+"_count"] = true
		case dto.MetricType_SUMMARY:
			names[name] = true
			names[name+"_sum"] = true
			names[name+"_count"] = true
		default:
			names[name] = true
		}
	}
	return names
}

// Sum adds the values (counter, gauge or untyped) of the samples of family
// name whose labels include every pair in match (nil matches all). A
// missing family, and a histogram or summary, which has no single value,
// sum to 0. As in Prometheus, a label a sample lacks has the value "", so
// {"code": ""} matches the samples without a code label.
func (m Metrics) Sum(name string, match map[string]string) float64 {
	var total float64
	m.each(name, match, func(_ *dto.Metric, v float64) { total += v })
	return total
}

// SumBy is Sum grouped by the value of one label; the samples that lack
// the label are grouped under "".
func (m Metrics) SumBy(name, label string, match map[string]string) map[string]float64 {
	out := map[string]float64{}
	m.each(name, match, func(s *dto.Metric, v float64) { out[labelValue(s, label)] += v })
	return out
}

// Count adds the observation counts of the histogram or summary samples of
// family name whose labels include every pair in match; 0 for a missing
// family or one of another type.
func (m Metrics) Count(name string, match map[string]string) uint64 {
	mf, ok := m[name]
	if !ok {
		return 0
	}
	var total uint64
	for _, s := range mf.GetMetric() {
		if !matches(s, match) {
			continue
		}
		switch mf.GetType() {
		case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
			total += s.GetHistogram().GetSampleCount()
		case dto.MetricType_SUMMARY:
			total += s.GetSummary().GetSampleCount()
		}
	}
	return total
}

// each calls f with every sample of family name that has a single value
// and matches match.
func (m Metrics) each(name string, match map[string]string, f func(*dto.Metric, float64)) {
	mf, ok := m[name]
	if !ok {
		return
	}
	for _, s := range mf.GetMetric() {
		v, ok := value(mf.GetType(), s)
		if !ok || !matches(s, match) {
			continue
		}
		f(s, v)
	}
}

func value(t dto.MetricType, s *dto.Metric) (float64, bool) {
	switch t {
	case dto.MetricType_COUNTER:
		return s.GetCounter().GetValue(), true
	case dto.MetricType_GAUGE:
		return s.GetGauge().GetValue(), true
	case dto.MetricType_UNTYPED:
		return s.GetUntyped().GetValue(), true
	default:
		return 0, false
	}
}

func matches(s *dto.Metric, match map[string]string) bool {
	for k, want := range match {
		if labelValue(s, k) != want {
			return false
		}
	}
	return true
}

func labelValue(s *dto.Metric, name string) string {
	for _, l := range s.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}
