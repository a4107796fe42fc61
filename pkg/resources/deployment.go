package resources

import (
	"fmt"
	"maps"
	"slices"
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

// Deployment returns the Deployment of a Memcached without zones, as an
// apply configuration that sets only the fields the operator owns.
func Deployment(d Defaulted) (*appsv1ac.DeploymentApplyConfiguration, error) {
	return PoolDeployment(d, "")
}

// PoolDeployment returns the Deployment of the Memcached's pool in zone
// ("" for a Memcached without zones). A zone pool's Pods run only on the
// zone's nodes, and carry the zone in their labels.
//
// The rolling update replaces one Pod at a time, and starts each new Pod
// before it stops an old one (maxUnavailable 0, maxSurge 1): every
// restarted Pod comes back with an empty cache, so a slow roll keeps the
// hit rate up, and a Memcached of one replica keeps a Ready Pod throughout.
// The cost is one Pod more than replicas during a rollout, which needs
// room on a node for it. Each new Pod must have been ready for
// spec.minReadySeconds before the next old one stops.
func PoolDeployment(d Defaulted, zone string) (*appsv1ac.DeploymentApplyConfiguration, error) {
	mc, s := d.Memcached, d.Spec

	podSpec, err := podSpec(mc, s, zone)
	if err != nil {
		return nil, err
	}

	template := podTemplate(mc, s, zone, podSpec)
	templateHash, err := TemplateHash(template)
	if err != nil {
		return nil, err
	}
	inputs, err := TemplateInputs(mc)
	if err != nil {
		return nil, err
	}

	dep := appsv1ac.Deployment(PoolName(mc, zone), mc.Namespace).
		WithLabels(PoolLabels(mc, zone)).
		WithAnnotations(map[string]string{
			RenderingAnnotation:      renderingVersion,
			GenerationAnnotation:     strconv.FormatInt(mc.Generation, 10),
			TemplateHashAnnotation:   templateHash,
			TemplateInputsAnnotation: inputs,
		}).
		WithOwnerReferences(OwnerReference(mc)).
		WithSpec(appsv1ac.DeploymentSpec().
			WithReplicas(*s.Replicas).
			WithMinReadySeconds(*s.MinReadySeconds).
			WithSelector(metav1ac.LabelSelector().WithMatchLabels(PoolSelectorLabels(mc, zone))).
			WithStrategy(appsv1ac.DeploymentStrategy().
				WithType(appsv1.RollingUpdateDeploymentStrategyType).
				WithRollingUpdate(appsv1ac.RollingUpdateDeployment().
					WithMaxUnavailable(intstr.FromInt32(0)).
					WithMaxSurge(intstr.FromInt32(1)))).
			WithTemplate(template))

	hash, err := deploymentSpecHash(dep)
	if err != nil {
		return nil, err
	}
	return dep.WithAnnotations(map[string]string{SpecHashAnnotation: hash}), nil
}

// podTemplate wraps the Pod spec with the Pods' labels and annotations.
func podTemplate(mc *cachev1beta1.Memcached, s cachev1beta1.MemcachedSpec, zone string, spec *corev1ac.PodSpecApplyConfiguration) *corev1ac.PodTemplateSpecApplyConfiguration {
	t := corev1ac.PodTemplateSpec().WithLabels(podLabels(mc, s, zone)).WithSpec(spec)
	if a := pod(s).Annotations; len(a) > 0 {
		t.WithAnnotations(a)
	}
	return t
}

func podSpec(mc *cachev1beta1.Memcached, s cachev1beta1.MemcachedSpec, zone string) (*corev1ac.PodSpecApplyConfiguration, error) {
	containers := []*corev1ac.ContainerApplyConfiguration{memcachedContainer(s)}
	if exporterEnabled(s) {
		containers = append(containers, exporterContainer(s))
	}
	switch {
	case authEnabled(s):
		containers = append(containers, reloaderContainer(s))
	case tlsEnabled(s):
		containers = append(containers, tlsReloaderContainer(s))
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
	if tlsEnabled(s) {
		p.WithVolumes(tlsVolume(s))
	}
	if authEnabled(s) {
		// The reloader signals memcached, which needs no capability, only
		// the same user and a shared process namespace.
		p.WithVolumes(authVolumes(s)...).WithShareProcessNamespace(true)
	}
	if extstoreEnabled(s) {
		p.WithVolumes(extstoreVolume(PoolLabels(mc, zone), s))
	}
	// The group owns what the volumes hold, so that memcached and its
	// sidecars, which do not run as root, can read the Secrets' files and
	// write the extstore file.
	if tlsEnabled(s) || authEnabled(s) || extstoreEnabled(s) {
		p.SecurityContext.WithFSGroup(memcachedUID)
	}

	overrides := pod(s)
	if overrides.Affinity != nil {
		a, err := convert[corev1ac.AffinityApplyConfiguration](overrides.Affinity)
		if err != nil {
			return nil, fmt.Errorf("converting affinity: %w", err)
		}
		p.WithAffinity(a)
	}
	constraints, err := spreadConstraints(PoolSelectorLabels(mc, zone), overrides.TopologySpreadConstraints)
	if err != nil {
		return nil, err
	}
	p.WithTopologySpreadConstraints(constraints...)
	if nodeSelector := poolNodeSelector(overrides.NodeSelector, zone); len(nodeSelector) > 0 {
		p.WithNodeSelector(nodeSelector)
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
	for _, secret := range overrides.ImagePullSecrets {
		p.WithImagePullSecrets(corev1ac.LocalObjectReference().WithName(secret.Name))
	}
	if overrides.TerminationGracePeriodSeconds != nil {
		p.WithTerminationGracePeriodSeconds(*overrides.TerminationGracePeriodSeconds)
	}
	return p, nil
}

// Default spreading: as even as the nodes and zones allow, but never at the
// price of a Pod left pending, since a small cluster must still be able to
// run more replicas than it has nodes.
var defaultSpreadTopologyKeys = []string{corev1.LabelHostname, corev1.LabelTopologyZone}

// podTemplateHashLabel is the label the Deployment controller puts on each
// ReplicaSet's Pods.
const podTemplateHashLabel = appsv1.DefaultDeploymentUniqueLabelKey

// spreadConstraints returns the user's topology spread constraints, or the
// default ones. A constraint without a labelSelector gets the Pods'
// selector, without which it would count no Pod; such a constraint also
// gets matchLabelKeys pod-template-hash, so that during a rollout the new
// ReplicaSet's Pods spread among themselves instead of around the old ones
// that are about to go.
func spreadConstraints(selector map[string]string, user []corev1.TopologySpreadConstraint) ([]*corev1ac.TopologySpreadConstraintApplyConfiguration, error) {
	if len(user) == 0 {
		out := make([]*corev1ac.TopologySpreadConstraintApplyConfiguration, 0, len(defaultSpreadTopologyKeys))
		for _, key := range defaultSpreadTopologyKeys {
			out = append(out, corev1ac.TopologySpreadConstraint().
				WithMaxSkew(1).
				WithTopologyKey(key).
				WithWhenUnsatisfiable(corev1.ScheduleAnyway).
				WithLabelSelector(metav1ac.LabelSelector().WithMatchLabels(selector)).
				WithMatchLabelKeys(podTemplateHashLabel))
		}
		return out, nil
	}
	out := make([]*corev1ac.TopologySpreadConstraintApplyConfiguration, 0, len(user))
	for i := range user {
		c, err := convert[corev1ac.TopologySpreadConstraintApplyConfiguration](&user[i])
		if err != nil {
			return nil, fmt.Errorf("converting topologySpreadConstraints[%d]: %w", i, err)
		}
		if c.LabelSelector == nil {
			c.WithLabelSelector(metav1ac.LabelSelector().WithMatchLabels(selector))
			if !slices.Contains(c.MatchLabelKeys, podTemplateHashLabel) {
				c.WithMatchLabelKeys(podTemplateHashLabel)
			}
		}
		out = append(out, c)
	}
	return out, nil
}

// podLabels are the user's Pod labels under the operator's, which select
// the Pods and so always win. The CRD refuses the operator's keys; an
// object stored before that rule still gets a working selector.
func podLabels(mc *cachev1beta1.Memcached, s cachev1beta1.MemcachedSpec, zone string) map[string]string {
	user := pod(s).Labels
	if len(user) == 0 {
		return PoolLabels(mc, zone)
	}
	l := maps.Clone(user)
	maps.Copy(l, PoolLabels(mc, zone))
	return l
}

// poolNodeSelector is the user's node selector, and for a zone pool the
// zone's label, which wins over a user's entry of the same key: the pool
// is the zone's.
func poolNodeSelector(user map[string]string, zone string) map[string]string {
	if zone == "" {
		return user
	}
	l := maps.Clone(user)
	if l == nil {
		l = map[string]string{}
	}
	l[corev1.LabelTopologyZone] = zone
	return l
}

// memcachedArgs are the flags the operator owns, then spec.extraArgs. The
// CRD refuses extra arguments that repeat an owned flag, since memcached
// would take the last one given and the spec would no longer say what
// runs.
func memcachedArgs(s cachev1beta1.MemcachedSpec) []string {
	args := []string{
		"-m", strconv.Itoa(int(memoryMiB(s))),
		"-c", strconv.Itoa(int(s.MaxConnections)),
		"-t", strconv.Itoa(int(s.Threads)),
		"-p", strconv.Itoa(int(s.Port)),
	}
	if s.MaxItemSize != nil {
		args = append(args, "-I", strconv.FormatInt(maxItemSizeKiB(s), 10)+"k")
	}
	if extstoreEnabled(s) {
		args = append(args, extstoreArgs(s)...)
	}
	if tlsEnabled(s) {
		args = append(args, tlsArgs(s)...)
	}
	if authEnabled(s) {
		args = append(args, authArgs()...)
	}
	return append(args, s.ExtraArgs...)
}

func memcachedContainer(s cachev1beta1.MemcachedSpec) *corev1ac.ContainerApplyConfiguration {
	c := corev1ac.Container().
		WithName(MemcachedContainerName).
		WithImage(s.Image).
		WithArgs(memcachedArgs(s)...).
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
	if tlsEnabled(s) {
		c.WithEnv(podIPsEnv()).WithVolumeMounts(tlsVolumeMount())
	}
	if p := plaintextPort(s); p != 0 {
		c.WithPorts(corev1ac.ContainerPort().
			WithName(PlaintextPortName).
			WithContainerPort(p).
			WithProtocol(corev1.ProtocolTCP))
	}
	if extstoreEnabled(s) {
		c.WithVolumeMounts(extstoreVolumeMount())
	}
	if authEnabled(s) {
		// The probes stay TCP connects, which -Y does not refuse: memcached
		// asks for credentials only once a command arrives.
		c.WithCommand(authCommand()...).WithVolumeMounts(authVolumeMounts()...)
	}
	if delay := preStopDelaySeconds(s); delay > 0 {
		c.WithLifecycle(corev1ac.Lifecycle().
			WithPreStop(corev1ac.LifecycleHandler().
				WithSleep(corev1ac.SleepAction().WithSeconds(int64(delay)))))
	}
	return c
}

// preStopDelaySeconds is spec.pod.preStopDelaySeconds or its default.
func preStopDelaySeconds(s cachev1beta1.MemcachedSpec) int32 {
	if d := pod(s).PreStopDelaySeconds; d != nil {
		return *d
	}
	return defaultPreStopDelaySeconds
}

func exporterContainer(s cachev1beta1.MemcachedSpec) *corev1ac.ContainerApplyConfiguration {
	return corev1ac.Container().
		WithName(ExporterContainerName).
		WithImage(exporter(s).Image).
		WithArgs("--memcached.address=" + exporterTarget(s)).
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

// exporterTarget is where the exporter reaches memcached: spec.port on
// loopback, or with TLS the plain port memcached opens on 127.0.0.1 only,
// since a certificate made out to the Service's names would not verify
// for a loopback address anyway.
func exporterTarget(s cachev1beta1.MemcachedSpec) string {
	if tlsEnabled(s) {
		return "127.0.0.1:" + strconv.Itoa(int(LoopbackPort(s)))
	}
	return "localhost:" + strconv.Itoa(int(s.Port))
}

// memcachedResources returns the computed requests and limits with the
// user's overrides laid over them key by key. The memory request equals the
// limit so memcached is never the first to be evicted under memory pressure.
// A computed request is lowered to a limit the user set below it, so an
// override of the limit alone always yields a valid pair.
func memcachedResources(s cachev1beta1.MemcachedSpec) *corev1ac.ResourceRequirementsApplyConfiguration {
	memory := *resource.NewQuantity((MemoryLimitMiB(memoryMiB(s), s.MaxConnections)+extstoreMemoryMiB(s))*1024*1024, resource.BinarySI)
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
