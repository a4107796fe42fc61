package resources

import (
	"reflect"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/utils/ptr"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
)

func memcached(mutate func(*cachev1beta1.MemcachedSpec)) *cachev1beta1.Memcached {
	mc := &cachev1beta1.Memcached{
		ObjectMeta: metav1.ObjectMeta{Name: "cache", Namespace: "prod", UID: "uid-1"},
	}
	if mutate != nil {
		mutate(&mc.Spec)
	}
	return mc
}

func container(t *testing.T, spec *corev1ac.PodSpecApplyConfiguration, name string) *corev1ac.ContainerApplyConfiguration {
	t.Helper()
	for i := range spec.Containers {
		if ptr.Deref(spec.Containers[i].Name, "") == name {
			return &spec.Containers[i]
		}
	}
	return nil
}

func quantity(s string) resource.Quantity { return resource.MustParse(s) }

func TestDeployment(t *testing.T) {
	tests := []struct {
		name string
		spec func(*cachev1beta1.MemcachedSpec)

		wantReplicas   int32
		wantImage      string
		wantArgs       []string
		wantContainers []string
		wantRequests   corev1.ResourceList
		wantLimits     corev1.ResourceList
		wantPriority   string
	}{
		{
			name:           "defaults",
			wantReplicas:   1,
			wantImage:      cachev1beta1.DefaultImage,
			wantArgs:       []string{"-m", "64", "-c", "1024", "-t", "4", "-p", "11211"},
			wantContainers: []string{"memcached"},
			wantRequests:   corev1.ResourceList{corev1.ResourceCPU: quantity("100m"), corev1.ResourceMemory: quantity("120Mi")},
			wantLimits:     corev1.ResourceList{corev1.ResourceMemory: quantity("120Mi")},
		},
		{
			name: "explicit spec",
			spec: func(s *cachev1beta1.MemcachedSpec) {
				s.Replicas = ptr.To[int32](3)
				s.Image = "registry.example/memcached:1.6.40"
				s.Memory = ptr.To(resource.MustParse("1024Mi"))
				s.MaxConnections = 4096
				s.Threads = 8
				s.Port = 12345
				podOf(s).PriorityClassName = "high"
			},
			wantReplicas:   3,
			wantImage:      "registry.example/memcached:1.6.40",
			wantArgs:       []string{"-m", "1024", "-c", "4096", "-t", "8", "-p", "12345"},
			wantContainers: []string{"memcached"},
			wantRequests:   corev1.ResourceList{corev1.ResourceCPU: quantity("100m"), corev1.ResourceMemory: quantity("1248Mi")},
			wantLimits:     corev1.ResourceList{corev1.ResourceMemory: quantity("1248Mi")},
			wantPriority:   "high",
		},
		{
			name:           "scaled to zero",
			spec:           func(s *cachev1beta1.MemcachedSpec) { s.Replicas = ptr.To[int32](0) },
			wantReplicas:   0,
			wantImage:      cachev1beta1.DefaultImage,
			wantArgs:       []string{"-m", "64", "-c", "1024", "-t", "4", "-p", "11211"},
			wantContainers: []string{"memcached"},
			wantRequests:   corev1.ResourceList{corev1.ResourceCPU: quantity("100m"), corev1.ResourceMemory: quantity("120Mi")},
			wantLimits:     corev1.ResourceList{corev1.ResourceMemory: quantity("120Mi")},
		},
		{
			name: "exporter",
			spec: func(s *cachev1beta1.MemcachedSpec) {
				s.Monitoring = &cachev1beta1.Monitoring{Exporter: &cachev1beta1.Exporter{Enabled: true}}
			},
			wantReplicas:   1,
			wantImage:      cachev1beta1.DefaultImage,
			wantArgs:       []string{"-m", "64", "-c", "1024", "-t", "4", "-p", "11211"},
			wantContainers: []string{"memcached", "exporter"},
			wantRequests:   corev1.ResourceList{corev1.ResourceCPU: quantity("100m"), corev1.ResourceMemory: quantity("120Mi")},
			wantLimits:     corev1.ResourceList{corev1.ResourceMemory: quantity("120Mi")},
		},
		{
			name: "resource overrides lower the computed request to a smaller limit",
			spec: func(s *cachev1beta1.MemcachedSpec) {
				s.Resources = &cachev1beta1.ResourceOverrides{
					Limits: &cachev1beta1.ResourceAmounts{Memory: "100Mi", CPU: "50m"},
				}
			},
			wantReplicas:   1,
			wantImage:      cachev1beta1.DefaultImage,
			wantArgs:       []string{"-m", "64", "-c", "1024", "-t", "4", "-p", "11211"},
			wantContainers: []string{"memcached"},
			wantRequests:   corev1.ResourceList{corev1.ResourceCPU: quantity("50m"), corev1.ResourceMemory: quantity("100Mi")},
			wantLimits:     corev1.ResourceList{corev1.ResourceMemory: quantity("100Mi"), corev1.ResourceCPU: quantity("50m")},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mc := memcached(tt.spec)
			d, err := Deployment(Default(mc))
			if err != nil {
				t.Fatalf("Deployment: %v", err)
			}

			if got := ptr.Deref(d.Name, ""); got != "cache" {
				t.Errorf("name = %q, want cache", got)
			}
			if !reflect.DeepEqual(d.Labels, map[string]string{LabelName: AppName, LabelInstance: "cache", LabelManagedBy: ManagedBy}) {
				t.Errorf("labels = %v", d.Labels)
			}
			if d.Annotations[SpecHashAnnotation] == "" {
				t.Errorf("spec hash annotation missing")
			}
			if len(d.OwnerReferences) != 1 || !ptr.Deref(d.OwnerReferences[0].Controller, false) ||
				!ptr.Deref(d.OwnerReferences[0].BlockOwnerDeletion, false) || ptr.Deref(d.OwnerReferences[0].UID, "") != "uid-1" {
				t.Errorf("ownerReferences = %+v, want one controller reference to uid-1", d.OwnerReferences)
			}
			if got := ptr.Deref(d.Spec.Replicas, -1); got != tt.wantReplicas {
				t.Errorf("replicas = %d, want %d", got, tt.wantReplicas)
			}
			if !reflect.DeepEqual(d.Spec.Selector.MatchLabels, SelectorLabels(mc)) {
				t.Errorf("selector = %v", d.Spec.Selector.MatchLabels)
			}
			ru := d.Spec.Strategy.RollingUpdate
			if ru.MaxUnavailable.String() != "0" || ru.MaxSurge.String() != "1" {
				t.Errorf("rolling update = %v/%v, want maxUnavailable 0, maxSurge 1", ru.MaxUnavailable, ru.MaxSurge)
			}

			pod := d.Spec.Template.Spec
			var names []string
			for _, c := range pod.Containers {
				names = append(names, ptr.Deref(c.Name, ""))
			}
			if !reflect.DeepEqual(names, tt.wantContainers) {
				t.Errorf("containers = %v, want %v", names, tt.wantContainers)
			}
			mcd := container(t, pod, MemcachedContainerName)
			if got := ptr.Deref(mcd.Image, ""); got != tt.wantImage {
				t.Errorf("image = %q, want %q", got, tt.wantImage)
			}
			if !reflect.DeepEqual(mcd.Args, tt.wantArgs) {
				t.Errorf("args = %v, want %v", mcd.Args, tt.wantArgs)
			}
			checkResources(t, "requests", *mcd.Resources.Requests, tt.wantRequests)
			checkResources(t, "limits", *mcd.Resources.Limits, tt.wantLimits)
			if mcd.ReadinessProbe.TCPSocket == nil || mcd.LivenessProbe.TCPSocket == nil {
				t.Errorf("readiness and liveness probes must be TCP probes")
			}
			sc := mcd.SecurityContext
			if !ptr.Deref(sc.RunAsNonRoot, false) || !ptr.Deref(sc.ReadOnlyRootFilesystem, false) ||
				ptr.Deref(sc.AllowPrivilegeEscalation, true) || !reflect.DeepEqual(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) ||
				*sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
				t.Errorf("container securityContext is not restricted: %+v", sc)
			}
			if got := ptr.Deref(pod.PriorityClassName, ""); got != tt.wantPriority {
				t.Errorf("priorityClassName = %q, want %q", got, tt.wantPriority)
			}
			if exp := container(t, pod, ExporterContainerName); exp != nil {
				if ptr.Deref(exp.Image, "") != cachev1beta1.DefaultExporterImage ||
					ptr.Deref(exp.Ports[0].ContainerPort, 0) != cachev1beta1.ExporterPort {
					t.Errorf("exporter = image %q port %d", ptr.Deref(exp.Image, ""), ptr.Deref(exp.Ports[0].ContainerPort, 0))
				}
			}
		})
	}
}

func checkResources(t *testing.T, what string, got, want corev1.ResourceList) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s = %v, want %v", what, got, want)
		return
	}
	for name, q := range want {
		if g, ok := got[name]; !ok || g.Cmp(q) != 0 {
			t.Errorf("%s[%s] = %v, want %v", what, name, got[name], q.String())
		}
	}
}

func TestDeploymentSpecHash(t *testing.T) {
	base, _ := Deployment(Default(memcached(nil)))
	same, _ := Deployment(Default(memcached(nil)))
	withToleration, _ := Deployment(Default(memcached(func(s *cachev1beta1.MemcachedSpec) {
		podOf(s).Tolerations = []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpExists}}
	})))
	if base.Annotations[SpecHashAnnotation] != same.Annotations[SpecHashAnnotation] {
		t.Errorf("hash is not deterministic")
	}
	if base.Annotations[SpecHashAnnotation] == withToleration.Annotations[SpecHashAnnotation] {
		t.Errorf("hash did not change with the spec")
	}
}

func TestService(t *testing.T) {
	tests := []struct {
		name      string
		spec      func(*cachev1beta1.MemcachedSpec)
		wantPorts map[string]int32
	}{
		{name: "defaults", wantPorts: map[string]int32{"memcache": 11211}},
		{name: "custom port", spec: func(s *cachev1beta1.MemcachedSpec) { s.Port = 2000 }, wantPorts: map[string]int32{"memcache": 2000}},
		{
			name: "exporter",
			spec: func(s *cachev1beta1.MemcachedSpec) {
				s.Monitoring = &cachev1beta1.Monitoring{Exporter: &cachev1beta1.Exporter{Enabled: true}}
			},
			wantPorts: map[string]int32{"memcache": 11211, "metrics": 9150},
		},
		{
			name: "exporter disabled",
			spec: func(s *cachev1beta1.MemcachedSpec) {
				s.Monitoring = &cachev1beta1.Monitoring{Exporter: &cachev1beta1.Exporter{Enabled: false}}
			},
			wantPorts: map[string]int32{"memcache": 11211},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mc := memcached(tt.spec)
			svc, err := Service(Default(mc))
			if err != nil {
				t.Fatalf("Service: %v", err)
			}
			if got := ptr.Deref(svc.Spec.ClusterIP, ""); got != corev1.ClusterIPNone {
				t.Errorf("clusterIP = %q, want None", got)
			}
			if ptr.Deref(svc.Spec.PublishNotReadyAddresses, true) {
				t.Errorf("publishNotReadyAddresses must be false")
			}
			if !reflect.DeepEqual(svc.Spec.Selector, SelectorLabels(mc)) {
				t.Errorf("selector = %v", svc.Spec.Selector)
			}
			got := map[string]int32{}
			for _, p := range svc.Spec.Ports {
				got[ptr.Deref(p.Name, "")] = ptr.Deref(p.Port, 0)
				if p.TargetPort.StrVal != ptr.Deref(p.Name, "") {
					t.Errorf("port %s targets %v, want the named container port", ptr.Deref(p.Name, ""), p.TargetPort)
				}
			}
			if !reflect.DeepEqual(got, tt.wantPorts) {
				t.Errorf("ports = %v, want %v", got, tt.wantPorts)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	resources := func(r *cachev1beta1.ResourceOverrides) func(*cachev1beta1.MemcachedSpec) {
		return func(s *cachev1beta1.MemcachedSpec) { s.Resources = r }
	}
	tests := []struct {
		name   string
		mutate func(*cachev1beta1.MemcachedSpec)
		// wantFields are the fields Validate must name, in order.
		wantFields []string
	}{
		{name: "no overrides", mutate: func(*cachev1beta1.MemcachedSpec) {}},
		{name: "request below limit", mutate: resources(&cachev1beta1.ResourceOverrides{
			Requests: &cachev1beta1.ResourceAmounts{CPU: "1"},
			Limits:   &cachev1beta1.ResourceAmounts{CPU: "2"},
		})},
		{name: "request above limit", mutate: resources(&cachev1beta1.ResourceOverrides{
			Requests: &cachev1beta1.ResourceAmounts{CPU: "3", Memory: "1Gi"},
			Limits:   &cachev1beta1.ResourceAmounts{CPU: "2", Memory: "512Mi"},
		}), wantFields: []string{"spec.resources.requests.cpu", "spec.resources.requests.memory"}},
		{name: "limit without request", mutate: resources(&cachev1beta1.ResourceOverrides{
			Limits: &cachev1beta1.ResourceAmounts{CPU: "2"},
		})},
		{name: "memory request above the computed limit", mutate: resources(&cachev1beta1.ResourceOverrides{
			Requests: &cachev1beta1.ResourceAmounts{Memory: "512Mi"},
		}), wantFields: []string{"spec.resources.requests.memory"}},
		{name: "negative amount", mutate: resources(&cachev1beta1.ResourceOverrides{
			Requests: &cachev1beta1.ResourceAmounts{CPU: "-1"},
		}), wantFields: []string{"spec.resources.requests.cpu"}},
		{name: "image with Unicode whitespace", mutate: func(s *cachev1beta1.MemcachedSpec) { s.Image = "memcached " },
			wantFields: []string{"spec.image"}},
		{name: "nodeSelector value", mutate: func(s *cachev1beta1.MemcachedSpec) { podOf(s).NodeSelector = map[string]string{"pool": "-ssd"} },
			wantFields: []string{"spec.pod.nodeSelector"}},
		{name: "toleration key", mutate: func(s *cachev1beta1.MemcachedSpec) {
			podOf(s).Tolerations = []corev1.Toleration{{Key: "bad key", Operator: corev1.TolerationOpExists}}
		}, wantFields: []string{"spec.pod.tolerations[0].key"}},
		{name: "toleration seconds without NoExecute", mutate: func(s *cachev1beta1.MemcachedSpec) {
			podOf(s).Tolerations = []corev1.Toleration{{Key: "spot", Operator: corev1.TolerationOpExists, TolerationSeconds: ptr.To[int64](5)}}
		}, wantFields: []string{"spec.pod.tolerations[0].effect"}},
		{name: "valid tolerations", mutate: func(s *cachev1beta1.MemcachedSpec) {
			podOf(s).Tolerations = []corev1.Toleration{
				{Operator: corev1.TolerationOpExists},
				{Key: "example.com/dedicated", Value: "cache", Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](5)},
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errs := Validate(Default(memcached(tt.mutate)))
			var fields []string
			for _, e := range errs {
				fields = append(fields, e.Field)
			}
			if !slices.Equal(fields, tt.wantFields) {
				t.Errorf("Validate = %v, want errors for %v", errs, tt.wantFields)
			}
		})
	}
}

func TestEndpointAndSelector(t *testing.T) {
	mc := memcached(func(s *cachev1beta1.MemcachedSpec) { s.Port = 2000 })
	if got, want := Endpoint(Default(mc)), "cache.prod.svc:2000"; got != want {
		t.Errorf("Endpoint = %q, want %q", got, want)
	}
	if got, want := Selector(mc), "app.kubernetes.io/instance=cache,app.kubernetes.io/name=memcached"; got != want {
		t.Errorf("Selector = %q, want %q", got, want)
	}
}

// podOf returns spec.pod, creating it, so a test can set one Pod field.
func podOf(s *cachev1beta1.MemcachedSpec) *cachev1beta1.PodOverrides {
	if s.Pod == nil {
		s.Pod = &cachev1beta1.PodOverrides{}
	}
	return s.Pod
}
