//go:build integration

// Package faults injects one fault at a time into the operator binary's
// world and checks that it still converges, loses nothing and touches
// nothing it does not own: its RBAC taken away, a second operator on the
// same objects, namespaces deleted under it, admission refusing a hundred
// Memcacheds at once, hostile Secrets and ConfigMaps as large as the
// apiserver stores, and hostile clients of its conversion webhook.
// docs/reliability.md records the figures the tests log. The apiserver's
// outages and the crash among hundreds of syncs have packages of their
// own (test/integration/apiserver and crash), whose faults no other test
// could run beside.
//
// Tests that revoke the RBAC every operator of the package shares, take the CRD's conversion from the package's webhook or
// flood the machine do not run in parallel: Go runs them one at a time
// before it resumes any parallel test, so no other test sees the fault or
// shares the cores they measure. Each says which of these it is.
//
// Faults injected into the operator's own client transport, such as a
// write that loses a race at a chosen instant or a panic inside a sync,
// cannot be shown from outside the process; those tests are in the
// repository root, with an in-process operator.
package faults

import (
	"testing"

	"github.com/kubelite/memcached-operator/test/integration/framework"
)

func TestMain(m *testing.M) {
	framework.Main(m, framework.Config{})
}
