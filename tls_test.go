package main

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
	"github.com/kubelite/memcached-operator/pkg/childcache"
)

func tlsSecret(name string, keys ...string) *corev1.Secret {
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: metav1.NamespaceDefault},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{},
	}
	for _, k := range keys {
		s.Data[k] = []byte("pem of " + k)
	}
	return s
}

// TestSyncTLSSecret covers the Secret spec.tls names: until it exists with
// both files, the Deployment is held (not created, or not changed) and the
// status says why; the other children are kept as usual.
func TestSyncTLSSecret(t *testing.T) {
	withTLS := func(mc *cachev1beta1.Memcached) *cachev1beta1.Memcached {
		mc = mc.DeepCopy()
		mc.Spec.TLS = &cachev1beta1.TLS{SecretName: "cache-tls"}
		return mc
	}
	tests := []struct {
		name   string
		secret *corev1.Secret
		// wantReason is the Degraded reason, or "" for a Deployment applied.
		wantReason string
	}{
		{name: "no Secret", wantReason: cachev1beta1.ReasonTLSSecretNotFound},
		{name: "Secret without tls.key", secret: tlsSecret("cache-tls", corev1.TLSCertKey), wantReason: cachev1beta1.ReasonTLSSecretInvalid},
		{name: "another Secret of that namespace", secret: tlsSecret("other", corev1.TLSCertKey, corev1.TLSPrivateKeyKey), wantReason: cachev1beta1.ReasonTLSSecretNotFound},
		{name: "Secret with both files", secret: tlsSecret("cache-tls", corev1.TLSCertKey, corev1.TLSPrivateKeyKey)},
	}
	for _, tt := range tests {
		t.Run(tt.name+": new Memcached", func(t *testing.T) {
			mc := withTLS(newMemcached("cache"))
			f := newFixture(t)
			f.addMemcached(mc)
			if tt.secret != nil {
				f.addSecret(tt.secret)
			}
			actions, o := f.run(cache.MetaObjectToName(mc))
			if tt.wantReason != "" && (o.retry != noRetry || o.err != nil) {
				t.Fatalf("sync outcome = %+v; a missing Secret is waited for through its informer, not retried", o)
			}
			if tt.wantReason == "" {
				// The status waits for the new Deployment to catch up.
				checkActions(t, []expectedAction{applyDeployment, applyService, applyPDB}, actions)
				return
			}
			checkActions(t, []expectedAction{updateStatus, applyService, applyPDB}, actions)
			checkDegraded(t, f, mc, tt.wantReason, "cache-tls")
			checkEvent(t, f.recorder, tt.wantReason)
		})

		t.Run(tt.name+": running cache turns TLS on", func(t *testing.T) {
			mc, dep, svc, pdb := converge(t, newMemcached("cache"))
			mc = withTLS(mc)
			mc.Generation++
			f := newFixture(t)
			f.seed(mc, dep, svc, pdb)
			if tt.secret != nil {
				f.addSecret(tt.secret)
			}
			actions, o := f.run(cache.MetaObjectToName(mc))
			if tt.wantReason != "" && (o.retry != noRetry || o.err != nil) {
				t.Fatalf("sync outcome = %+v; a missing Secret is waited for through its informer, not retried", o)
			}
			if tt.wantReason == "" {
				checkActions(t, []expectedAction{applyDeployment}, actions)
				return
			}
			checkActions(t, []expectedAction{updateStatus}, actions)
			checkDegraded(t, f, mc, tt.wantReason, "cache-tls")
			got, err := f.kubeClient.AppsV1().Deployments(mc.Namespace).Get(context.Background(), mc.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if len(got.Spec.Template.Spec.Volumes) != 0 || ptr.Deref(got.Spec.Replicas, 0) != 2 {
				t.Errorf("the held Deployment changed: volumes %v", got.Spec.Template.Spec.Volumes)
			}
		})
	}
}

// TestHandleSecret checks that a Secret's events queue exactly the
// Memcacheds that name it, and that a renewal (new data, same keys) queues
// nothing.
func TestHandleSecret(t *testing.T) {
	named := newMemcached("named")
	named.Spec.TLS = &cachev1beta1.TLS{SecretName: "cache-tls"}
	plain := newMemcached("plain")
	elsewhere := newMemcached("elsewhere")
	elsewhere.Namespace = "other"
	elsewhere.Spec.TLS = &cachev1beta1.TLS{SecretName: "cache-tls"}

	f := newFixture(t)
	for _, mc := range []*cachev1beta1.Memcached{named, plain, elsewhere} {
		f.addMemcached(mc)
	}
	_, ctx := ktesting.NewTestContext(t)
	c := f.newController(ctx)

	secret := tlsSecret("cache-tls", corev1.TLSCertKey, corev1.TLSPrivateKeyKey)
	c.handleSecret(secret)
	if got := c.workqueue.Len(); got != 1 {
		t.Fatalf("queue length after the Secret's add = %d, want 1 (default/named)", got)
	}
	key, _ := c.workqueue.Get()
	if key != cache.MetaObjectToName(named) {
		t.Errorf("queued %v, want default/named", key)
	}
	c.workqueue.Done(key)

	// The handlers see Secrets as the cache keeps them.
	trim := func(s *corev1.Secret) *corev1.Secret {
		t.Helper()
		trimmed, err := childcache.Secret(secretChecks, "", tlsSecretKeys...)(s.DeepCopy())
		if err != nil {
			t.Fatal(err)
		}
		return trimmed.(*corev1.Secret)
	}
	renewed := secret.DeepCopy()
	renewed.Data[corev1.TLSCertKey] = []byte("renewed")
	if childcache.SecretKeysChanged(trim(secret), trim(renewed)) {
		t.Error("a renewal that keeps the keys counts as a change the controller must see")
	}
	if !childcache.SecretKeysChanged(trim(tlsSecret("cache-tls", corev1.TLSCertKey)), trim(secret)) {
		t.Error("a key added does not count as a change")
	}

	trimmed := trim(secret)
	for k, v := range trimmed.Data {
		if v != nil {
			t.Errorf("the cached Secret keeps the data of %s", k)
		}
	}
	if _, err := c.secretLister.Get("default", "absent"); !apierrors.IsNotFound(err) {
		t.Errorf("lister Get of an absent Secret = %v, want NotFound", err)
	}
}

func caConfigMap(name string, keys ...string) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: metav1.NamespaceDefault}}
	for _, k := range keys {
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		cm.Data[k] = "pem of " + k
	}
	return cm
}

// TestSyncClientCA covers the Secret or ConfigMap spec.tls.clientCA
// names: until it exists with ca.crt, the Deployment is held and the
// status says why, as for the serving Secret.
func TestSyncClientCA(t *testing.T) {
	serving := tlsSecret("cache-tls", corev1.TLSCertKey, corev1.TLSPrivateKeyKey)
	tests := []struct {
		name       string
		clientCA   cachev1beta1.ClientCA
		secret     *corev1.Secret
		configMap  *corev1.ConfigMap
		wantReason string
		// wantMessage is part of the Degraded message.
		wantMessage string
	}{
		{name: "no Secret", clientCA: cachev1beta1.ClientCA{SecretName: "clients-ca"},
			wantReason: cachev1beta1.ReasonClientCANotFound, wantMessage: `Secret "clients-ca" named by spec.tls.clientCA.secretName does not exist`},
		{name: "Secret without ca.crt", clientCA: cachev1beta1.ClientCA{SecretName: "clients-ca"}, secret: tlsSecret("clients-ca", corev1.TLSCertKey),
			wantReason: cachev1beta1.ReasonClientCAInvalid, wantMessage: `Secret "clients-ca" named by spec.tls.clientCA.secretName has no ca.crt`},
		{name: "Secret with ca.crt", clientCA: cachev1beta1.ClientCA{SecretName: "clients-ca"}, secret: tlsSecret("clients-ca", cachev1beta1.ClientCAKey)},
		{name: "the serving Secret without ca.crt", clientCA: cachev1beta1.ClientCA{SecretName: "cache-tls"},
			wantReason: cachev1beta1.ReasonClientCAInvalid, wantMessage: `Secret "cache-tls" named by spec.tls.clientCA.secretName has no ca.crt`},
		{name: "no ConfigMap", clientCA: cachev1beta1.ClientCA{ConfigMapName: "clients-bundle"},
			wantReason: cachev1beta1.ReasonClientCANotFound, wantMessage: `ConfigMap "clients-bundle" named by spec.tls.clientCA.configMapName does not exist`},
		{name: "a Secret of the ConfigMap's name", clientCA: cachev1beta1.ClientCA{ConfigMapName: "clients-bundle"}, secret: tlsSecret("clients-bundle", cachev1beta1.ClientCAKey),
			wantReason: cachev1beta1.ReasonClientCANotFound, wantMessage: `ConfigMap "clients-bundle"`},
		{name: "ConfigMap without ca.crt", clientCA: cachev1beta1.ClientCA{ConfigMapName: "clients-bundle"}, configMap: caConfigMap("clients-bundle", "ca.pem"),
			wantReason: cachev1beta1.ReasonClientCAInvalid, wantMessage: `ConfigMap "clients-bundle" named by spec.tls.clientCA.configMapName has no ca.crt`},
		{name: "ConfigMap with ca.crt", clientCA: cachev1beta1.ClientCA{ConfigMapName: "clients-bundle"}, configMap: caConfigMap("clients-bundle", cachev1beta1.ClientCAKey)},
		{name: "ConfigMap with ca.crt in binaryData", clientCA: cachev1beta1.ClientCA{ConfigMapName: "clients-bundle"},
			configMap: &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "clients-bundle", Namespace: metav1.NamespaceDefault}, BinaryData: map[string][]byte{cachev1beta1.ClientCAKey: []byte("pem")}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mc := newMemcached("cache")
			mc.Spec.TLS = &cachev1beta1.TLS{SecretName: "cache-tls", ClientCA: &tt.clientCA}
			f := newFixture(t)
			f.addMemcached(mc)
			if tt.secret != nil && tt.secret.Name == serving.Name {
				f.addSecret(tt.secret)
			} else {
				f.addSecret(serving)
				if tt.secret != nil {
					f.addSecret(tt.secret)
				}
			}
			if tt.configMap != nil {
				f.addConfigMap(tt.configMap)
			}
			actions, o := f.run(cache.MetaObjectToName(mc))
			if tt.wantReason == "" {
				checkActions(t, []expectedAction{applyDeployment, applyService, applyPDB}, actions)
				return
			}
			if o.retry != noRetry || o.err != nil {
				t.Fatalf("sync outcome = %+v; a missing CA is waited for through its informer, not retried", o)
			}
			checkActions(t, []expectedAction{updateStatus, applyService, applyPDB}, actions)
			checkDegraded(t, f, mc, tt.wantReason, tt.wantMessage)
			checkEvent(t, f.recorder, tt.wantReason)
		})
	}
}

// TestHandleClientCA checks that the events of the Secret or ConfigMap
// spec.tls.clientCA names queue exactly the Memcacheds that name it.
func TestHandleClientCA(t *testing.T) {
	bySecret := newMemcached("by-secret")
	bySecret.Spec.TLS = &cachev1beta1.TLS{SecretName: "cache-tls", ClientCA: &cachev1beta1.ClientCA{SecretName: "clients-ca"}}
	byConfigMap := newMemcached("by-configmap")
	byConfigMap.Spec.TLS = &cachev1beta1.TLS{SecretName: "cache-tls", ClientCA: &cachev1beta1.ClientCA{ConfigMapName: "clients-ca"}}
	sameSecret := newMemcached("same-secret")
	sameSecret.Spec.TLS = &cachev1beta1.TLS{SecretName: "clients-ca", ClientCA: &cachev1beta1.ClientCA{SecretName: "clients-ca"}}
	elsewhere := byConfigMap.DeepCopy()
	elsewhere.Namespace = "other"

	tests := []struct {
		name  string
		event func(*Controller)
		want  []string
	}{
		{name: "the CA Secret", event: func(c *Controller) { c.handleSecret(tlsSecret("clients-ca", cachev1beta1.ClientCAKey)) },
			want: []string{"default/by-secret", "default/same-secret"}},
		{name: "the serving Secret", event: func(c *Controller) { c.handleSecret(tlsSecret("cache-tls")) },
			want: []string{"default/by-configmap", "default/by-secret"}},
		{name: "the CA ConfigMap", event: func(c *Controller) { c.handleConfigMap(caConfigMap("clients-ca", cachev1beta1.ClientCAKey)) },
			want: []string{"default/by-configmap"}},
		{name: "the CA ConfigMap's tombstone", event: func(c *Controller) {
			c.handleConfigMap(cache.DeletedFinalStateUnknown{Key: "default/clients-ca", Obj: caConfigMap("clients-ca")})
		}, want: []string{"default/by-configmap"}},
		{name: "another ConfigMap", event: func(c *Controller) { c.handleConfigMap(caConfigMap("other")) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			for _, mc := range []*cachev1beta1.Memcached{bySecret, byConfigMap, sameSecret, elsewhere} {
				f.addMemcached(mc)
			}
			_, ctx := ktesting.NewTestContext(t)
			c := f.newController(ctx)
			tt.event(c)
			var got []string
			for c.workqueue.Len() > 0 {
				key, _ := c.workqueue.Get()
				got = append(got, key.String())
				c.workqueue.Done(key)
			}
			slices.Sort(got)
			if !slices.Equal(got, tt.want) {
				t.Errorf("queued %v, want %v", got, tt.want)
			}
		})
	}
}
