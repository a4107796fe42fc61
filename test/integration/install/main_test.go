//go:build integration

// Package install tests the operator as it is installed and run: leader
// election between replicas, its listeners (/healthz, /readyz and /metrics
// behind delegated authorization), the namespaced install, the Helm chart,
// the shipped policies, monitoring rules and NetworkPolicy.
package install

import (
	"testing"

	"github.com/kubelite/memcached-operator/test/integration/framework"
)

func TestMain(m *testing.M) {
	framework.Main(m, framework.Config{})
}
