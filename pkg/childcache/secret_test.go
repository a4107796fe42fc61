package childcache

import (
	"fmt"
	"maps"
	"runtime"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

var tlsKeys = []string{corev1.TLSCertKey, corev1.TLSPrivateKeyKey}

func TestSecret(t *testing.T) {
	tests := []struct {
		name string
		data map[string][]byte
		want []string
	}{
		{name: "both keys", data: map[string][]byte{corev1.TLSCertKey: []byte("cert"), corev1.TLSPrivateKeyKey: []byte("key"), "ca.crt": []byte("ca")}, want: tlsKeys},
		{name: "one key", data: map[string][]byte{corev1.TLSPrivateKeyKey: []byte("key")}, want: []string{corev1.TLSPrivateKeyKey}},
		{name: "an empty value counts as there", data: map[string][]byte{corev1.TLSCertKey: {}}, want: []string{corev1.TLSCertKey}},
		{name: "none of the keys", data: map[string][]byte{"password": []byte("hunter2")}},
		{name: "no data"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "ns", UID: "uid", ResourceVersion: "7",
					Labels: map[string]string{"a": "b"}, Annotations: map[string]string{"c": "d"}},
				Type: corev1.SecretTypeTLS,
				Data: tt.data,
			}
			out, err := Secret(nil, "", tlsKeys...)(in)
			if err != nil {
				t.Fatal(err)
			}
			got := out.(*corev1.Secret)
			if keys := slices.Sorted(maps.Keys(got.Data)); !slices.Equal(keys, tt.want) {
				t.Errorf("keys %v, want %v", keys, tt.want)
			}
			for k, v := range got.Data {
				if v != nil {
					t.Errorf("the cached Secret keeps the value of %s", k)
				}
			}
			if got.Name != "s" || got.Namespace != "ns" || got.UID != "uid" || got.ResourceVersion != "7" || got.Labels != nil || got.Annotations != nil || got.Type != "" || !isTrimmed(got) {
				t.Errorf("cached %+v of type %q, stringData %v, want only the name, namespace, UID and resourceVersion, and the trimmed mark", got.ObjectMeta, got.Type, got.StringData)
			}
		})
	}
}

// TestSecretChecks covers the keys the transform keeps a verdict of: the
// check's problem, bounded, or nil for a usable value, and nothing for an
// absent key.
func TestSecretChecks(t *testing.T) {
	check := func(v []byte) string {
		switch string(v) {
		case "good":
			return ""
		case "long":
			return strings.Repeat("x", 1000)
		}
		return "bad value"
	}
	tests := []struct {
		name    string
		data    map[string][]byte
		present bool
		problem string
	}{
		{name: "usable", data: map[string][]byte{"auth": []byte("good")}, present: true},
		{name: "a problem", data: map[string][]byte{"auth": []byte("user pw")}, present: true, problem: "bad value"},
		{name: "a problem cut to its bound", data: map[string][]byte{"auth": []byte("long")}, present: true, problem: strings.Repeat("x", maxProblemBytes)},
		{name: "absent", data: map[string][]byte{"other": []byte("good")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			transform := Secret(map[string]func([]byte) string{"auth": check}, "", tlsKeys...)
			out, err := transform(&corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "ns"},
				Data:       tt.data,
			})
			if err != nil {
				t.Fatal(err)
			}
			// A watch-list transforms each object twice.
			if out, err = transform(out); err != nil {
				t.Fatal(err)
			}
			got := out.(*corev1.Secret)
			if _, ok := got.Data["auth"]; ok != tt.present || len(got.Data) != map[bool]int{true: 1, false: 0}[tt.present] {
				t.Errorf("cached keys %v, want auth present: %v", slices.Collect(maps.Keys(got.Data)), tt.present)
			}
			if p := SecretProblem(got, "auth"); p != tt.problem {
				t.Errorf("SecretProblem = %q, want %q", p, tt.problem)
			}
		})
	}
}

// TestSecretForgedMark: a Secret that anyone stored is trimmed whatever it
// carries, even a type under the operator's group, and no byte of its
// values is kept. (stringData, the transform's own mark, is never
// returned by the apiserver.)
func TestSecretForgedMark(t *testing.T) {
	const value = "forged-value-that-must-not-leak"
	tests := []struct {
		name   string
		secret *corev1.Secret
	}{
		{name: "a type under the operator's group", secret: &corev1.Secret{Type: "cache.kubelite.io/trimmed"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := tt.secret
			in.ObjectMeta = metav1.ObjectMeta{Name: "s", Namespace: "ns"}
			in.Data = map[string][]byte{"auth": []byte(value), corev1.TLSCertKey: []byte(value), caKey: []byte(value), "pad": []byte(value)}
			check := func(v []byte) string {
				if len(v) == 0 {
					return "empty"
				}
				return ""
			}
			out, err := Secret(map[string]func([]byte) string{"auth": check}, caKey, tlsKeys...)(in)
			if err != nil {
				t.Fatal(err)
			}
			got := out.(*corev1.Secret)
			if got == in {
				t.Fatal("the transform kept the Secret as it was stored")
			}
			if keys := slices.Sorted(maps.Keys(got.Data)); !slices.Equal(keys, []string{"auth", caKey, caFingerprintsKey, corev1.TLSCertKey}) {
				t.Errorf("cached keys %v, want auth, %s, its fingerprints and %s", keys, caKey, corev1.TLSCertKey)
			}
			if dump := fmt.Sprintf("%#v", got); strings.Contains(dump, value) {
				t.Errorf("the cached Secret holds its value: %s", dump)
			}
			if p := SecretProblem(got, "auth"); p != "" {
				t.Errorf("SecretProblem = %q, want the check's verdict on the value, which is usable", p)
			}
		})
	}
}

// TestSecretKeysChanged: what the cache keeps changed, or not.
func TestSecretKeysChanged(t *testing.T) {
	secret := func(data map[string][]byte) *corev1.Secret { return &corev1.Secret{Data: data} }
	tests := []struct {
		name     string
		old, new map[string][]byte
		want     bool
	}{
		{name: "same keys", old: map[string][]byte{"tls.crt": nil}, new: map[string][]byte{"tls.crt": nil}},
		{name: "a key added", old: map[string][]byte{"tls.crt": nil}, new: map[string][]byte{"tls.crt": nil, "tls.key": nil}, want: true},
		{name: "a key replaced", old: map[string][]byte{"tls.crt": nil}, new: map[string][]byte{"tls.key": nil}, want: true},
		{name: "a verdict changed", old: map[string][]byte{"auth": nil}, new: map[string][]byte{"auth": []byte("no entry")}, want: true},
		{name: "a verdict fixed", old: map[string][]byte{"auth": []byte("no entry")}, new: map[string][]byte{"auth": nil}, want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := SecretKeysChanged(secret(tt.old), secret(tt.new)); got != tt.want {
				t.Errorf("SecretKeysChanged = %v, want %v", got, tt.want)
			}
		})
	}
}

// maximalSecret is about the largest Secret an apiserver stores: 3,500
// keys of 246 bytes (the names alone fill most of 1 MiB), among them the
// TLS keys and a checked key, as anyone who may create a Secret can write.
func maximalSecret(i int) *corev1.Secret {
	data := make(map[string][]byte, 3500)
	data[corev1.TLSCertKey], data[corev1.TLSPrivateKeyKey], data["auth"] = nil, nil, nil
	pad := strings.Repeat("k", 240)
	for j := len(data); j < 3500; j++ {
		data[fmt.Sprintf("%s%06d", pad, j)] = nil
	}
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("maximal-%03d", i), Namespace: "tenant", UID: types.UID(fmt.Sprintf("uid-%03d", i)), ResourceVersion: "1"},
		Data:       data,
	}
}

// TestSecretCacheCostOfMaximalSecrets caches 150 maximal Secrets through
// the transform and requires the heap to grow by less than 1 MiB: what a
// Secret costs the operator must not be up to whoever writes it, nor up to
// what a check says of it, nor up to the CAs of its bundle: one of 64
// distinct CAs, the most the cache knows, or a ca.crt of 1 MiB of them.
//
// A Secret's type is anyone's to choose, so the same holds of a type that
// reads like the operator's own.
func TestSecretCacheCostOfMaximalSecrets(t *testing.T) {
	shapes := []struct {
		name   string
		secret func(i int) *corev1.Secret
	}{
		{name: "3,500 keys", secret: maximalSecret},
		{name: "3,500 keys and 64 CAs", secret: func(i int) *corev1.Secret {
			s := maximalSecret(i)
			s.Data[caKey] = distinctCAs(i, maxCAs)
			return s
		}},
		{name: "1 MiB of CAs", secret: func(i int) *corev1.Secret {
			s := maximalSecret(i)
			s.Data = map[string][]byte{corev1.TLSCertKey: nil, corev1.TLSPrivateKeyKey: nil, "auth": nil, caKey: caFlood()}
			return s
		}},
	}
	for _, shape := range shapes {
		for _, secretType := range []corev1.SecretType{corev1.SecretTypeOpaque, "cache.kubelite.io/trimmed"} {
			t.Run(shape.name+"/"+string(secretType), func(t *testing.T) {
				const n, bound = 150, 1 << 20
				store := cache.NewStore(cache.MetaNamespaceKeyFunc)
				verbose := func([]byte) string { return strings.Repeat("wrong ", 10000) }
				transform := Secret(map[string]func([]byte) string{"auth": verbose}, caKey, tlsKeys...)
				// What the objects share, such as caFlood, is built
				// before the heap is measured.
				shape.secret(0)
				before := heapAfterGC()
				for i := range n {
					secret := shape.secret(i)
					secret.Type = secretType
					obj, err := transform(secret)
					if err != nil {
						t.Fatal(err)
					}
					if err := store.Add(obj); err != nil {
						t.Fatal(err)
					}
				}
				grown := int64(heapAfterGC()) - int64(before)
				t.Logf("%d maximal Secrets cached: heap grew by %d KiB (%d bytes each)", n, grown>>10, grown/n)
				if grown >= bound {
					t.Errorf("%d maximal Secrets grew the heap by %.1f MiB, want under 1 MiB", n, float64(grown)/(1<<20))
				}
				if got := len(store.List()); got != n {
					t.Fatalf("%d Secrets cached, want %d", got, n)
				}
				runtime.KeepAlive(store)
			})
		}
	}
}

func heapAfterGC() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
