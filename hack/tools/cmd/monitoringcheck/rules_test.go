package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/promql/parser"
)

// writeFile writes content to name in a fresh directory and returns its path.
func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// promRule is a PrometheusRule whose second rule's expression sits on line
// 16, with expr replaced by the argument and extra appended to the rule.
func promRule(expr, extra string) string {
	return `# A comment that shifts every line.
apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata:
  name: test
spec:
  groups:
  - name: g
    rules:
    - alert: First
      expr: up == 0
      labels:
        severity: warning
    - alert: Second
      for: 5m
      expr: ` + expr + `
` + extra
}

func TestRuleQueries(t *testing.T) {
	cases := []struct {
		name    string
		content string
		// want is the expression and line of each rule, or wantErr a
		// part of the only error.
		want    []query
		wantErr string
	}{
		{
			name:    "valid rules keep the lines of the PrometheusRule",
			content: promRule("rate(foo_total[5m]) > 0", ""),
			want:    []query{{where: ":11", expr: "up == 0"}, {where: ":16", expr: "rate(foo_total[5m]) > 0"}},
		},
		{
			name:    "an expression that does not parse is reported at its line",
			content: promRule("rate(foo_total[5m] > 0", ""),
			wantErr: ":16:13: group \"g\", rule 2, \"Second\": could not parse expression",
		},
		{
			name:    "an unknown field is refused",
			content: promRule("up == 0", "      fro: 10m\n"),
			wantErr: "line 17: field fro not found",
		},
		{
			name:    "a bad annotation template is refused",
			content: promRule("up == 0", "      annotations:\n        summary: '{{ $value | nosuchfunc }}'\n"),
			wantErr: `function "nosuchfunc" not defined`,
		},
		{
			name:    "a key after spec is not part of the rules",
			content: promRule("up == 0", "status:\n  whatever: true\n"),
			want:    []query{{where: ":11", expr: "up == 0"}, {where: ":16", expr: "up == 0"}},
		},
		{
			name:    "another kind is refused",
			content: strings.Replace(promRule("up == 0", ""), "kind: PrometheusRule", "kind: ConfigMap", 1),
			wantErr: `kind is "ConfigMap", want PrometheusRule`,
		},
		{
			name:    "a flow-style spec is refused",
			content: "apiVersion: monitoring.coreos.com/v1\nkind: PrometheusRule\nspec: {groups: []}\n",
			wantErr: "spec is not a block mapping",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := writeFile(t, "rule.yaml", c.content)
			got, errs := ruleQueries(path, parser.NewParser(parser.Options{}))
			if c.wantErr != "" {
				if len(errs) != 1 || !strings.Contains(errs[0].Error(), c.wantErr) || !strings.HasPrefix(errs[0].Error(), path) {
					t.Fatalf("errors = %v, want one starting with %s and containing %q", errs, path, c.wantErr)
				}
				return
			}
			if len(errs) > 0 {
				t.Fatalf("unexpected errors: %v", errs)
			}
			if len(got) != len(c.want) {
				t.Fatalf("queries = %v, want %v", got, c.want)
			}
			for i := range got {
				if want := (query{where: path + c.want[i].where, expr: c.want[i].expr}); got[i] != want {
					t.Errorf("query %d = %+v, want %+v", i, got[i], want)
				}
			}
		})
	}
}
