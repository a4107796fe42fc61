//go:build integration

package api

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cachev1alpha1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1alpha1"
	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
	"github.com/kubelite/memcached-operator/pkg/maximal"
	"github.com/kubelite/memcached-operator/test/integration/framework"
)

// TestIntegrationCRDBounds checks the size bounds of the Memcached spec on
// the apiserver: the maximal Memcached (maximal.Memcached) that docs/api.md
// sizes and TestMaximalMemcachedHeap caches is admitted, so the figures are
// of an object a tenant can store, and one entry past any bound is refused.
// It needs no operator: the schema alone decides.
func TestIntegrationCRDBounds(t *testing.T) {
	t.Parallel()
	ns := framework.NewNamespace(t)
	ctx := context.Background()
	memcacheds := framework.Memcacheds().CacheV1beta1().Memcacheds(ns)

	t.Run("maximal Memcached is admitted", func(t *testing.T) {
		if _, err := memcacheds.Create(ctx, maximal.Memcached(ns, 0), metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating the maximal Memcached: %v", err)
		}
	})

	long := func(n int) string { return strings.Repeat("a", n) }
	tolerations := func(n int) []corev1.Toleration {
		var out []corev1.Toleration
		for i := range n {
			out = append(out, corev1.Toleration{Key: fmt.Sprintf("t%d", i), Operator: corev1.TolerationOpExists})
		}
		return out
	}
	labels := func(n int) map[string]string {
		out := map[string]string{}
		for i := range n {
			out[fmt.Sprintf("l%d", i)] = "v"
		}
		return out
	}
	nodeTerm := func(requirements, values int) corev1.NodeSelectorTerm {
		var term corev1.NodeSelectorTerm
		for i := range requirements {
			r := corev1.NodeSelectorRequirement{Key: fmt.Sprintf("k%d", i), Operator: corev1.NodeSelectorOpIn}
			for j := range values {
				r.Values = append(r.Values, fmt.Sprintf("v%d", j))
			}
			term.MatchExpressions = append(term.MatchExpressions, r)
		}
		return term
	}
	nodeAffinity := func(terms ...corev1.NodeSelectorTerm) *corev1.Affinity {
		return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: terms},
		}}
	}
	antiAffinityTerms := func(n int) *corev1.Affinity {
		a := &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{}}
		for i := range n {
			a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution = append(a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution,
				corev1.WeightedPodAffinityTerm{Weight: 1, PodAffinityTerm: corev1.PodAffinityTerm{
					TopologyKey: "kubernetes.io/hostname", Namespaces: []string{fmt.Sprintf("ns%d", i)},
				}})
		}
		return a
	}
	spread := func(constraints, labelsEach int) []corev1.TopologySpreadConstraint {
		var out []corev1.TopologySpreadConstraint
		for range constraints {
			out = append(out, corev1.TopologySpreadConstraint{
				MaxSkew: 1, TopologyKey: "topology.kubernetes.io/zone", WhenUnsatisfiable: corev1.ScheduleAnyway,
				LabelSelector: &metav1.LabelSelector{MatchLabels: labels(labelsEach)},
			})
		}
		return out
	}
	args := func(n, length int) []string {
		var out []string
		for range n {
			out = append(out, long(length))
		}
		return out
	}

	// Each case is one past a bound: the lists and maps of the Kubernetes
	// types the spec embeds (bounded by hack/tools/cmd/crdbounds), their
	// strings and map keys, and each total rule of types.go.
	peers := func(n int, selector *cachev1beta1.LabelSelector) []cachev1beta1.NetworkPolicyPeer {
		var out []cachev1beta1.NetworkPolicyPeer
		for range n {
			out = append(out, cachev1beta1.NetworkPolicyPeer{PodSelector: selector})
		}
		return out
	}
	tests := []struct {
		name string
		pod  cachev1beta1.PodOverrides
		args []string
		np   *cachev1beta1.NetworkPolicy
	}{
		{name: "17 tolerations", pod: cachev1beta1.PodOverrides{Tolerations: tolerations(17)}},
		{name: "toleration value of 64 characters", pod: cachev1beta1.PodOverrides{Tolerations: []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpEqual, Value: long(64)}}}},
		{name: "toleration key of 318 characters", pod: cachev1beta1.PodOverrides{Tolerations: []corev1.Toleration{{Key: long(318), Operator: corev1.TolerationOpExists}}}},
		{name: "17 node selector labels", pod: cachev1beta1.PodOverrides{NodeSelector: labels(17)}},
		{name: "node selector value of 64 characters", pod: cachev1beta1.PodOverrides{NodeSelector: map[string]string{"pool": long(64)}}},
		{name: "node selector key of 318 characters", pod: cachev1beta1.PodOverrides{NodeSelector: map[string]string{long(318): "v"}}},
		{name: "65 Pod labels", pod: cachev1beta1.PodOverrides{Labels: labels(65)}},
		{name: "Pod label value of 64 characters", pod: cachev1beta1.PodOverrides{Labels: map[string]string{"team": long(64)}}},
		{name: "Pod annotations of 8193 characters", pod: cachev1beta1.PodOverrides{Annotations: map[string]string{"a": long(8192)}}},
		{name: "image pull Secret name of 254 characters", pod: cachev1beta1.PodOverrides{ImagePullSecrets: []corev1.LocalObjectReference{{Name: long(254)}}}},
		{name: "node affinity value of 64 characters", pod: cachev1beta1.PodOverrides{Affinity: nodeAffinity(corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "k", Operator: corev1.NodeSelectorOpIn, Values: []string{long(64)}}}})}},
		{name: "node affinity term of 17 requirements", pod: cachev1beta1.PodOverrides{Affinity: nodeAffinity(nodeTerm(17, 0))}},
		{name: "node affinity requirement of 65 values", pod: cachev1beta1.PodOverrides{Affinity: nodeAffinity(nodeTerm(1, 65))}},
		{name: "node affinity of 33 entries", pod: cachev1beta1.PodOverrides{Affinity: nodeAffinity(nodeTerm(1, 31), nodeTerm(1, 0))}},
		{name: "pod anti-affinity of 18 entries", pod: cachev1beta1.PodOverrides{Affinity: antiAffinityTerms(9)}},
		{name: "topology spread constraints of 33 entries", pod: cachev1beta1.PodOverrides{TopologySpreadConstraints: spread(3, 10)}},
		{name: "topology spread match label value of 64 characters", pod: cachev1beta1.PodOverrides{TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{
			MaxSkew: 1, TopologyKey: "kubernetes.io/hostname", WhenUnsatisfiable: corev1.ScheduleAnyway,
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": long(64)}},
		}}}},
		{name: "extra arguments of 4097 characters", args: append(args(4, 1024), "x")},
		{name: "17 network policy clients", np: &cachev1beta1.NetworkPolicy{Clients: peers(17, &cachev1beta1.LabelSelector{})}},
		{name: "network policy of 25 entries", np: &cachev1beta1.NetworkPolicy{
			Clients: peers(1, &cachev1beta1.LabelSelector{MatchLabels: labels(12)}),
			Metrics: peers(1, &cachev1beta1.LabelSelector{MatchLabels: labels(11)}),
		}},
		{name: "network policy peer without a selector", np: &cachev1beta1.NetworkPolicy{Clients: []cachev1beta1.NetworkPolicyPeer{{}}}},
		{name: "network policy match label value of 64 characters", np: &cachev1beta1.NetworkPolicy{Metrics: peers(1, &cachev1beta1.LabelSelector{MatchLabels: map[string]string{"app": long(64)}})}},
		{name: "network policy In without values", np: &cachev1beta1.NetworkPolicy{Clients: peers(1, &cachev1beta1.LabelSelector{
			MatchExpressions: []cachev1beta1.LabelSelectorRequirement{{Key: "k", Operator: "In"}},
		})}},
		{name: "network policy Exists with values", np: &cachev1beta1.NetworkPolicy{Clients: peers(1, &cachev1beta1.LabelSelector{
			MatchExpressions: []cachev1beta1.LabelSelectorRequirement{{Key: "k", Operator: "Exists", Values: []string{"v"}}},
		})}},
		{name: "network policy operator Gt", np: &cachev1beta1.NetworkPolicy{Clients: peers(1, &cachev1beta1.LabelSelector{
			MatchExpressions: []cachev1beta1.LabelSelectorRequirement{{Key: "k", Operator: "Gt", Values: []string{"1"}}},
		})}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := tt.pod
			mc := &cachev1beta1.Memcached{
				ObjectMeta: metav1.ObjectMeta{GenerateName: "over-"},
				Spec:       cachev1beta1.MemcachedSpec{Pod: &pod, ExtraArgs: tt.args, NetworkPolicy: tt.np},
			}
			_, err := memcacheds.Create(ctx, mc, metav1.CreateOptions{})
			if !apierrors.IsInvalid(err) {
				t.Fatalf("creating a Memcached with %s: err = %v, want Invalid", tt.name, err)
			}
		})
	}

	t.Run("v1alpha1 with 17 tolerations", func(t *testing.T) {
		var tols []corev1.Toleration
		for i := range 17 {
			tols = append(tols, corev1.Toleration{Key: fmt.Sprintf("t%d", i), Operator: corev1.TolerationOpExists})
		}
		_, err := framework.Memcacheds().CacheV1alpha1().Memcacheds(ns).Create(ctx, &cachev1alpha1.Memcached{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "over-"},
			Spec:       cachev1alpha1.MemcachedSpec{Tolerations: tols},
		}, metav1.CreateOptions{})
		if !apierrors.IsInvalid(err) {
			t.Fatalf("creating a v1alpha1 Memcached with 17 tolerations: err = %v, want Invalid", err)
		}
	})
}
