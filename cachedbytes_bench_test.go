package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
	"github.com/kubelite/memcached-operator/pkg/childcache"
	"github.com/kubelite/memcached-operator/pkg/intern"
	"github.com/kubelite/memcached-operator/pkg/resources"
)

// BenchmarkCachedBytes reports what one cached object of each kind holds
// on the heap, decoded as the informers decode it (protobuf for the child
// kinds, JSON for Memcacheds), with and without the informer transforms,
// over 2000 objects whose names differ as the objects of 2000 Memcacheds
// would. The objects are the unit tests' converged children, without the
// fields the apiserver defaults and the Deployment controller's status, so
// the figures are lower than a cluster's; `make bench` measures those. The
// time per operation is one decode and one transform.
func BenchmarkCachedBytes(b *testing.B) {
	mc, dep, svc, pdb := converge(b, newMemcached("cache"))
	const n = 2000
	rename := func(obj metav1.Object, i int) {
		name := fmt.Sprintf("cache-%d", i)
		obj.SetName(name)
		labels := maps.Clone(obj.GetLabels())
		if labels == nil {
			labels = map[string]string{}
		}
		labels[resources.LabelInstance] = name
		obj.SetLabels(labels)
		// A child's controller is the Memcached of its name; one whose
		// owner names another is cached as a foreign object.
		owners := slices.Clone(obj.GetOwnerReferences())
		for j := range owners {
			owners[j].Name = name
		}
		obj.SetOwnerReferences(owners)
	}
	type protoObject interface {
		metav1.Object
		Marshal() ([]byte, error)
	}
	encodeProto := func(o protoObject) func(int) []byte {
		return func(i int) []byte {
			rename(o, i)
			raw, err := o.Marshal()
			if err != nil {
				b.Fatal(err)
			}
			return raw
		}
	}
	kinds := []struct {
		name      string
		encode    func(i int) []byte
		decode    func([]byte) any
		transform func(*intern.Table) func(any) (any, error)
	}{
		{"Deployment", encodeProto(dep.DeepCopy()), func(raw []byte) any {
			d := &appsv1.Deployment{}
			_ = d.Unmarshal(raw)
			return d
		}, childcache.Child},
		{"Service", encodeProto(svc.DeepCopy()), func(raw []byte) any {
			s := &corev1.Service{}
			_ = s.Unmarshal(raw)
			return s
		}, childcache.Child},
		{"PodDisruptionBudget", encodeProto(pdb.DeepCopy()), func(raw []byte) any {
			p := &policyv1.PodDisruptionBudget{}
			_ = p.Unmarshal(raw)
			return p
		}, childcache.Child},
		{"Memcached", func(i int) []byte {
			m := mc.DeepCopy()
			rename(m, i)
			raw, err := json.Marshal(m)
			if err != nil {
				b.Fatal(err)
			}
			return raw
		}, func(raw []byte) any {
			m := &cachev1beta1.Memcached{}
			_ = json.Unmarshal(raw, m)
			return m
		}, childcache.Memcached},
	}
	for _, kind := range kinds {
		raw := make([][]byte, n)
		for i := range raw {
			raw[i] = kind.encode(i)
		}
		for _, trimmed := range []bool{false, true} {
			name := kind.name + "/decoded"
			if trimmed {
				name = kind.name + "/transformed"
			}
			b.Run(name, func(b *testing.B) {
				transform := func(obj any) (any, error) { return obj, nil }
				if trimmed {
					transform = kind.transform(intern.New(intern.DefaultCapacity))
				}
				held := make([]any, n)
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				for i := range n {
					held[i], _ = transform(kind.decode(raw[i]))
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				runtime.KeepAlive(held)

				i := 0
				for b.Loop() {
					_, _ = transform(kind.decode(raw[i%n]))
					i++
				}
				// After the loop: b.Loop resets what was reported before it.
				b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "B/cached")
			})
		}
	}
}
