package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/promql/parser"
)

func TestSelectedNames(t *testing.T) {
	cases := []struct {
		name    string
		expr    string
		want    []string
		wantErr string
	}{
		{name: "a plain selector", expr: `foo{job="x"}`, want: []string{"foo"}},
		{name: "a histogram keeps its suffix", expr: `histogram_quantile(0.99, sum by (le) (rate(foo_seconds_bucket[5m])))`, want: []string{"foo_seconds_bucket"}},
		{name: "both sides of a binary expression", expr: `rate(foo_sum[5m]) / rate(foo_count[5m])`, want: []string{"foo_sum", "foo_count"}},
		{name: "the name as a label matcher", expr: `{__name__="foo", job="x"}`, want: []string{"foo"}},
		{name: "a subquery and an offset", expr: `max_over_time(rate(foo_total[1m] offset 1h)[10m:1m])`, want: []string{"foo_total"}},
		{name: "a selector inside absent", expr: `absent(up{job="x"} == 1)`, want: []string{"up"}},
		{name: "no metric at all", expr: `vector(1)`},
		{name: "a name matched by a regular expression", expr: `{__name__=~"foo.*"}`, wantErr: "has no fixed metric name"},
		{name: "an expression that does not parse", expr: `rate(foo[5m]`, wantErr: "unclosed left parenthesis"},
	}
	p := parser.NewParser(parser.Options{})
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := selectedNames(p, c.expr)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("names = %v, want %v", got, c.want)
			}
		})
	}
}

func TestSortNames(t *testing.T) {
	exporter := map[string]bool{"memcached_up": true, "memcached_items_evicted_total": true}
	cases := []struct {
		name         string
		exprs        []string
		wantOperator []string
		wantProblem  string
	}{
		{
			name:         "exporter names are checked, operator names collected once and sorted",
			exprs:        []string{`memcached_up == 0 or up == 0`, `rate(workqueue_retries_total[5m])`, `memcached_operator_reconcile_total + workqueue_retries_total`},
			wantOperator: []string{"memcached_operator_reconcile_total", "workqueue_retries_total"},
		},
		{
			name:         "a renamed exporter metric is a problem",
			exprs:        []string{`rate(memcached_items_evict_total[5m])`},
			wantOperator: []string{},
			wantProblem:  "q0: memcached_items_evict_total is not a metric of the memcached exporter (list.txt)",
		},
		{
			name:         "an expression that does not parse is a problem",
			exprs:        []string{`memcached_up ==`},
			wantOperator: []string{},
			wantProblem:  "q0: 1:16: parse error",
		},
	}
	p := parser.NewParser(parser.Options{})
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var queries []query
			for i, e := range c.exprs {
				queries = append(queries, query{where: "q" + string(rune('0'+i)), expr: e})
			}
			operator, problems := sortNames(p, queries, exporter, "list.txt")
			if !slices.Equal(operator, c.wantOperator) {
				t.Errorf("operator names = %v, want %v", operator, c.wantOperator)
			}
			switch {
			case c.wantProblem == "" && len(problems) > 0:
				t.Errorf("unexpected problems: %v", problems)
			case c.wantProblem != "" && (len(problems) != 1 || !strings.HasPrefix(problems[0].Error(), c.wantProblem)):
				t.Errorf("problems = %v, want one starting with %q", problems, c.wantProblem)
			}
		})
	}
}
