//go:build integration

// Package crash SIGKILLs the operator binary in the middle of hundreds of
// syncs and starts it again: every Memcached must converge, with no child
// lost, doubled or misread as someone else's, and nothing done rewritten.
//
// It has a control plane of its own because its hundreds of Memcacheds
// and their children would slow every test beside it, and their
// deletion, left to the garbage collector, would go on under them.
package crash

import (
	"testing"

	"github.com/kubelite/memcached-operator/test/integration/framework"
)

func TestMain(m *testing.M) {
	framework.Main(m, framework.Config{})
}
