package framework

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	clientset "github.com/kubelite/memcached-operator/pkg/generated/clientset/versioned"
)

// namespaces counts the namespaces NewNamespace made: the package's
// control plane is its own, so a count makes every name unique in it.
var namespaces atomic.Int64

// NewNamespace creates a namespace for one test, named after it, and deletes
// it when the test ends (see DeleteNamespace).
func NewNamespace(t *testing.T) string {
	t.Helper()
	name := namespaceName(t.Name(), namespaces.Add(1))
	ctx := context.Background()
	if _, err := env.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating namespace: %v", err)
	}
	t.Cleanup(func() { DeleteNamespace(t, name) })
	return name
}

// namespaceName makes a DNS-1123 label of a test's name and a sequence
// number: subtests' names may hold any character, and a long one is cut.
func namespaceName(test string, seq int64) string {
	var b strings.Builder
	for _, r := range strings.ToLower(test) {
		switch {
		case 'a' <= r && r <= 'z', '0' <= r && r <= '9':
			b.WriteRune(r)
		case !strings.HasSuffix(b.String(), "-"):
			b.WriteByte('-')
		}
	}
	prefix := b.String()
	if len(prefix) > 50 {
		prefix = prefix[:50]
	}
	return fmt.Sprintf("%s-%d", strings.Trim(prefix, "-"), seq)
}

// DeleteNamespace deletes the namespace's Memcacheds, releases them
// (ReleaseMemcacheds) and waits until they are gone, then deletes the
// namespace without waiting: kube-controller-manager starts on a deleted
// namespace only after a fixed 5-second grace period.
func DeleteNamespace(t *testing.T, name string) {
	t.Helper()
	ctx := context.Background()
	// Also when the wait fails: a namespace left behind would hold its
	// objects until the package's control plane stops.
	defer func() {
		if err := env.kube.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Errorf("deleting namespace %s: %v", name, err)
		}
	}()
	if err := ReleaseMemcacheds(ctx, env.mc, name); err != nil {
		t.Error(err)
		return
	}
	mcs := env.mc.CacheV1beta1().Memcacheds(name)
	Eventually(t, 2*time.Minute, "the Memcacheds of namespace "+name+" are deleted", func(ctx context.Context) (bool, string) {
		list, err := mcs.List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		var left []string
		for _, mc := range list.Items {
			left = append(left, fmt.Sprintf("%s finalizers=%v", mc.Name, mc.Finalizers))
		}
		return len(left) == 0, fmt.Sprintf("left: %v", left)
	})
}

// ReleaseMemcacheds deletes every Memcached in the namespace and removes
// their finalizers by hand, with the patch docs/operations.md gives for an
// uninstalled operator: a test's operator has often stopped before its
// cleanup runs. One still running may finalize a Memcached first, and the
// patch then finds it gone.
func ReleaseMemcacheds(ctx context.Context, client clientset.Interface, ns string) error {
	mcs := client.CacheV1beta1().Memcacheds(ns)
	if err := mcs.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		return fmt.Errorf("deleting the Memcacheds of namespace %s: %w", ns, err)
	}
	list, err := mcs.List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing the Memcacheds of namespace %s: %w", ns, err)
	}
	for _, mc := range list.Items {
		if len(mc.Finalizers) == 0 {
			continue
		}
		_, err := mcs.Patch(ctx, mc.Name, types.JSONPatchType, []byte(`[{"op":"remove","path":"/metadata/finalizers"}]`), metav1.PatchOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("removing the finalizers of Memcached %s/%s: %w", ns, mc.Name, err)
		}
	}
	return nil
}

// ReleaseAtEnd has the test's cleanup release the Memcacheds of
// namespaces (ReleaseMemcacheds) through client, one without a client-side
// limit (Unthrottled), before DeleteNamespace finds them: for hundreds of
// Memcacheds whose finalizers are left to remove by hand, the admin
// client's 5 QPS would take minutes. Call it after creating the
// namespaces, so that it runs before their own cleanup.
func ReleaseAtEnd(t *testing.T, client clientset.Interface, namespaces ...string) {
	t.Helper()
	t.Cleanup(func() {
		for _, ns := range namespaces {
			if err := ReleaseMemcacheds(context.Background(), client, ns); err != nil {
				t.Error(err)
			}
		}
	})
}

// InNamespace selects the namespace ns by its name label, for a binding or
// a webhook that must judge only one test's objects.
func InNamespace(ns string) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}}
}
