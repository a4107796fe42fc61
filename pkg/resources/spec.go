package resources

import (
	cachev1alpha1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1alpha1"
)

// withDefaults returns a copy of spec with every field the CRD schema
// defaults filled in. The apiserver applies the same defaults on write, so
// for stored objects this changes nothing; it keeps the builders total for
// objects that never passed through the apiserver, such as test fixtures and
// fuzz inputs.
func withDefaults(spec cachev1alpha1.MemcachedSpec) cachev1alpha1.MemcachedSpec {
	s := *spec.DeepCopy()
	if s.Replicas == nil {
		one := int32(1)
		s.Replicas = &one
	}
	if s.Image == "" {
		s.Image = cachev1alpha1.DefaultImage
	}
	if s.MemoryMB == 0 {
		s.MemoryMB = 64
	}
	if s.MaxConnections == 0 {
		s.MaxConnections = 1024
	}
	if s.Threads == 0 {
		s.Threads = 4
	}
	if s.Port == 0 {
		s.Port = cachev1alpha1.DefaultPort
	}
	if s.Exporter != nil && s.Exporter.Image == "" {
		s.Exporter.Image = cachev1alpha1.DefaultExporterImage
	}
	return s
}

// exporterEnabled reports whether the exporter sidecar is on.
func exporterEnabled(s cachev1alpha1.MemcachedSpec) bool {
	return s.Exporter != nil && s.Exporter.Enabled
}

// Endpoint is the address clients use to reach the cache through its
// headless Service.
func Endpoint(mc *cachev1alpha1.Memcached) string {
	s := withDefaults(mc.Spec)
	return endpoint(ChildName(mc), mc.Namespace, s.Port)
}
