package main

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"go.yaml.in/yaml/v3"
)

// ruleQueries returns the expression of every rule in the PrometheusRule
// at path. The rule groups go through rulefmt.Parse as Prometheus loads a
// rule file, with unknown fields refused: a misspelt field, a bad
// duration, an expression or an annotation template that does not parse
// is an error. Errors name the file, line and column.
func ruleQueries(path string, p parser.Parser) ([]query, []error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, []error{fmt.Errorf("reading the rules: %w", err)}
	}
	groups, err := ruleGroupsText(data)
	if err != nil {
		return nil, []error{fmt.Errorf("%s: %w", path, err)}
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if _, errs := rulefmt.Parse(groups, false, model.LegacyValidation, p, logger); len(errs) > 0 {
		for i := range errs {
			errs[i] = inFile(path, errs[i])
		}
		return nil, errs
	}

	// rulefmt keeps no positions for valid rules; read them again for
	// the messages about names.
	var doc struct {
		Groups []rulefmt.RuleGroupNode `yaml:"groups"`
	}
	if err := yaml.Unmarshal(groups, &doc); err != nil {
		return nil, []error{fmt.Errorf("%s: %w", path, err)}
	}
	var queries []query
	for _, g := range doc.Groups {
		for _, r := range g.Rules {
			queries = append(queries, query{where: fmt.Sprintf("%s:%d", path, r.Expr.Line), expr: r.Expr.Value})
		}
	}
	return queries, nil
}

// inFile prefixes err with path: "file:12:7: ..." when err starts with a
// position, as rulefmt's validation errors do, else "file: ...".
func inFile(path string, err error) error {
	if msg := err.Error(); msg != "" && msg[0] >= '0' && msg[0] <= '9' {
		return fmt.Errorf("%s:%w", path, err)
	}
	return fmt.Errorf("%s: %w", path, err)
}

// ruleGroupsText turns a PrometheusRule into a Prometheus rule file whose
// lines are where they were: every line outside the block under spec is
// blanked, and the block keeps its indentation (YAML allows an indented
// top-level mapping). So a line and column that rulefmt reports are those
// of the PrometheusRule.
func ruleGroupsText(data []byte) ([]byte, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	if len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, fmt.Errorf("not a single YAML mapping")
	}
	root := doc.Content[0]
	var kind string
	var spec *yaml.Node
	end := 0 // The last line of spec's block; 0 for the end of the file.
	for i := 0; i+1 < len(root.Content); i += 2 {
		switch key, value := root.Content[i], root.Content[i+1]; {
		case key.Value == "kind":
			kind = value.Value
		case key.Value == "spec":
			spec = value
			if i+2 < len(root.Content) {
				end = root.Content[i+2].Line - 1
			}
		}
	}
	if kind != "PrometheusRule" {
		return nil, fmt.Errorf("kind is %q, want PrometheusRule", kind)
	}
	if spec == nil || spec.Kind != yaml.MappingNode || spec.Style&yaml.FlowStyle != 0 {
		return nil, fmt.Errorf("spec is not a block mapping")
	}

	lines := bytes.SplitAfter(data, []byte("\n"))
	if end == 0 {
		end = len(lines)
	}
	var out bytes.Buffer
	for i, line := range lines {
		if n := i + 1; n >= spec.Line && n <= end {
			out.Write(line)
		} else if bytes.HasSuffix(line, []byte("\n")) {
			out.WriteByte('\n')
		}
	}
	return out.Bytes(), nil
}
