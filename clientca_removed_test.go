package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2/ktesting"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
)

// testCA returns a self-signed CA certificate named commonName, in PEM.
func testCA(t *testing.T, commonName string) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: commonName},
		NotBefore:             time.Now().Add(-time.Minute),
		NotAfter:              time.Now().Add(time.Hour),
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// caFingerprint is how a ClientCARemoved Event names the CA of a PEM
// certificate: the first 8 bytes of its SHA-256 fingerprint, as
// `openssl x509 -noout -fingerprint -sha256` writes them.
func caFingerprint(t *testing.T, cert []byte) string {
	t.Helper()
	block, _ := pem.Decode(cert)
	if block == nil {
		t.Fatalf("no PEM block in %q", cert)
	}
	sum := sha256.Sum256(block.Bytes)
	return strings.ReplaceAll(fmt.Sprintf("% X", sum[:8]), " ", ":")
}

// TestWarnClientCARemoved: an update of a client CA bundle that takes a CA
// out of it warns each Memcached of the namespace whose spec.tls.clientCA
// names it, once, with the CA's fingerprint and the Deployments to
// restart; an update that removes none warns no one, nor does one of a
// source that a Memcached names otherwise or in another namespace.
func TestWarnClientCARemoved(t *testing.T) {
	first, second := testCA(t, "first"), testCA(t, "second")
	both := slices.Concat(first, second)
	memcached := func(ns, name string, tls cachev1beta1.TLS, zones ...string) *cachev1beta1.Memcached {
		mc := newMemcached(name)
		mc.Namespace = ns
		mc.Spec.TLS = &tls
		mc.Spec.Zones = zones
		return mc
	}
	byConfigMap := func(name string) cachev1beta1.TLS {
		return cachev1beta1.TLS{SecretName: "cache-tls", ClientCA: &cachev1beta1.ClientCA{ConfigMapName: name}}
	}
	memcacheds := []*cachev1beta1.Memcached{
		memcached("default", "cache", byConfigMap("bundle")),
		memcached("default", "zoned", byConfigMap("bundle"), "a", "b"),
		memcached("default", "other", byConfigMap("other-bundle")),
		memcached("elsewhere", "cache", byConfigMap("bundle")),
		memcached("default", "by-secret", cachev1beta1.TLS{SecretName: "cache-tls", ClientCA: &cachev1beta1.ClientCA{SecretName: "bundle"}}),
		// Its serving Secret, not its client CA, is the Secret "bundle".
		memcached("default", "serving", cachev1beta1.TLS{SecretName: "bundle", ClientCA: &cachev1beta1.ClientCA{ConfigMapName: "other-bundle"}}),
	}
	restart := map[string]string{
		"cache":     "kubectl -n default rollout restart deployment/cache",
		"zoned":     "kubectl -n default rollout restart deployment/zoned-a deployment/zoned-b",
		"by-secret": "kubectl -n default rollout restart deployment/by-secret",
	}

	configMap := func(bundle []byte) *corev1.ConfigMap {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "bundle", Namespace: "default", ResourceVersion: "1"}}
		if bundle != nil {
			cm.Data = map[string]string{cachev1beta1.ClientCAKey: string(bundle)}
		}
		return cm
	}
	secret := func(bundle []byte) *corev1.Secret {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "bundle", Namespace: "default", ResourceVersion: "1"}}
		if bundle != nil {
			s.Data = map[string][]byte{cachev1beta1.ClientCAKey: bundle}
		}
		return s
	}
	tests := []struct {
		name     string
		old, new any
		// warned are the Memcacheds of default that get the Event.
		warned []string
		// removed is the fingerprint the Events name.
		removed []byte
	}{
		{name: "ConfigMap: a CA removed", old: configMap(both), new: configMap(first), warned: []string{"cache", "zoned"}, removed: second},
		{name: "ConfigMap: a CA replaced", old: configMap(first), new: configMap(second), warned: []string{"cache", "zoned"}, removed: first},
		{name: "ConfigMap: a CA added", old: configMap(first), new: configMap(both)},
		{name: "ConfigMap: unchanged", old: configMap(both), new: configMap(both)},
		{name: "ConfigMap: ca.crt removed", old: configMap(both), new: configMap(nil)},
		{name: "Secret: a CA removed", old: secret(both), new: secret(second), warned: []string{"by-secret"}, removed: first},
		{name: "Secret: a CA added", old: secret(first), new: secret(both)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			f := newFixture(t)
			for _, mc := range memcacheds {
				f.addMemcached(mc)
			}
			c := f.newController(ctx)
			trim := configMapTransform()
			if _, ok := tt.old.(*corev1.Secret); ok {
				trim = secretTransform()
			}
			cached := func(obj any) any {
				t.Helper()
				out, err := trim(obj)
				if err != nil {
					t.Fatal(err)
				}
				return out
			}

			c.warnClientCARemoved(cached(tt.old), cached(tt.new))

			var events []string
			for len(f.recorder.Events) > 0 {
				events = append(events, <-f.recorder.Events)
			}
			if len(events) != len(tt.warned) {
				t.Fatalf("Events %q, want one for each of %v", events, tt.warned)
			}
			for _, name := range tt.warned {
				i := slices.IndexFunc(events, func(e string) bool { return strings.HasSuffix(e, restart[name]) })
				if i < 0 {
					t.Errorf("no Event ends with %q: %q", restart[name], events)
					continue
				}
				e := events[i]
				if !strings.HasPrefix(e, corev1.EventTypeWarning+" "+reasonClientCARemoved+" ") {
					t.Errorf("Event %q, want a Warning of reason %s", e, reasonClientCARemoved)
				}
				kept := first
				if slices.Equal(tt.removed, first) {
					kept = second
				}
				if !strings.Contains(e, "fingerprint starts "+caFingerprint(t, tt.removed)+";") || strings.Contains(e, caFingerprint(t, kept)) {
					t.Errorf("Event %q, want it to name the removed CA %s alone", e, caFingerprint(t, tt.removed))
				}
				if !strings.Contains(e, `"bundle"`) || !strings.Contains(e, "until they restart") {
					t.Errorf("Event %q, want it to name the source and say the Pods trust the CA until they restart", e)
				}
			}
		})
	}
}

// TestClientCARemovedMessage covers the message of a bundle that lost
// more CAs than an Event lists.
func TestClientCARemovedMessage(t *testing.T) {
	mc := newMemcached("cache")
	mc.Spec.TLS = &cachev1beta1.TLS{SecretName: "cache-tls", ClientCA: &cachev1beta1.ClientCA{SecretName: "clients"}}
	removed := make([]string, maxListedCAs+2)
	for i := range removed {
		removed[i] = fmt.Sprintf("%02X:00:00:00:00:00:00:00", i)
	}
	got := clientCARemovedMessage(mc, removed)
	want := fmt.Sprintf(`Secret "clients" named by spec.tls.clientCA.secretName no longer holds 10 CA certificates, whose SHA-256 fingerprints start %s and 2 more; `+
		"memcached drops no CA when it reloads the bundle, so the running Pods accept clients they signed until they restart: kubectl -n default rollout restart deployment/cache",
		strings.Join(removed[:maxListedCAs], ", "))
	if got != want {
		t.Errorf("message\n%s\nwant\n%s", got, want)
	}
}
