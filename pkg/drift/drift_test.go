package drift

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/utils/ptr"
)

func desiredDeployment() *appsv1ac.DeploymentApplyConfiguration {
	return appsv1ac.Deployment("cache", "default").
		WithLabels(map[string]string{"app": "memcached"}).
		WithOwnerReferences(metav1ac.OwnerReference().WithUID("u1").WithName("cache").WithKind("Memcached").WithAPIVersion("cache.kubelite.io/v1alpha1").WithController(true)).
		WithSpec(appsv1ac.DeploymentSpec().
			WithReplicas(2).
			WithStrategy(appsv1ac.DeploymentStrategy().WithRollingUpdate(appsv1ac.RollingUpdateDeployment().WithMaxSurge(intstr.FromString("25%")))).
			WithTemplate(corev1ac.PodTemplateSpec().
				WithSpec(corev1ac.PodSpec().
					WithAutomountServiceAccountToken(false).
					WithContainers(corev1ac.Container().
						WithName("memcached").
						WithImage("memcached:1").
						WithArgs("-m", "64").
						WithPorts(corev1ac.ContainerPort().WithName("memcache").WithContainerPort(11211).WithProtocol(corev1.ProtocolTCP)).
						WithResources(corev1ac.ResourceRequirements().WithLimits(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1000m")}))))))
}

// liveDeployment is what the apiserver returns for desiredDeployment: the
// same values plus defaults and fields set by others.
func liveDeployment() *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{
			Name: "cache", Namespace: "default", ResourceVersion: "7", UID: "d1",
			Labels: map[string]string{"app": "memcached"},
			OwnerReferences: []metav1.OwnerReference{
				{UID: "u1", Name: "cache", Kind: "Memcached", APIVersion: "cache.kubelite.io/v1alpha1", Controller: ptr.To(true)},
			},
		},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Strategy: appsv1.DeploymentStrategy{
				Type:          appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: ptr.To(intstr.FromString("25%")), MaxUnavailable: ptr.To(intstr.FromInt32(1))},
			},
			RevisionHistoryLimit: ptr.To[int32](10),
			Template: corev1.PodTemplateSpec{
				Spec: corev1.PodSpec{
					AutomountServiceAccountToken: ptr.To(false),
					RestartPolicy:                corev1.RestartPolicyAlways,
					Containers: []corev1.Container{{
						Name:                     "memcached",
						Image:                    "memcached:1",
						Args:                     []string{"-m", "64"},
						Ports:                    []corev1.ContainerPort{{Name: "memcache", ContainerPort: 11211, Protocol: corev1.ProtocolTCP}},
						Resources:                corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}},
						TerminationMessagePath:   "/dev/termination-log",
						ImagePullPolicy:          corev1.PullIfNotPresent,
						TerminationMessagePolicy: corev1.TerminationMessageReadFile,
					}},
				},
			},
		},
	}
}

func TestDiff(t *testing.T) {
	tests := []struct {
		name     string
		desired  func(*appsv1ac.DeploymentApplyConfiguration)
		live     func(*appsv1.Deployment)
		wantPath string
	}{
		{name: "converged with defaults and canonical quantities"},
		{
			name:     "scalar drift",
			live:     func(d *appsv1.Deployment) { d.Spec.Replicas = ptr.To[int32](5) },
			wantPath: "spec.replicas",
		},
		{
			name:     "pointer removed",
			live:     func(d *appsv1.Deployment) { d.Spec.Replicas = nil },
			wantPath: "spec.replicas",
		},
		{
			name:     "false is a value",
			live:     func(d *appsv1.Deployment) { d.Spec.Template.Spec.AutomountServiceAccountToken = ptr.To(true) },
			wantPath: "spec.template.spec.automountServiceAccountToken",
		},
		{
			name:     "label removed",
			live:     func(d *appsv1.Deployment) { d.Labels = map[string]string{"other": "x"} },
			wantPath: "metadata.labels[app]",
		},
		{
			name: "labels and annotations of others are kept",
			live: func(d *appsv1.Deployment) {
				d.Labels["team"] = "web"
				d.Spec.Template.Annotations = map[string]string{"kubectl.kubernetes.io/restartedAt": "now"}
			},
		},
		{
			name:     "atomic list changed",
			live:     func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Args = []string{"-m", "64", "-v"} },
			wantPath: "spec.template.spec.containers[0].args",
		},
		{
			name: "keyed list entry added by someone else",
			live: func(d *appsv1.Deployment) {
				d.Spec.Template.Spec.Containers = append([]corev1.Container{{Name: "sidecar"}}, d.Spec.Template.Spec.Containers...)
				d.OwnerReferences = append(d.OwnerReferences, metav1.OwnerReference{UID: "other", Name: "x"})
			},
		},
		{
			name:     "keyed list entry missing",
			live:     func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Name = "renamed" },
			wantPath: "spec.template.spec.containers[0]",
		},
		{
			name: "quantity changed",
			live: func(d *appsv1.Deployment) {
				d.Spec.Template.Spec.Containers[0].Resources.Limits[corev1.ResourceCPU] = resource.MustParse("2")
			},
			wantPath: "spec.template.spec.containers[0].resources.limits[cpu]",
		},
		{
			name:     "int-or-string changed",
			live:     func(d *appsv1.Deployment) { d.Spec.Strategy.RollingUpdate.MaxSurge = ptr.To(intstr.FromInt32(1)) },
			wantPath: "spec.strategy.rollingUpdate.maxSurge",
		},
		{
			name:     "owner reference replaced",
			live:     func(d *appsv1.Deployment) { d.OwnerReferences[0].UID = "u2" },
			wantPath: "metadata.ownerReferences[0]",
		},
		{
			name:     "desired adds a field",
			desired:  func(d *appsv1ac.DeploymentApplyConfiguration) { d.Spec.WithMinReadySeconds(5) },
			wantPath: "spec.minReadySeconds",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := desiredDeployment()
			if tt.desired != nil {
				tt.desired(d)
			}
			l := liveDeployment()
			if tt.live != nil {
				tt.live(l)
			}
			if got := Diff(d, l); got != tt.wantPath {
				t.Errorf("Diff = %q, want %q", got, tt.wantPath)
			}
		})
	}
}

func TestDiffIgnoresTypeMeta(t *testing.T) {
	// An apply configuration carries kind and apiVersion; an object from an
	// informer cache does not.
	d := corev1ac.Service("cache", "default").WithSpec(corev1ac.ServiceSpec().WithClusterIP("None"))
	l := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "cache", Namespace: "default"}, Spec: corev1.ServiceSpec{ClusterIP: "None"}}
	if got := Diff(d, l); got != "" {
		t.Errorf("Diff = %q, want no difference", got)
	}
}
