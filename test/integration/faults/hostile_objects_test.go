//go:build integration

package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
	"github.com/kubelite/memcached-operator/pkg/resources"
	"github.com/kubelite/memcached-operator/test/integration/framework"
)

// TestFaultHostileSecrets fills the operator's namespace with Secrets as
// large as the apiserver stores, as anyone who may create a Secret there
// can: 2,900 key names each, an auth value, and a type the operator's
// cache once took for its own trimmed copies (cache.kubelite.io/trimmed).
// 150 of them must grow the operator's heap by less than 1 MiB, a
// Memcached whose spec.tls names one of them still sees its tls.crt and
// tls.key, and one whose spec.auth names one reports what is wrong with
// its auth file without any byte of its value showing in the status, an
// Event or the operator's log.
func TestFaultHostileSecrets(t *testing.T) {
	t.Parallel()
	checkHostileObjects(t, hostileObjects{
		kind: "Secrets",
		create: func(ctx context.Context, ns string, i int) error {
			_, err := framework.Kube().CoreV1().Secrets(ns).Create(ctx, hostileSecret(i), metav1.CreateOptions{})
			return err
		},
		spec: func(i int) cachev1beta1.MemcachedSpec {
			return cachev1beta1.MemcachedSpec{TLS: &cachev1beta1.TLS{SecretName: hostileSecret(i).Name}}
		},
		problems: []string{cachev1beta1.ReasonTLSSecretNotFound, cachev1beta1.ReasonTLSSecretInvalid},
		after: func(t *testing.T, ns string, op *framework.Operator) {
			ctx := context.Background()
			const name = "auth-hostile"
			framework.CreateMemcached(t, ns, name, func(s *cachev1beta1.MemcachedSpec) {
				s.Auth = &cachev1beta1.Auth{SecretName: hostileSecret(159).Name}
			})
			var mc *cachev1beta1.Memcached
			framework.Eventually(t, time.Minute, name+" reports its auth Secret invalid", func(ctx context.Context) (bool, string) {
				var err error
				if mc, err = framework.GetMemcached(ctx, ns, name); err != nil {
					return false, err.Error()
				}
				for _, c := range mc.Status.Conditions {
					if c.Reason == cachev1beta1.ReasonAuthSecretInvalid {
						return true, ""
					}
				}
				return false, fmt.Sprintf("conditions %v", mc.Status.Conditions)
			})
			events, err := framework.Kube().CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			status, err := json.Marshal(mc.Status)
			if err != nil {
				t.Fatal(err)
			}
			for what, text := range map[string]string{"the status": string(status), "the Events": fmt.Sprint(events.Items), "the operator's log": op.Log()} {
				if i := strings.Index(text, hostileValueMark); i >= 0 {
					t.Errorf("%s shows a hostile Secret's value: …%.200s…", what, text[max(0, i-100):])
				}
			}
		},
	})
}

// hostileValueMark starts the auth value of every hostileSecret.
const hostileValueMark = "hostile-secret-value"

// hostileSecret is about the largest Secret the apiserver stores: the TLS
// keys, an auth value of 200 kB that memcached would refuse (no ':'), and
// 2,897 other keys whose names fill most of the rest of its 1 MiB. Its
// type is one the operator's group could be taken to own.
func hostileSecret(i int) *corev1.Secret {
	data := map[string][]byte{
		corev1.TLSCertKey: []byte("cert"), corev1.TLSPrivateKeyKey: []byte("key"),
		resources.AuthSecretKey: []byte(hostileValueMark + strings.Repeat("v", 200_000)),
	}
	pad := strings.Repeat("k", 240)
	for j := len(data); j < 2900; j++ {
		data[fmt.Sprintf("%s%06d", pad, j)] = nil
	}
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("hostile-%03d", i)}, Type: "cache.kubelite.io/trimmed", Data: data}
}

// TestFaultHostileConfigMaps does the same with ConfigMaps of 3,500 key
// names, which the operator caches for spec.tls.clientCA: a Memcached
// whose client CA is the last one still sees its ca.crt.
func TestFaultHostileConfigMaps(t *testing.T) {
	t.Parallel()
	checkHostileObjects(t, hostileObjects{
		kind: "ConfigMaps",
		setup: func(t *testing.T, ns string) {
			framework.CreateTLSSecret(t, ns, "cache-tls", "v1")
		},
		create: func(ctx context.Context, ns string, i int) error {
			_, err := framework.Kube().CoreV1().ConfigMaps(ns).Create(ctx, hostileConfigMap(i), metav1.CreateOptions{})
			return err
		},
		spec: func(i int) cachev1beta1.MemcachedSpec {
			return cachev1beta1.MemcachedSpec{TLS: &cachev1beta1.TLS{
				SecretName: "cache-tls",
				ClientCA:   &cachev1beta1.ClientCA{ConfigMapName: hostileConfigMap(i).Name},
			}}
		},
		problems: []string{cachev1beta1.ReasonClientCANotFound, cachev1beta1.ReasonClientCAInvalid},
	})
}

// hostileConfigMap is about the largest ConfigMap the apiserver stores,
// with ca.crt and 3,499 other keys whose names fill most of its 1 MiB.
func hostileConfigMap(i int) *corev1.ConfigMap {
	data := map[string]string{cachev1beta1.ClientCAKey: "bundle"}
	pad := strings.Repeat("k", 240)
	for j := len(data); j < 3500; j++ {
		data[fmt.Sprintf("%s%06d", pad, j)] = ""
	}
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("hostile-%03d", i)}, Data: data}
}

// hostileObjects is one kind of object anyone may fill a namespace with,
// that the operator caches without a label selector.
type hostileObjects struct {
	kind string
	// setup, if set, creates what the Memcacheds need besides the objects.
	setup func(t *testing.T, ns string)
	// create creates the i-th object; spec is that of a Memcached that
	// names it, which shows one of problems until the operator's cache
	// holds it.
	create   func(ctx context.Context, ns string, i int) error
	spec     func(i int) cachev1beta1.MemcachedSpec
	problems []string
	// after, if set, runs once the heap has been measured.
	after func(t *testing.T, ns string, op *framework.Operator)
}

// checkHostileObjects creates 160 of the objects in the namespace the
// operator binary watches and requires the 150 after the first ten to grow
// its heap by less than 1 MiB. The operator is the one released
// (framework.ReleaseBinary), whose heap is the one users see.
func checkHostileObjects(t *testing.T, h hostileObjects) {
	t.Helper()
	ctx := context.Background()
	ns := framework.NewNamespace(t)
	op := framework.StartOperatorBinary(t, framework.ReleaseBinary(t), ns, "--enable-profiling")
	op.WaitReady(t)
	if h.setup != nil {
		h.setup(t, ns)
	}

	create := func(from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			if err := h.create(ctx, ns, i); err != nil {
				t.Fatalf("creating %s %d: %v", h.kind, i, err)
			}
		}
	}
	// seen waits until the operator's cache holds object i: a Memcached
	// that names it leaves the problems.
	seen := func(i int) {
		t.Helper()
		name := fmt.Sprintf("tls-%03d", i)
		framework.CreateMemcached(t, ns, name, func(s *cachev1beta1.MemcachedSpec) { *s = h.spec(i) })
		framework.Eventually(t, time.Minute, name+" sees the keys it needs", func(ctx context.Context) (bool, string) {
			mc, err := framework.GetMemcached(ctx, ns, name)
			if err != nil {
				return false, err.Error()
			}
			for _, c := range mc.Status.Conditions {
				if slices.Contains(h.problems, c.Reason) {
					return false, c.Reason + ": " + c.Message
				}
			}
			return mc.Status.ObservedGeneration == mc.Generation, fmt.Sprintf("observed generation %d of %d", mc.Status.ObservedGeneration, mc.Generation)
		})
	}
	// Ten first, so that the watch's buffers have grown to the largest
	// object before the heap is first measured: that cost is paid once.
	create(0, 10)
	seen(9)
	before := heapAfterGC(t, op)
	create(10, 160)
	seen(159)
	after := heapAfterGC(t, op)
	grown := after - before
	t.Logf("150 maximal %s: operator heap %.1f MiB before, %.1f MiB after, grew %d KiB", h.kind, before/(1<<20), after/(1<<20), int64(grown)>>10)
	if grown >= 1<<20 {
		t.Errorf("150 maximal %s grew the operator's heap by %.1f MiB, want under 1 MiB", h.kind, grown/(1<<20))
	}
	if h.after != nil {
		h.after(t, ns, op)
	}
}

// heapAfterGC is the binary's live heap: its heap profile is asked for
// with gc=1, which collects first, then its go_memstats_heap_alloc_bytes
// is read. The smallest of three readings is taken.
func heapAfterGC(t *testing.T, op *framework.Operator) float64 {
	t.Helper()
	least := -1.0
	for range 3 {
		if code, body := op.Get(op.MetricsAddr, "/debug/pprof/heap?gc=1"); code != http.StatusOK {
			t.Fatalf("heap profile: %d %.200s", code, body)
		}
		m, err := op.Metrics()
		if err != nil {
			t.Fatal(err)
		}
		if !m.Has("go_memstats_heap_alloc_bytes") {
			t.Fatal("the operator exports no go_memstats_heap_alloc_bytes")
		}
		if v := m.Sum("go_memstats_heap_alloc_bytes", nil); least < 0 || v < least {
			least = v
		}
	}
	return least
}
