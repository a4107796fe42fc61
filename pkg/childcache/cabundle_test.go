package childcache

import (
	"bytes"
	"crypto/sha256"
	"encoding/pem"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The transforms hash the DER of a bundle's CERTIFICATE blocks without
// parsing it, so these tests stand for a CA certificate with any bytes.

// bundleOf returns a PEM bundle of one CERTIFICATE block per DER.
func bundleOf(ders ...string) []byte {
	var b bytes.Buffer
	for _, der := range ders {
		_ = pem.Encode(&b, &pem.Block{Type: "CERTIFICATE", Bytes: []byte(der)})
	}
	return b.Bytes()
}

// fingerprint is what CAFingerprints returns for a certificate of der:
// the first 8 bytes of its SHA-256 digest, as openssl writes them.
func fingerprint(der string) string {
	sum := sha256.Sum256([]byte(der))
	return strings.ReplaceAll(fmt.Sprintf("% X", sum[:8]), " ", ":")
}

// fingerprints returns the sorted fingerprints of ders.
func fingerprints(ders ...string) []string {
	var fps []string
	for _, der := range ders {
		fps = append(fps, fingerprint(der))
	}
	slices.Sort(fps)
	return fps
}

// distinctCAs returns a bundle of n certificates that no other i shares.
func distinctCAs(i, n int) []byte {
	ders := make([]string, n)
	for j := range ders {
		ders[j] = fmt.Sprintf("CA %d of bundle %d", j, i)
	}
	return bundleOf(ders...)
}

// caFlood is a ca.crt of 1 MiB of distinct certificates, as anyone who may
// create a Secret or ConfigMap can write. The transforms never keep it, so
// every test shares one.
var caFlood = sync.OnceValue(func() []byte {
	var b bytes.Buffer
	for j := 0; b.Len() < 1<<20; j++ {
		_ = pem.Encode(&b, &pem.Block{Type: "CERTIFICATE", Bytes: []byte{byte(j >> 16), byte(j >> 8), byte(j)}})
	}
	return b.Bytes()
})

// cachedVariants returns what the caches keep of a Secret, a ConfigMap
// with the bundle in data, and one with it in binaryData, each with
// bundle as ca.crt, each transformed twice, as a watch-list does.
func cachedVariants(t *testing.T, bundle []byte) map[string]any {
	t.Helper()
	meta := metav1.ObjectMeta{Name: "bundle", Namespace: "ns", ResourceVersion: "1"}
	secret, configMap := Secret(nil, caKey), ConfigMap(caKey)
	variants := map[string]any{}
	for name, in := range map[string]struct {
		obj       any
		transform func(any) (any, error)
	}{
		"Secret":               {&corev1.Secret{ObjectMeta: meta, Data: map[string][]byte{caKey: bundle}}, secret},
		"ConfigMap data":       {&corev1.ConfigMap{ObjectMeta: meta, Data: map[string]string{caKey: string(bundle)}}, configMap},
		"ConfigMap binaryData": {&corev1.ConfigMap{ObjectMeta: meta, BinaryData: map[string][]byte{caKey: bundle}}, configMap},
	} {
		out, err := in.transform(in.obj)
		if err != nil {
			t.Fatal(err)
		}
		if out, err = in.transform(out); err != nil {
			t.Fatal(err)
		}
		variants[name] = out
	}
	return variants
}

// TestCAFingerprints covers what the Secret and ConfigMap caches keep of
// a CA bundle: the distinct certificates of its PEM CERTIFICATE blocks, by
// fingerprint, up to maxCAs; beyond, that they are not known.
func TestCAFingerprints(t *testing.T) {
	many := make([]string, maxCAs)
	for j := range many {
		many[j] = fmt.Sprintf("CA %d", j)
	}
	tests := []struct {
		name   string
		bundle []byte
		want   []string
		known  bool
	}{
		{name: "one CA", bundle: bundleOf("first"), want: fingerprints("first"), known: true},
		{name: "two CAs, sorted", bundle: bundleOf("second", "first"), want: fingerprints("first", "second"), known: true},
		{name: "a CA twice counts once", bundle: bundleOf("first", "first"), want: fingerprints("first"), known: true},
		{name: "a CA repeated over 1 MiB counts once", bundle: bytes.Repeat(bundleOf("first"), 1<<20/len(bundleOf("first"))), want: fingerprints("first"), known: true},
		{
			name: "other blocks and text between blocks are skipped",
			bundle: slices.Concat([]byte("# clients\n"), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte("key")}),
				bundleOf("first"), []byte("trailing text\n")),
			want: fingerprints("first"), known: true,
		},
		{name: "no PEM: no CA", bundle: []byte("not a bundle"), known: true},
		{name: "empty: no CA", bundle: []byte{}, known: true},
		{name: "64 CAs", bundle: bundleOf(many...), want: fingerprints(many...), known: true},
		{name: "65 CAs are too many to know", bundle: bundleOf(append(many, "one more")...)},
		{name: "1 MiB of CAs", bundle: caFlood()},
	}
	for _, tt := range tests {
		for variant, cached := range cachedVariants(t, tt.bundle) {
			t.Run(tt.name+"/"+variant, func(t *testing.T) {
				got, known := CAFingerprints(cached)
				if known != tt.known || !slices.Equal(got, tt.want) {
					t.Errorf("CAFingerprints = %v, %t; want %v, %t", got, known, tt.want, tt.known)
				}
			})
		}
	}
}

// TestCAFingerprintsForged: what an object's author writes never passes
// for what the cache keeps. A value that reads like kept fingerprints is
// fingerprinted as a bundle (it holds no certificate), and an object that
// did not go through a transform has no known CAs. The key the cache keeps
// them under is one the apiserver refuses in a stored Secret or ConfigMap
// (TestIntegrationClientCARemovedEvent).
func TestCAFingerprintsForged(t *testing.T) {
	// Two fingerprints as the cache keeps them.
	forged := []byte("0123456789abcdef,fedcba9876543210")
	meta := metav1.ObjectMeta{Name: "bundle", Namespace: "ns"}
	tests := []struct {
		name  string
		obj   any
		known bool
	}{
		{name: "Secret value", obj: transformed(t, Secret(nil, caKey), &corev1.Secret{ObjectMeta: meta, Data: map[string][]byte{caKey: forged}}), known: true},
		{name: "Secret of the operator's type", obj: transformed(t, Secret(nil, caKey), &corev1.Secret{ObjectMeta: meta, Type: "cache.kubelite.io/trimmed", Data: map[string][]byte{caKey: forged}}), known: true},
		{name: "ConfigMap data", obj: transformed(t, ConfigMap(caKey), &corev1.ConfigMap{ObjectMeta: meta, Data: map[string]string{caKey: string(forged)}}), known: true},
		{name: "ConfigMap binaryData", obj: transformed(t, ConfigMap(caKey), &corev1.ConfigMap{ObjectMeta: meta, BinaryData: map[string][]byte{caKey: forged}}), known: true},
		{name: "ConfigMap annotation", obj: transformed(t, ConfigMap(caKey), &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: "bundle", Namespace: "ns", Annotations: map[string]string{"cache.kubelite.io/" + caKey: string(forged)}},
			Data:       map[string]string{caKey: ""},
		}), known: true},
		{name: "Secret not transformed", obj: &corev1.Secret{ObjectMeta: meta, Data: map[string][]byte{caKey: bundleOf("first")}}},
		{name: "ConfigMap not transformed", obj: &corev1.ConfigMap{ObjectMeta: meta, Data: map[string]string{caKey: string(bundleOf("first"))}}},
		{name: "another type", obj: &corev1.Pod{ObjectMeta: meta}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, known := CAFingerprints(tt.obj); known != tt.known || len(got) > 0 {
				t.Errorf("CAFingerprints = %v, %t; want none, known %t", got, known, tt.known)
			}
		})
	}
}

// transformed returns what transform makes of obj.
func transformed(t *testing.T, transform func(any) (any, error), obj any) any {
	t.Helper()
	out, err := transform(obj)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestRemovedCAs covers the CAs an update took out of a bundle, which
// the operator warns of: none unless a CA the cache knew is gone and the
// cache knows both versions.
func TestRemovedCAs(t *testing.T) {
	secret := func(bundle []byte) any {
		data := map[string][]byte{}
		if bundle != nil {
			data[caKey] = bundle
		}
		return transformed(t, Secret(nil, caKey), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "bundle"}, Data: data})
	}
	many := make([]string, maxCAs+1)
	for j := range many {
		many[j] = fmt.Sprintf("CA %d", j)
	}
	tests := []struct {
		name     string
		old, new any
		want     []string
	}{
		{name: "one of two removed", old: secret(bundleOf("first", "second")), new: secret(bundleOf("first")), want: fingerprints("second")},
		{name: "both removed", old: secret(bundleOf("first", "second")), new: secret([]byte("none")), want: fingerprints("first", "second")},
		{name: "replaced", old: secret(bundleOf("first")), new: secret(bundleOf("second")), want: fingerprints("first")},
		{name: "added", old: secret(bundleOf("first")), new: secret(bundleOf("first", "second"))},
		{name: "unchanged", old: secret(bundleOf("first", "second")), new: secret(bundleOf("second", "first"))},
		{name: "the key removed", old: secret(bundleOf("first")), new: secret(nil)},
		{name: "the key added", old: secret(nil), new: secret(bundleOf("first"))},
		{name: "from too many to know", old: secret(bundleOf(many...)), new: secret(bundleOf("first"))},
		{name: "to too many to know", old: secret(bundleOf("other")), new: secret(bundleOf(many...))},
		{
			name: "a ConfigMap's",
			old:  transformed(t, ConfigMap(caKey), &corev1.ConfigMap{Data: map[string]string{caKey: string(bundleOf("first", "second"))}}),
			new:  transformed(t, ConfigMap(caKey), &corev1.ConfigMap{BinaryData: map[string][]byte{caKey: bundleOf("second")}}),
			want: fingerprints("first"),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := RemovedCAs(tt.old, tt.new); !slices.Equal(got, tt.want) {
				t.Errorf("RemovedCAs = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestCAFingerprintsKeepNoKeysChange: a change of the CAs alone syncs
// nothing; the sync does not read them.
func TestCAFingerprintsKeepNoKeysChange(t *testing.T) {
	old, renewed := cachedVariants(t, bundleOf("first", "second")), cachedVariants(t, bundleOf("first"))
	if SecretKeysChanged(old["Secret"], renewed["Secret"]) {
		t.Error("SecretKeysChanged: a CA removed from the bundle counts as a change of keys")
	}
	if ConfigMapKeysChanged(old["ConfigMap data"], renewed["ConfigMap data"]) {
		t.Error("ConfigMapKeysChanged: a CA removed from the bundle counts as a change of keys")
	}
}
