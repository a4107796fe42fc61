//go:build integration

package install

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/kubelite/memcached-operator/test/integration/framework"
)

// TestIntegrationOperatorNetworkPolicy applies the operator's own
// NetworkPolicy (artifacts/network-policy) and checks that the apiserver
// takes it, that it selects the shipped Deployment's Pods, and that each
// port it opens is one the operator's container names. What it blocks
// needs a network plugin, which the local control plane has not: that is
// not tested here.
func TestIntegrationOperatorNetworkPolicy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const file = "artifacts/network-policy/networkpolicy.yaml"
	if err := framework.Cluster().ApplyFiles(ctx, framework.Path(file)); err != nil {
		t.Fatalf("applying %s: %v", file, err)
	}
	t.Cleanup(func() {
		_ = framework.Kube().NetworkingV1().NetworkPolicies("memcached-operator").Delete(context.Background(), "memcached-operator", metav1.DeleteOptions{})
	})
	policy, err := framework.Kube().NetworkingV1().NetworkPolicies("memcached-operator").Get(ctx, "memcached-operator", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	var deployment appsv1.Deployment
	framework.ReadManifest(t, "artifacts/deploy/deployment.yaml", &deployment)
	selector, err := metav1.LabelSelectorAsSelector(&policy.Spec.PodSelector)
	if err != nil {
		t.Fatal(err)
	}
	if !selector.Matches(labels.Set(deployment.Spec.Template.Labels)) {
		t.Errorf("the policy selects %s, which does not match the operator's Pods %v", selector, deployment.Spec.Template.Labels)
	}
	named := map[string]bool{}
	for _, c := range deployment.Spec.Template.Spec.Containers {
		for _, p := range c.Ports {
			named[p.Name] = true
		}
	}
	open := map[string]networkingv1.NetworkPolicyIngressRule{}
	for _, rule := range policy.Spec.Ingress {
		for _, p := range rule.Ports {
			if p.Port == nil || !named[p.Port.StrVal] {
				t.Errorf("the policy opens port %v, which the operator's container does not name", p.Port)
				continue
			}
			open[p.Port.StrVal] = rule
		}
	}
	for _, port := range []string{"webhook", "metrics"} {
		rule, ok := open[port]
		if !ok {
			t.Errorf("the policy does not open %s, so nothing may reach it", port)
			continue
		}
		if len(rule.From) == 0 {
			t.Errorf("the policy opens %s to everyone", port)
		}
	}
}
