package resources

import (
	"encoding/json"
	"reflect"
	"testing"

	"k8s.io/utils/ptr"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
)

func TestNetworkPolicy(t *testing.T) {
	team := cachev1beta1.NetworkPolicyPeer{NamespaceSelector: &cachev1beta1.LabelSelector{MatchLabels: map[string]string{"team": "web"}}}
	monitoring := cachev1beta1.NetworkPolicyPeer{
		NamespaceSelector: &cachev1beta1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "monitoring"}},
		PodSelector:       &cachev1beta1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": "prometheus"}},
	}
	exporter := func(s *cachev1beta1.MemcachedSpec) {
		s.Monitoring = &cachev1beta1.Monitoring{Exporter: &cachev1beta1.Exporter{Enabled: true}}
	}
	tests := []struct {
		name   string
		spec   func(*cachev1beta1.MemcachedSpec)
		policy *cachev1beta1.NetworkPolicy
		// wantSpec is the policy's spec as JSON; "" for no policy.
		wantSpec string
	}{
		{name: "left out: no policy"},
		{
			name:     "empty: the Memcached's own namespace, memcached port only",
			policy:   &cachev1beta1.NetworkPolicy{},
			wantSpec: `{"podSelector":{"matchLabels":{"app.kubernetes.io/instance":"cache","app.kubernetes.io/name":"memcached"}},"ingress":[{"ports":[{"protocol":"TCP","port":11211}],"from":[{"podSelector":{}}]}],"policyTypes":["Ingress"]}`,
		},
		{
			name:     "clients are the peers, in their order, on spec.port",
			spec:     func(s *cachev1beta1.MemcachedSpec) { s.Port = 11311 },
			policy:   &cachev1beta1.NetworkPolicy{Clients: []cachev1beta1.NetworkPolicyPeer{team, {PodSelector: &cachev1beta1.LabelSelector{}}}},
			wantSpec: `{"podSelector":{"matchLabels":{"app.kubernetes.io/instance":"cache","app.kubernetes.io/name":"memcached"}},"ingress":[{"ports":[{"protocol":"TCP","port":11311}],"from":[{"namespaceSelector":{"matchLabels":{"team":"web"}}},{"podSelector":{}}]}],"policyTypes":["Ingress"]}`,
		},
		{
			name: "match expressions are kept, values only where given",
			policy: &cachev1beta1.NetworkPolicy{Clients: []cachev1beta1.NetworkPolicyPeer{{
				NamespaceSelector: &cachev1beta1.LabelSelector{MatchExpressions: []cachev1beta1.LabelSelectorRequirement{
					{Key: "kubernetes.io/metadata.name", Operator: "In", Values: []string{"web", "api"}},
					{Key: "quarantined", Operator: "DoesNotExist"},
				}},
				PodSelector: &cachev1beta1.LabelSelector{MatchLabels: map[string]string{"role": "frontend"}},
			}}},
			wantSpec: `{"podSelector":{"matchLabels":{"app.kubernetes.io/instance":"cache","app.kubernetes.io/name":"memcached"}},"ingress":[{"ports":[{"protocol":"TCP","port":11211}],"from":[{"podSelector":{"matchLabels":{"role":"frontend"}},"namespaceSelector":{"matchExpressions":[{"key":"kubernetes.io/metadata.name","operator":"In","values":["web","api"]},{"key":"quarantined","operator":"DoesNotExist"}]}}]}],"policyTypes":["Ingress"]}`,
		},
		{
			name:     "metrics peers reach the exporter's port",
			spec:     exporter,
			policy:   &cachev1beta1.NetworkPolicy{Clients: []cachev1beta1.NetworkPolicyPeer{team}, Metrics: []cachev1beta1.NetworkPolicyPeer{monitoring}},
			wantSpec: `{"podSelector":{"matchLabels":{"app.kubernetes.io/instance":"cache","app.kubernetes.io/name":"memcached"}},"ingress":[{"ports":[{"protocol":"TCP","port":11211}],"from":[{"namespaceSelector":{"matchLabels":{"team":"web"}}}]},{"ports":[{"protocol":"TCP","port":9150}],"from":[{"podSelector":{"matchLabels":{"app.kubernetes.io/name":"prometheus"}},"namespaceSelector":{"matchLabels":{"kubernetes.io/metadata.name":"monitoring"}}}]}],"policyTypes":["Ingress"]}`,
		},
		{
			name:     "exporter on without metrics peers: its port stays closed",
			spec:     exporter,
			policy:   &cachev1beta1.NetworkPolicy{},
			wantSpec: `{"podSelector":{"matchLabels":{"app.kubernetes.io/instance":"cache","app.kubernetes.io/name":"memcached"}},"ingress":[{"ports":[{"protocol":"TCP","port":11211}],"from":[{"podSelector":{}}]}],"policyTypes":["Ingress"]}`,
		},
		{
			name:     "metrics peers without the exporter: no rule for a port nothing serves",
			policy:   &cachev1beta1.NetworkPolicy{Metrics: []cachev1beta1.NetworkPolicyPeer{monitoring}},
			wantSpec: `{"podSelector":{"matchLabels":{"app.kubernetes.io/instance":"cache","app.kubernetes.io/name":"memcached"}},"ingress":[{"ports":[{"protocol":"TCP","port":11211}],"from":[{"podSelector":{}}]}],"policyTypes":["Ingress"]}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mc := memcached(func(s *cachev1beta1.MemcachedSpec) {
				if tt.spec != nil {
					tt.spec(s)
				}
				s.NetworkPolicy = tt.policy
			})
			np, err := NetworkPolicy(Default(mc))
			if err != nil {
				t.Fatalf("NetworkPolicy: %v", err)
			}
			if tt.wantSpec == "" {
				if np != nil {
					t.Fatalf("a policy for a spec without networkPolicy: %+v", np)
				}
				return
			}
			if np == nil {
				t.Fatal("no policy")
			}
			if ptr.Deref(np.Name, "") != "cache" || ptr.Deref(np.Namespace, "") != "prod" {
				t.Errorf("name = %s/%s, want prod/cache", ptr.Deref(np.Namespace, ""), ptr.Deref(np.Name, ""))
			}
			if !reflect.DeepEqual(np.Labels, Labels(mc)) {
				t.Errorf("labels = %v, want %v", np.Labels, Labels(mc))
			}
			if len(np.OwnerReferences) != 1 || !ptr.Deref(np.OwnerReferences[0].Controller, false) || ptr.Deref(np.OwnerReferences[0].UID, "") != mc.UID {
				t.Errorf("ownerReferences = %+v, want the Memcached's controller reference", np.OwnerReferences)
			}
			if np.Annotations[SpecHashAnnotation] == "" {
				t.Errorf("spec hash annotation missing")
			}
			got, err := json.Marshal(np.Spec)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.wantSpec {
				t.Errorf("spec\n got: %s\nwant: %s", got, tt.wantSpec)
			}
		})
	}
}

// TestNetworkPolicyRendersTheSame checks that equal specs render
// byte-identical policies with the same spec hash, so an unchanged spec
// never writes the policy, and that a change of peers changes the hash.
func TestNetworkPolicyRendersTheSame(t *testing.T) {
	spec := func(team string) func(*cachev1beta1.MemcachedSpec) {
		return func(s *cachev1beta1.MemcachedSpec) {
			s.NetworkPolicy = &cachev1beta1.NetworkPolicy{Clients: []cachev1beta1.NetworkPolicyPeer{{
				NamespaceSelector: &cachev1beta1.LabelSelector{MatchLabels: map[string]string{"team": team, "env": "prod", "tier": "web"}},
			}}}
		}
	}
	render := func(mutate func(*cachev1beta1.MemcachedSpec)) (string, string) {
		t.Helper()
		np, err := NetworkPolicy(Default(memcached(mutate)))
		if err != nil {
			t.Fatal(err)
		}
		b, err := json.Marshal(np)
		if err != nil {
			t.Fatal(err)
		}
		return string(b), np.Annotations[SpecHashAnnotation]
	}
	first, firstHash := render(spec("web"))
	for range 20 {
		if again, _ := render(spec("web")); again != first {
			t.Fatalf("the same spec rendered twice differently:\n%s\n%s", first, again)
		}
	}
	if _, other := render(spec("api")); other == firstHash {
		t.Errorf("another peer kept the spec hash %s", firstHash)
	}
}

// TestNetworkPolicyLeavesTheOtherChildren checks that spec.networkPolicy
// changes no other child: setting it must not roll the Pods.
func TestNetworkPolicyLeavesTheOtherChildren(t *testing.T) {
	without, err := Build(Default(memcached(nil)))
	if err != nil {
		t.Fatal(err)
	}
	with, err := Build(Default(memcached(func(s *cachev1beta1.MemcachedSpec) {
		s.NetworkPolicy = &cachev1beta1.NetworkPolicy{Clients: []cachev1beta1.NetworkPolicyPeer{{PodSelector: &cachev1beta1.LabelSelector{}}}}
	})))
	if err != nil {
		t.Fatal(err)
	}
	if without.NetworkPolicy != nil || with.NetworkPolicy == nil {
		t.Fatalf("policies: %v without the field, %v with it", without.NetworkPolicy, with.NetworkPolicy)
	}
	for _, c := range []struct {
		kind      string
		was, with any
	}{
		{"Deployment", without.Pools[0].Deployment, with.Pools[0].Deployment},
		{"Service", without.Service, with.Service},
		{"PodDisruptionBudget", without.Pools[0].PodDisruptionBudget, with.Pools[0].PodDisruptionBudget},
	} {
		a, _ := json.Marshal(c.was)
		b, _ := json.Marshal(c.with)
		if string(a) != string(b) {
			t.Errorf("spec.networkPolicy changed the %s:\n%s\n%s", c.kind, a, b)
		}
	}
}
