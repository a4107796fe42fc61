//go:build tools

// Package tools only records Helm in go.mod; nothing imports it.
package tools

import (
	_ "helm.sh/helm/v4/cmd/helm"
)
