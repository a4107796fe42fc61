package maximal

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
)

// padded returns tag followed by 'a's up to n characters. Each maximal
// Memcached tags its strings with its own number, so that no two share a
// value the intern table could fold into one, as a hostile tenant's would
// not.
func padded(tag string, n int) string {
	return tag + strings.Repeat("a", n-len(tag))
}

// qualifiedKey is a label key of Kubernetes' largest size, 317 characters:
// a 253-character DNS subdomain, "/" and a 63-character name.
func qualifiedKey(tag string) string {
	prefix := padded(tag, 63) + "." + strings.Repeat("a", 63) + "." + strings.Repeat("a", 63) + "." + strings.Repeat("a", 61)
	return prefix + "/" + padded("n"+tag, 63)
}

// dnsSubdomain is a 253-character object name.
func dnsSubdomain(tag string) string {
	return padded(tag, 63) + "." + strings.Repeat("a", 63) + "." + strings.Repeat("a", 63) + "." + strings.Repeat("a", 61)
}

// Memcached is a Memcached with the largest spec the CRD's schema
// admits: every list, map and string at its bound, and every total rule
// (affinity, topology spread constraints, annotations, extraArgs) filled
// with the entries that cost the most bytes each. Its metadata, which the
// schema does not bound, is only a name of 63 characters. The schema
// admits it, which TestIntegrationCRDBounds checks; its children need not
// work (its priority class and TLS Secret do not exist, for two), which is
// not the schema's business. n makes its strings its own.
func Memcached(namespace string, n int) *cachev1beta1.Memcached {
	tag := func(field string, j int) string { return fmt.Sprintf("m%d-%s%d-", n, field, j) }
	mc := &cachev1beta1.Memcached{
		ObjectMeta: metav1.ObjectMeta{Name: padded(fmt.Sprintf("m%d-", n), 63), Namespace: namespace},
		Spec: cachev1beta1.MemcachedSpec{
			Replicas:       ptr.To[int32](1000),
			Image:          padded(tag("image", 0), 512),
			Memory:         ptr.To(resource.MustParse("64Gi")),
			MaxConnections: 65536,
			Threads:        64,
			Port:           65535,
			MaxItemSize:    ptr.To(resource.MustParse("1Gi")),
			Resources: &cachev1beta1.ResourceOverrides{
				Requests: &cachev1beta1.ResourceAmounts{CPU: "64", Memory: "65Gi"},
				Limits:   &cachev1beta1.ResourceAmounts{CPU: "64", Memory: "65Gi"},
			},
			// A client CA by Secret name; auth, which a name of the same
			// length would give, cannot come with the exporter's longer image.
			TLS: &cachev1beta1.TLS{SecretName: dnsSubdomain(tag("tls", 0)),
				ClientCA: &cachev1beta1.ClientCA{SecretName: dnsSubdomain(tag("ca", 0))}},
			PodDisruptionBudget: &cachev1beta1.DisruptionBudget{MaxUnavailable: ptr.To(intstr.FromString("100%"))},
			Monitoring: &cachev1beta1.Monitoring{Exporter: &cachev1beta1.Exporter{
				Enabled: true, Image: padded(tag("exporter", 0), 512),
			}},
			DeletionPolicy: cachev1beta1.DeletionPolicyOrphan,
		},
	}
	// 64 arguments of 64 characters: the 4096 in all.
	for j := range 64 {
		mc.Spec.ExtraArgs = append(mc.Spec.ExtraArgs, padded(tag("arg", j), 64))
	}
	pod := &cachev1beta1.PodOverrides{
		Labels:                        map[string]string{},
		Annotations:                   map[string]string{},
		NodeSelector:                  map[string]string{},
		TerminationGracePeriodSeconds: ptr.To[int64](3600),
		PreStopDelaySeconds:           ptr.To[int32](300),
		PriorityClassName:             dnsSubdomain(tag("priority", 0)),
	}
	mc.Spec.Pod = pod
	for j := range 64 {
		pod.Labels[qualifiedKey(tag("label", j))] = padded(tag("value", j), 63)
	}
	// 64 keys and values of 64 characters each: the 8 KiB in all.
	for j := range 64 {
		pod.Annotations[padded(tag("annotation", j), 64)] = padded(tag("value", j), 64)
	}
	for j := range 16 {
		pod.NodeSelector[qualifiedKey(tag("node", j))] = padded(tag("value", j), 63)
		pod.ImagePullSecrets = append(pod.ImagePullSecrets, corev1.LocalObjectReference{Name: dnsSubdomain(tag("pull", j))})
		pod.Tolerations = append(pod.Tolerations, corev1.Toleration{
			Key: qualifiedKey(tag("toleration", j)), Operator: corev1.TolerationOpEqual,
			Value: padded(tag("value", j), 63), Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](3600),
		})
	}
	// Of the 32 entries topology spread constraints may have, 8 are the
	// constraints themselves, each with a topology key, and 24 match labels,
	// the entry with the most bytes.
	for j := range 8 {
		labels := map[string]string{}
		for k := range 3 {
			labels[qualifiedKey(tag(fmt.Sprintf("spread%d-", j), k))] = padded(tag("value", k), 63)
		}
		pod.TopologySpreadConstraints = append(pod.TopologySpreadConstraints, corev1.TopologySpreadConstraint{
			MaxSkew: 1, TopologyKey: qualifiedKey(tag("spread", j)), WhenUnsatisfiable: corev1.ScheduleAnyway,
			LabelSelector:      &metav1.LabelSelector{MatchLabels: labels},
			MinDomains:         ptr.To[int32](1),
			NodeAffinityPolicy: ptr.To(corev1.NodeInclusionPolicyHonor), NodeTaintsPolicy: ptr.To(corev1.NodeInclusionPolicyIgnore),
		})
	}
	pod.Affinity = affinity(tag)
	// The 24 entries networkPolicy may have: one peer and 23 match labels,
	// the entry with the most bytes.
	peer := cachev1beta1.NetworkPolicyPeer{
		NamespaceSelector: &cachev1beta1.LabelSelector{MatchLabels: map[string]string{}},
		PodSelector:       &cachev1beta1.LabelSelector{MatchLabels: map[string]string{}},
	}
	for j := range 23 {
		selector := peer.PodSelector
		if j%2 == 0 {
			selector = peer.NamespaceSelector
		}
		selector.MatchLabels[qualifiedKey(tag("peer", j))] = padded(tag("value", j), 63)
	}
	mc.Spec.NetworkPolicy = &cachev1beta1.NetworkPolicy{Clients: []cachev1beta1.NetworkPolicyPeer{peer}}
	return mc
}

// affinity fills each part of an affinity to its total: nodeAffinity
// with 32 requirements of a 317-character key (2 terms of 16, the most a
// term holds), each pod (anti-)affinity with 8 terms, each a topology key
// and one match label.
func affinity(tag func(string, int) string) *corev1.Affinity {
	a := &corev1.Affinity{
		NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{}},
		PodAffinity:  &corev1.PodAffinity{}, PodAntiAffinity: &corev1.PodAntiAffinity{},
	}
	for t := range 2 {
		var term corev1.NodeSelectorTerm
		for j := range 16 {
			term.MatchExpressions = append(term.MatchExpressions, corev1.NodeSelectorRequirement{
				Key: qualifiedKey(tag(fmt.Sprintf("affinity%d-", t), j)), Operator: corev1.NodeSelectorOpExists,
			})
		}
		a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms = append(
			a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms, term)
	}
	podTerms := func(part string) []corev1.PodAffinityTerm {
		var terms []corev1.PodAffinityTerm
		for j := range 8 {
			terms = append(terms, corev1.PodAffinityTerm{
				TopologyKey:   qualifiedKey(tag(part+"key", j)),
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{qualifiedKey(tag(part+"label", j)): padded(tag("value", j), 63)}},
			})
		}
		return terms
	}
	a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution = podTerms("pod")
	a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution = podTerms("anti")
	return a
}
