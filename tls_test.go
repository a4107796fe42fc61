package main

import (
	"context"
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
		trimmed, err := childcache.Secret(secretChecks, tlsSecretKeys...)(s.DeepCopy())
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
