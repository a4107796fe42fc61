package main

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestSubstituteVariables(t *testing.T) {
	cases := []struct {
		name, expr, want string
	}{
		{name: "rate interval", expr: `rate(foo[$__rate_interval])`, want: `rate(foo[5m])`},
		{name: "braced interval", expr: `rate(foo[${__interval}])`, want: `rate(foo[5m])`},
		{name: "label value", expr: `foo{namespace=~"$namespace"}`, want: `foo{namespace=~"variable"}`},
		{name: "braced with a format", expr: `foo{pod=~"${pod:regex}"}`, want: `foo{pod=~"variable"}`},
		{name: "old brackets", expr: `foo{pod="[[pod]]"}`, want: `foo{pod="variable"}`},
		{name: "no variables", expr: `sum(foo)`, want: `sum(foo)`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := substituteVariables(c.expr); got != c.want {
				t.Errorf("substituteVariables(%q) = %q, want %q", c.expr, got, c.want)
			}
		})
	}
}

func TestDashboardQueries(t *testing.T) {
	d := `{
  "panels": [
    {"type": "row", "title": "Open row", "panels": []},
    {"title": "Top", "targets": [{"refId": "A", "expr": "rate(a_total[$__rate_interval])"}]},
    {"type": "row", "title": "Collapsed", "collapsed": true, "panels": [
      {"title": "Inside", "targets": [{"refId": "B", "expr": "b{ns=\"$namespace\"}"}]}
    ]},
    {"title": "Text panel"}
  ],
  "templating": {"list": [
    {"name": "datasource", "type": "datasource", "query": "prometheus"},
    {"name": "ns", "type": "query", "query": {"query": "label_values(c{job=\"x\"}, namespace)"}},
    {"name": "old", "type": "query", "query": "label_values(d, pod)"}
  ]}
}`
	path := writeFile(t, "dashboard.json", d)
	got, problems := dashboardQueries(path)
	if len(problems) > 0 {
		t.Fatalf("unexpected problems: %v", problems)
	}
	want := []query{
		{where: path + `: panel "Top", query A`, expr: "rate(a_total[5m])"},
		{where: path + `: panel "Inside", query B`, expr: `b{ns="variable"}`},
		{where: path + `: variable "ns"`, expr: `c{job="x"}`},
		{where: path + `: variable "old"`, expr: `d`},
	}
	if len(got) != len(want) {
		t.Fatalf("queries = %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("query %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestDashboardProblems(t *testing.T) {
	cases := []struct {
		name, dashboard, want string
	}{
		{
			name:      "a query without PromQL",
			dashboard: `{"panels": [{"title": "Logs", "targets": [{"refId": "A", "query": "{app=\"x\"}"}]}]}`,
			want:      `panel "Logs", query A: no PromQL expression`,
		},
		{
			name:      "a variable query that cannot be checked",
			dashboard: `{"templating": {"list": [{"name": "m", "type": "query", "query": "metrics(memcached_.*)"}]}}`,
			want:      `variable "m": cannot check "metrics(memcached_.*)"`,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, problems := dashboardQueries(writeFile(t, "dashboard.json", c.dashboard))
			if len(problems) != 1 || !strings.Contains(problems[0].Error(), c.want) {
				t.Errorf("problems = %v, want one containing %q", problems, c.want)
			}
		})
	}
}

func TestVariableSelectorForms(t *testing.T) {
	for name, raw := range map[string]string{
		"string": `"label_values(up{job=\"x\"}, pod)"`,
		"object": `{"query": "label_values(up{job=\"x\"}, pod)", "refId": "A"}`,
	} {
		t.Run(name, func(t *testing.T) {
			got, err := variableSelector(json.RawMessage(raw))
			if err != nil || got != `up{job="x"}` {
				t.Errorf("variableSelector(%s) = %q, %v", raw, got, err)
			}
		})
	}
}
