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
	"fmt"
	"net"
	"net/http"
	"strconv"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
	clientset "github.com/kubelite/memcached-operator/pkg/generated/clientset/versioned"
	"github.com/kubelite/memcached-operator/pkg/localcluster"
	"github.com/kubelite/memcached-operator/test/integration/framework"
)

func TestMain(m *testing.M) {
	framework.Main(m, framework.Config{})
}

// condition returns the Memcached's condition of type condType, or an
// empty one.
func condition(mc *cachev1beta1.Memcached, condType string) metav1.Condition {
	if c := meta.FindStatusCondition(mc.Status.Conditions, condType); c != nil {
		return *c
	}
	return metav1.Condition{}
}

// patchSpec merge-patches the Memcached; a merge patch carries no
// resourceVersion, so the operator's status writes cannot conflict with it.
func patchSpec(t *testing.T, ns, name, patch string) {
	t.Helper()
	if _, err := framework.Memcacheds().CacheV1beta1().Memcacheds(ns).Patch(context.Background(), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatalf("patching Memcached %s/%s: %v", ns, name, err)
	}
}

// unthrottled returns admin clients without a client-side rate limit, for
// tests that drive the cluster harder than the default 5 QPS allows.
func unthrottled() (kubernetes.Interface, clientset.Interface) {
	cfg := rest.CopyConfig(framework.Cluster().Config)
	cfg.QPS, cfg.Burst = -1, 0
	return kubernetes.NewForConfigOrDie(cfg), clientset.NewForConfigOrDie(cfg)
}

// freeAddr picks a port on the loopback address for a listener the
// operator binds, when the test must know it before the operator starts:
// one outside the kernel's ephemeral range, which outgoing connections
// could take before the operator binds it.
func freeAddr(t *testing.T) string {
	t.Helper()
	port, err := localcluster.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
}

// waitReady waits until the operator's /readyz answers 200.
func waitReady(t *testing.T, op *framework.Operator) {
	t.Helper()
	framework.Eventually(t, framework.WaitLong, "readyz", func(context.Context) (bool, string) {
		code, body := op.Get(op.HealthAddr, "/readyz")
		return code == http.StatusOK, fmt.Sprintf("%d %s", code, body)
	})
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
