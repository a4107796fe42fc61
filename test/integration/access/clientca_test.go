//go:build integration

package access

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	cachev1alpha1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1alpha1"
	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
	"github.com/kubelite/memcached-operator/pkg/resources"
	"github.com/kubelite/memcached-operator/test/integration/framework"
)

// clientCAOptions is what memcached is given with a client CA: the serving
// pair, the bundle, and verification required.
const clientCAOptions = "ssl_chain_cert=/etc/memcached/tls/tls.crt,ssl_key=/etc/memcached/tls/tls.key," +
	"ssl_ca_cert=/etc/memcached/tls/ca.crt,ssl_verify_mode=2"

// longResync is the resync period of the operators that must be released
// by an event: longer than the test, so that no resync does it.
const longResync = "--resync-period=1h"

// eventReleaseTimeout bounds how long the Deployment of a Memcached held
// for its client CA takes to appear once the CA is fixed. The CA's event
// takes a second or two; with a resync longer than the test, only the
// operator's unrelated requeues, more than a minute apart, would release
// it without that event.
const eventReleaseTimeout = 30 * time.Second

// waitReleased waits until the held Deployment has been created.
func waitReleased(t *testing.T, ns, name string) {
	t.Helper()
	framework.Eventually(t, eventReleaseTimeout, "the Deployment is created", func(ctx context.Context) (bool, string) {
		_, err := framework.GetDeployment(ctx, ns, name)
		return err == nil, fmt.Sprint(err)
	})
}

// caSource returns the projected source of ca.crt in the Deployment's TLS
// volume, and describes the volume when it is not the projected volume of
// the serving Secret and the CA.
func caSource(ctx context.Context, ns, name string) (*corev1.VolumeProjection, string) {
	dep, err := framework.GetDeployment(ctx, ns, name)
	if err != nil {
		return nil, err.Error()
	}
	volumes := dep.Spec.Template.Spec.Volumes
	if len(volumes) != 1 || volumes[0].Name != resources.TLSVolumeName || volumes[0].Projected == nil || len(volumes[0].Projected.Sources) != 2 {
		return nil, fmt.Sprintf("volumes %+v", volumes)
	}
	sources := volumes[0].Projected.Sources
	serving := sources[0].Secret
	if serving == nil || serving.Name != "cache-tls" || len(serving.Items) != 2 ||
		serving.Items[0].Key != corev1.TLSCertKey || serving.Items[1].Key != corev1.TLSPrivateKeyKey {
		return nil, fmt.Sprintf("first source %+v, want tls.crt and tls.key of cache-tls", sources[0])
	}
	if ptr.Deref(volumes[0].Projected.DefaultMode, 0) != 0o440 {
		return nil, fmt.Sprintf("default mode %o, want 440", ptr.Deref(volumes[0].Projected.DefaultMode, 0))
	}
	return &sources[1], ""
}

// checkClientCAPod checks what the apiserver accepted for the Deployment's
// Pod template: memcached told to require client certificates of the
// mounted bundle, and the reloader comparing that bundle too.
func checkClientCAPod(t *testing.T, ctx context.Context, ns, name string) {
	t.Helper()
	dep, err := framework.GetDeployment(ctx, ns, name)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range dep.Spec.Template.Spec.Containers {
		switch c.Name {
		case resources.MemcachedContainerName:
			if !strings.Contains(strings.Join(c.Args, " "), "-o "+clientCAOptions+" ") {
				t.Errorf("memcached args %v lack -o %s", c.Args, clientCAOptions)
			}
			if len(c.VolumeMounts) != 1 || c.VolumeMounts[0].MountPath != resources.TLSMountPath {
				t.Errorf("memcached mounts %+v, want the TLS volume at %s", c.VolumeMounts, resources.TLSMountPath)
			}
		case resources.TLSReloaderContainerName:
			if len(c.Command) < 3 || !strings.Contains(c.Command[2], `$(<"$dir/ca.crt")`) {
				t.Errorf("the reloader does not compare ca.crt: %v", c.Command)
			}
		}
	}
}

// TestIntegrationClientCA follows a Memcached whose client CA Secret comes
// late and incomplete: the Deployment waits with ClientCANotFound, then
// ClientCAInvalid while the Secret lacks ca.crt, and the complete Secret
// releases it without an edit to the Memcached, with the CA projected
// beside the serving pair. A deleted CA Secret holds the running
// Deployment instead of changing it. The operator's resync is longer than
// the test, so only the Secret's events can release the Deployment.
func TestIntegrationClientCA(t *testing.T) {
	t.Parallel()
	ns := framework.NewNamespace(t)
	framework.StartOperator(t, ns, longResync)
	ctx := context.Background()
	framework.CreateTLSSecret(t, ns, "cache-tls", "first")
	created := framework.CreateMemcached(t, ns, "cache", func(s *cachev1beta1.MemcachedSpec) {
		s.TLS = &cachev1beta1.TLS{SecretName: "cache-tls", ClientCA: &cachev1beta1.ClientCA{SecretName: "clients-ca"}}
	})

	waitBlockedBy(t, ns, "cache", cachev1beta1.ReasonClientCANotFound, `Secret "clients-ca" named by spec.tls.clientCA.secretName does not exist`)
	if _, err := framework.GetDeployment(ctx, ns, "cache"); !apierrors.IsNotFound(err) {
		t.Errorf("Deployment while the CA Secret is missing: %v, want none", err)
	}

	secrets := framework.Kube().CoreV1().Secrets(ns)
	partial, err := secrets.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "clients-ca"},
		Data:       map[string][]byte{"ca.pem": []byte("bundle")},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitBlockedBy(t, ns, "cache", cachev1beta1.ReasonClientCAInvalid, `Secret "clients-ca" named by spec.tls.clientCA.secretName has no ca.crt`)
	partial.Data[cachev1beta1.ClientCAKey] = []byte("bundle")
	if _, err := secrets.Update(ctx, partial, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitReleased(t, ns, "cache")
	mc := framework.WaitConverged(t, ns, "cache", metav1.ConditionTrue)
	if mc.Generation != created.Generation {
		t.Errorf("generation %d -> %d: the Secret alone must release the Deployment", created.Generation, mc.Generation)
	}
	source, problem := caSource(ctx, ns, "cache")
	if source == nil {
		t.Fatal(problem)
	}
	if source.Secret == nil || source.Secret.Name != "clients-ca" || len(source.Secret.Items) != 1 || source.Secret.Items[0].Key != cachev1beta1.ClientCAKey {
		t.Errorf("CA source %+v, want ca.crt of Secret clients-ca", source)
	}
	checkClientCAPod(t, ctx, ns, "cache")

	dep, err := framework.GetDeployment(ctx, ns, "cache")
	if err != nil {
		t.Fatal(err)
	}
	if err := secrets.Delete(ctx, "clients-ca", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitBlockedBy(t, ns, "cache", cachev1beta1.ReasonClientCANotFound, "clients-ca")
	if after, err := framework.GetDeployment(ctx, ns, "cache"); err != nil || after.Generation != dep.Generation {
		t.Errorf("with the CA Secret gone the Deployment is %v (error %v), want it kept at generation %d", after, err, dep.Generation)
	}
}

// TestIntegrationClientCAConfigMap is the ConfigMap variant, as a
// trust-manager Bundle writes it: missing, then without ca.crt, then with
// it, and the CA projected from the ConfigMap. As in TestIntegrationClientCA
// only the ConfigMap's events can release the Deployment.
func TestIntegrationClientCAConfigMap(t *testing.T) {
	t.Parallel()
	ns := framework.NewNamespace(t)
	framework.StartOperator(t, ns, longResync)
	ctx := context.Background()
	framework.CreateTLSSecret(t, ns, "cache-tls", "first")
	created := framework.CreateMemcached(t, ns, "cache", func(s *cachev1beta1.MemcachedSpec) {
		s.TLS = &cachev1beta1.TLS{SecretName: "cache-tls", ClientCA: &cachev1beta1.ClientCA{ConfigMapName: "clients-bundle"}}
	})

	waitBlockedBy(t, ns, "cache", cachev1beta1.ReasonClientCANotFound, `ConfigMap "clients-bundle" named by spec.tls.clientCA.configMapName does not exist`)
	configMaps := framework.Kube().CoreV1().ConfigMaps(ns)
	partial, err := configMaps.Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "clients-bundle"},
		Data:       map[string]string{"trust-bundle.pem": "bundle"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitBlockedBy(t, ns, "cache", cachev1beta1.ReasonClientCAInvalid, `ConfigMap "clients-bundle" named by spec.tls.clientCA.configMapName has no ca.crt`)
	partial.Data[cachev1beta1.ClientCAKey] = "bundle"
	if _, err := configMaps.Update(ctx, partial, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitReleased(t, ns, "cache")
	mc := framework.WaitConverged(t, ns, "cache", metav1.ConditionTrue)
	if mc.Generation != created.Generation {
		t.Errorf("generation %d -> %d: the ConfigMap alone must release the Deployment", created.Generation, mc.Generation)
	}
	source, problem := caSource(ctx, ns, "cache")
	if source == nil {
		t.Fatal(problem)
	}
	if source.ConfigMap == nil || source.ConfigMap.Name != "clients-bundle" || len(source.ConfigMap.Items) != 1 || source.ConfigMap.Items[0].Key != cachev1beta1.ClientCAKey {
		t.Errorf("CA source %+v, want ca.crt of ConfigMap clients-bundle", source)
	}
	checkClientCAPod(t, ctx, ns, "cache")
}

// TestIntegrationClientCAOffKeepsTheDeployment turns a client CA on for a
// running TLS cache and off again: with it off the Deployment is the very
// one it was before, plain Secret volume and spec hash alike, so that
// specs without a client CA keep the Pods they run.
func TestIntegrationClientCAOffKeepsTheDeployment(t *testing.T) {
	t.Parallel()
	ns := framework.NewNamespace(t)
	framework.StartOperator(t, ns)
	ctx := context.Background()
	framework.CreateTLSSecret(t, ns, "cache-tls", "first")
	if _, err := framework.Kube().CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "clients-bundle"},
		Data:       map[string]string{cachev1beta1.ClientCAKey: "bundle"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.CreateMemcached(t, ns, "cache", func(s *cachev1beta1.MemcachedSpec) {
		s.TLS = &cachev1beta1.TLS{SecretName: "cache-tls"}
	})
	framework.WaitConverged(t, ns, "cache", metav1.ConditionTrue)
	before, err := framework.GetDeployment(ctx, ns, "cache")
	if err != nil {
		t.Fatal(err)
	}
	if v := before.Spec.Template.Spec.Volumes; len(v) != 1 || v[0].Secret == nil || v[0].Projected != nil {
		t.Fatalf("TLS without a client CA: volumes %+v, want the Secret volume", v)
	}
	for _, c := range before.Spec.Template.Spec.Containers {
		if strings.Contains(strings.Join(c.Args, " "), "ssl_ca_cert") || strings.Contains(strings.Join(c.Command, " "), "ca.crt") {
			t.Errorf("TLS without a client CA: container %s runs %v %v", c.Name, c.Command, c.Args)
		}
	}

	framework.PatchSpec(t, ns, "cache", `{"spec":{"tls":{"clientCA":{"configMapName":"clients-bundle"}}}}`)
	framework.WaitConverged(t, ns, "cache", metav1.ConditionTrue)
	if source, problem := caSource(ctx, ns, "cache"); source == nil || source.ConfigMap == nil {
		t.Fatalf("client CA on: %s %+v", problem, source)
	}

	framework.PatchSpec(t, ns, "cache", `{"spec":{"tls":{"clientCA":null}}}`)
	framework.WaitConverged(t, ns, "cache", metav1.ConditionTrue)
	after, err := framework.GetDeployment(ctx, ns, "cache")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := after.Annotations[resources.TemplateHashAnnotation], before.Annotations[resources.TemplateHashAnnotation]; got != want {
		t.Errorf("Pod template hash with the client CA off again = %s, want %s as before it was set", got, want)
	}
	if !equality.Semantic.DeepEqual(after.Spec.Template, before.Spec.Template) {
		t.Errorf("Pod template with the client CA off again differs from the one before it was set:\n got %+v\nwant %+v", after.Spec.Template, before.Spec.Template)
	}
}

// TestIntegrationClientCARejected checks the CRD's refusal of a client CA
// with both sources, or neither, or a name that no object can have.
func TestIntegrationClientCARejected(t *testing.T) {
	t.Parallel()
	ns := framework.NewNamespace(t)
	tests := []struct {
		name     string
		clientCA string
		// extraArgs, if set, is spec.extraArgs as JSON.
		extraArgs string
		wantText  string
	}{
		{name: "both sources", clientCA: `{"secretName":"a","configMapName":"b"}`, wantText: "spec.tls.clientCA: Invalid value: set exactly one of secretName and configMapName"},
		{name: "neither source", clientCA: `{}`, wantText: "set exactly one of secretName and configMapName"},
		{name: "Secret name with capitals", clientCA: `{"secretName":"Clients_CA"}`, wantText: "spec.tls.clientCA.secretName"},
		{name: "empty ConfigMap name", clientCA: `{"configMapName":""}`, wantText: "spec.tls.clientCA.configMapName"},
		{name: "extraArgs that would turn verification off", clientCA: `{"secretName":"ca"}`, extraArgs: `["-o","ssl_verify_mode=0"]`, wantText: "spec.extraArgs: Forbidden: extraArgs must not set ssl_ca_cert or ssl_verify_mode with tls.clientCA"},
		{name: "extraArgs that would name another bundle", clientCA: `{"secretName":"ca"}`, extraArgs: `["-o","ssl_ca_cert=/tmp/other.crt"]`, wantText: "must not set ssl_ca_cert or ssl_verify_mode"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			extra := ""
			if tt.extraArgs != "" {
				extra = `,"extraArgs":` + tt.extraArgs
			}
			body := fmt.Sprintf(`{"apiVersion":"cache.kubelite.io/v1beta1","kind":"Memcached","metadata":{"name":"bad"},"spec":{"tls":{"secretName":"cache-tls","clientCA":%s}%s}}`, tt.clientCA, extra)
			err := framework.Memcacheds().CacheV1beta1().RESTClient().Post().Namespace(ns).Resource("memcacheds").
				SetHeader("Content-Type", "application/json").Body([]byte(body)).Do(context.Background()).Error()
			if !apierrors.IsInvalid(err) {
				t.Fatalf("create error = %v, want Invalid", err)
			}
			if !strings.Contains(err.Error(), tt.wantText) {
				t.Errorf("error %q does not name %s", err, tt.wantText)
			}
		})
	}
}

// TestIntegrationClientCAThroughV1alpha1 edits a Memcached with a client CA
// through v1alpha1, which has no word for it, converted by the package's
// webhook: the client CA survives.
func TestIntegrationClientCAThroughV1alpha1(t *testing.T) {
	t.Parallel()
	ns := framework.NewNamespace(t)
	ctx := context.Background()
	clientCA := &cachev1beta1.ClientCA{ConfigMapName: "clients-bundle"}
	framework.CreateMemcached(t, ns, "cache", func(s *cachev1beta1.MemcachedSpec) {
		s.TLS = &cachev1beta1.TLS{SecretName: "cache-tls", ClientCA: clientCA}
	})
	// No operator watches the namespace, so nothing else writes the
	// Memcached between the read and the update.
	alphas := framework.Memcacheds().CacheV1alpha1().Memcacheds(ns)
	alpha, err := alphas.Get(ctx, "cache", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := alpha.Annotations[cachev1alpha1.V1beta1SpecAnnotation]; !ok {
		t.Fatalf("the v1alpha1 form does not keep spec.tls in %s", cachev1alpha1.V1beta1SpecAnnotation)
	}
	alpha.Spec.Replicas = ptr.To[int32](3)
	if _, err := alphas.Update(ctx, alpha, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	beta, err := framework.GetMemcached(ctx, ns, "cache")
	if err != nil {
		t.Fatal(err)
	}
	if ptr.Deref(beta.Spec.Replicas, 0) != 3 || beta.Spec.TLS == nil || !equality.Semantic.DeepEqual(beta.Spec.TLS.ClientCA, clientCA) {
		t.Errorf("after an edit through v1alpha1, v1beta1 spec.replicas %v, spec.tls %+v; want 3 and the client CA kept", beta.Spec.Replicas, beta.Spec.TLS)
	}
}
