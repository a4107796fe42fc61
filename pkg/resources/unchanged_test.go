package resources

import (
	"testing"

	"k8s.io/utils/ptr"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
)

// TestDeploymentUnchangedWithoutNewFields pins the Pod template hash of the
// Deployments of specs that set none of spec.auth, spec.tls.clientCA and
// spec.networkPolicy to what the release before them rendered (dc8485c): a
// Pod template that changed would roll, and empty, every such cache on an
// operator upgrade. The rest of the Deployment may change without a
// restart (this release adds the rendering annotations and a rolling
// update that surges instead). TLS is among them, since the reloader
// sidecar's script and name are part of the template. A change meant to
// roll them bumps RenderingVersion and updates the hashes here.
//
// Each spec carries the image the earlier releases defaulted, as every
// stored Memcached does: the apiserver wrote the CRD's default into each
// object when it was created, so a new default image changes no stored
// spec and rolls no cache.
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
		{name: "defaults", hash: "e549rkdalbds"},
		{name: "exporter", spec: withExporter, hash: "1pa4u9cfjijwf"},
		{name: "TLS", spec: withTLS, hash: "nef29k6fvo91"},
		{name: "TLS and exporter on port 11212", spec: func(s *cachev1beta1.MemcachedSpec) {
			withTLS(s)
			withExporter(s)
			s.Port = 11212
		}, hash: "bx6adpadgofo"},
		{name: "TLS and exporter", spec: func(s *cachev1beta1.MemcachedSpec) {
			withTLS(s)
			withExporter(s)
		}, hash: "3nfrz13cv09kh"},
		{name: "TLS on port 11212", spec: func(s *cachev1beta1.MemcachedSpec) {
			withTLS(s)
			s.Port = 11212
		}, hash: "2unul16bw2cqj"},
		{name: "extra arguments and Pod settings", spec: func(s *cachev1beta1.MemcachedSpec) {
			s.ExtraArgs = []string{"-o", "lru_crawler"}
			s.Replicas = ptr.To[int32](3)
			s.Pod = &cachev1beta1.PodOverrides{PriorityClassName: "high", PreStopDelaySeconds: ptr.To[int32](0)}
		}, hash: "ougi259zso89"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := Deployment(Default(memcached(func(s *cachev1beta1.MemcachedSpec) {
				s.Image = "memcached:1.6.39"
				if tt.spec != nil {
					tt.spec(s)
				}
			})))
			if err != nil {
				t.Fatal(err)
			}
			if got := d.Annotations[TemplateHashAnnotation]; got != tt.hash {
				t.Errorf("Pod template hash %s, want %s: the Pod template of a Memcached without the new fields changed, which would roll every such cache", got, tt.hash)
			}
		})
	}
}
