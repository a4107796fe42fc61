package resources

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
)

func benchMemcached() *cachev1beta1.Memcached {
	return memcached(func(s *cachev1beta1.MemcachedSpec) {
		s.Monitoring = &cachev1beta1.Monitoring{Exporter: &cachev1beta1.Exporter{Enabled: true}}
		podOf(s).Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "cache", Effect: corev1.TaintEffectNoSchedule}}
		s.Resources = &cachev1beta1.ResourceOverrides{Limits: &cachev1beta1.ResourceAmounts{CPU: "2"}}
	})
}

func BenchmarkDeployment(b *testing.B) {
	mc := benchMemcached()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Deployment(Default(mc)); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkService(b *testing.B) {
	mc := benchMemcached()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Service(Default(mc)); err != nil {
			b.Fatal(err)
		}
	}
}
