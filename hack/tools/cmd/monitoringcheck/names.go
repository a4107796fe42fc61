package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
)

// scrapeSeries are written by Prometheus itself for every target; neither
// the exporter nor the operator serves them.
var scrapeSeries = map[string]bool{"up": true}

// exporterSide reports whether name belongs to the memcached exporter.
// All of the exporter's names start with memcached_; of the operator's,
// only those under memcached_operator_ do.
func exporterSide(name string) bool {
	return strings.HasPrefix(name, "memcached_") && !strings.HasPrefix(name, "memcached_operator_")
}

// selectedNames returns the metric name of every selector in expr as
// written, so a histogram's name keeps its _bucket, _sum or _count: that
// is the name a scrape shows, which is what the name lists hold. A
// selector without one fixed name ({__name__=~"..."}) is an error, since
// nothing could check it.
func selectedNames(p parser.Parser, expr string) ([]string, error) {
	e, err := p.ParseExpr(expr)
	if err != nil {
		return nil, err
	}
	var names []string
	var errs []error
	parser.Inspect(e, func(node parser.Node, _ []parser.Node) error {
		vs, ok := node.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		for _, m := range vs.LabelMatchers {
			if m.Name == model.MetricNameLabel && m.Type == labels.MatchEqual {
				names = append(names, m.Value)
				return nil
			}
		}
		errs = append(errs, fmt.Errorf("%s has no fixed metric name, so it cannot be checked", vs))
		return nil
	})
	return names, errors.Join(errs...)
}

// sortNames parses every query and sorts the names they select. An
// exporter name must be in exporter, read from exporterList; the other
// names are the operator's, returned sorted and without repeats.
func sortNames(p parser.Parser, queries []query, exporter map[string]bool, exporterList string) ([]string, []error) {
	operator := map[string]bool{}
	var problems []error
	for _, q := range queries {
		names, err := selectedNames(p, q.expr)
		if err != nil {
			problems = append(problems, fmt.Errorf("%s: %w", q.where, err))
		}
		for _, name := range names {
			switch {
			case scrapeSeries[name]:
			case exporterSide(name):
				if !exporter[name] {
					problems = append(problems, fmt.Errorf("%s: %s is not a metric of the memcached exporter (%s)", q.where, name, exporterList))
				}
			default:
				operator[name] = true
			}
		}
	}
	return sortedKeys(operator), problems
}
