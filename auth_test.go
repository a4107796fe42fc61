package main

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
	"github.com/kubelite/memcached-operator/pkg/childcache"
	"github.com/kubelite/memcached-operator/pkg/resources"
)

func authSecret(name string, data map[string]string) *corev1.Secret {
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: metav1.NamespaceDefault},
		Data:       map[string][]byte{},
	}
	for k, v := range data {
		s.Data[k] = []byte(v)
	}
	return s
}

func withAuth(mc *cachev1beta1.Memcached) *cachev1beta1.Memcached {
	mc = mc.DeepCopy()
	mc.Spec.Auth = &cachev1beta1.Auth{SecretName: "cache-auth"}
	return mc
}

// TestSyncAuthSecret covers the Secret spec.auth names: until it exists
// with an auth file the Pods would hand memcached, the Deployment is held
// and the status says why, down to the line; the other children are kept.
func TestSyncAuthSecret(t *testing.T) {
	tests := []struct {
		name   string
		secret *corev1.Secret
		// wantReason is the Degraded reason, or "" for a Deployment
		// applied; wantMessage a part of its message.
		wantReason, wantMessage string
	}{
		{name: "no Secret", wantReason: cachev1beta1.ReasonAuthSecretNotFound, wantMessage: `"cache-auth" named by spec.auth.secretName does not exist`},
		{name: "Secret without the key auth", secret: authSecret("cache-auth", map[string]string{"password": "app:pw"}),
			wantReason: cachev1beta1.ReasonAuthSecretInvalid, wantMessage: "has no key auth"},
		{name: "an entry without a colon", secret: authSecret("cache-auth", map[string]string{"auth": "app:pw\napp pw\n"}),
			wantReason: cachev1beta1.ReasonAuthSecretInvalid, wantMessage: "cannot use: no ':' on line 2;"},
		{name: "nine entries", secret: authSecret("cache-auth", map[string]string{"auth": strings.Repeat("u:p\n", 9)}),
			wantReason: cachev1beta1.ReasonAuthSecretInvalid, wantMessage: "more than 8 entries"},
		{name: "another Secret of that namespace", secret: authSecret("other", map[string]string{"auth": "app:pw"}),
			wantReason: cachev1beta1.ReasonAuthSecretNotFound, wantMessage: "cache-auth"},
		{name: "a valid auth file", secret: authSecret("cache-auth", map[string]string{"auth": "# app\r\napp:pw\r\n"})},
	}
	for _, tt := range tests {
		t.Run(tt.name+": new Memcached", func(t *testing.T) {
			mc := withAuth(newMemcached("cache"))
			f := newFixture(t)
			f.addMemcached(mc)
			if tt.secret != nil {
				f.addSecret(tt.secret)
			}
			actions, o := f.run(cache.MetaObjectToName(mc))
			if tt.wantReason == "" {
				checkActions(t, []expectedAction{applyDeployment, applyService, applyPDB}, actions)
				return
			}
			if o.retry != noRetry || o.err != nil {
				t.Fatalf("sync outcome = %+v; a Secret to fix is waited for through its informer, not retried", o)
			}
			checkActions(t, []expectedAction{updateStatus, applyService, applyPDB}, actions)
			checkDegraded(t, f, mc, tt.wantReason, tt.wantMessage)
			checkEvent(t, f.recorder, tt.wantReason)
		})

		t.Run(tt.name+": running cache turns auth on", func(t *testing.T) {
			mc, dep, svc, pdb := converge(t, newMemcached("cache"))
			mc = withAuth(mc)
			mc.Generation++
			f := newFixture(t)
			f.seed(mc, dep, svc, pdb)
			if tt.secret != nil {
				f.addSecret(tt.secret)
			}
			actions, _ := f.run(cache.MetaObjectToName(mc))
			if tt.wantReason == "" {
				checkActions(t, []expectedAction{applyDeployment}, actions)
				return
			}
			checkActions(t, []expectedAction{updateStatus}, actions)
			checkDegraded(t, f, mc, tt.wantReason, tt.wantMessage)
			got, err := f.kubeClient.AppsV1().Deployments(mc.Namespace).Get(context.Background(), mc.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if len(got.Spec.Template.Spec.Volumes) != 0 || got.Spec.Template.Spec.ShareProcessNamespace != nil {
				t.Errorf("the held Deployment changed: volumes %v", got.Spec.Template.Spec.Volumes)
			}
		})
	}
}

// TestSyncAuthAndTLSSecrets: the auth Secret missing and the TLS Secret
// without tls.key, the status names both.
func TestSyncAuthAndTLSSecrets(t *testing.T) {
	mc := withAuth(newMemcached("cache"))
	mc.Spec.TLS = &cachev1beta1.TLS{SecretName: "cache-tls"}
	f := newFixture(t)
	f.addMemcached(mc)
	f.addSecret(tlsSecret("cache-tls", corev1.TLSCertKey))
	if _, o := f.run(cache.MetaObjectToName(mc)); !strings.Contains(o.message, "cache-tls") || !strings.Contains(o.message, "cache-auth") {
		t.Errorf("message %q, want both Secrets named", o.message)
	}
}

// TestHandleAuthSecret checks that a Secret's events queue the Memcacheds
// whose spec.auth names it, and that of its updates only those that change
// the auth file's verdict do: a rotation from one valid file to another
// reaches the Pods without the operator.
func TestHandleAuthSecret(t *testing.T) {
	named := withAuth(newMemcached("named"))
	plain := newMemcached("plain")
	f := newFixture(t)
	f.addMemcached(named)
	f.addMemcached(plain)
	_, ctx := ktesting.NewTestContext(t)
	c := f.newController(ctx)

	c.handleSecret(authSecret("cache-auth", nil))
	if got := c.workqueue.Len(); got != 1 {
		t.Fatalf("queue length after the Secret's add = %d, want 1 (default/named)", got)
	}
	if key, _ := c.workqueue.Get(); key != cache.MetaObjectToName(named) {
		t.Errorf("queued %v, want default/named", key)
	}

	trim := func(auth string) any {
		t.Helper()
		s, err := secretTransform()(authSecret("cache-auth", map[string]string{resources.AuthSecretKey: auth}))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	tests := []struct {
		name     string
		old, new string
		want     bool
	}{
		{name: "a rotation", old: "old:pw\n", new: "old:pw\nnew:pw\n"},
		{name: "a valid file broken", old: "app:pw\n", new: "app pw\n", want: true},
		{name: "a broken file fixed", old: "app pw\n", new: "app:pw\n", want: true},
		{name: "another problem", old: "app pw\n", new: "", want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := childcache.SecretKeysChanged(trim(tt.old), trim(tt.new)); got != tt.want {
				t.Errorf("SecretKeysChanged = %v, want %v", got, tt.want)
			}
		})
	}
	if s := trim("app:hunter2\n").(*corev1.Secret); s.Data[resources.AuthSecretKey] != nil {
		t.Errorf("the cached Secret keeps %q of a valid auth file, want nothing", s.Data[resources.AuthSecretKey])
	}
}
