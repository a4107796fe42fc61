package resources

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	cachev1alpha1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1alpha1"
)

func benchMemcached() *cachev1alpha1.Memcached {
	return memcached(func(s *cachev1alpha1.MemcachedSpec) {
		s.Exporter = &cachev1alpha1.ExporterSpec{Enabled: true}
		s.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "cache", Effect: corev1.TaintEffectNoSchedule}}
		s.Resources = &cachev1alpha1.ResourceOverrides{Limits: &cachev1alpha1.ResourceAmounts{CPU: "2"}}
	})
}

func BenchmarkDeployment(b *testing.B) {
	mc := benchMemcached()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Deployment(mc); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkService(b *testing.B) {
	mc := benchMemcached()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Service(mc); err != nil {
			b.Fatal(err)
		}
	}
}
