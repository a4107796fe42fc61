package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunUpdateThenVerify writes the operator list with -update, checks
// that a plain run then passes, and that renaming a metric in a rule makes
// it fail: the whole path make update-monitoring and make verify take.
func TestRunUpdateThenVerify(t *testing.T) {
	dir := t.TempDir()
	cfg := config{
		rules:        filepath.Join(dir, "rules.yaml"),
		dashboard:    filepath.Join(dir, "dashboard.json"),
		exporterList: filepath.Join(dir, "exporter.txt"),
		operatorList: filepath.Join(dir, "operator.txt"),
	}
	write := func(path, content string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(cfg.rules, promRule(`rate(memcached_operator_reconcile_total{result="error"}[5m]) > 0`, ""))
	write(cfg.dashboard, `{"panels": [{"title": "Evictions", "targets": [{"refId": "A", "expr": "rate(memcached_items_evicted_total[$__rate_interval])"}]}]}`)
	write(cfg.exporterList, "# memcached_exporter vX\nmemcached_items_evicted_total\n")

	if problems := run(cfg); len(problems) != 1 || !strings.Contains(problems[0].Error(), "used but not listed: [memcached_operator_reconcile_total]") {
		t.Fatalf("before -update: problems = %v, want the missing list", problems)
	}
	update := cfg
	update.update = true
	if problems := run(update); len(problems) > 0 {
		t.Fatalf("-update: %v", problems)
	}
	if problems := run(cfg); len(problems) > 0 {
		t.Fatalf("after -update: %v", problems)
	}

	write(cfg.rules, promRule(`rate(memcached_operator_reconciles_total{result="error"}[5m]) > 0`, ""))
	problems := run(cfg)
	if len(problems) != 1 || !strings.Contains(problems[0].Error(), "used but not listed: [memcached_operator_reconciles_total]; listed but not used: [memcached_operator_reconcile_total]") {
		t.Errorf("after a rename: problems = %v, want the stale list", problems)
	}

	write(cfg.rules, promRule(`rate(memcached_operator_reconcile_total[5m] > 0`, ""))
	before, _ := os.ReadFile(cfg.operatorList)
	if problems := run(update); len(problems) < 2 || !strings.Contains(problems[len(problems)-1].Error(), "not written") {
		t.Errorf("-update with a broken rule: problems = %v, want the rule's error and a refusal", problems)
	}
	if after, _ := os.ReadFile(cfg.operatorList); string(after) != string(before) {
		t.Errorf("-update with a broken rule rewrote the list")
	}
}
