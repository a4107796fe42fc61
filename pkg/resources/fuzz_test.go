package resources

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	cachev1alpha1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1alpha1"
)

// FuzzBuilders feeds arbitrary specs to Validate and the builders. None may
// panic, and for any spec inside the CRD's ranges without a memory override
// the container memory limit must exceed -m. `go test` runs the seeds;
// `go test -fuzz FuzzBuilders ./pkg/resources` explores.
func FuzzBuilders(f *testing.F) {
	f.Add(int32(1), "memcached:1.6.39", int32(64), int32(1024), int32(4), int32(11211), "", "", "", "", false, "", "")
	f.Add(int32(0), "", int32(16), int32(1), int32(1), int32(1), "500m", "2", "64Mi", "1Gi", true, "dedicated", "ssd")
	f.Add(int32(1000), "r/m:x", int32(65536), int32(65536), int32(64), int32(65535), "x", "-1", "1e3", "0.5", true, "", "")
	f.Fuzz(func(t *testing.T, replicas int32, image string, memoryMB, maxConnections, threads, port int32,
		reqCPU, limCPU, reqMem, limMem string, exporter bool, tolerationKey, nodeLabel string) {
		mc := &cachev1alpha1.Memcached{
			ObjectMeta: metav1.ObjectMeta{Name: "fuzz", Namespace: "ns", UID: "uid"},
			Spec: cachev1alpha1.MemcachedSpec{
				Replicas:       ptr.To(replicas),
				Image:          image,
				MemoryMB:       memoryMB,
				MaxConnections: maxConnections,
				Threads:        threads,
				Port:           port,
				Exporter:       &cachev1alpha1.ExporterSpec{Enabled: exporter},
			},
		}
		if reqCPU+limCPU+reqMem+limMem != "" {
			mc.Spec.Resources = &cachev1alpha1.ResourceOverrides{
				Requests: &cachev1alpha1.ResourceAmounts{CPU: reqCPU, Memory: reqMem},
				Limits:   &cachev1alpha1.ResourceAmounts{CPU: limCPU, Memory: limMem},
			}
		}
		if tolerationKey != "" {
			mc.Spec.Tolerations = []corev1.Toleration{{Key: tolerationKey, Operator: corev1.TolerationOpExists}}
		}
		if nodeLabel != "" {
			mc.Spec.NodeSelector = map[string]string{"pool": nodeLabel}
		}

		_ = Validate(mc)
		dep, err := Deployment(mc)
		if err != nil {
			t.Fatalf("Deployment: %v", err)
		}
		if _, err := Service(mc); err != nil {
			t.Fatalf("Service: %v", err)
		}
		_ = Endpoint(mc)

		inRange := memoryMB >= 16 && memoryMB <= 65536 && maxConnections >= 1 && maxConnections <= 65536
		if inRange && mc.Spec.Resources == nil {
			limit := (*dep.Spec.Template.Spec.Containers[0].Resources.Limits)[corev1.ResourceMemory]
			if limit.Cmp(*resource.NewQuantity(int64(memoryMB)*1024*1024, resource.BinarySI)) <= 0 {
				t.Errorf("memory limit %s does not exceed -m %d MiB", limit.String(), memoryMB)
			}
		}
	})
}
