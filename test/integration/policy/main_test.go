//go:build integration

// Package policy tests the admission policies the operator ships on a real
// apiserver: the validating policy of artifacts/policy, its verdicts on
// Memcached writes through both API versions and the parameters that
// decide them; and the finalizer policy of artifacts/deploy.
package policy

import (
	"testing"

	"github.com/kubelite/memcached-operator/test/integration/framework"
)

func TestMain(m *testing.M) {
	framework.Main(m, framework.Config{})
}
