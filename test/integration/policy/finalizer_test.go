//go:build integration

package policy

import (
	"context"
	"slices"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cachev1alpha1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1alpha1"
	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
	"github.com/kubelite/memcached-operator/pkg/localcluster"
	"github.com/kubelite/memcached-operator/test/integration/framework"
)

// finalizerPolicy is the MutatingAdmissionPolicy that artifacts/ installs
// with the operator.
const finalizerPolicy = "artifacts/deploy/finalizer_policy.yaml"

// TestIntegrationFinalizerPolicy installs the finalizer policy and checks
// that a Memcached is stored with the operator's finalizer, through either
// version, beside a user's own; and that the operator, finding it there,
// converges the Memcached without a write to the Memcached other than its
// status.
func TestIntegrationFinalizerPolicy(t *testing.T) {
	ctx := context.Background()
	if err := framework.Cluster().ApplyFiles(ctx, framework.Path(finalizerPolicy)); err != nil {
		t.Fatalf("the apiserver refused %s: %v", finalizerPolicy, err)
	}
	// The policy applies to every namespace, so the package's other tests
	// run after it is gone: they create Memcacheds without an operator.
	t.Cleanup(func() {
		admission := framework.Kube().AdmissionregistrationV1()
		for _, err := range []error{
			admission.MutatingAdmissionPolicyBindings().Delete(ctx, "memcached-operator-children-finalizer", metav1.DeleteOptions{}),
			admission.MutatingAdmissionPolicies().Delete(ctx, "memcached-operator-children-finalizer", metav1.DeleteOptions{}),
		} {
			if err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("removing the finalizer policy: %v", err)
			}
		}
	})
	ns := framework.NewNamespace(t)
	mcs := framework.Memcacheds().CacheV1beta1().Memcacheds(ns)
	// The apiserver loads policies through an informer: wait for the
	// first create that shows it, with a dry run, which stores nothing.
	framework.Eventually(t, framework.WaitLong, "the policy takes effect", func(ctx context.Context) (bool, string) {
		probe := &cachev1beta1.Memcached{ObjectMeta: metav1.ObjectMeta{Name: "probe"}}
		got, err := mcs.Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			return false, err.Error()
		}
		return slices.Contains(got.Finalizers, cachev1beta1.ChildrenFinalizer), "finalizers " + joined(got.Finalizers)
	})

	t.Run("v1beta1, beside the user's own finalizer", func(t *testing.T) {
		mc := &cachev1beta1.Memcached{ObjectMeta: metav1.ObjectMeta{Name: "beta", Finalizers: []string{"example.com/keep"}}}
		got, err := mcs.Create(ctx, mc, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if want := []string{"example.com/keep", cachev1beta1.ChildrenFinalizer}; !slices.Equal(got.Finalizers, want) {
			t.Errorf("stored with finalizers %s, want %s", joined(got.Finalizers), joined(want))
		}
		removeFinalizer(t, ns, "beta", "example.com/keep")
	})
	t.Run("v1alpha1", func(t *testing.T) {
		mc := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Name: "alpha"}}
		got, err := framework.Memcacheds().CacheV1alpha1().Memcacheds(ns).Create(ctx, mc, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if want := []string{cachev1beta1.ChildrenFinalizer}; !slices.Equal(got.Finalizers, want) {
			t.Errorf("stored with finalizers %s, want %s", joined(got.Finalizers), joined(want))
		}
	})
	t.Run("v1beta1, with the finalizer already there", func(t *testing.T) {
		mc := &cachev1beta1.Memcached{ObjectMeta: metav1.ObjectMeta{Name: "already", Finalizers: []string{cachev1beta1.ChildrenFinalizer}}}
		got, err := mcs.Create(ctx, mc, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if want := []string{cachev1beta1.ChildrenFinalizer}; !slices.Equal(got.Finalizers, want) {
			t.Errorf("stored with finalizers %s, want %s: not added twice", joined(got.Finalizers), joined(want))
		}
	})
	t.Run("the operator sends no finalizer patch", func(t *testing.T) {
		op := framework.StartOperator(t, ns)
		framework.CreateMemcached(t, ns, "cache", nil)
		framework.WaitConverged(t, ns, "cache", metav1.ConditionTrue)
		writes := op.Requests(t, func(e localcluster.AuditEvent) bool {
			return e.Write() && e.Resource() == "memcacheds" && e.Name() == "cache"
		})
		if len(writes) > 0 {
			t.Errorf("the operator wrote the Memcached, not only its status: %v", writes)
		}
	})
}

// removeFinalizer takes one finalizer off a Memcached, so that the
// namespace's cleanup can delete it.
func removeFinalizer(t *testing.T, ns, name, finalizer string) {
	t.Helper()
	mcs := framework.Memcacheds().CacheV1beta1().Memcacheds(ns)
	mc, err := mcs.Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mc.Finalizers = slices.DeleteFunc(mc.Finalizers, func(f string) bool { return f == finalizer })
	if _, err := mcs.Update(context.Background(), mc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func joined(s []string) string { return "[" + strings.Join(s, " ") + "]" }
