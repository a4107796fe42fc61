package resources

import (
	"math"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
)

// Defaulted is a Memcached together with its spec with every default filled
// in: what the validation and every builder read. A sync defaults the spec
// once (Default) and hands the result to each of them, so they cannot
// disagree on a default.
type Defaulted struct {
	// Memcached is the object as stored. Its name, namespace and UID
	// name and own the children; the builders never read its Spec.
	Memcached *cachev1beta1.Memcached
	// Spec is the Memcached's spec with the defaults filled in.
	Spec cachev1beta1.MemcachedSpec
}

// Default fills in the defaults of mc's spec.
func Default(mc *cachev1beta1.Memcached) Defaulted {
	return Defaulted{Memcached: mc, Spec: withDefaults(mc.Spec)}
}

// withDefaults returns a copy of spec with every field the CRD schema
// defaults filled in. The apiserver applies the same defaults on write, so
// for stored objects this changes nothing; it keeps the builders total for
// objects that never passed through the apiserver, such as test fixtures and
// fuzz inputs.
func withDefaults(spec cachev1beta1.MemcachedSpec) cachev1beta1.MemcachedSpec {
	s := *spec.DeepCopy()
	if s.Replicas == nil {
		one := int32(1)
		s.Replicas = &one
	}
	if s.Image == "" {
		s.Image = cachev1beta1.DefaultImage
	}
	if s.Memory == nil {
		memory := resource.MustParse(cachev1beta1.DefaultMemory)
		s.Memory = &memory
	}
	if s.MaxConnections == 0 {
		s.MaxConnections = 1024
	}
	if s.Threads == 0 {
		s.Threads = 4
	}
	if s.Port == 0 {
		s.Port = cachev1beta1.DefaultPort
	}
	if s.MinReadySeconds == nil {
		s.MinReadySeconds = ptr.To[int32](cachev1beta1.DefaultMinReadySeconds)
	}
	if e := exporter(s); e != nil && e.Image == "" {
		e.Image = cachev1beta1.DefaultExporterImage
	}
	return s
}

// exporter is spec.monitoring.exporter, or nil.
func exporter(s cachev1beta1.MemcachedSpec) *cachev1beta1.Exporter {
	if s.Monitoring == nil {
		return nil
	}
	return s.Monitoring.Exporter
}

// exporterEnabled reports whether the exporter sidecar is on.
func exporterEnabled(s cachev1beta1.MemcachedSpec) bool {
	e := exporter(s)
	return e != nil && e.Enabled
}

// pod is spec.pod, or the empty overrides.
func pod(s cachev1beta1.MemcachedSpec) cachev1beta1.PodOverrides {
	if s.Pod == nil {
		return cachev1beta1.PodOverrides{}
	}
	return *s.Pod
}

// mebibyte is the unit of memcached's -m.
const mebibyte = 1 << 20

// memoryMiB is spec.memory in whole mebibytes, memcached's -m, rounded up.
// The CRD admits only whole mebibytes; rounding up keeps a fixture that
// never met the CRD from asking for less than it said.
func memoryMiB(s cachev1beta1.MemcachedSpec) int32 {
	if s.Memory == nil {
		return 0
	}
	v := s.Memory.Value()
	n := v / mebibyte
	if v%mebibyte > 0 {
		n++
	}
	return int32(max(math.MinInt32, min(math.MaxInt32, n)))
}

// kibibyte is the unit memcached's -I is passed in.
const kibibyte = 1 << 10

// maxItemSizeKiB is spec.maxItemSize in whole kibibytes, rounded up like
// memoryMiB; 0 when it is left out.
func maxItemSizeKiB(s cachev1beta1.MemcachedSpec) int64 {
	if s.MaxItemSize == nil {
		return 0
	}
	v := s.MaxItemSize.Value()
	n := v / kibibyte
	if v%kibibyte > 0 {
		n++
	}
	return n
}

// Endpoint is the address clients use to reach the cache through its
// headless Service.
func Endpoint(d Defaulted) string {
	return endpoint(ChildName(d.Memcached), d.Memcached.Namespace, d.Spec.Port)
}

// ZoneEndpoint is the address of the zone pool's own headless Service.
func ZoneEndpoint(d Defaulted, zone string) string {
	return endpoint(PoolName(d.Memcached, zone), d.Memcached.Namespace, d.Spec.Port)
}
