//go:build integration

package main

// The helpers of this file read a Memcached's conditions and have admission
// refuse the writes of its Deployment, for the integration tests of this
// package; test/integration/status tests the status itself.

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
)

// condition returns the Memcached's condition of type condType, or an
// empty one.
func condition(mc *cachev1beta1.Memcached, condType string) metav1.Condition {
	if c := meta.FindStatusCondition(mc.Status.Conditions, condType); c != nil {
		return *c
	}
	return metav1.Condition{}
}

// deploymentWrites is an admission rule for Deployment writes.
var deploymentWrites = admissionregistrationv1.RuleWithOperations{
	Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
	Rule: admissionregistrationv1.Rule{
		APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"deployments"},
	},
}

// inNamespace selects only namespace ns, so that cluster-wide admission
// objects cannot disturb other tests.
func inNamespace(ns string) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}}
}

// waitDenied waits until a server-side dry-run create of a Deployment in ns
// fails as want says: admission configuration takes effect with a delay.
func waitDenied(t *testing.T, ns string, want func(error) bool) {
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
	eventually(t, 30*time.Second, "the cause is in effect", func(ctx context.Context) (bool, string) {
		_, err := suite.kube.AppsV1().Deployments(ns).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return want(err), fmt.Sprint(err)
	})
}

func denyByPolicy(t *testing.T, ns string) func() {
	remove := denyInNamespace(t, "freeze-"+ns, ns, deploymentWrites, "caches are frozen in this namespace")
	waitDenied(t, ns, func(err error) bool { return err != nil && strings.Contains(err.Error(), "caches are frozen") })
	return remove
}

// denyInNamespace has a ValidatingAdmissionPolicy, and its binding, both
// called name, deny with message every request rule matches in namespace
// ns, and returns what removes them. The test's cleanup removes them too.
// The policy takes effect with a delay: callers wait for it.
func denyInNamespace(t *testing.T, name, ns string, rule admissionregistrationv1.RuleWithOperations, message string) func() {
	t.Helper()
	ctx := context.Background()
	policies := suite.kube.AdmissionregistrationV1().ValidatingAdmissionPolicies()
	bindings := suite.kube.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings()
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
			MatchResources:    &admissionregistrationv1.MatchResources{NamespaceSelector: inNamespace(ns)},
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
