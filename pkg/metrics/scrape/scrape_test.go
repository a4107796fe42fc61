package scrape

import (
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// exposition has a labelled counter, a gauge, an untyped sample and a
// histogram, as the operator's /metrics serves them.
const exposition = `# HELP rest_client_requests_total Requests by code and method.
# TYPE rest_client_requests_total counter
rest_client_requests_total{code="200",host="127.0.0.1:6443",method="GET"} 7
rest_client_requests_total{code="201",host="127.0.0.1:6443",method="POST"} 3
rest_client_requests_total{code="200",host="127.0.0.1:6443",method="PATCH"} 2
rest_client_requests_total{code="409",host="127.0.0.1:6443",method="PATCH"} 1
# TYPE workqueue_depth gauge
workqueue_depth{name="memcached"} 4
workqueue_depth{name="other"} 9
# TYPE requests_in_flight untyped
requests_in_flight 5
# TYPE reconcile_duration_seconds histogram
reconcile_duration_seconds_bucket{le="1"} 2
reconcile_duration_seconds_bucket{le="+Inf"} 3
reconcile_duration_seconds_sum 1.5
reconcile_duration_seconds_count 3
`

func parse(t *testing.T, text string) Metrics {
	t.Helper()
	m, err := Parse(strings.NewReader(text))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return m
}

func TestSum(t *testing.T) {
	m := parse(t, exposition)
	tests := []struct {
		name   string
		family string
		match  map[string]string
		want   float64
		has    bool
	}{
		{name: "counter, every sample", family: "rest_client_requests_total", want: 13, has: true},
		{name: "counter, one label", family: "rest_client_requests_total", match: map[string]string{"method": "PATCH"}, want: 3, has: true},
		{name: "counter, two labels", family: "rest_client_requests_total", match: map[string]string{"method": "PATCH", "code": "409"}, want: 1, has: true},
		{name: "no sample matches", family: "rest_client_requests_total", match: map[string]string{"method": "DELETE"}, want: 0, has: true},
		{name: "an empty value matches a missing label", family: "rest_client_requests_total", match: map[string]string{"verb": ""}, want: 13, has: true},
		{name: "gauge", family: "workqueue_depth", match: map[string]string{"name": "memcached"}, want: 4, has: true},
		{name: "untyped", family: "requests_in_flight", want: 5, has: true},
		{name: "histogram has no single value", family: "reconcile_duration_seconds", want: 0, has: true},
		{name: "missing family", family: "memcached_operator_reconcile_total", want: 0, has: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := m.Sum(tc.family, tc.match); got != tc.want {
				t.Errorf("Sum(%q, %v) = %v, want %v", tc.family, tc.match, got, tc.want)
			}
			if got := m.Has(tc.family); got != tc.has {
				t.Errorf("Has(%q) = %v, want %v", tc.family, got, tc.has)
			}
		})
	}
}

func TestCount(t *testing.T) {
	m := parse(t, exposition)
	tests := []struct {
		name   string
		family string
		want   uint64
	}{
		{name: "histogram", family: "reconcile_duration_seconds", want: 3},
		{name: "counter has no count", family: "rest_client_requests_total", want: 0},
		{name: "missing family", family: "memcached_operator_spec_to_observed_seconds", want: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := m.Count(tc.family, nil); got != tc.want {
				t.Errorf("Count(%q) = %d, want %d", tc.family, got, tc.want)
			}
		})
	}
}

func TestSumBy(t *testing.T) {
	m := parse(t, exposition)
	tests := []struct {
		name   string
		family string
		label  string
		match  map[string]string
		want   map[string]float64
	}{
		{name: "by method", family: "rest_client_requests_total", label: "method", want: map[string]float64{"GET": 7, "POST": 3, "PATCH": 3}},
		{name: "by method, one code", family: "rest_client_requests_total", label: "method", match: map[string]string{"code": "200"}, want: map[string]float64{"GET": 7, "PATCH": 2}},
		{name: "samples without the label group under the empty value", family: "requests_in_flight", label: "method", want: map[string]float64{"": 5}},
		{name: "missing family", family: "memcached_operator_reconcile_total", label: "result", want: map[string]float64{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := m.SumBy(tc.family, tc.label, tc.match); !maps.Equal(got, tc.want) {
				t.Errorf("SumBy(%q, %q, %v) = %v, want %v", tc.family, tc.label, tc.match, got, tc.want)
			}
		})
	}
}

func TestSeriesNames(t *testing.T) {
	m := parse(t, exposition+`# TYPE rpc_seconds summary
rpc_seconds{quantile="0.5"} 0.1
rpc_seconds_sum 2
rpc_seconds_count 9
`)
	want := map[string]bool{
		"rest_client_requests_total":        true,
		"workqueue_depth":                   true,
		"requests_in_flight":                true,
		"reconcile_duration_seconds_bucket": true,
		"reconcile_duration_seconds_sum":    true,
		"reconcile_duration_seconds_count":  true,
		"rpc_seconds":                       true,
		"rpc_seconds_sum":                   true,
		"rpc_seconds_count":                 true,
	}
	if got := m.SeriesNames(); !maps.Equal(got, want) {
		t.Errorf("SeriesNames() = %v, want %v", got, want)
	}
}

func TestGet(t *testing.T) {
	tests := []struct {
		name    string
		status  int
		body    string
		wantErr bool
		want    float64 // Sum of workqueue_depth when there is no error.
	}{
		{name: "served", status: http.StatusOK, body: exposition, want: 13},
		{name: "non-200 status", status: http.StatusServiceUnavailable, body: exposition, wantErr: true},
		{name: "body cut short", status: http.StatusOK, body: "workqueue_depth{name=\"memcached\"} 4\nworkqueue_dep", wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.WriteHeader(tc.status)
				_, _ = w.Write([]byte(tc.body))
			}))
			defer srv.Close()
			m, err := Get(t.Context(), srv.URL+"/metrics")
			if (err != nil) != tc.wantErr {
				t.Fatalf("Get: error %v, want error: %v", err, tc.wantErr)
			}
			if err == nil {
				if got := m.Sum("workqueue_depth", nil); got != tc.want {
					t.Errorf("Sum(workqueue_depth) = %v, want %v", got, tc.want)
				}
			}
		})
	}
}
