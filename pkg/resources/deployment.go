package resources

import (
	"fmt"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
)

// Container and port names. The Service targets the named ports, so a port
// number change rolls the Pods and the Service together.
const (
	MemcachedContainerName = "memcached"
	ExporterContainerName  = "exporter"
	MemcachedPortName      = "memcache"
	ExporterPortName       = "metrics"
)

// memcachedUID is the uid of the memcache user in the official memcached
// image. Setting it explicitly lets runAsNonRoot pass even for images that
// declare their user by name.
const memcachedUID = 11211

// defaultCPURequest is what a memcached container asks for when the spec
// does not say. memcached is rarely CPU bound; no CPU limit is set, so it
// can burst instead of being throttled at the worst moment.
var defaultCPURequest = resource.MustParse("100m")

// Exporter sidecar sizing: the exporter is a small Go program.
var (
	exporterCPURequest    = resource.MustParse("10m")
	exporterMemoryRequest = resource.MustParse("16Mi")
	exporterMemoryLimit   = resource.MustParse("64Mi")
)

// Deployment returns the Deployment a Memcached should run, as an apply
// configuration that sets only the fields the operator owns.
//
// The rolling update replaces one Pod at a time (maxUnavailable 1, maxSurge
// 25%): every restarted Pod comes back with an empty cache, so a slow roll
// keeps the hit rate up.
func Deployment(mc *cachev1beta1.Memcached) (*appsv1ac.DeploymentApplyConfiguration, error) {
	s := withDefaults(mc.Spec)

	podSpec, err := podSpec(mc, s)
	if err != nil {
		return nil, err
	}

	d := appsv1ac.Deployment(ChildName(mc), mc.Namespace).
		WithLabels(Labels(mc)).
		WithOwnerReferences(OwnerReference(mc)).
		WithSpec(appsv1ac.DeploymentSpec().
			WithReplicas(*s.Replicas).
			WithSelector(metav1ac.LabelSelector().WithMatchLabels(SelectorLabels(mc))).
			WithStrategy(appsv1ac.DeploymentStrategy().
				WithType(appsv1.RollingUpdateDeploymentStrategyType).
				WithRollingUpdate(appsv1ac.RollingUpdateDeployment().
					WithMaxUnavailable(intstr.FromInt32(1)).
					WithMaxSurge(intstr.FromString("25%")))).
			WithTemplate(corev1ac.PodTemplateSpec().
				WithLabels(Labels(mc)).
				WithSpec(podSpec)))

	hash, err := specHash(d)
	if err != nil {
		return nil, fmt.Errorf("hashing Deployment: %w", err)
	}
	return d.WithAnnotations(map[string]string{SpecHashAnnotation: hash}), nil
}

func podSpec(mc *cachev1beta1.Memcached, s cachev1beta1.MemcachedSpec) (*corev1ac.PodSpecApplyConfiguration, error) {
	containers := []*corev1ac.ContainerApplyConfiguration{memcachedContainer(s)}
	if exporterEnabled(s) {
		containers = append(containers, exporterContainer(s))
	}

	p := corev1ac.PodSpec().
		WithContainers(containers...).
		WithEnableServiceLinks(false).
		WithAutomountServiceAccountToken(false).
		WithSecurityContext(corev1ac.PodSecurityContext().
			WithRunAsNonRoot(true).
			WithRunAsUser(memcachedUID).
			WithRunAsGroup(memcachedUID).
			WithSeccompProfile(corev1ac.SeccompProfile().WithType(corev1.SeccompProfileTypeRuntimeDefault)))

	affinity, err := affinity(mc, s)
	if err != nil {
		return nil, err
	}
	p.WithAffinity(affinity)

	overrides := pod(s)
	if len(overrides.NodeSelector) > 0 {
		p.WithNodeSelector(overrides.NodeSelector)
	}
	for i := range overrides.Tolerations {
		t, err := convert[corev1ac.TolerationApplyConfiguration](&overrides.Tolerations[i])
		if err != nil {
			return nil, fmt.Errorf("converting tolerations[%d]: %w", i, err)
		}
		p.WithTolerations(t)
	}
	if overrides.PriorityClassName != "" {
		p.WithPriorityClassName(overrides.PriorityClassName)
	}
	return p, nil
}

// affinity starts from the user's affinity and, unless it says something
// about pod anti-affinity, adds a preferred anti-affinity that spreads the
// replicas across nodes. Preferred, not required: a small cluster must still
// be able to run more replicas than it has nodes.
func affinity(mc *cachev1beta1.Memcached, s cachev1beta1.MemcachedSpec) (*corev1ac.AffinityApplyConfiguration, error) {
	a := corev1ac.Affinity()
	if user := pod(s).Affinity; user != nil {
		converted, err := convert[corev1ac.AffinityApplyConfiguration](user)
		if err != nil {
			return nil, fmt.Errorf("converting affinity: %w", err)
		}
		a = converted
	}
	if a.PodAntiAffinity == nil {
		a.WithPodAntiAffinity(corev1ac.PodAntiAffinity().
			WithPreferredDuringSchedulingIgnoredDuringExecution(corev1ac.WeightedPodAffinityTerm().
				WithWeight(100).
				WithPodAffinityTerm(corev1ac.PodAffinityTerm().
					WithTopologyKey(corev1.LabelHostname).
					WithLabelSelector(metav1ac.LabelSelector().WithMatchLabels(SelectorLabels(mc))))))
	}
	return a, nil
}

func memcachedContainer(s cachev1beta1.MemcachedSpec) *corev1ac.ContainerApplyConfiguration {
	return corev1ac.Container().
		WithName(MemcachedContainerName).
		WithImage(s.Image).
		WithArgs(
			"-m", strconv.Itoa(int(memoryMiB(s))),
			"-c", strconv.Itoa(int(s.MaxConnections)),
			"-t", strconv.Itoa(int(s.Threads)),
			"-p", strconv.Itoa(int(s.Port)),
		).
		WithPorts(corev1ac.ContainerPort().
			WithName(MemcachedPortName).
			WithContainerPort(s.Port).
			WithProtocol(corev1.ProtocolTCP)).
		WithResources(memcachedResources(s)).
		WithReadinessProbe(corev1ac.Probe().
			WithTCPSocket(corev1ac.TCPSocketAction().WithPort(intstr.FromString(MemcachedPortName))).
			WithPeriodSeconds(5).
			WithFailureThreshold(3)).
		WithLivenessProbe(corev1ac.Probe().
			WithTCPSocket(corev1ac.TCPSocketAction().WithPort(intstr.FromString(MemcachedPortName))).
			WithInitialDelaySeconds(10).
			WithPeriodSeconds(10).
			WithFailureThreshold(3)).
		WithSecurityContext(restrictedContainerSecurityContext())
}

func exporterContainer(s cachev1beta1.MemcachedSpec) *corev1ac.ContainerApplyConfiguration {
	return corev1ac.Container().
		WithName(ExporterContainerName).
		WithImage(exporter(s).Image).
		WithArgs("--memcached.address=localhost:" + strconv.Itoa(int(s.Port))).
		WithPorts(corev1ac.ContainerPort().
			WithName(ExporterPortName).
			WithContainerPort(cachev1beta1.ExporterPort).
			WithProtocol(corev1.ProtocolTCP)).
		WithResources(corev1ac.ResourceRequirements().
			WithRequests(corev1.ResourceList{
				corev1.ResourceCPU:    exporterCPURequest,
				corev1.ResourceMemory: exporterMemoryRequest,
			}).
			WithLimits(corev1.ResourceList{
				corev1.ResourceMemory: exporterMemoryLimit,
			})).
		WithSecurityContext(restrictedContainerSecurityContext())
}

// memcachedResources returns the computed requests and limits with the
// user's overrides laid over them key by key. The memory request equals the
// limit so memcached is never the first to be evicted under memory pressure.
// A computed request is lowered to a limit the user set below it, so an
// override of the limit alone always yields a valid pair.
func memcachedResources(s cachev1beta1.MemcachedSpec) *corev1ac.ResourceRequirementsApplyConfiguration {
	memory := *resource.NewQuantity(MemoryLimitMiB(memoryMiB(s), s.MaxConnections)*1024*1024, resource.BinarySI)
	requests := corev1.ResourceList{
		corev1.ResourceCPU:    defaultCPURequest,
		corev1.ResourceMemory: memory,
	}
	limits := corev1.ResourceList{
		corev1.ResourceMemory: memory,
	}
	if r := s.Resources; r != nil {
		userLimits, userRequests := resourceList(r.Limits), resourceList(r.Requests)
		for name, q := range userLimits {
			limits[name] = q
		}
		for name, q := range requests {
			if _, set := userRequests[name]; set {
				continue
			}
			if limit, ok := limits[name]; ok && q.Cmp(limit) > 0 {
				requests[name] = limit
			}
		}
		for name, q := range userRequests {
			requests[name] = q
		}
	}
	return corev1ac.ResourceRequirements().WithRequests(requests).WithLimits(limits)
}

// restrictedContainerSecurityContext meets the Pod Security Standards'
// restricted profile.
func restrictedContainerSecurityContext() *corev1ac.SecurityContextApplyConfiguration {
	return corev1ac.SecurityContext().
		WithRunAsNonRoot(true).
		WithAllowPrivilegeEscalation(false).
		WithReadOnlyRootFilesystem(true).
		WithPrivileged(false).
		WithCapabilities(corev1ac.Capabilities().WithDrop("ALL")).
		WithSeccompProfile(corev1ac.SeccompProfile().WithType(corev1.SeccompProfileTypeRuntimeDefault))
}

// resourceList turns the spec's CPU and memory amounts into a ResourceList
// holding only the values that are set and parse. The CRD schema rejects
// amounts that are not quantities; Validate reports any that slip through
// (an object stored before the rule existed), so the builders can skip them.
func resourceList(a *cachev1beta1.ResourceAmounts) corev1.ResourceList {
	list := corev1.ResourceList{}
	if a == nil {
		return list
	}
	for name, value := range map[corev1.ResourceName]string{corev1.ResourceCPU: a.CPU, corev1.ResourceMemory: a.Memory} {
		if value == "" {
			continue
		}
		if q, err := resource.ParseQuantity(value); err == nil {
			list[name] = q
		}
	}
	return list
}
