package resources

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	networkingv1ac "k8s.io/client-go/applyconfigurations/networking/v1"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
)

// NetworkPolicy returns the NetworkPolicy of a Memcached's Pods, or nil
// when spec.networkPolicy is left out and the Memcached has none.
//
// The policy selects the Pods by their selector labels and restricts
// ingress alone, so the Pods' own connections (DNS, the apiserver) are as
// before. It admits the clients, or the Pods of the Memcached's namespace
// when none are listed, to the memcached port, and the metrics peers to the
// exporter's port when the exporter is on; with no metrics peers that port
// is closed, because a policy that selects a Pod admits only what one of its
// rules does. An example, for clients [{namespaceSelector: {matchLabels:
// {team: web}}}] and the exporter on with metrics [{namespaceSelector:
// {matchLabels: {kubernetes.io/metadata.name: monitoring}}}]:
//
//	ingress:
//	- from: [{namespaceSelector: {matchLabels: {team: web}}}]
//	  ports: [{protocol: TCP, port: 11211}]
//	- from: [{namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: monitoring}}}]
//	  ports: [{protocol: TCP, port: 9150}]
func NetworkPolicy(d Defaulted) (*networkingv1ac.NetworkPolicyApplyConfiguration, error) {
	mc, s := d.Memcached, d.Spec
	if s.NetworkPolicy == nil {
		return nil, nil
	}
	clients := peers(s.NetworkPolicy.Clients)
	if len(clients) == 0 {
		// podSelector {} alone: every Pod of the policy's namespace.
		clients = []*networkingv1ac.NetworkPolicyPeerApplyConfiguration{
			networkingv1ac.NetworkPolicyPeer().WithPodSelector(metav1ac.LabelSelector()),
		}
	}
	clientPorts := []*networkingv1ac.NetworkPolicyPortApplyConfiguration{tcpPort(s.Port)}
	if p := plaintextPort(s); p != 0 {
		clientPorts = append(clientPorts, tcpPort(p))
	}
	rules := []*networkingv1ac.NetworkPolicyIngressRuleApplyConfiguration{
		networkingv1ac.NetworkPolicyIngressRule().WithFrom(clients...).WithPorts(clientPorts...),
	}
	if metrics := peers(s.NetworkPolicy.Metrics); exporterEnabled(s) && len(metrics) > 0 {
		rules = append(rules, networkingv1ac.NetworkPolicyIngressRule().
			WithFrom(metrics...).
			WithPorts(tcpPort(cachev1beta1.ExporterPort)))
	}

	np := networkingv1ac.NetworkPolicy(ChildName(mc), mc.Namespace).
		WithLabels(Labels(mc)).
		WithOwnerReferences(OwnerReference(mc)).
		WithSpec(networkingv1ac.NetworkPolicySpec().
			WithPodSelector(metav1ac.LabelSelector().WithMatchLabels(SelectorLabels(mc))).
			WithPolicyTypes(networkingv1.PolicyTypeIngress).
			WithIngress(rules...))
	np.WithAnnotations(map[string]string{RenderingAnnotation: renderingVersion})
	hash, err := specHash(np)
	if err != nil {
		return nil, fmt.Errorf("hashing NetworkPolicy: %w", err)
	}
	return np.WithAnnotations(map[string]string{SpecHashAnnotation: hash}), nil
}

// tcpPort is a policy port of TCP and the given number.
func tcpPort(port int32) *networkingv1ac.NetworkPolicyPortApplyConfiguration {
	return networkingv1ac.NetworkPolicyPort().WithProtocol(corev1.ProtocolTCP).WithPort(intstr.FromInt32(port))
}

// peers turns the spec's peers into a policy's, in their order.
func peers(in []cachev1beta1.NetworkPolicyPeer) []*networkingv1ac.NetworkPolicyPeerApplyConfiguration {
	var out []*networkingv1ac.NetworkPolicyPeerApplyConfiguration
	for _, p := range in {
		peer := networkingv1ac.NetworkPolicyPeer()
		if p.NamespaceSelector != nil {
			peer.WithNamespaceSelector(labelSelector(p.NamespaceSelector))
		}
		if p.PodSelector != nil {
			peer.WithPodSelector(labelSelector(p.PodSelector))
		}
		out = append(out, peer)
	}
	return out
}

// labelSelector turns a spec selector into a policy's. An empty one stays
// empty ({}), which selects everything.
func labelSelector(in *cachev1beta1.LabelSelector) *metav1ac.LabelSelectorApplyConfiguration {
	out := metav1ac.LabelSelector()
	if len(in.MatchLabels) > 0 {
		out.WithMatchLabels(in.MatchLabels)
	}
	for _, r := range in.MatchExpressions {
		req := metav1ac.LabelSelectorRequirement().WithKey(r.Key).WithOperator(metav1.LabelSelectorOperator(r.Operator))
		if len(r.Values) > 0 {
			req.WithValues(r.Values...)
		}
		out.WithMatchExpressions(req)
	}
	return out
}
