package childcache

import (
	"fmt"
	"maps"
	"runtime"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	corev1 "k8s.io/api/core/v1"
)

const caKey = "ca.crt"

func TestConfigMap(t *testing.T) {
	tests := []struct {
		name   string
		data   map[string]string
		binary map[string][]byte
		want   []string
	}{
		{name: "the key in data", data: map[string]string{caKey: "-----BEGIN CERTIFICATE-----", "other": "x"}, want: []string{caKey}},
		{name: "the key in binaryData", binary: map[string][]byte{caKey: []byte("der")}, want: []string{caKey}},
		{name: "an empty value counts as there", data: map[string]string{caKey: ""}, want: []string{caKey}},
		{name: "other keys only", data: map[string]string{"ca.pem": "x"}, binary: map[string][]byte{"trust.p12": {1}}},
		{name: "no data"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns", UID: "uid", ResourceVersion: "7",
					Labels: map[string]string{"a": "b"}, Annotations: map[string]string{"c": "d"},
					ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "m"}}},
				Data:       tt.data,
				BinaryData: tt.binary,
			}
			transform := ConfigMap(caKey)
			out, err := transform(in)
			if err != nil {
				t.Fatal(err)
			}
			// A watch-list transforms each object twice.
			if out, err = transform(out); err != nil {
				t.Fatal(err)
			}
			got := out.(*corev1.ConfigMap)
			// Beside the keys, data holds the fingerprints of the
			// bundle's CAs, here none: no value is a PEM certificate.
			want := tt.want
			if len(want) > 0 {
				want = append(slices.Clone(want), caFingerprintsKey)
			}
			if keys := slices.Sorted(maps.Keys(got.Data)); !slices.Equal(keys, want) {
				t.Errorf("keys %v, want %v", keys, want)
			}
			for k, v := range got.Data {
				if v != "" {
					t.Errorf("the cached ConfigMap keeps the value of %s", k)
				}
			}
			if got.BinaryData != nil {
				t.Errorf("the cached ConfigMap keeps binaryData %v", slices.Collect(maps.Keys(got.BinaryData)))
			}
			if fps, known := CAFingerprints(got); known != (len(tt.want) > 0) || len(fps) > 0 {
				t.Errorf("CAFingerprints = %v, %t; want none, known if there is a bundle", fps, known)
			}
			if got.Name != "c" || got.Namespace != "ns" || got.UID != "uid" || got.ResourceVersion != "7" ||
				got.Labels != nil || got.Annotations != nil || got.ManagedFields != nil {
				t.Errorf("cached %+v, want only the name, namespace, UID and resourceVersion", got.ObjectMeta)
			}
		})
	}
}

func TestConfigMapKeysChanged(t *testing.T) {
	with := func(keys ...string) *corev1.ConfigMap {
		cm := &corev1.ConfigMap{}
		for _, k := range keys {
			if cm.Data == nil {
				cm.Data = map[string]string{}
			}
			cm.Data[k] = ""
		}
		return cm
	}
	tests := []struct {
		name     string
		old, new any
		want     bool
	}{
		{name: "same keys: a renewed bundle", old: with(caKey), new: with(caKey)},
		{name: "key added", old: with(), new: with(caKey), want: true},
		{name: "key removed", old: with(caKey), new: with(), want: true},
		{name: "not ConfigMaps", old: "x", new: with(), want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ConfigMapKeysChanged(tt.old, tt.new); got != tt.want {
				t.Errorf("ConfigMapKeysChanged = %t, want %t", got, tt.want)
			}
		})
	}
}

// maximalConfigMap is about the largest ConfigMap an apiserver stores:
// 3,500 keys of 246 bytes with empty values (the names alone fill most of
// 1 MiB), among them ca.crt, as anyone who may create a ConfigMap can
// write.
func maximalConfigMap(i int) *corev1.ConfigMap {
	data := make(map[string]string, 3500)
	data[caKey] = ""
	pad := strings.Repeat("k", 240)
	for j := len(data); j < 3500; j++ {
		data[fmt.Sprintf("%s%06d", pad, j)] = ""
	}
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("maximal-%03d", i), Namespace: "tenant", UID: types.UID(fmt.Sprintf("uid-%03d", i)), ResourceVersion: "1"},
		Data:       data,
	}
}

// TestConfigMapCacheCostOfMaximalConfigMaps caches 150 maximal ConfigMaps
// through the transform and requires the heap to grow by less than 1 MiB:
// what a ConfigMap costs the operator must not be up to whoever writes it,
// nor up to the CAs of its bundle: 64 distinct CAs, the most the cache
// knows, in data or in binaryData, or a ca.crt of 1 MiB of them.
func TestConfigMapCacheCostOfMaximalConfigMaps(t *testing.T) {
	tests := []struct {
		name      string
		configMap func(i int) *corev1.ConfigMap
	}{
		{name: "3,500 keys", configMap: maximalConfigMap},
		{name: "3,500 keys and 64 CAs", configMap: func(i int) *corev1.ConfigMap {
			cm := maximalConfigMap(i)
			cm.Data[caKey] = string(distinctCAs(i, maxCAs))
			return cm
		}},
		{name: "3,500 keys and 64 CAs in binaryData", configMap: func(i int) *corev1.ConfigMap {
			cm := maximalConfigMap(i)
			delete(cm.Data, caKey)
			cm.BinaryData = map[string][]byte{caKey: distinctCAs(i, maxCAs)}
			return cm
		}},
		{name: "1 MiB of CAs", configMap: func(i int) *corev1.ConfigMap {
			cm := maximalConfigMap(i)
			cm.Data = map[string]string{caKey: string(caFlood())}
			return cm
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			const n, bound = 150, 1 << 20
			store := cache.NewStore(cache.MetaNamespaceKeyFunc)
			transform := ConfigMap(caKey)
			// What the objects share, such as caFlood, is built before
			// the heap is measured.
			tt.configMap(0)
			before := heapAfterGC()
			for i := range n {
				obj, err := transform(tt.configMap(i))
				if err != nil {
					t.Fatal(err)
				}
				if err := store.Add(obj); err != nil {
					t.Fatal(err)
				}
			}
			grown := int64(heapAfterGC()) - int64(before)
			t.Logf("%d maximal ConfigMaps cached: heap grew by %d KiB (%d bytes each)", n, grown>>10, grown/n)
			if grown >= bound {
				t.Errorf("%d maximal ConfigMaps grew the heap by %.1f MiB, want under 1 MiB", n, float64(grown)/(1<<20))
			}
			if got := len(store.List()); got != n {
				t.Fatalf("%d ConfigMaps cached, want %d", got, n)
			}
			runtime.KeepAlive(store)
		})
	}
}
