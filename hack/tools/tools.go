//go:build tools

// Package tools only records the developer tools in go.mod; nothing imports it.
package tools

import (
	_ "github.com/google/go-containerregistry/cmd/crane"
	_ "honnef.co/go/tools/cmd/staticcheck"
	_ "k8s.io/code-generator"
	_ "sigs.k8s.io/controller-tools/cmd/controller-gen"
)
