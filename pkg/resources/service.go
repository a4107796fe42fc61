package resources

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
)

// Service returns the headless Service of a Memcached, which selects every
// Pod of every pool. Clients of a
// memcached cluster shard keys across the Pods themselves, so they need
// every Pod address (clusterIP None) rather than a load-balanced virtual IP,
// and only ready ones (publishNotReadyAddresses false).
func Service(d Defaulted) (*corev1ac.ServiceApplyConfiguration, error) {
	return poolService(d, "")
}

// ZoneService returns the headless Service of the Memcached's pool in
// zone, which selects that pool's Pods only: the address a client in the
// zone uses to read from its own zone.
func ZoneService(d Defaulted, zone string) (*corev1ac.ServiceApplyConfiguration, error) {
	return poolService(d, zone)
}

// poolService is the headless Service of the pool in zone, or with zone ""
// that of the whole Memcached.
func poolService(d Defaulted, zone string) (*corev1ac.ServiceApplyConfiguration, error) {
	mc, s := d.Memcached, d.Spec

	ports := []*corev1ac.ServicePortApplyConfiguration{
		corev1ac.ServicePort().
			WithName(MemcachedPortName).
			WithPort(s.Port).
			WithTargetPort(intstr.FromString(MemcachedPortName)).
			WithProtocol(corev1.ProtocolTCP),
	}
	if p := plaintextPort(s); p != 0 {
		ports = append(ports, corev1ac.ServicePort().
			WithName(PlaintextPortName).
			WithPort(p).
			WithTargetPort(intstr.FromString(PlaintextPortName)).
			WithProtocol(corev1.ProtocolTCP))
	}
	if exporterEnabled(s) {
		ports = append(ports, corev1ac.ServicePort().
			WithName(ExporterPortName).
			WithPort(cachev1beta1.ExporterPort).
			WithTargetPort(intstr.FromString(ExporterPortName)).
			WithProtocol(corev1.ProtocolTCP))
	}

	svc := corev1ac.Service(PoolName(mc, zone), mc.Namespace).
		WithLabels(PoolLabels(mc, zone)).
		WithOwnerReferences(OwnerReference(mc)).
		WithSpec(corev1ac.ServiceSpec().
			WithClusterIP(corev1.ClusterIPNone).
			WithSelector(PoolSelectorLabels(mc, zone)).
			WithPublishNotReadyAddresses(false).
			WithPorts(ports...))

	svc.WithAnnotations(map[string]string{RenderingAnnotation: renderingVersion})
	hash, err := specHash(svc)
	if err != nil {
		return nil, fmt.Errorf("hashing Service: %w", err)
	}
	return svc.WithAnnotations(map[string]string{SpecHashAnnotation: hash}), nil
}

func endpoint(name, namespace string, port int32) string {
	return fmt.Sprintf("%s.%s.svc:%d", name, namespace, port)
}
