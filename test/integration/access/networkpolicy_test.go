//go:build integration

package access

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
	"github.com/kubelite/memcached-operator/pkg/localcluster"
	"github.com/kubelite/memcached-operator/pkg/resources"
	"github.com/kubelite/memcached-operator/test/integration/framework"
)

// The tests below cover the NetworkPolicy a Memcached asks for with
// spec.networkPolicy, as an object on a real control plane: what it
// says, its drift repair, its removal and a foreign policy of its name.
// The operator's own NetworkPolicy (artifacts/) is tested with the
// install.

// foreignRecheckInterval is how often the operator syncs a Memcached
// blocked by someone else's object in its child's name again, to see
// whether the object is gone (foreignRecheckInterval in controller.go).
const foreignRecheckInterval = time.Minute

func getNetworkPolicy(ctx context.Context, ns, name string) (*networkingv1.NetworkPolicy, error) {
	return framework.Kube().NetworkingV1().NetworkPolicies(ns).Get(ctx, name, metav1.GetOptions{})
}

// ingressJSON is a policy's ingress rules as JSON, to compare with what a
// test expects in one string.
func ingressJSON(np *networkingv1.NetworkPolicy) string {
	b, err := json.Marshal(np.Spec.Ingress)
	if err != nil {
		return err.Error()
	}
	return string(b)
}

// The ingress rules of the specs below, as the apiserver stores them.
const (
	ownNamespaceOnly = `[{"ports":[{"protocol":"TCP","port":11211}],"from":[{"podSelector":{}}]}]`
	webAndMonitoring = `[{"ports":[{"protocol":"TCP","port":11211}],"from":[{"namespaceSelector":{"matchLabels":{"team":"web"}}},{"podSelector":{"matchLabels":{"role":"frontend"}}}]},` +
		`{"ports":[{"protocol":"TCP","port":9150}],"from":[{"podSelector":{"matchLabels":{"app.kubernetes.io/name":"prometheus"}},"namespaceSelector":{"matchLabels":{"kubernetes.io/metadata.name":"monitoring"}}}]}]`
)

// cachePolicy matches the requests for the NetworkPolicy named cache, the
// child of the tests' Memcached.
func cachePolicy(e localcluster.AuditEvent) bool {
	return e.Resource() == "networkpolicies" && e.Name() == "cache"
}

// TestIntegrationMemcachedNetworkPolicy walks one Memcached's policy
// through its life: networkPolicy {} creates it, admitting the Pods of the
// namespace to the memcached port; clients and metrics replace its peers; a
// hand edit is put back; a converged Memcached costs no write; unsetting
// the field deletes it.
func TestIntegrationMemcachedNetworkPolicy(t *testing.T) {
	t.Parallel()
	ns := framework.NewNamespace(t)
	op := framework.StartOperator(t, ns)
	ctx := context.Background()
	mc := framework.CreateMemcached(t, ns, "cache", func(s *cachev1beta1.MemcachedSpec) {
		s.NetworkPolicy = &cachev1beta1.NetworkPolicy{}
	})
	framework.WaitConverged(t, ns, "cache", metav1.ConditionTrue)

	np, err := getNetworkPolicy(ctx, ns, "cache")
	if err != nil {
		t.Fatalf("networkPolicy {} made no NetworkPolicy: %v", err)
	}
	if ref := metav1.GetControllerOf(np); ref == nil || ref.UID != mc.UID || ref.Kind != "Memcached" || !ptr.Deref(ref.BlockOwnerDeletion, false) {
		t.Errorf("controller reference %+v, want the Memcached's (UID %s) with blockOwnerDeletion", ref, mc.UID)
	}
	for k, v := range resources.Labels(mc) {
		if np.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, np.Labels[k], v)
		}
	}
	if got := metav1.FormatLabelSelector(&np.Spec.PodSelector); got != resources.Selector(mc) {
		t.Errorf("podSelector %s, want the Pods' %s", got, resources.Selector(mc))
	}
	if len(np.Spec.PolicyTypes) != 1 || np.Spec.PolicyTypes[0] != networkingv1.PolicyTypeIngress || np.Spec.Egress != nil {
		t.Errorf("policyTypes %v, egress %v; want Ingress alone", np.Spec.PolicyTypes, np.Spec.Egress)
	}
	if got := ingressJSON(np); got != ownNamespaceOnly {
		t.Errorf("ingress of networkPolicy {}:\n got %s\nwant %s", got, ownNamespaceOnly)
	}

	t.Log("Clients and metrics peers, with the exporter on")
	framework.PatchSpec(t, ns, "cache", `{"spec":{"monitoring":{"exporter":{"enabled":true}},"networkPolicy":{`+
		`"clients":[{"namespaceSelector":{"matchLabels":{"team":"web"}}},{"podSelector":{"matchLabels":{"role":"frontend"}}}],`+
		`"metrics":[{"namespaceSelector":{"matchLabels":{"kubernetes.io/metadata.name":"monitoring"}},"podSelector":{"matchLabels":{"app.kubernetes.io/name":"prometheus"}}}]}}}`)
	framework.Eventually(t, framework.WaitLong, "the policy admits the listed peers", func(ctx context.Context) (bool, string) {
		np, err := getNetworkPolicy(ctx, ns, "cache")
		if err != nil {
			return false, err.Error()
		}
		got := ingressJSON(np)
		return got == webAndMonitoring, got
	})
	framework.WaitConverged(t, ns, "cache", metav1.ConditionTrue)

	t.Log("A hand edit that opens the cache to everyone")
	if _, err := framework.Kube().NetworkingV1().NetworkPolicies(ns).Patch(ctx, "cache", types.MergePatchType,
		[]byte(`{"spec":{"ingress":[{}]}}`), metav1.PatchOptions{FieldManager: "kubectl-edit"}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, framework.WaitLong, "the hand edit is put back", func(ctx context.Context) (bool, string) {
		np, err := getNetworkPolicy(ctx, ns, "cache")
		if err != nil {
			return false, err.Error()
		}
		got := ingressJSON(np)
		return got == webAndMonitoring, got
	})
	framework.Eventually(t, framework.WaitLong, "a DriftRepaired Event names the NetworkPolicy", func(ctx context.Context) (bool, string) {
		events, err := framework.Kube().CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		var reasons []string
		for _, e := range events.Items {
			if e.Reason == "DriftRepaired" && e.Type == corev1.EventTypeNormal && strings.Contains(e.Message, "NetworkPolicy") {
				return true, ""
			}
			reasons = append(reasons, e.Reason+": "+e.Message)
		}
		return false, fmt.Sprint(reasons)
	})

	t.Log("Converged: touched and resynced without a write")
	op.WaitQuiet(t)
	mark, before := len(op.Writes(t)), syncs(t, op)
	patch := []byte(`{"metadata":{"labels":{"touched":"yes"}}}`)
	if _, err := framework.Memcacheds().CacheV1beta1().Memcacheds(ns).Patch(ctx, "cache", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, framework.WaitLong, "the touched Memcached is synced", func(context.Context) (bool, string) {
		return syncs(t, op) > before, "no sync yet"
	})
	op.WaitTwoResyncs(t, 1)
	if w := op.Writes(t)[mark:]; len(w) > 0 {
		t.Errorf("a converged Memcached with a NetworkPolicy cost %d writes: %v", len(w), w)
	}

	t.Log("The field unset")
	mark = len(op.Writes(t))
	framework.PatchSpec(t, ns, "cache", `{"spec":{"networkPolicy":null}}`)
	framework.Eventually(t, framework.WaitLong, "the policy is deleted", func(ctx context.Context) (bool, string) {
		_, err := getNetworkPolicy(ctx, ns, "cache")
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	framework.WaitConverged(t, ns, "cache", metav1.ConditionTrue)
	op.WaitQuiet(t)
	// The apiserver logs a request once it has answered it, which may be
	// just after its effect shows.
	framework.Eventually(t, framework.WaitLong, "the audit log holds the policy's DELETE", func(context.Context) (bool, string) {
		n := len(op.Requests(t, func(e localcluster.AuditEvent) bool { return cachePolicy(e) && e.Verb == "delete" }))
		return n > 0, "none yet"
	})
	var deletes []localcluster.AuditEvent
	for _, w := range op.Writes(t)[mark:] {
		if w.Verb == "delete" {
			deletes = append(deletes, w)
		}
	}
	if len(deletes) != 1 || !cachePolicy(deletes[0]) || deletes[0].Code() != http.StatusOK {
		t.Errorf("DELETE requests %v, want one of networkpolicies %s/cache, answered 200", deletes, ns)
	}
	for _, kind := range []string{"Deployment", "Service", "PodDisruptionBudget"} {
		if err := childExists(ctx, ns, kind); err != nil {
			t.Errorf("after the policy's removal: %v", err)
		}
	}
}

// TestIntegrationMemcachedNetworkPolicyForeign puts someone else's
// NetworkPolicy in the child's name. While the Memcached asks for a policy
// it reports ResourceExists, never writes to it and creates no Deployment:
// its Pods would serve open to every Pod of the cluster. Once the field is
// unset, the Memcached converges and the foreign policy is still there,
// never deleted.
func TestIntegrationMemcachedNetworkPolicyForeign(t *testing.T) {
	t.Parallel()
	ns := framework.NewNamespace(t)
	op := framework.StartOperator(t, ns)
	ctx := context.Background()
	foreign, err := framework.Kube().NetworkingV1().NetworkPolicies(ns).Create(ctx, &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "cache", Labels: map[string]string{"app": "someone-else"}},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "someone-else"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	framework.CreateMemcached(t, ns, "cache", func(s *cachev1beta1.MemcachedSpec) { s.NetworkPolicy = &cachev1beta1.NetworkPolicy{} })
	framework.Eventually(t, framework.WaitLong, "Degraded=ResourceExists naming the NetworkPolicy", func(ctx context.Context) (bool, string) {
		mc, err := framework.GetMemcached(ctx, ns, "cache")
		if err != nil {
			return false, err.Error()
		}
		d := framework.Condition(mc, cachev1beta1.ConditionDegraded)
		return d.Status == metav1.ConditionTrue && d.Reason == cachev1beta1.ReasonResourceExists && strings.Contains(d.Message, "NetworkPolicy"), fmt.Sprintf("%+v", d)
	})
	// The Deployment waits for the policy; the children that run nothing
	// do not.
	if _, err := framework.GetDeployment(ctx, ns, "cache"); !apierrors.IsNotFound(err) {
		t.Errorf("a Deployment exists while its NetworkPolicy is blocked: %v", err)
	}
	for _, kind := range []string{"Service", "PodDisruptionBudget"} {
		if err := childExists(ctx, ns, kind); err != nil {
			t.Errorf("while the NetworkPolicy is blocked: %v", err)
		}
	}

	framework.PatchSpec(t, ns, "cache", `{"spec":{"networkPolicy":null}}`)
	framework.WaitConverged(t, ns, "cache", metav1.ConditionTrue)
	op.WaitQuiet(t)
	after, err := getNetworkPolicy(ctx, ns, "cache")
	if err != nil {
		t.Fatalf("the foreign NetworkPolicy is gone: %v", err)
	}
	if after.UID != foreign.UID || after.Generation != foreign.Generation || len(after.OwnerReferences) != 0 {
		t.Errorf("the foreign NetworkPolicy changed: UID %s -> %s, generation %d -> %d, ownerReferences %v",
			foreign.UID, after.UID, foreign.Generation, after.Generation, after.OwnerReferences)
	}
	for _, entry := range after.ManagedFields {
		if entry.Manager == resources.ManagedBy {
			t.Errorf("the operator manages fields of the foreign NetworkPolicy: %+v", entry)
		}
	}
	// The create-only applies are refused with a Conflict and change
	// nothing; no other write, and no DELETE, may reach the policy.
	for _, w := range op.Requests(t, func(e localcluster.AuditEvent) bool { return cachePolicy(e) && e.Write() }) {
		if w.Verb != "patch" || w.Code() != http.StatusConflict {
			t.Errorf("the operator wrote to the foreign NetworkPolicy: %s", w)
		}
	}
}

// TestIntegrationMemcachedNetworkPolicyHoldsTheDeployment turns the policy
// on for a running cache, with a Pod template change, while someone else's
// NetworkPolicy holds the name: the Deployment keeps its template and its
// Pods, and the status says why. Once the foreign policy goes, the
// Memcached's own is created, and only then the template applied.
func TestIntegrationMemcachedNetworkPolicyHoldsTheDeployment(t *testing.T) {
	t.Parallel()
	ns := framework.NewNamespace(t)
	framework.StartOperator(t, ns)
	ctx := context.Background()
	framework.CreateMemcached(t, ns, "cache", nil)
	framework.WaitConverged(t, ns, "cache", metav1.ConditionTrue)
	before, err := framework.GetDeployment(ctx, ns, "cache")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := framework.Kube().NetworkingV1().NetworkPolicies(ns).Create(ctx, &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "cache"},
		Spec:       networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "someone-else"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.PatchSpec(t, ns, "cache", `{"spec":{"networkPolicy":{},"pod":{"annotations":{"example.com/rolled":"yes"}}}}`)
	framework.Eventually(t, framework.WaitLong, "Degraded=ResourceExists saying the Deployment is held", func(ctx context.Context) (bool, string) {
		mc, err := framework.GetMemcached(ctx, ns, "cache")
		if err != nil {
			return false, err.Error()
		}
		d := framework.Condition(mc, cachev1beta1.ConditionDegraded)
		return d.ObservedGeneration == mc.Generation && d.Status == metav1.ConditionTrue && d.Reason == cachev1beta1.ReasonResourceExists &&
			strings.Contains(d.Message, "Deployment is held until the NetworkPolicy"), fmt.Sprintf("%+v", d)
	})
	held, err := framework.GetDeployment(ctx, ns, "cache")
	if err != nil {
		t.Fatal(err)
	}
	if held.Generation != before.Generation || held.Spec.Template.Annotations["example.com/rolled"] != "" {
		t.Errorf("the Deployment took the new template while its NetworkPolicy was blocked: generation %d -> %d, annotations %v",
			before.Generation, held.Generation, held.Spec.Template.Annotations)
	}

	if err := framework.Kube().NetworkingV1().NetworkPolicies(ns).Delete(ctx, "cache", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, framework.WaitLong+foreignRecheckInterval, "the Deployment takes the template once the policy is in place", func(ctx context.Context) (bool, string) {
		dep, err := framework.GetDeployment(ctx, ns, "cache")
		if err != nil {
			return false, err.Error()
		}
		return dep.Spec.Template.Annotations["example.com/rolled"] == "yes", fmt.Sprintf("template annotations %v", dep.Spec.Template.Annotations)
	})
	if err := childExists(ctx, ns, "NetworkPolicy"); err != nil {
		t.Errorf("the Deployment rolled without its NetworkPolicy: %v", err)
	}
}

// TestIntegrationMemcachedNetworkPolicyInvalidSelector asks for a policy
// whose selector the schema admits but the apiserver's validation of
// NetworkPolicies refuses, a label key with a space: the Memcached reports
// InvalidSpec, naming the NetworkPolicy, keeps the children that run
// nothing and creates no Deployment.
func TestIntegrationMemcachedNetworkPolicyInvalidSelector(t *testing.T) {
	t.Parallel()
	ns := framework.NewNamespace(t)
	framework.StartOperator(t, ns)
	ctx := context.Background()
	framework.CreateMemcached(t, ns, "cache", func(s *cachev1beta1.MemcachedSpec) {
		s.NetworkPolicy = &cachev1beta1.NetworkPolicy{Clients: []cachev1beta1.NetworkPolicyPeer{
			{PodSelector: &cachev1beta1.LabelSelector{MatchLabels: map[string]string{"not a key": "v"}}},
		}}
	})
	framework.Eventually(t, framework.WaitLong, "Degraded=InvalidSpec naming the NetworkPolicy", func(ctx context.Context) (bool, string) {
		mc, err := framework.GetMemcached(ctx, ns, "cache")
		if err != nil {
			return false, err.Error()
		}
		d := framework.Condition(mc, cachev1beta1.ConditionDegraded)
		return d.Status == metav1.ConditionTrue && d.Reason == cachev1beta1.ReasonInvalidSpec && strings.Contains(d.Message, "NetworkPolicy"), fmt.Sprintf("%+v", d)
	})
	if _, err := framework.GetDeployment(ctx, ns, "cache"); !apierrors.IsNotFound(err) {
		t.Errorf("a Deployment exists while its NetworkPolicy is refused: %v", err)
	}
	for _, kind := range []string{"Service", "PodDisruptionBudget"} {
		if err := childExists(ctx, ns, kind); err != nil {
			t.Errorf("with an invalid policy: %v", err)
		}
	}
	if _, err := getNetworkPolicy(ctx, ns, "cache"); !apierrors.IsNotFound(err) {
		t.Errorf("a NetworkPolicy exists: %v", err)
	}
}

// childExists returns an error unless the Memcached "cache" of ns has a
// child of kind that it controls.
func childExists(ctx context.Context, ns, kind string) error {
	var obj metav1.Object
	var err error
	kube := framework.Kube()
	switch kind {
	case "Deployment":
		obj, err = kube.AppsV1().Deployments(ns).Get(ctx, "cache", metav1.GetOptions{})
	case "Service":
		obj, err = kube.CoreV1().Services(ns).Get(ctx, "cache", metav1.GetOptions{})
	case "PodDisruptionBudget":
		obj, err = kube.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, "cache", metav1.GetOptions{})
	case "NetworkPolicy":
		obj, err = kube.NetworkingV1().NetworkPolicies(ns).Get(ctx, "cache", metav1.GetOptions{})
	default:
		return fmt.Errorf("no child kind %s", kind)
	}
	if err != nil {
		return fmt.Errorf("getting the %s: %w", kind, err)
	}
	if metav1.GetControllerOf(obj) == nil {
		return fmt.Errorf("the %s has no controller", kind)
	}
	return nil
}
