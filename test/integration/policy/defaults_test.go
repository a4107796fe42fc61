//go:build integration

package policy

import (
	"context"
	"fmt"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"

	"github.com/kubelite/memcached-operator/test/integration/framework"
)

// defaultsName names the MutatingAdmissionPolicy of
// artifacts/policy/defaults, its binding and its ConfigMap, which is in
// policyNamespace; defaultsLabel is the namespace label its binding selects.
const (
	defaultsName  = "memcached-operator-defaults"
	defaultsLabel = "cache.kubelite.io/platform-defaults"
)

// platformImage is the operator's default release from a platform's
// registry, which the tests give as the default image.
const platformImage = "registry.example.com/library/" + cachev1beta1.DefaultImage

// TestIntegrationPlatformDefaults installs artifacts/policy/defaults as
// shipped on the real apiserver and checks what it stores: the defaults in
// a labelled namespace and none elsewhere, a Memcached's own values kept,
// defaults applied once unless enforced, and the validating policy of
// artifacts/policy judging the result.
func TestIntegrationPlatformDefaults(t *testing.T) {
	ctx := context.Background()
	installDefaults(t)
	tenant := framework.NewNamespace(t)
	if _, err := framework.Kube().CoreV1().Namespaces().Patch(ctx, tenant, types.MergePatchType,
		[]byte(fmt.Sprintf(`{"metadata":{"labels":{%q:"enabled"}}}`, defaultsLabel)), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	other := framework.NewNamespace(t)

	setDefaults(t, tenant, map[string]string{
		"networkPolicy":     "true",
		"priorityClassName": "platform-standard",
		"image":             platformImage,
	})

	t.Run("a labelled namespace gets the defaults", func(t *testing.T) {
		for _, tt := range []struct {
			name   string
			create func(name string) error
		}{
			{name: "v1beta1", create: createBeta(tenant, nil)},
			{name: "v1alpha1", create: createAlpha(tenant, nil)},
			{name: "no spec at all", create: func(name string) error { return createWithoutSpec(tenant, name) }},
		} {
			t.Run(tt.name, func(t *testing.T) {
				name := "defaulted-" + strings.ReplaceAll(tt.name, " ", "-")
				if err := tt.create(name); err != nil {
					t.Fatal(err)
				}
				checkStored(t, tenant, name, stored{networkPolicy: true, priorityClassName: "platform-standard", image: platformImage})
			})
		}
	})

	t.Run("another namespace gets none", func(t *testing.T) {
		if err := createBeta(other, nil)("plain"); err != nil {
			t.Fatal(err)
		}
		checkStored(t, other, "plain", stored{image: cachev1beta1.DefaultImage})
	})

	t.Run("what a Memcached sets itself is kept", func(t *testing.T) {
		if err := createBeta(tenant, func(s *cachev1beta1.MemcachedSpec) {
			s.NetworkPolicy = &cachev1beta1.NetworkPolicy{Clients: []cachev1beta1.NetworkPolicyPeer{{
				NamespaceSelector: &cachev1beta1.LabelSelector{MatchLabels: map[string]string{"team": "web"}},
			}}}
			framework.PodOf(s).PriorityClassName = "team-batch"
			s.Image = "memcached:1.6.38"
		})("own"); err != nil {
			t.Fatal(err)
		}
		mc := checkStored(t, tenant, "own", stored{networkPolicy: true, priorityClassName: "team-batch", image: "memcached:1.6.38"})
		if mc.Spec.NetworkPolicy != nil && len(mc.Spec.NetworkPolicy.Clients) != 1 {
			t.Errorf("stored networkPolicy %+v, want the Memcached's own, with its one client rule", *mc.Spec.NetworkPolicy)
		}
	})

	// Removes every default from a Memcached that got them; the CRD writes
	// its own default image back.
	const removeAll = `{"spec":{"networkPolicy":null,"pod":{"priorityClassName":null},"image":null}}`

	t.Run("an update does not apply a removed default again", func(t *testing.T) {
		if err := createBeta(tenant, nil)("removed"); err != nil {
			t.Fatal(err)
		}
		if err := patchMerge(ctx, tenant, "removed", removeAll); err != nil {
			t.Fatal(err)
		}
		checkStored(t, tenant, "removed", stored{image: cachev1beta1.DefaultImage})
		if err := patchMerge(ctx, tenant, "removed", `{"spec":{"replicas":2}}`); err != nil {
			t.Fatal(err)
		}
		checkStored(t, tenant, "removed", stored{image: cachev1beta1.DefaultImage})
	})

	t.Run("enforced defaults", func(t *testing.T) {
		if err := createBeta(tenant, nil)("before-enforcing"); err != nil {
			t.Fatal(err)
		}
		if err := patchMerge(ctx, tenant, "before-enforcing", removeAll); err != nil {
			t.Fatal(err)
		}
		setDefaults(t, tenant, map[string]string{
			"networkPolicy":     "true",
			"priorityClassName": "platform-enforced",
			"image":             platformImage,
			"enforced":          "networkPolicy,\n priorityClassName, image",
		})

		t.Run("override refused on create", func(t *testing.T) {
			if err := createBeta(tenant, func(s *cachev1beta1.MemcachedSpec) {
				framework.PodOf(s).PriorityClassName = "team-batch"
				s.Image = "memcached:1.6.38"
			})("overridden"); err != nil {
				t.Fatal(err)
			}
			checkStored(t, tenant, "overridden", stored{networkPolicy: true, priorityClassName: "platform-enforced", image: platformImage})
		})
		t.Run("an update that leaves the spec alone changes nothing", func(t *testing.T) {
			if err := patchMerge(ctx, tenant, "before-enforcing", `{"metadata":{"labels":{"team":"a"}}}`); err != nil {
				t.Fatal(err)
			}
			checkStored(t, tenant, "before-enforcing", stored{image: cachev1beta1.DefaultImage})
		})
		t.Run("an update of the spec applies them again", func(t *testing.T) {
			if err := patchMerge(ctx, tenant, "before-enforcing", `{"spec":{"replicas":2}}`); err != nil {
				t.Fatal(err)
			}
			checkStored(t, tenant, "before-enforcing", stored{networkPolicy: true, priorityClassName: "platform-enforced", image: platformImage})
		})
		t.Run("removing them is undone", func(t *testing.T) {
			if err := patchMerge(ctx, tenant, "before-enforcing", removeAll); err != nil {
				t.Fatal(err)
			}
			checkStored(t, tenant, "before-enforcing", stored{networkPolicy: true, priorityClassName: "platform-enforced", image: platformImage})
		})
	})

	t.Run("without its ConfigMap every write is refused", func(t *testing.T) {
		// A label only, which the policy would never mutate: the apiserver
		// looks the ConfigMap up first. A dry run stores nothing.
		label := func(ctx context.Context) error {
			_, err := framework.Memcacheds().CacheV1beta1().Memcacheds(tenant).Patch(ctx, "own", types.MergePatchType,
				[]byte(`{"metadata":{"labels":{"probe":"yes"}}}`), metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}})
			return err
		}
		if err := framework.Kube().CoreV1().ConfigMaps(policyNamespace).Delete(ctx, defaultsName, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		framework.Eventually(t, policyPropagation, "a label change is refused for want of the ConfigMap", func(ctx context.Context) (bool, string) {
			err := label(ctx)
			return err != nil && strings.Contains(err.Error(), "no params found"), fmt.Sprint(err)
		})
		if err := framework.Cluster().ApplyFiles(ctx, framework.Path("artifacts/policy/defaults/params.yaml")); err != nil {
			t.Fatal(err)
		}
		framework.Eventually(t, policyPropagation, "a label change is admitted with the ConfigMap back", func(ctx context.Context) (bool, string) {
			err := label(ctx)
			return err == nil, fmt.Sprint(err)
		})
	})

	t.Run("the validating policy judges the result", func(t *testing.T) {
		// Nothing enforced, so that a Memcached's own image reaches the
		// validating policy.
		setDefaults(t, tenant, map[string]string{"priorityClassName": "platform-validated", "image": platformImage})
		installPolicy(t, tenant)
		setPolicyData(t, map[string]string{
			"allowedImagePrefixes":     "registry.example.com",
			"forbiddenTolerationKeys":  "",
			"forbiddenPriorityClasses": "platform-forbidden",
		})
		t.Cleanup(func() { restorePolicyData(t, tenant) })
		// The shipped limits refused registry.example.com; this waits for
		// the edited ones.
		waitVerdict(t, tenant, func(s *cachev1beta1.MemcachedSpec) { s.Image = "registry.example.com/x:1" }, "")

		for i, tt := range []struct {
			name   string
			mutate func(*cachev1beta1.MemcachedSpec)
			want   string
		}{
			{
				// memcached:1.6.45 alone is refused by these limits: the
				// default image makes it valid.
				name: "the default image makes it valid",
			},
			{
				name:   "its own image from elsewhere is kept, and refused",
				mutate: func(s *cachev1beta1.MemcachedSpec) { s.Image = "memcached:1.6.38" },
				want:   "spec.image: memcached:1.6.38 (docker.io/library/memcached:1.6.38) not allowed",
			},
			{
				name:   "its own forbidden priority class is kept, and refused",
				mutate: func(s *cachev1beta1.MemcachedSpec) { framework.PodOf(s).PriorityClassName = "platform-forbidden" },
				want:   "spec.pod.priorityClassName: platform-forbidden not allowed",
			},
		} {
			t.Run(tt.name, func(t *testing.T) {
				checkVerdict(t, createBeta(tenant, tt.mutate)(fmt.Sprintf("validated-%d", i)), tt.want)
			})
		}

		// A default the validating policy forbids refuses every create
		// that takes it: the platform's mistake is loud, not stored.
		setConfigMapData(t, defaultsName, map[string]string{"priorityClassName": "platform-forbidden"})
		waitVerdict(t, tenant, func(s *cachev1beta1.MemcachedSpec) { s.Image = platformImage }, "spec.pod.priorityClassName: platform-forbidden not allowed")
	})
}

// stored is what the defaults decide in a stored Memcached's spec.
type stored struct {
	networkPolicy     bool
	priorityClassName string
	image             string
}

// checkStored reads Memcached ns/name and fails the test unless its spec
// holds what want says. It returns the Memcached.
func checkStored(t *testing.T, ns, name string, want stored) *cachev1beta1.Memcached {
	t.Helper()
	mc, err := framework.GetMemcached(context.Background(), ns, name)
	if err != nil {
		t.Fatal(err)
	}
	got := stored{networkPolicy: mc.Spec.NetworkPolicy != nil, image: mc.Spec.Image}
	if mc.Spec.Pod != nil {
		got.priorityClassName = mc.Spec.Pod.PriorityClassName
	}
	if got != want {
		t.Errorf("stored %+v, want %+v", got, want)
	}
	return mc
}

// installDefaults applies artifacts/policy/defaults as shipped and deletes
// its objects when the test ends.
func installDefaults(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	t.Cleanup(func() {
		admission := framework.Kube().AdmissionregistrationV1()
		for what, err := range map[string]error{
			"the binding":   admission.MutatingAdmissionPolicyBindings().Delete(ctx, defaultsName, metav1.DeleteOptions{}),
			"the policy":    admission.MutatingAdmissionPolicies().Delete(ctx, defaultsName, metav1.DeleteOptions{}),
			"the ConfigMap": framework.Kube().CoreV1().ConfigMaps(policyNamespace).Delete(ctx, defaultsName, metav1.DeleteOptions{}),
		} {
			if err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("deleting %s: %v", what, err)
			}
		}
	})
	if err := framework.Cluster().ApplyFiles(ctx,
		framework.Path("artifacts/policy/defaults/params.yaml"),
		framework.Path("artifacts/policy/defaults/policy.yaml"),
		framework.Path("artifacts/policy/defaults/binding.yaml")); err != nil {
		t.Fatalf("the apiserver refused artifacts/policy/defaults: %v", err)
	}
}

// setDefaults replaces the data of the defaults' ConfigMap, then waits
// until a dry-run create in namespace ns shows the new priority class
// default: the apiserver learns of the edit through an informer. Each call
// names a priority class of its own, which is what tells the edits apart.
func setDefaults(t *testing.T, ns string, data map[string]string) {
	t.Helper()
	setConfigMapData(t, defaultsName, data)
	want := data["priorityClassName"]
	framework.Eventually(t, policyPropagation, "the defaults give priority class "+want, func(ctx context.Context) (bool, string) {
		probe := &cachev1beta1.Memcached{ObjectMeta: metav1.ObjectMeta{Name: "probe"}}
		got, err := framework.Memcacheds().CacheV1beta1().Memcacheds(ns).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			return false, err.Error()
		}
		if got.Spec.Pod == nil {
			return false, "no spec.pod"
		}
		return got.Spec.Pod.PriorityClassName == want, "priorityClassName " + got.Spec.Pod.PriorityClassName
	})
}
