package framework

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// DeploymentWrites is an admission rule for creates and updates of
// Deployments.
var DeploymentWrites = admissionregistrationv1.RuleWithOperations{
	Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
	Rule: admissionregistrationv1.Rule{
		APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"deployments"},
	},
}

// DenyDeployments has an admission policy refuse every create and update
// of a Deployment in ns, waits until it does, and returns what removes
// the policy.
func DenyDeployments(t *testing.T, ns string) func() {
	t.Helper()
	remove := DenyInNamespace(t, "freeze-"+ns, ns, DeploymentWrites, "caches are frozen in this namespace")
	WaitDeploymentCreate(t, ns, func(err error) bool { return err != nil && strings.Contains(err.Error(), "caches are frozen") })
	return remove
}

// DenyInNamespace has a ValidatingAdmissionPolicy, and its binding, both
// called name, deny with message every request rule matches in namespace
// ns, and returns what removes them. The test's cleanup removes them too.
// The policy takes effect with a delay: callers wait for it, with
// WaitDeploymentCreate for example.
func DenyInNamespace(t *testing.T, name, ns string, rule admissionregistrationv1.RuleWithOperations, message string) func() {
	t.Helper()
	ctx := context.Background()
	policies := env.kube.AdmissionregistrationV1().ValidatingAdmissionPolicies()
	bindings := env.kube.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings()
	_, err := policies.Create(ctx, &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{
				ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{RuleWithOperations: rule}},
			},
			Validations: []admissionregistrationv1.Validation{{Expression: "false", Message: message}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = bindings.Create(ctx, &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources:    &admissionregistrationv1.MatchResources{NamespaceSelector: InNamespace(ns)},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	remove := func() {
		_ = bindings.Delete(ctx, name, metav1.DeleteOptions{})
		_ = policies.Delete(ctx, name, metav1.DeleteOptions{})
	}
	t.Cleanup(remove)
	return remove
}

// WaitDeploymentCreate waits until a server-side dry-run create of a
// Deployment in ns fails, or succeeds, as want says: admission
// configuration and quota take effect with a delay.
func WaitDeploymentCreate(t *testing.T, ns string, want func(error) bool) {
	t.Helper()
	probe := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "probe"},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "probe"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "probe"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "probe"}}},
			},
		},
	}
	Eventually(t, 30*time.Second, "the cause is in effect", func(ctx context.Context) (bool, string) {
		_, err := env.kube.AppsV1().Deployments(ns).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return want(err), fmt.Sprint(err)
	})
}
