//go:build integration

// Package policy tests the admission policies of artifacts/policy on a real
// apiserver: their verdicts on Memcached writes through both API versions,
// and the parameters that decide them.
package policy

import (
	"testing"

	"github.com/kubelite/memcached-operator/test/integration/framework"
)

func TestMain(m *testing.M) {
	framework.Main(m, framework.Config{})
}
