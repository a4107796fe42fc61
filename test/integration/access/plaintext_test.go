//go:build integration

package access

import (
	"context"
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
	"github.com/kubelite/memcached-operator/pkg/resources"
	"github.com/kubelite/memcached-operator/test/integration/framework"
)

// TestIntegrationPlaintextPort moves a Memcached's clients to TLS as
// docs/operations.md says: TLS on port 11212 with the plaintext port
// 11211 kept open, then the plaintext port removed. Expected, on the real
// control plane: while it is set, the memcached container, the headless
// Service and the NetworkPolicy carry both ports; once it is removed,
// only the TLS one.
func TestIntegrationPlaintextPort(t *testing.T) {
	t.Parallel()
	ns := framework.NewNamespace(t)
	framework.StartOperator(t, ns)
	framework.CreateTLSSecret(t, ns, "cache-tls", "first")
	framework.CreateMemcached(t, ns, "cache", func(s *cachev1beta1.MemcachedSpec) {
		s.Port = 11212
		s.TLS = &cachev1beta1.TLS{SecretName: "cache-tls", PlaintextPort: 11211}
		s.NetworkPolicy = &cachev1beta1.NetworkPolicy{}
	})
	framework.WaitConverged(t, ns, "cache", metav1.ConditionTrue)
	if got := childPorts(t, ns, "cache"); !slices.Equal(got.container, []int32{11212, 11211}) ||
		!slices.Equal(got.service, []int32{11212, 11211}) || !slices.Equal(got.policy, []int32{11212, 11211}) {
		t.Errorf("with the plaintext port: %s; want 11212 and 11211 in each", got)
	}

	framework.PatchSpec(t, ns, "cache", `{"spec":{"tls":{"plaintextPort":null}}}`)
	framework.WaitConverged(t, ns, "cache", metav1.ConditionTrue)
	if got := childPorts(t, ns, "cache"); !slices.Equal(got.container, []int32{11212}) ||
		!slices.Equal(got.service, []int32{11212}) || !slices.Equal(got.policy, []int32{11212}) {
		t.Errorf("once the plaintext port is removed: %s; want 11212 alone in each", got)
	}
}

// ports are the memcached ports of a Memcached's children, in their order.
type ports struct {
	container, service, policy []int32
}

func (p ports) String() string {
	return fmt.Sprintf("container ports %v, Service ports %v, NetworkPolicy ports %v", p.container, p.service, p.policy)
}

// childPorts reads the ports of the memcached container of the
// Deployment, of the Service and of the NetworkPolicy's rule for clients.
func childPorts(t *testing.T, ns, name string) ports {
	t.Helper()
	ctx := context.Background()
	var p ports
	dep, err := framework.GetDeployment(ctx, ns, name)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range dep.Spec.Template.Spec.Containers {
		if c.Name == resources.MemcachedContainerName {
			for _, cp := range c.Ports {
				p.container = append(p.container, cp.ContainerPort)
			}
		}
	}
	svc, err := framework.Kube().CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, sp := range svc.Spec.Ports {
		if sp.Protocol == corev1.ProtocolTCP {
			p.service = append(p.service, sp.Port)
		}
	}
	np, err := framework.Kube().NetworkingV1().NetworkPolicies(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(np.Spec.Ingress) > 0 {
		for _, pp := range np.Spec.Ingress[0].Ports {
			p.policy = append(p.policy, pp.Port.IntVal)
		}
	}
	return p
}
