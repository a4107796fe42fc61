package main

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strings"
)

// dashboard is the part of a Grafana dashboard that holds queries.
type dashboard struct {
	Panels     []panel `json:"panels"`
	Templating struct {
		List []variable `json:"list"`
	} `json:"templating"`
}

type panel struct {
	Title   string   `json:"title"`
	Targets []target `json:"targets"`
	// Panels are those of a collapsed row.
	Panels []panel `json:"panels"`
}

type target struct {
	RefID string `json:"refId"`
	Expr  string `json:"expr"`
}

// variable is a template variable. Query is a string in older dashboards
// and {"query": "..."} in newer ones.
type variable struct {
	Name  string          `json:"name"`
	Type  string          `json:"type"`
	Query json.RawMessage `json:"query"`
}

// dashboardQueries returns every panel query and every query variable's
// metric selector of the Grafana dashboard at path, with Grafana's
// variables replaced so that the PromQL parser can read them.
func dashboardQueries(path string) ([]query, []error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, []error{fmt.Errorf("reading the dashboard: %w", err)}
	}
	var d dashboard
	if err := json.Unmarshal(data, &d); err != nil {
		return nil, []error{fmt.Errorf("%s: %w", path, err)}
	}
	var queries []query
	var problems []error
	var walk func(panels []panel)
	walk = func(panels []panel) {
		for _, p := range panels {
			for _, t := range p.Targets {
				where := fmt.Sprintf("%s: panel %q, query %s", path, p.Title, t.RefID)
				if t.Expr == "" {
					problems = append(problems, fmt.Errorf("%s: no PromQL expression", where))
					continue
				}
				queries = append(queries, query{where: where, expr: substituteVariables(t.Expr)})
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)

	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		where := fmt.Sprintf("%s: variable %q", path, v.Name)
		selector, err := variableSelector(v.Query)
		if err != nil {
			problems = append(problems, fmt.Errorf("%s: %w", where, err))
			continue
		}
		queries = append(queries, query{where: where, expr: substituteVariables(selector)})
	}
	return queries, problems
}

// labelValues matches label_values(<selector>, <label>), the one form of
// variable query whose metric can be checked.
var labelValues = regexp.MustCompile(`^\s*label_values\((.+),\s*\w+\s*\)\s*$`)

// variableSelector returns the metric selector of a query variable.
// Other forms are refused rather than skipped: a query nobody checks could
// name any metric.
func variableSelector(raw json.RawMessage) (string, error) {
	var text string
	if err := json.Unmarshal(raw, &text); err != nil {
		var object struct {
			Query string `json:"query"`
		}
		if err := json.Unmarshal(raw, &object); err != nil {
			return "", fmt.Errorf("query is neither a string nor an object with a query: %w", err)
		}
		text = object.Query
	}
	m := labelValues.FindStringSubmatch(text)
	if m == nil {
		return "", fmt.Errorf("cannot check %q: only label_values(<selector>, <label>) is supported", text)
	}
	return m[1], nil
}

// grafanaVariable matches what Grafana replaces in a query before
// Prometheus sees it: $name, ${name}, ${name:format} and [[name]].
var grafanaVariable = regexp.MustCompile(`\$\{\w+(?::\w+)?\}|\$\w+|\[\[\w+\]\]`)

// substituteVariables replaces Grafana's interval variables with a
// duration and every other variable with a plain word. The word parses
// inside a label value, where variables belong; anywhere else (a range, a
// metric name) it makes the query fail to parse or name an unknown
// metric, either of which is reported.
func substituteVariables(expr string) string {
	return grafanaVariable.ReplaceAllStringFunc(expr, func(v string) string {
		name, _, _ := strings.Cut(strings.Trim(v, "${}[]"), ":")
		switch name {
		case "__rate_interval", "__interval", "__range":
			return "5m"
		}
		return "variable"
	})
}
