//go:build integration

package access

import (
	"context"
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
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
	"github.com/kubelite/memcached-operator/pkg/resources"
	"github.com/kubelite/memcached-operator/test/integration/framework"
)

// reasonClientCARemoved is the reason of the Warning Event docs/api.md
// lists for a CA taken out of a client CA bundle.
const reasonClientCARemoved = "ClientCARemoved"

// TestIntegrationClientCARemovedEvent takes a CA out of the client CA
// bundle of a running Memcached, the last step of a CA rotation, after
// adding one: the removal, and it alone, brings a Warning Event
// ClientCARemoved that names the removed CA by fingerprint and the
// Deployment to restart, since memcached keeps trusting the CA until its
// Pods restart. It also checks that the apiserver refuses a Secret or a
// ConfigMap with the data key under which the operator's caches keep the
// fingerprints (childcache's caFingerprintsKey), so that no stored object
// can pass its own for the operator's.
func TestIntegrationClientCARemovedEvent(t *testing.T) {
	t.Parallel()
	ns := framework.NewNamespace(t)
	framework.StartOperator(t, ns)
	ctx := context.Background()
	configMaps := framework.Kube().CoreV1().ConfigMaps(ns)

	forgedKey := resources.AnnotationPrefix + "ca-fingerprints"
	_, err := configMaps.Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "forged"},
		Data:       map[string]string{cachev1beta1.ClientCAKey: "", forgedKey: "0123456789abcdef"},
	}, metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) {
		t.Errorf("creating a ConfigMap with the key %s: %v, want Invalid", forgedKey, err)
	}
	_, err = framework.Kube().CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "forged"},
		Data:       map[string][]byte{cachev1beta1.ClientCAKey: nil, forgedKey: []byte("0123456789abcdef")},
	}, metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) {
		t.Errorf("creating a Secret with the key %s: %v, want Invalid", forgedKey, err)
	}

	first, second, third := testCA(t, "first"), testCA(t, "second"), testCA(t, "third")
	framework.CreateTLSSecret(t, ns, "cache-tls", "first")
	bundle, err := configMaps.Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "clients-bundle"},
		Data:       map[string]string{cachev1beta1.ClientCAKey: string(slices.Concat(first, second))},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	framework.CreateMemcached(t, ns, "cache", func(s *cachev1beta1.MemcachedSpec) {
		s.TLS = &cachev1beta1.TLS{SecretName: "cache-tls", ClientCA: &cachev1beta1.ClientCA{ConfigMapName: "clients-bundle"}}
	})
	framework.WaitConverged(t, ns, "cache", metav1.ConditionTrue)

	// The operator never writes the bundle, so the updates cannot conflict.
	for _, cas := range [][]byte{slices.Concat(first, second, third), slices.Concat(first, third)} {
		bundle.Data[cachev1beta1.ClientCAKey] = string(cas)
		if bundle, err = configMaps.Update(ctx, bundle, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	removed := caFingerprint(t, second)
	var events []corev1.Event
	framework.Eventually(t, framework.WaitLong, "a Warning Event ClientCARemoved naming "+removed, func(ctx context.Context) (bool, string) {
		list, err := framework.Kube().CoreV1().Events(ns).List(ctx, metav1.ListOptions{
			FieldSelector: "involvedObject.kind=Memcached,involvedObject.name=cache,reason=" + reasonClientCARemoved,
		})
		if err != nil {
			return false, err.Error()
		}
		events = list.Items
		return slices.ContainsFunc(events, func(e corev1.Event) bool { return strings.Contains(e.Message, removed) }),
			fmt.Sprintf("%d such Events", len(events))
	})
	// The Events of one Memcached are recorded in order, so one for the
	// added CA would be here by now.
	if len(events) != 1 {
		t.Fatalf("%d ClientCARemoved Events, want one, for the removal alone: %+v", len(events), events)
	}
	e := events[0]
	if e.Type != corev1.EventTypeWarning {
		t.Errorf("Event of type %s, want Warning", e.Type)
	}
	for _, kept := range [][]byte{first, third} {
		if fp := caFingerprint(t, kept); strings.Contains(e.Message, fp) {
			t.Errorf("Event %q names %s, a CA still in the bundle", e.Message, fp)
		}
	}
	if want := "kubectl -n " + ns + " rollout restart deployment/cache"; !strings.HasSuffix(e.Message, want) {
		t.Errorf("Event %q, want it to end with %q", e.Message, want)
	}
	t.Logf("Event: %s", e.Message)
}

// testCA returns a new self-signed CA certificate, in PEM, with commonName
// as its subject.
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
	now := time.Now()
	template := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: commonName},
		NotBefore:             now.Add(-time.Minute),
		NotAfter:              now.Add(time.Hour),
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, template, template, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// caFingerprint is how docs/api.md says a ClientCARemoved Event names a
// CA: the first 8 bytes of the SHA-256 fingerprint of its certificate, in
// the colon-separated upper-case hex of
// `openssl x509 -noout -fingerprint -sha256`.
func caFingerprint(t *testing.T, cert []byte) string {
	t.Helper()
	block, _ := pem.Decode(cert)
	if block == nil {
		t.Fatalf("no PEM block in %q", cert)
	}
	sum := sha256.Sum256(block.Bytes)
	return strings.ReplaceAll(fmt.Sprintf("% X", sum[:8]), " ", ":")
}
