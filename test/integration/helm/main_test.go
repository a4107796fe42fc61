//go:build integration

// Package helm installs charts/memcached-operator with helm, as its users
// do, on a control plane without artifacts/, and runs the operator binary
// with what each release installed.
package helm

import (
	"testing"

	"github.com/kubelite/memcached-operator/test/integration/framework"
)

func TestMain(m *testing.M) {
	framework.Main(m, framework.Config{Bare: true})
}
