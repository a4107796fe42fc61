package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/prometheus/prometheus/promql/parser"
)

// query is one PromQL expression and where it was found.
type query struct {
	where string
	expr  string
}

// run checks cfg and returns every problem found, not just the first, so
// that one run shows all that needs fixing.
func run(cfg config) []error {
	p := parser.NewParser(parser.Options{})

	var queries []query
	rules, problems := ruleQueries(cfg.rules, p)
	queries = append(queries, rules...)
	panels, errs := dashboardQueries(cfg.dashboard)
	queries = append(queries, panels...)
	problems = append(problems, errs...)

	exporter, err := readNames(cfg.exporterList)
	if err != nil {
		return append(problems, err)
	}
	operator, errs := sortNames(p, queries, exporter, cfg.exporterList)
	problems = append(problems, errs...)

	want := renderOperatorList(operator)
	if cfg.update {
		// A list written from rules that do not parse would bless
		// whatever happened to be readable.
		if len(problems) > 0 {
			return append(problems, fmt.Errorf("%s not written: fix the problems above first", cfg.operatorList))
		}
		if err := os.WriteFile(cfg.operatorList, want, 0o644); err != nil {
			return []error{fmt.Errorf("writing the operator metric list: %w", err)}
		}
		return nil
	}
	got, err := os.ReadFile(cfg.operatorList)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return append(problems, fmt.Errorf("reading the operator metric list: %w", err))
	}
	if string(got) != string(want) {
		problems = append(problems, staleListError(cfg.operatorList, got, operator))
	}
	return problems
}
