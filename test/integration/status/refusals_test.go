//go:build integration

package status

import (
	"context"
	"fmt"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
	"github.com/kubelite/memcached-operator/pkg/localcluster"
	"github.com/kubelite/memcached-operator/test/integration/framework"
)

// TestIntegrationRefusedWritesAreVisibleAndRecover puts something in the
// way of the Deployment that the Memcached's spec has no part in: an
// admission policy, a quota, a webhook that is down. Each must show as
// Degraded with its own reason and one Warning Event, and once the cause
// is removed the Memcached must converge without anyone editing it.
func TestIntegrationRefusedWritesAreVisibleAndRecover(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// block puts the cause in place for namespace ns and returns what
		// removes it.
		block       func(t *testing.T, ns string) (unblock func())
		wantReason  string
		wantMessage string
	}{
		{
			name:        "admission policy",
			block:       framework.DenyDeployments,
			wantReason:  cachev1beta1.ReasonAdmissionDenied,
			wantMessage: "caches are frozen in this namespace",
		},
		{
			name:        "resource quota",
			block:       denyByQuota,
			wantReason:  cachev1beta1.ReasonQuotaExceeded,
			wantMessage: "exceeded quota: no-deployments",
		},
		{
			name:        "webhook down",
			block:       webhookDown,
			wantReason:  cachev1beta1.ReasonAPIServerError,
			wantMessage: `failed calling webhook "down.kubelite.io"`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ns := framework.NewNamespace(t)
			op := framework.StartOperator(t, ns)
			unblock := tt.block(t, ns)
			created := framework.CreateMemcached(t, ns, "cache", nil)
			framework.Eventually(t, framework.WaitLong, "Degraded="+tt.wantReason, func(ctx context.Context) (bool, string) {
				mc, err := framework.GetMemcached(ctx, ns, "cache")
				if err != nil {
					return false, err.Error()
				}
				d, p := framework.Condition(mc, cachev1beta1.ConditionDegraded), framework.Condition(mc, cachev1beta1.ConditionProgressing)
				return d.Status == metav1.ConditionTrue && d.Reason == tt.wantReason && strings.Contains(d.Message, tt.wantMessage) &&
						p.Status == metav1.ConditionFalse && p.Reason == tt.wantReason,
					fmt.Sprintf("Degraded %+v, Progressing %+v", d, p)
			})
			// The cause stays while the key is retried on its backoff:
			// after two more refused writes of the Deployment, the Event
			// is still one.
			mark := len(op.Requests(t, refusedDeploymentWrite))
			framework.Eventually(t, framework.WaitLong, "two more refused writes of the Deployment", func(context.Context) (bool, string) {
				refused := op.Requests(t, refusedDeploymentWrite)[mark:]
				return len(refused) >= 2, fmt.Sprintf("%d refused since the mark", len(refused))
			})
			events, err := warningEvents(context.Background(), ns, "cache", tt.wantReason)
			if err != nil {
				t.Fatal(err)
			}
			if len(events) != 1 || events[0].Count > 1 {
				t.Errorf("Warning Events with reason %s: %d objects, want 1 with count 1: %+v", tt.wantReason, len(events), events)
			}

			unblock()
			mc := framework.WaitConverged(t, ns, "cache", metav1.ConditionTrue)
			if mc.Generation != created.Generation {
				t.Errorf("generation %d -> %d: the test must converge without an edit", created.Generation, mc.Generation)
			}
			if d := framework.Condition(mc, cachev1beta1.ConditionDegraded); d.Status != metav1.ConditionFalse {
				t.Errorf("Degraded = %+v after the cause was removed", d)
			}
		})
	}
}

// refusedDeploymentWrite matches a write of a named Deployment that the
// apiserver refused.
func refusedDeploymentWrite(e localcluster.AuditEvent) bool {
	return e.Write() && e.Code() >= 400 && e.Resource() == "deployments" && e.Name() != ""
}

// TestIntegrationRefusedUpdateKeepsRealCounts converges a Memcached with 3
// replicas, then has an admission policy refuse every update of its
// Deployment and scales it to 4. The refused apply must not make the status
// forget the Deployment that still serves: it keeps the real counts (3
// ready), shows the refusal, and clears without an edit once the policy is
// gone.
func TestIntegrationRefusedUpdateKeepsRealCounts(t *testing.T) {
	t.Parallel()
	ns := framework.NewNamespace(t)
	framework.StartOperator(t, ns)
	framework.CreateMemcached(t, ns, "cache", func(s *cachev1beta1.MemcachedSpec) { s.Replicas = ptr.To[int32](3) })
	framework.WaitConverged(t, ns, "cache", metav1.ConditionTrue)

	unblock := framework.DenyDeployments(t, ns)
	ctx := context.Background()
	scaled, err := framework.Memcacheds().CacheV1beta1().Memcacheds(ns).Patch(ctx, "cache", types.MergePatchType,
		[]byte(`{"spec":{"replicas":4}}`), metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, framework.WaitLong, "the refusal is on the status with the real counts", func(ctx context.Context) (bool, string) {
		mc, err := framework.GetMemcached(ctx, ns, "cache")
		if err != nil {
			return false, err.Error()
		}
		d := framework.Condition(mc, cachev1beta1.ConditionDegraded)
		return mc.Status.ObservedGeneration == scaled.Generation && d.Reason == cachev1beta1.ReasonAdmissionDenied,
			fmt.Sprintf("status %+v", mc.Status)
	})
	mc, err := framework.GetMemcached(ctx, ns, "cache")
	if err != nil {
		t.Fatal(err)
	}
	if mc.Status.ReadyReplicas != 3 || mc.Status.AvailableReplicas != 3 {
		t.Errorf("ready %d, available %d replicas while the refused update is on the status; want the 3 that serve",
			mc.Status.ReadyReplicas, mc.Status.AvailableReplicas)
	}
	if a := framework.Condition(mc, cachev1beta1.ConditionAvailable); a.Status != metav1.ConditionTrue {
		t.Errorf("Available = %+v while 3 of 4 replicas serve", a)
	}
	if p := framework.Condition(mc, cachev1beta1.ConditionProgressing); p.Status != metav1.ConditionFalse || p.Reason != cachev1beta1.ReasonAdmissionDenied ||
		!strings.Contains(p.Message, "caches are frozen") {
		t.Errorf("Progressing = %+v, want False with the policy's refusal", p)
	}

	unblock()
	mc = framework.WaitConverged(t, ns, "cache", metav1.ConditionTrue)
	if mc.Generation != scaled.Generation {
		t.Errorf("generation %d -> %d: the refusal must clear without an edit", scaled.Generation, mc.Generation)
	}
	if mc.Status.ReadyReplicas != 4 {
		t.Errorf("ready replicas %d after the policy is gone, want 4", mc.Status.ReadyReplicas)
	}
}

// warningEvents returns the Warning Events about the Memcached with the
// given reason.
func warningEvents(ctx context.Context, ns, name, reason string) ([]corev1.Event, error) {
	list, err := framework.Kube().CoreV1().Events(ns).List(ctx, metav1.ListOptions{
		FieldSelector: "involvedObject.kind=Memcached,involvedObject.name=" + name + ",reason=" + reason + ",type=Warning",
	})
	if err != nil {
		return nil, err
	}
	return list.Items, nil
}

// denyByQuota has a ResourceQuota of no Deployments in ns refuse every
// create of one, and returns what removes it.
func denyByQuota(t *testing.T, ns string) func() {
	ctx := context.Background()
	quotas := framework.Kube().CoreV1().ResourceQuotas(ns)
	_, err := quotas.Create(ctx, &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "no-deployments"},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{"count/deployments.apps": resource.MustParse("0")}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	framework.WaitDeploymentCreate(t, ns, func(err error) bool { return err != nil && strings.Contains(err.Error(), "exceeded quota") })
	return func() {
		if err := quotas.Delete(ctx, "no-deployments", metav1.DeleteOptions{}); err != nil {
			t.Errorf("deleting the quota: %v", err)
		}
	}
}

// webhookDown has a validating webhook that nothing serves, failing
// closed, refuse every create and update of a Deployment in ns, and returns
// what removes it.
func webhookDown(t *testing.T, ns string) func() {
	ctx := context.Background()
	configs := framework.Kube().AdmissionregistrationV1().ValidatingWebhookConfigurations()
	name := "down-" + ns
	_, err := configs.Create(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:                    "down.kubelite.io",
			AdmissionReviewVersions: []string{"v1"},
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
			TimeoutSeconds:          ptr.To[int32](2),
			// Port 1 on loopback: nothing listens there.
			ClientConfig:      admissionregistrationv1.WebhookClientConfig{URL: ptr.To("https://127.0.0.1:1/validate")},
			NamespaceSelector: framework.InNamespace(ns),
			Rules:             []admissionregistrationv1.RuleWithOperations{framework.DeploymentWrites},
		}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	remove := func() { _ = configs.Delete(ctx, name, metav1.DeleteOptions{}) }
	t.Cleanup(remove)
	framework.WaitDeploymentCreate(t, ns, func(err error) bool { return err != nil && strings.Contains(err.Error(), "failed calling webhook") })
	return remove
}
