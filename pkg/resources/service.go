package resources

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
)

// Service returns the headless Service of a Memcached. Clients of a
// memcached cluster shard keys across the Pods themselves, so they need
// every Pod address (clusterIP None) rather than a load-balanced virtual IP,
// and only ready ones (publishNotReadyAddresses false).
func Service(d Defaulted) (*corev1ac.ServiceApplyConfiguration, error) {
	mc, s := d.Memcached, d.Spec

	ports := []*corev1ac.ServicePortApplyConfiguration{
		corev1ac.ServicePort().
			WithName(MemcachedPortName).
			WithPort(s.Port).
			WithTargetPort(intstr.FromString(MemcachedPortName)).
			WithProtocol(corev1.ProtocolTCP),
	}
	if exporterEnabled(s) {
		ports = append(ports, corev1ac.ServicePort().
			WithName(ExporterPortName).
			WithPort(cachev1beta1.ExporterPort).
			WithTargetPort(intstr.FromString(ExporterPortName)).
			WithProtocol(corev1.ProtocolTCP))
	}

	svc := corev1ac.Service(ChildName(mc), mc.Namespace).
		WithLabels(Labels(mc)).
		WithOwnerReferences(OwnerReference(mc)).
		WithSpec(corev1ac.ServiceSpec().
			WithClusterIP(corev1.ClusterIPNone).
			WithSelector(SelectorLabels(mc)).
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
