//go:build integration

package policy

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"

	cachev1alpha1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1alpha1"
	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
	clientset "github.com/kubelite/memcached-operator/pkg/generated/clientset/versioned"

	"github.com/kubelite/memcached-operator/test/integration/framework"
)

// policyName names the ValidatingAdmissionPolicy, its binding and its
// ConfigMap in artifacts/policy; the ConfigMap is in policyNamespace.
const (
	policyName      = "memcached-pod-policy"
	policyNamespace = "memcached-operator"
)

// Admission configuration takes effect asynchronously: the apiserver
// learns of a new binding, or of an edited ConfigMap, through informers.
// A few seconds is usual; policyPropagation bounds it.
const policyPropagation = 30 * time.Second

// A toleration of the control-plane taint, and one of every taint.
var (
	controlPlaneToleration = corev1.Toleration{Key: "node-role.kubernetes.io/control-plane", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}
	everyTaintToleration   = corev1.Toleration{Operator: corev1.TolerationOpExists}
)

// TestIntegrationPolicy installs artifacts/policy on the real apiserver and
// checks its verdicts on Memcached writes through both versions, and that
// its one ConfigMap decides them. The shipped binding covers every
// namespace; here it is limited to the test's namespace, so that the other
// tests of the suite, which create Memcacheds with all sorts of images, are
// never judged by it.
func TestIntegrationPolicy(t *testing.T) {
	ns := framework.NewNamespace(t)
	installPolicy(t, ns)
	ctx := context.Background()
	beta := framework.Memcacheds().CacheV1beta1().Memcacheds(ns)
	alpha := framework.Memcacheds().CacheV1alpha1().Memcacheds(ns)

	t.Run("verdicts", func(t *testing.T) {
		tests := []struct {
			name string
			// create writes a Memcached with the given name.
			create func(name string) error
			// want is a part of the policy's message, or empty when the
			// write must be admitted.
			want string
		}{
			{
				name:   "default images",
				create: createBeta(ns, func(s *cachev1beta1.MemcachedSpec) { exporterOf(s).Enabled = true }),
			},
			{
				name:   "no spec at all runs the default image",
				create: func(name string) error { return createWithoutSpec(ns, name) },
			},
			{
				name:   "allowed repository, other tag, short name",
				create: createBeta(ns, func(s *cachev1beta1.MemcachedSpec) { s.Image = "memcached:1.6.38" }),
			},
			{
				name: "allowed repository by digest, full name",
				create: createBeta(ns, func(s *cachev1beta1.MemcachedSpec) {
					s.Image = "docker.io/library/memcached@sha256:" + strings.Repeat("ab", 32)
				}),
			},
			{
				name:   "image from another registry",
				create: createBeta(ns, func(s *cachev1beta1.MemcachedSpec) { s.Image = "evil.example.com/memcached:1.6" }),
				want:   "spec.image: evil.example.com/memcached:1.6 not allowed",
			},
			{
				name:   "repository whose name starts like an allowed one",
				create: createBeta(ns, func(s *cachev1beta1.MemcachedSpec) { s.Image = "memcached-evil:1" }),
				want:   "spec.image: memcached-evil:1 (docker.io/library/memcached-evil:1) not allowed",
			},
			{
				name: "exporter image from another registry",
				create: createBeta(ns, func(s *cachev1beta1.MemcachedSpec) {
					*exporterOf(s) = cachev1beta1.Exporter{Enabled: true, Image: "evil.example.com/exporter:1"}
				}),
				want: "spec.monitoring.exporter.image: evil.example.com/exporter:1 not allowed",
			},
			{
				name: "disabled exporter runs no image",
				create: createBeta(ns, func(s *cachev1beta1.MemcachedSpec) {
					*exporterOf(s) = cachev1beta1.Exporter{Image: "evil.example.com/exporter:1"}
				}),
			},
			{
				name: "control-plane toleration",
				create: createBeta(ns, func(s *cachev1beta1.MemcachedSpec) {
					framework.PodOf(s).Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists}, controlPlaneToleration}
				}),
				want: "spec.pod.tolerations: key node-role.kubernetes.io/control-plane not allowed",
			},
			{
				name: "legacy master toleration",
				create: createBeta(ns, func(s *cachev1beta1.MemcachedSpec) {
					framework.PodOf(s).Tolerations = []corev1.Toleration{{Key: "node-role.kubernetes.io/master", Operator: corev1.TolerationOpEqual, Value: "", Effect: corev1.TaintEffectNoSchedule}}
				}),
				want: "spec.pod.tolerations: key node-role.kubernetes.io/master not allowed",
			},
			{
				name: "toleration of every taint",
				create: createBeta(ns, func(s *cachev1beta1.MemcachedSpec) {
					framework.PodOf(s).Tolerations = []corev1.Toleration{everyTaintToleration}
				}),
				want: "spec.pod.tolerations: operator Exists without a key",
			},
			{
				name: "other tolerations",
				create: createBeta(ns, func(s *cachev1beta1.MemcachedSpec) {
					framework.PodOf(s).Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "cache"}}
				}),
			},
			{
				name:   "system-cluster-critical",
				create: createBeta(ns, func(s *cachev1beta1.MemcachedSpec) { framework.PodOf(s).PriorityClassName = "system-cluster-critical" }),
				want:   "spec.pod.priorityClassName: system-cluster-critical not allowed",
			},
			{
				name:   "system-node-critical",
				create: createBeta(ns, func(s *cachev1beta1.MemcachedSpec) { framework.PodOf(s).PriorityClassName = "system-node-critical" }),
				want:   "spec.pod.priorityClassName: system-node-critical not allowed",
			},
			{
				name:   "other priority class",
				create: createBeta(ns, func(s *cachev1beta1.MemcachedSpec) { framework.PodOf(s).PriorityClassName = "caches" }),
			},
			{
				name:   "v1alpha1 allowed",
				create: createAlpha(ns, func(s *cachev1alpha1.MemcachedSpec) { s.Exporter = &cachev1alpha1.ExporterSpec{Enabled: true} }),
			},
			{
				name:   "v1alpha1 image from another registry",
				create: createAlpha(ns, func(s *cachev1alpha1.MemcachedSpec) { s.Image = "evil.example.com/memcached:1.6" }),
				want:   "spec.image: evil.example.com/memcached:1.6 not allowed",
			},
			{
				name: "v1alpha1 exporter image from another registry",
				create: createAlpha(ns, func(s *cachev1alpha1.MemcachedSpec) {
					s.Exporter = &cachev1alpha1.ExporterSpec{Enabled: true, Image: "evil.example.com/exporter:1"}
				}),
				want: "spec.exporter.image: evil.example.com/exporter:1 not allowed",
			},
			{
				name:   "v1alpha1 control-plane toleration",
				create: createAlpha(ns, func(s *cachev1alpha1.MemcachedSpec) { s.Tolerations = []corev1.Toleration{controlPlaneToleration} }),
				want:   "spec.tolerations: key node-role.kubernetes.io/control-plane not allowed",
			},
			{
				name:   "v1alpha1 system priority class",
				create: createAlpha(ns, func(s *cachev1alpha1.MemcachedSpec) { s.PriorityClassName = "system-node-critical" }),
				want:   "spec.priorityClassName: system-node-critical not allowed",
			},
		}
		for i, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				checkVerdict(t, tt.create(fmt.Sprintf("verdict-%d", i)), tt.want)
			})
		}
	})

	t.Run("v1alpha1 annotation cannot carry a forbidden toleration", func(t *testing.T) {
		// The annotation holds the v1beta1 spec of an object read through
		// v1alpha1. A client may write it with anything in it; the policy
		// sees the object the conversion makes of it, which is the object
		// stored, so either the policy refuses it or what is stored has no
		// such toleration.
		smuggled, err := json.Marshal(cachev1beta1.MemcachedSpec{Pod: &cachev1beta1.PodOverrides{
			Tolerations: []corev1.Toleration{controlPlaneToleration}, PriorityClassName: "system-node-critical",
		}})
		if err != nil {
			t.Fatal(err)
		}
		mc := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{
			Name: "smuggler", Annotations: map[string]string{cachev1alpha1.V1beta1SpecAnnotation: string(smuggled)},
		}}
		_, err = alpha.Create(ctx, mc, metav1.CreateOptions{})
		if err != nil {
			checkVerdict(t, err, "spec.tolerations: key node-role.kubernetes.io/control-plane not allowed")
			return
		}
		stored, err := beta.Get(ctx, "smuggler", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if p := stored.Spec.Pod; p != nil && (len(p.Tolerations) > 0 || p.PriorityClassName != "") {
			t.Errorf("admitted, and stored with pod %+v: the annotation got past the policy", *p)
		}
		// Once stored, an update through v1alpha1 that keeps the
		// annotation and adds the toleration for real is refused.
		mcAlpha, err := alpha.Get(ctx, "smuggler", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if mcAlpha.Annotations == nil {
			mcAlpha.Annotations = map[string]string{}
		}
		mcAlpha.Annotations[cachev1alpha1.V1beta1SpecAnnotation] = string(smuggled)
		mcAlpha.Spec.Tolerations = []corev1.Toleration{controlPlaneToleration}
		_, err = alpha.Update(ctx, mcAlpha, metav1.UpdateOptions{})
		checkVerdict(t, err, "spec.tolerations: key node-role.kubernetes.io/control-plane not allowed")
	})

	t.Run("updates", func(t *testing.T) {
		if err := createBeta(ns, nil)("updated"); err != nil {
			t.Fatal(err)
		}
		tests := []struct {
			name   string
			update func() error
			want   string
		}{
			{
				name: "v1beta1 adds a control-plane toleration",
				update: func() error {
					return patchMerge(ctx, ns, "updated", `{"spec":{"pod":{"tolerations":[{"key":"node-role.kubernetes.io/control-plane","operator":"Exists"}]}}}`)
				},
				want: "spec.pod.tolerations: key node-role.kubernetes.io/control-plane not allowed",
			},
			{
				name: "v1alpha1 sets a system priority class",
				update: func() error {
					mc, err := alpha.Get(ctx, "updated", metav1.GetOptions{})
					if err != nil {
						return err
					}
					mc.Spec.PriorityClassName = "system-cluster-critical"
					_, err = alpha.Update(ctx, mc, metav1.UpdateOptions{})
					return err
				},
				want: "spec.priorityClassName: system-cluster-critical not allowed",
			},
			{
				name: "v1alpha1 enables an exporter whose image is not allowed",
				update: func() error {
					mc, err := alpha.Get(ctx, "updated", metav1.GetOptions{})
					if err != nil {
						return err
					}
					mc.Spec.Exporter = &cachev1alpha1.ExporterSpec{Enabled: true, Image: "evil.example.com/exporter:1"}
					_, err = alpha.Update(ctx, mc, metav1.UpdateOptions{})
					return err
				},
				want: "spec.exporter.image: evil.example.com/exporter:1 not allowed",
			},
			{
				name:   "allowed change",
				update: func() error { return patchMerge(ctx, ns, "updated", `{"spec":{"replicas":2}}`) },
			},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) { checkVerdict(t, tt.update(), tt.want) })
		}
	})

	t.Run("the ConfigMap decides", func(t *testing.T) {
		// Stored while the shipped limits allow it.
		if err := createBeta(ns, func(s *cachev1beta1.MemcachedSpec) { s.Image = "memcached:1.6.38" })("before-edit"); err != nil {
			t.Fatal(err)
		}
		// Only the operator's own default image, exactly, and one private
		// registry; forbid a key of our own; forbid no priority class.
		edit := map[string]string{
			"allowedImagePrefixes":     "registry.example.com, docker.io/library/" + cachev1beta1.DefaultImage,
			"forbiddenTolerationKeys":  "dedicated",
			"forbiddenPriorityClasses": "",
		}
		start := time.Now()
		setPolicyData(t, edit)
		waitVerdict(t, ns, func(s *cachev1beta1.MemcachedSpec) { s.Image = "registry.example.com/cache/memcached:1.6" }, "")
		t.Logf("The edited ConfigMap took effect within %s.", time.Since(start).Round(100*time.Millisecond))
		t.Cleanup(func() { restorePolicyData(t, ns) })

		tests := []struct {
			name string
			// write creates a Memcached with the given name, or changes
			// one created before the edit.
			write func(name string) error
			want  string
		}{
			{
				// The policy repeats v1beta1.DefaultImage for Memcacheds
				// without a spec; this fails if the two differ.
				name:  "no spec at all runs exactly the default image",
				write: func(name string) error { return createWithoutSpec(ns, name) },
			},
			{
				name:  "default repository, other tag",
				write: createBeta(ns, func(s *cachev1beta1.MemcachedSpec) { s.Image = "memcached:1.6.38" }),
				want:  "spec.image: memcached:1.6.38 (docker.io/library/memcached:1.6.38) not allowed",
			},
			{
				name:  "registry host that starts like an allowed one",
				write: createBeta(ns, func(s *cachev1beta1.MemcachedSpec) { s.Image = "registry.example.com.evil.io/memcached:1" }),
				want:  "spec.image: registry.example.com.evil.io/memcached:1 not allowed",
			},
			{
				name: "default exporter image no longer allowed",
				write: createBeta(ns, func(s *cachev1beta1.MemcachedSpec) {
					s.Image = cachev1beta1.DefaultImage
					exporterOf(s).Enabled = true
				}),
				want: "spec.monitoring.exporter.image: " + cachev1beta1.DefaultExporterImage + " not allowed",
			},
			{
				name: "newly forbidden toleration",
				write: createBeta(ns, func(s *cachev1beta1.MemcachedSpec) {
					s.Image = cachev1beta1.DefaultImage
					framework.PodOf(s).Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists}}
				}),
				want: "spec.pod.tolerations: key dedicated not allowed",
			},
			{
				name: "no longer forbidden toleration and priority class",
				write: createBeta(ns, func(s *cachev1beta1.MemcachedSpec) {
					s.Image = cachev1beta1.DefaultImage
					framework.PodOf(s).Tolerations = []corev1.Toleration{controlPlaneToleration}
					framework.PodOf(s).PriorityClassName = "system-cluster-critical"
				}),
			},
			{
				name:  "existing Memcached: a label only",
				write: func(string) error { return patchMerge(ctx, ns, "before-edit", `{"metadata":{"labels":{"team":"a"}}}`) },
			},
			{
				name:  "existing Memcached: any change to its spec",
				write: func(string) error { return patchMerge(ctx, ns, "before-edit", `{"spec":{"replicas":2}}`) },
				want:  "spec.image: memcached:1.6.38 (docker.io/library/memcached:1.6.38) not allowed",
			},
		}
		for i, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				checkVerdict(t, tt.write(fmt.Sprintf("edited-%d", i)), tt.want)
			})
		}

		// A key left out is not read as "none": every write is refused.
		delete(edit, "forbiddenPriorityClasses")
		setPolicyData(t, edit)
		waitVerdict(t, ns, func(s *cachev1beta1.MemcachedSpec) { s.Image = "registry.example.com/cache/memcached:1.6" },
			"the ConfigMap "+policyNamespace+"/"+policyName+" lacks forbiddenPriorityClasses")
	})

	t.Run("only a Secret the writer may read", func(t *testing.T) {
		// A tenant who may write Memcacheds in ns but read no Secret.
		tenant := "tenant-of-" + ns
		grant(t, ns, tenant, rbacv1.PolicyRule{APIGroups: []string{cachev1beta1.GroupName}, Resources: []string{"memcacheds"}, Verbs: []string{"create", "update", "patch", "get"}})
		cfg := rest.CopyConfig(framework.Cluster().Config)
		cfg.Impersonate = rest.ImpersonationConfig{UserName: tenant}
		asTenant := clientset.NewForConfigOrDie(cfg).CacheV1beta1().Memcacheds(ns)
		// RBAC takes a moment to see a new binding.
		framework.Eventually(t, policyPropagation, "the tenant may create Memcacheds", func(ctx context.Context) (bool, string) {
			_, err := asTenant.Create(ctx, &cachev1beta1.Memcached{ObjectMeta: metav1.ObjectMeta{Name: "dry-run"}},
				metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			return err == nil, fmt.Sprint(err)
		})
		withSecret := func(name, secret string) error {
			_, err := asTenant.Create(ctx, &cachev1beta1.Memcached{
				ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec:       cachev1beta1.MemcachedSpec{TLS: &cachev1beta1.TLS{SecretName: secret}},
			}, metav1.CreateOptions{})
			return err
		}
		checkVerdict(t, withSecret("other-apps-key", "other-app-tls"),
			"spec.tls.secretName: "+tenant+" may not get Secret other-app-tls in namespace "+ns+", so may not mount it into a cache")
		// Allowed to get that one Secret, the tenant may name it.
		grant(t, ns, tenant, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{"cache-tls"}, Verbs: []string{"get"}})
		framework.Eventually(t, policyPropagation, "a Secret the tenant may get is admitted", func(context.Context) (bool, string) {
			err := withSecret("own-key", "cache-tls")
			return err == nil, fmt.Sprint(err)
		})
		// Without a TLS Secret nothing is asked of the tenant's access.
		if _, err := asTenant.Create(ctx, &cachev1beta1.Memcached{ObjectMeta: metav1.ObjectMeta{Name: "no-tls"}}, metav1.CreateOptions{}); err != nil {
			t.Errorf("a Memcached without TLS: %v", err)
		}
		// A change to another field passes; one that names another Secret
		// is checked like a create.
		if _, err := asTenant.Patch(ctx, "own-key", types.MergePatchType, []byte(`{"spec":{"replicas":2}}`), metav1.PatchOptions{}); err != nil {
			t.Errorf("a change that keeps spec.tls.secretName: %v", err)
		}
		_, err := asTenant.Patch(ctx, "own-key", types.MergePatchType, []byte(`{"spec":{"tls":{"secretName":"other-app-tls"}}}`), metav1.PatchOptions{})
		checkVerdict(t, err, "may not get Secret other-app-tls")

		// The client CA's Secret is checked the same way; a ConfigMap is not.
		_, err = asTenant.Patch(ctx, "own-key", types.MergePatchType, []byte(`{"spec":{"tls":{"clientCA":{"secretName":"other-app-tls"}}}}`), metav1.PatchOptions{})
		checkVerdict(t, err, "spec.tls.clientCA.secretName: "+tenant+" may not get Secret other-app-tls in namespace "+ns+", so may not mount it into a cache")
		if _, err := asTenant.Patch(ctx, "own-key", types.MergePatchType, []byte(`{"spec":{"tls":{"clientCA":{"secretName":"cache-tls"}}}}`), metav1.PatchOptions{}); err != nil {
			t.Errorf("a client CA Secret the tenant may get: %v", err)
		}
		if _, err := asTenant.Patch(ctx, "own-key", types.MergePatchType, []byte(`{"spec":{"tls":{"clientCA":{"secretName":null,"configMapName":"clients-bundle"}}}}`), metav1.PatchOptions{}); err != nil {
			t.Errorf("a client CA ConfigMap: %v", err)
		}

		// So is the auth Secret, which holds every credential of a cache.
		_, err = asTenant.Patch(ctx, "no-tls", types.MergePatchType, []byte(`{"spec":{"auth":{"secretName":"other-app-auth"}}}`), metav1.PatchOptions{})
		checkVerdict(t, err, "spec.auth.secretName: "+tenant+" may not get Secret other-app-auth in namespace "+ns+", so may not mount it into a cache")
		grant(t, ns, tenant, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{"cache-auth"}, Verbs: []string{"get"}})
		framework.Eventually(t, policyPropagation, "an auth Secret the tenant may get is admitted", func(context.Context) (bool, string) {
			_, err := asTenant.Patch(ctx, "no-tls", types.MergePatchType, []byte(`{"spec":{"auth":{"secretName":"cache-auth"}}}`), metav1.PatchOptions{})
			return err == nil, fmt.Sprint(err)
		})

		// A new image reads every Secret the Pods mount, so choosing the
		// image of a cache is reading its Secrets, even when the names
		// stay. Each cache here mounts one Secret the tenant may not get,
		// named by someone who may (the suite's admin); the tenant may
		// still change anything else of it.
		type imageChange struct{ name, patch string }
		newImage := imageChange{name: "spec.image", patch: `{"spec":{"image":"memcached:1.6.38"}}`}
		exporterOn := imageChange{name: "exporter enabled", patch: `{"spec":{"monitoring":{"exporter":{"enabled":true}}}}`}
		mounts := []struct {
			name, field, secret string
			spec                cachev1beta1.MemcachedSpec
			// imageChanges are the changes tried; the CRD refuses an
			// exporter with auth.
			imageChanges []imageChange
		}{
			{
				name: "mounts-tls", field: "spec.tls.secretName", secret: "admins-tls",
				spec:         cachev1beta1.MemcachedSpec{TLS: &cachev1beta1.TLS{SecretName: "admins-tls"}},
				imageChanges: []imageChange{newImage, exporterOn},
			},
			{
				name: "mounts-client-ca", field: "spec.tls.clientCA.secretName", secret: "admins-ca",
				spec:         cachev1beta1.MemcachedSpec{TLS: &cachev1beta1.TLS{SecretName: "cache-tls", ClientCA: &cachev1beta1.ClientCA{SecretName: "admins-ca"}}},
				imageChanges: []imageChange{newImage, exporterOn},
			},
			{
				name: "mounts-auth", field: "spec.auth.secretName", secret: "admins-auth",
				spec:         cachev1beta1.MemcachedSpec{Auth: &cachev1beta1.Auth{SecretName: "admins-auth"}},
				imageChanges: []imageChange{newImage},
			},
		}
		for _, m := range mounts {
			if _, err := beta.Create(ctx, &cachev1beta1.Memcached{ObjectMeta: metav1.ObjectMeta{Name: m.name}, Spec: m.spec}, metav1.CreateOptions{}); err != nil {
				t.Fatalf("the admin creating %s: %v", m.name, err)
			}
		}
		for _, m := range mounts {
			t.Run("image change of a cache that mounts "+m.field, func(t *testing.T) {
				for _, c := range m.imageChanges {
					_, err := asTenant.Patch(ctx, m.name, types.MergePatchType, []byte(c.patch), metav1.PatchOptions{})
					checkVerdict(t, err, m.field+": "+tenant+" may not get Secret "+m.secret+" in namespace "+ns+", so may not change the images of a cache that mounts it")
				}
				if _, err := asTenant.Patch(ctx, m.name, types.MergePatchType, []byte(`{"spec":{"replicas":2}}`), metav1.PatchOptions{}); err != nil {
					t.Errorf("a change that keeps the images: %v", err)
				}
				// Allowed to get the Secret, the tenant may change the images.
				grant(t, ns, tenant, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{m.secret}, Verbs: []string{"get"}})
				for _, c := range m.imageChanges {
					framework.Eventually(t, policyPropagation, c.name+" is admitted once the tenant may get "+m.secret, func(ctx context.Context) (bool, string) {
						_, err := asTenant.Patch(ctx, m.name, types.MergePatchType, []byte(c.patch), metav1.PatchOptions{})
						return err == nil, fmt.Sprint(err)
					})
				}
			})
		}
	})

	t.Run("without its ConfigMap every write is refused", func(t *testing.T) {
		if err := createBeta(ns, nil)("before-delete"); err != nil {
			t.Fatal(err)
		}
		if err := framework.Kube().CoreV1().ConfigMaps(policyNamespace).Delete(ctx, policyName, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { restorePolicyData(t, ns) })
		const notFound = "no params found for policy binding with `Deny` parameterNotFoundAction"
		waitVerdict(t, ns, nil, notFound)
		// Even one that leaves the spec alone, such as a label or the
		// operator's finalizer: docs/operations.md says so.
		err := patchMerge(ctx, ns, "before-delete", `{"metadata":{"labels":{"team":"a"}}}`)
		if err == nil || !strings.Contains(err.Error(), notFound) {
			t.Errorf("a metadata-only update without the ConfigMap: %v, want %q", err, notFound)
		}
	})
}

// grant gives user a rule in ns through a Role and RoleBinding of their
// own, deleted with the namespace.
func grant(t *testing.T, ns, user string, rule rbacv1.PolicyRule) {
	t.Helper()
	ctx := context.Background()
	name := fmt.Sprintf("%s-%d", user, time.Now().UnixNano())
	if _, err := framework.Kube().RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Rules:      []rbacv1.PolicyRule{rule},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := framework.Kube().RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// installPolicy applies the policy and the ConfigMap of artifacts/policy as
// shipped, and the shipped binding limited to namespace ns, then waits
// until the policy is in effect there. All three are deleted when the test
// ends.
func installPolicy(t *testing.T, ns string) {
	t.Helper()
	ctx := context.Background()
	policies := framework.Kube().AdmissionregistrationV1().ValidatingAdmissionPolicies()
	bindings := framework.Kube().AdmissionregistrationV1().ValidatingAdmissionPolicyBindings()

	t.Cleanup(func() {
		for what, err := range map[string]error{
			"the policy":    policies.Delete(ctx, policyName, metav1.DeleteOptions{}),
			"the ConfigMap": framework.Kube().CoreV1().ConfigMaps(policyNamespace).Delete(ctx, policyName, metav1.DeleteOptions{}),
		} {
			if err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("deleting %s: %v", what, err)
			}
		}
	})
	if err := framework.Cluster().ApplyFiles(ctx, framework.Path("artifacts/policy/params.yaml"), framework.Path("artifacts/policy/policy.yaml")); err != nil {
		t.Fatal(err)
	}

	f, err := os.Open(framework.Path("artifacts/policy/binding.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var binding admissionregistrationv1.ValidatingAdmissionPolicyBinding
	if err := utilyaml.NewYAMLOrJSONDecoder(f, 4096).Decode(&binding); err != nil {
		t.Fatalf("decoding the shipped binding: %v", err)
	}
	if binding.Spec.MatchResources != nil {
		t.Errorf("the shipped binding has matchResources %+v; it must cover every namespace", binding.Spec.MatchResources)
	}
	binding.Name = policyName + "-" + ns
	binding.Spec.MatchResources = &admissionregistrationv1.MatchResources{NamespaceSelector: framework.InNamespace(ns)}
	if _, err := bindings.Create(ctx, &binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := bindings.Delete(ctx, binding.Name, metav1.DeleteOptions{}); err != nil {
			t.Errorf("deleting the binding: %v", err)
		}
	})

	start := time.Now()
	waitVerdict(t, ns, func(s *cachev1beta1.MemcachedSpec) { s.Image = "evil.example.com/memcached:1" }, "spec.image: evil.example.com/memcached:1 not allowed")
	t.Logf("The binding took effect within %s.", time.Since(start).Round(100*time.Millisecond))
}

// setPolicyData replaces the data of the policy's ConfigMap.
func setPolicyData(t *testing.T, data map[string]string) {
	t.Helper()
	setConfigMapData(t, policyName, data)
}

// setConfigMapData replaces the data of ConfigMap name in policyNamespace,
// where the parameters of the shipped policies live.
func setConfigMapData(t *testing.T, name string, data map[string]string) {
	t.Helper()
	ctx := context.Background()
	cm, err := framework.Kube().CoreV1().ConfigMaps(policyNamespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data = data
	if _, err := framework.Kube().CoreV1().ConfigMaps(policyNamespace).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// restorePolicyData applies the shipped ConfigMap again and waits until the
// policy in namespace ns judges by it: the default images pass.
func restorePolicyData(t *testing.T, ns string) {
	t.Helper()
	if err := framework.Cluster().ApplyFiles(context.Background(), framework.Path("artifacts/policy/params.yaml")); err != nil {
		t.Fatal(err)
	}
	waitVerdict(t, ns, func(s *cachev1beta1.MemcachedSpec) { exporterOf(s).Enabled = true }, "")
}

// waitVerdict waits until a dry-run create of a Memcached with the spec
// mutate makes in namespace ns gets the verdict want: admitted when want is
// empty, else refused with a message that contains it.
func waitVerdict(t *testing.T, ns string, mutate func(*cachev1beta1.MemcachedSpec), want string) {
	t.Helper()
	mc := &cachev1beta1.Memcached{ObjectMeta: metav1.ObjectMeta{Name: "probe"}}
	if mutate != nil {
		mutate(&mc.Spec)
	}
	framework.Eventually(t, policyPropagation, fmt.Sprintf("the policy's verdict is %q", want), func(ctx context.Context) (bool, string) {
		_, err := framework.Memcacheds().CacheV1beta1().Memcacheds(ns).Create(ctx, mc, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if want == "" {
			return err == nil, fmt.Sprint(err)
		}
		return err != nil && strings.Contains(err.Error(), want), fmt.Sprint(err)
	})
}

// checkVerdict fails the test unless err is nil when want is empty, or is
// the policy's refusal with a message that contains want.
func checkVerdict(t *testing.T, err error, want string) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Errorf("refused: %v", err)
	case want == "":
	case err == nil:
		t.Errorf("admitted, want a refusal that says %q", want)
	case !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "ValidatingAdmissionPolicy '"+policyName+"'"):
		t.Errorf("got %v, want the refusal of ValidatingAdmissionPolicy %s", err, policyName)
	case !strings.Contains(err.Error(), want):
		t.Errorf("got %q, want a message that says %q", err.Error(), want)
	}
}

// createBeta returns a function that creates a v1beta1 Memcached with the
// given name and the spec mutate makes.
func createBeta(ns string, mutate func(*cachev1beta1.MemcachedSpec)) func(name string) error {
	return func(name string) error {
		mc := &cachev1beta1.Memcached{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if mutate != nil {
			mutate(&mc.Spec)
		}
		_, err := framework.Memcacheds().CacheV1beta1().Memcacheds(ns).Create(context.Background(), mc, metav1.CreateOptions{})
		return err
	}
}

// createAlpha is createBeta through v1alpha1.
func createAlpha(ns string, mutate func(*cachev1alpha1.MemcachedSpec)) func(name string) error {
	return func(name string) error {
		mc := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if mutate != nil {
			mutate(&mc.Spec)
		}
		_, err := framework.Memcacheds().CacheV1alpha1().Memcacheds(ns).Create(context.Background(), mc, metav1.CreateOptions{})
		return err
	}
}

// createWithoutSpec creates a v1beta1 Memcached that has no spec, which
// the typed client cannot send: the CRD fills in defaults only where a spec
// is present, so the operator's own defaults apply.
func createWithoutSpec(ns, name string) error {
	body, err := json.Marshal(map[string]any{
		"apiVersion": cachev1beta1.GroupVersion.String(),
		"kind":       "Memcached",
		"metadata":   map[string]any{"name": name},
	})
	if err != nil {
		return err
	}
	return framework.Memcacheds().CacheV1beta1().RESTClient().Post().Namespace(ns).Resource("memcacheds").Body(body).Do(context.Background()).Error()
}

// patchMerge merge-patches the v1beta1 Memcached ns/name.
func patchMerge(ctx context.Context, ns, name, patch string) error {
	_, err := framework.Memcacheds().CacheV1beta1().Memcacheds(ns).Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	return err
}

// exporterOf returns spec.monitoring.exporter, creating it if needed.
func exporterOf(s *cachev1beta1.MemcachedSpec) *cachev1beta1.Exporter {
	if s.Monitoring == nil {
		s.Monitoring = &cachev1beta1.Monitoring{}
	}
	if s.Monitoring.Exporter == nil {
		s.Monitoring.Exporter = &cachev1beta1.Exporter{}
	}
	return s.Monitoring.Exporter
}
