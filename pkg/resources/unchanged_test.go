package resources

import (
	"testing"

	"k8s.io/utils/ptr"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
)

// TestDeploymentUnchangedWithoutNewFields pins the spec hash of the
// Deployments of specs that set none of spec.auth, spec.tls.clientCA and
// spec.networkPolicy to what the release before them rendered: the hash
// covers the whole apply configuration, so an equal hash is an unchanged
// Deployment, and a Pod template that changed would roll, and empty,
// every such cache on an operator upgrade. TLS is among them, since the
// reloader sidecar's script and name are part of the template. A change
// meant to roll them, such as a new default image, updates the hashes here.
func TestDeploymentUnchangedWithoutNewFields(t *testing.T) {
	withExporter := func(s *cachev1beta1.MemcachedSpec) {
		s.Monitoring = &cachev1beta1.Monitoring{Exporter: &cachev1beta1.Exporter{Enabled: true}}
	}
	withTLS := func(s *cachev1beta1.MemcachedSpec) { s.TLS = &cachev1beta1.TLS{SecretName: "cache-tls"} }
	tests := []struct {
		name string
		spec func(*cachev1beta1.MemcachedSpec)
		hash string
	}{
		{name: "defaults", hash: "22y0fev5d7f7q"},
		{name: "exporter", spec: withExporter, hash: "206vls8iugqf5"},
		{name: "TLS", spec: withTLS, hash: "2708fg1hzzh96"},
		{name: "TLS and exporter on port 11212", spec: func(s *cachev1beta1.MemcachedSpec) {
			withTLS(s)
			withExporter(s)
			s.Port = 11212
		}, hash: "3he2zp3mmgvhd"},
		{name: "TLS and exporter", spec: func(s *cachev1beta1.MemcachedSpec) {
			withTLS(s)
			withExporter(s)
		}, hash: "3on81qwe5aufi"},
		{name: "TLS on port 11212", spec: func(s *cachev1beta1.MemcachedSpec) {
			withTLS(s)
			s.Port = 11212
		}, hash: "33tbmhijubbr8"},
		{name: "extra arguments and Pod settings", spec: func(s *cachev1beta1.MemcachedSpec) {
			s.ExtraArgs = []string{"-o", "lru_crawler"}
			s.Replicas = ptr.To[int32](3)
			s.Pod = &cachev1beta1.PodOverrides{PriorityClassName: "high", PreStopDelaySeconds: ptr.To[int32](0)}
		}, hash: "33wjdx359zexl"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := Deployment(Default(memcached(tt.spec)))
			if err != nil {
				t.Fatal(err)
			}
			if got := d.Annotations[SpecHashAnnotation]; got != tt.hash {
				t.Errorf("spec hash %s, want %s: the Deployment of a Memcached without the new fields changed, which would roll every such cache", got, tt.hash)
			}
		})
	}
}
