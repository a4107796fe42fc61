package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"slices"
	"strings"
)

// readNames reads a list of metric names, one per line; blank lines and
// lines that start with # are skipped.
func readNames(path string) (map[string]bool, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading a metric name list: %w", err)
	}
	return parseNames(data), nil
}

func parseNames(data []byte) map[string]bool {
	names := map[string]bool{}
	s := bufio.NewScanner(bytes.NewReader(data))
	for s.Scan() {
		line := strings.TrimSpace(s.Text())
		if line != "" && !strings.HasPrefix(line, "#") {
			names[line] = true
		}
	}
	return names
}

// operatorListHeader heads hack/monitoring/operator-metrics.txt.
const operatorListHeader = `# Metric names of the operator that artifacts/monitoring uses, one per
# line, as PromQL selects them (a histogram's _bucket, _sum or _count).
# Written by "make update-monitoring" from the rules and the dashboard;
# "make verify" fails when it is out of date, and
# TestIntegrationMonitoring fails when a running operator does not serve
# one of them.
`

// renderOperatorList is the content of the operator list for names.
func renderOperatorList(names []string) []byte {
	var b bytes.Buffer
	b.WriteString(operatorListHeader)
	for _, n := range names {
		b.WriteString(n + "\n")
	}
	return b.Bytes()
}

// staleListError says how the checked-in operator list differs from the
// names in use.
func staleListError(path string, got []byte, want []string) error {
	listed := parseNames(got)
	var missing, unused []string
	for _, n := range want {
		if !listed[n] {
			missing = append(missing, n)
		}
		delete(listed, n)
	}
	unused = sortedKeys(listed)
	return fmt.Errorf("%s is out of date (run make update-monitoring); used but not listed: %v; listed but not used: %v", path, missing, unused)
}

func sortedKeys(set map[string]bool) []string {
	keys := make([]string, 0, len(set))
	for k := range set {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
