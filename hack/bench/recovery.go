package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
)

// The recovery phase refuses every Deployment of N new Memcacheds for
// recoveryOutage, as a webhook that is down or a policy would, and then
// times how long they take to converge once the cause is gone. Each key
// backs off on its own up to --max-retry-delay, so the figure should be
// about that cap plus a converge from scratch; a limiter shared by all
// keys would add N/10 s behind it.
const (
	recoveryPrefix = "refused"
	recoveryOutage = 60 * time.Second
	recoveryCap    = 10 * time.Second
	// recoveryLabel marks the namespaces the refusing policy binds to.
	recoveryLabel = "bench.kubelite.io/refused"
	// recoveryPolicy names the ValidatingAdmissionPolicy and its binding.
	recoveryPolicy = "bench-refuse-deployments"
)

// RecoveryResult is what the recovery phase measured.
type RecoveryResult struct {
	// OutageSeconds is from the moment the refusal took effect until it
	// was lifted: the creates, the wait until every Memcached reported it,
	// and recoveryOutage after that.
	OutageSeconds        float64 `json:"outageSeconds"`
	MaxRetryDelaySeconds float64 `json:"maxRetryDelaySeconds"`
	// Seconds is from the moment a dry-run create of a Deployment is
	// admitted again until every Memcached has its Deployment and reports
	// Degraded=False at its generation.
	Seconds float64 `json:"seconds"`
}

// recovery runs on a cluster of its own, with an operator started for it.
func (s *sizeRun) recovery(ctx context.Context, e *env) error {
	for i := range s.cfg.Namespaces {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
			Name:   e.namespace(recoveryPrefix, i),
			Labels: map[string]string{recoveryLabel: "true"},
		}}
		if _, err := e.kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating namespace %s: %w", ns.Name, err)
		}
	}
	if err := e.refuseDeployments(ctx); err != nil {
		return err
	}
	probeNS := e.namespace(recoveryPrefix, 0)
	if err := e.waitDeploymentAdmitted(ctx, probeNS, false); err != nil {
		return err
	}
	refusedAt := time.Now()
	// No resync, which would sync every failing key every period whatever
	// its backoff: only retries bring the keys back.
	if _, err := e.startOperator(ctx, "--max-retry-delay="+recoveryCap.String(), "--resync-period=0"); err != nil {
		return err
	}
	s.step("creating %d Memcacheds whose Deployments are refused for %s once all have failed", s.cfg.N, recoveryOutage)
	if err := e.createMemcacheds(ctx, recoveryPrefix, nil); err != nil {
		return err
	}
	if err := e.tracker.waitRefused(ctx, recoveryPrefix, s.cfg.N); err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(recoveryOutage):
	}
	policies := e.kube.AdmissionregistrationV1()
	if err := policies.ValidatingAdmissionPolicyBindings().Delete(ctx, recoveryPolicy, metav1.DeleteOptions{}); err != nil {
		return fmt.Errorf("lifting the refusal: %w", err)
	}
	if err := policies.ValidatingAdmissionPolicies().Delete(ctx, recoveryPolicy, metav1.DeleteOptions{}); err != nil {
		return fmt.Errorf("lifting the refusal: %w", err)
	}
	if err := e.waitDeploymentAdmitted(ctx, probeNS, true); err != nil {
		return err
	}
	start := time.Now()
	if err := e.tracker.waitRecovered(ctx, recoveryPrefix, s.cfg.N); err != nil {
		return err
	}
	s.r.Recovery = &RecoveryResult{
		OutageSeconds:        start.Sub(refusedAt).Seconds(),
		MaxRetryDelaySeconds: recoveryCap.Seconds(),
		Seconds:              time.Since(start).Seconds(),
	}
	s.step("recovered in %.1fs", s.r.Recovery.Seconds)
	return nil
}

// refuseDeployments has a ValidatingAdmissionPolicy refuse every create and
// update of a Deployment in the namespaces labelled recoveryLabel.
func (e *env) refuseDeployments(ctx context.Context) error {
	policies := e.kube.AdmissionregistrationV1()
	_, err := policies.ValidatingAdmissionPolicies().Create(ctx, &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: recoveryPolicy},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{
				ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"deployments"}},
				}}},
			},
			Validations: []admissionregistrationv1.Validation{{Expression: "false", Message: "the bench refuses Deployments here"}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("creating the refusing policy: %w", err)
	}
	_, err = policies.ValidatingAdmissionPolicyBindings().Create(ctx, &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: recoveryPolicy},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        recoveryPolicy,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources: &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{recoveryLabel: "true"},
			}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("binding the refusing policy: %w", err)
	}
	return nil
}

// waitDeploymentAdmitted waits until a dry-run create of a Deployment in ns
// is admitted, or refused: the apiserver loads policies through an
// informer, so they take effect, and go, with a delay.
func (e *env) waitDeploymentAdmitted(ctx context.Context, ns string, admitted bool) error {
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
	var last error
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, last = e.kube.AppsV1().Deployments(ns).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return (last == nil) == admitted, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for Deployments in %s to be admitted=%t: %w (last: %v)", ns, admitted, err, last)
	}
	return nil
}

// waitRefused waits until n Memcacheds in the namespaces named prefix-*
// report the refusal: Degraded with reason AdmissionDenied.
func (t *tracker) waitRefused(ctx context.Context, prefix string, n int) error {
	var refused int
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 20*time.Minute, true, func(context.Context) (bool, error) {
		refused = 0
		for _, obj := range t.memcacheds.GetStore().List() {
			mc := obj.(*cachev1beta1.Memcached)
			c := meta.FindStatusCondition(mc.Status.Conditions, cachev1beta1.ConditionDegraded)
			if strings.HasPrefix(mc.Namespace, prefix+"-") && c != nil && c.Reason == cachev1beta1.ReasonAdmissionDenied {
				refused++
			}
		}
		return refused >= n, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for %d Memcacheds to report AdmissionDenied (%d do): %w", n, refused, err)
	}
	return nil
}

// waitRecovered waits until n Memcacheds in the namespaces named prefix-*
// report Degraded=False at their generation and have their Deployment. A
// refused sync still records its generation as observed, and still
// applies the Service, so waitConverged would count them before they
// recover.
func (t *tracker) waitRecovered(ctx context.Context, prefix string, n int) error {
	var recovered, deployments int
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 20*time.Minute, true, func(context.Context) (bool, error) {
		recovered = 0
		for _, obj := range t.memcacheds.GetStore().List() {
			mc := obj.(*cachev1beta1.Memcached)
			c := meta.FindStatusCondition(mc.Status.Conditions, cachev1beta1.ConditionDegraded)
			if strings.HasPrefix(mc.Namespace, prefix+"-") && mc.Status.ObservedGeneration == mc.Generation &&
				c != nil && c.Status == metav1.ConditionFalse && c.ObservedGeneration == mc.Generation {
				recovered++
			}
		}
		_, deployments, _ = t.converged(prefix, 1)
		return recovered >= n && deployments >= n, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for %d Memcacheds to recover (%d report Degraded=False, %d Deployments): %w", n, recovered, deployments, err)
	}
	return nil
}
