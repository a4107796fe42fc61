//go:build integration

// Package faults injects one fault at a time into the operator binary's
// world and checks that it still converges, loses nothing and touches
// nothing it does not own: a SIGKILL in the middle of a thousand syncs, its
// RBAC taken away, a second operator on the same objects, the apiserver
// stopped (and etcd compacted, so that every informer relists), namespaces
// deleted under it, admission refusing a thousand Memcacheds at once,
// hostile Secrets and ConfigMaps as large as the apiserver stores, and
// hostile clients of its conversion webhook. docs/reliability.md records
// the figures the tests log.
//
// Tests that stop the apiserver, revoke the RBAC every operator of the
// package shares, take the CRD's conversion from the package's webhook or
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
	"context"
	"testing"

	clientset "github.com/kubelite/memcached-operator/pkg/generated/clientset/versioned"
	"github.com/kubelite/memcached-operator/test/integration/framework"
)

func TestMain(m *testing.M) {
	framework.Main(m, framework.Config{})
}

// releaseAtEnd has the test's cleanup release the Memcacheds of namespaces
// (framework.ReleaseMemcacheds) through mcs, a client without a
// client-side limit, before framework.DeleteNamespace finds them: for a
// thousand Memcacheds whose finalizers are left to remove by hand, the
// admin client's 5 QPS would take minutes. Call it after creating the
// namespaces.
func releaseAtEnd(t *testing.T, mcs clientset.Interface, namespaces ...string) {
	t.Helper()
	t.Cleanup(func() {
		for _, ns := range namespaces {
			if err := framework.ReleaseMemcacheds(context.Background(), mcs, ns); err != nil {
				t.Error(err)
			}
		}
	})
}
