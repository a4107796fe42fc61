//go:build integration

package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
	"github.com/kubelite/memcached-operator/pkg/deployutil"
)

// condition returns the Memcached's condition of type condType, or an
// empty one.
func condition(mc *cachev1beta1.Memcached, condType string) metav1.Condition {
	if c := meta.FindStatusCondition(mc.Status.Conditions, condType); c != nil {
		return *c
	}
	return metav1.Condition{}
}

// TestIntegrationAvailableNeedsAServingPod creates caches whose Pods cannot
// schedule, and the Memcached must not say Available: at 1 replica or at
// 3 under the operator's strategy (maxUnavailable 0, under which the
// Deployment's own Available condition agrees), and at 1 under a
// Deployment that tolerates maxUnavailable 1 of 1 and so calls itself
// Available with no Pod. The operator never applies that strategy; a
// Deployment carries it while its paused Memcached keeps a rendering
// that had it, which the test makes by hand. Each turns Available once
// the Pods can run.
func TestIntegrationAvailableNeedsAServingPod(t *testing.T) {
	startOperator(t)
	ns := newNamespace(t)
	tests := []struct {
		name     string
		replicas int32
		// maxUnavailableOne pauses the Memcached and gives its
		// Deployment maxUnavailable 1, maxSurge 25%.
		maxUnavailableOne bool
	}{
		{name: "replicas 1", replicas: 1},
		{name: "replicas 3", replicas: 3},
		{name: "replicas 1, paused with maxUnavailable 1", replicas: 1, maxUnavailableOne: true},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel() // Own namespace or own name; the operator serves all.
			name := fmt.Sprintf("unschedulable-%d", i)
			createMemcached(t, ns, name, func(s *cachev1beta1.MemcachedSpec) {
				s.Replicas = ptr.To(tt.replicas)
				podOf(s).NodeSelector = map[string]string{"kubelite.io/no-such-node": "true"}
			})
			ctx := context.Background()
			if tt.maxUnavailableOne {
				// A paused Deployment gets no ReplicaSet: pause once the
				// Pods exist.
				eventually(t, waitLong, "the Deployment has its Pod", func(ctx context.Context) (bool, string) {
					dep, err := fetchDeployment(ctx, ns, name)
					if err != nil {
						return false, err.Error()
					}
					return dep.Status.Replicas == tt.replicas, fmt.Sprintf("Deployment status %+v", dep.Status)
				})
				patchSpec(t, suite.mc, ns, name, `{"spec":{"paused":true}}`)
				waitProgressing(t, ns, name, cachev1beta1.ReasonPaused)
				strategy := []byte(`{"spec":{"strategy":{"rollingUpdate":{"maxUnavailable":1,"maxSurge":"25%"}}}}`)
				if _, err := suite.kube.AppsV1().Deployments(ns).Patch(ctx, name, types.StrategicMergePatchType, strategy, metav1.PatchOptions{FieldManager: "another-rendering"}); err != nil {
					t.Fatal(err)
				}
			}
			// Wait until the Deployment controller has created every Pod
			// and the Memcached's status reflects that Deployment.
			eventually(t, waitLong, "the Deployment has all its Pods and the Memcached has seen it", func(ctx context.Context) (bool, string) {
				dep, err := fetchDeployment(ctx, ns, name)
				if err != nil {
					return false, err.Error()
				}
				mc, err := fetchMemcached(ctx, ns, name)
				if err != nil {
					return false, err.Error()
				}
				return dep.Status.ObservedGeneration == dep.Generation && dep.Status.Replicas == tt.replicas &&
						mc.Status.Replicas == tt.replicas && mc.Status.ObservedGeneration == mc.Generation,
					fmt.Sprintf("Deployment status %+v, Memcached status %+v", dep.Status, mc.Status)
			})
			if tt.maxUnavailableOne {
				dep, err := fetchDeployment(ctx, ns, name)
				if err != nil {
					t.Fatal(err)
				}
				if c := deployutil.Condition(dep, appsv1.DeploymentAvailable); c == nil || c.Status != corev1.ConditionTrue {
					t.Fatalf("the Deployment's Available = %+v; the test needs the case where it is True with no Pod available", c)
				}
			}
			// Two resync periods: every sync in between must keep saying
			// False.
			deadline := time.Now().Add(2 * testResync)
			for time.Now().Before(deadline) {
				mc, err := fetchMemcached(ctx, ns, name)
				if err != nil {
					t.Fatal(err)
				}
				if c := condition(mc, cachev1beta1.ConditionAvailable); c.Status != metav1.ConditionFalse ||
					c.Reason != cachev1beta1.ReasonMinimumReplicasUnavailable || mc.Status.AvailableReplicas != 0 {
					t.Fatalf("Available = %s/%s (%q) with %d available Pods, want False/%s",
						c.Status, c.Reason, c.Message, mc.Status.AvailableReplicas, cachev1beta1.ReasonMinimumReplicasUnavailable)
				}
				time.Sleep(200 * time.Millisecond)
			}

			patchSpec(t, suite.mc, ns, name, `{"spec":{"paused":false,"pod":{"nodeSelector":null}}}`)
			waitConverged(t, ns, name, metav1.ConditionTrue)
			dep, err := fetchDeployment(ctx, ns, name)
			if err != nil {
				t.Fatal(err)
			}
			// Unpaused, the operator applies its strategy again.
			if ru := dep.Spec.Strategy.RollingUpdate; ru == nil || ru.MaxUnavailable.String() != "0" || ru.MaxSurge.String() != "1" {
				t.Errorf("rolling update after the unpause = %+v, want maxUnavailable 0, maxSurge 1", ru)
			}
		})
	}
}

// warningEvents returns the Warning Events about the Memcached with the
// given reason.
func warningEvents(ctx context.Context, ns, name, reason string) ([]corev1.Event, error) {
	list, err := suite.kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{
		FieldSelector: "involvedObject.kind=Memcached,involvedObject.name=" + name + ",reason=" + reason + ",type=Warning",
	})
	if err != nil {
		return nil, err
	}
	return list.Items, nil
}

// waitBlockedBy waits until Degraded and Progressing both carry reason,
// with messagePart in the message, and a Warning Event with that reason
// was sent: how a Memcached whose Deployment is held shows it.
func waitBlockedBy(t *testing.T, ns, name, reason, messagePart string) {
	t.Helper()
	eventually(t, waitLong, "Degraded="+reason, func(ctx context.Context) (bool, string) {
		mc, err := fetchMemcached(ctx, ns, name)
		if err != nil {
			return false, err.Error()
		}
		events, err := warningEvents(ctx, ns, name, reason)
		if err != nil {
			return false, err.Error()
		}
		d, p := condition(mc, cachev1beta1.ConditionDegraded), condition(mc, cachev1beta1.ConditionProgressing)
		return d.Status == metav1.ConditionTrue && d.Reason == reason && strings.Contains(d.Message, messagePart) &&
				p.Status == metav1.ConditionFalse && p.Reason == reason && mc.Status.ObservedGeneration == mc.Generation &&
				len(events) > 0,
			fmt.Sprintf("Degraded %+v, Progressing %+v, %d Events", d, p, len(events))
	})
}

// TestIntegrationRefusedWritesAreVisibleAndRecover puts something in the
// way of the Deployment that the Memcached's spec has no part in: an
// admission policy, a quota, a webhook that is down. Each must show as
// Degraded with its own reason and one Warning Event, and once the cause
// is removed the Memcached must converge without anyone editing it.
func TestIntegrationRefusedWritesAreVisibleAndRecover(t *testing.T) {
	op := startOperator(t)
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
			block:       denyByPolicy,
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
			t.Parallel() // Own namespace or own name; the operator serves all.
			ns := newNamespace(t)
			unblock := tt.block(t, ns)
			created := createMemcached(t, ns, "cache", nil)
			eventually(t, waitLong, "Degraded="+tt.wantReason, func(ctx context.Context) (bool, string) {
				mc, err := fetchMemcached(ctx, ns, "cache")
				if err != nil {
					return false, err.Error()
				}
				d, p := condition(mc, cachev1beta1.ConditionDegraded), condition(mc, cachev1beta1.ConditionProgressing)
				return d.Status == metav1.ConditionTrue && d.Reason == tt.wantReason && strings.Contains(d.Message, tt.wantMessage) &&
						p.Status == metav1.ConditionFalse && p.Reason == tt.wantReason,
					fmt.Sprintf("Degraded %+v, Progressing %+v", d, p)
			})
			// The cause stays while the key is retried on its backoff:
			// after two more refused writes of the Deployment, the Event
			// is still one.
			mark := op.requests.Len()
			eventually(t, waitLong, "two more refused writes of the Deployment", func(context.Context) (bool, string) {
				refused := op.requests.Since(mark, func(r request) bool {
					return r.write() && r.code >= 400 && strings.Contains(r.path, "/namespaces/"+ns+"/deployments/")
				})
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
			mc := waitConverged(t, ns, "cache", metav1.ConditionTrue)
			if mc.Generation != created.Generation {
				t.Errorf("generation %d -> %d: the test must converge without an edit", created.Generation, mc.Generation)
			}
			if d := condition(mc, cachev1beta1.ConditionDegraded); d.Status != metav1.ConditionFalse {
				t.Errorf("Degraded = %+v after the cause was removed", d)
			}
		})
	}
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

func denyByQuota(t *testing.T, ns string) func() {
	ctx := context.Background()
	quotas := suite.kube.CoreV1().ResourceQuotas(ns)
	_, err := quotas.Create(ctx, &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "no-deployments"},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{"count/deployments.apps": resource.MustParse("0")}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitDenied(t, ns, func(err error) bool { return err != nil && strings.Contains(err.Error(), "exceeded quota") })
	return func() {
		if err := quotas.Delete(ctx, "no-deployments", metav1.DeleteOptions{}); err != nil {
			t.Errorf("deleting the quota: %v", err)
		}
	}
}

func webhookDown(t *testing.T, ns string) func() {
	ctx := context.Background()
	configs := suite.kube.AdmissionregistrationV1().ValidatingWebhookConfigurations()
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
			NamespaceSelector: inNamespace(ns),
			Rules:             []admissionregistrationv1.RuleWithOperations{deploymentWrites},
		}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	remove := func() { _ = configs.Delete(ctx, name, metav1.DeleteOptions{}) }
	t.Cleanup(remove)
	waitDenied(t, ns, func(err error) bool { return err != nil && strings.Contains(err.Error(), "failed calling webhook") })
	return remove
}

// TestIntegrationRecreatedMemcachedWaitsForPredecessor deletes a Memcached
// whose Deployment someone else's finalizer holds, and creates it again
// under the same name. The new one must say what it waits for, and create
// its own Deployment once the old one is released, before its recheck.
func TestIntegrationRecreatedMemcachedWaitsForPredecessor(t *testing.T) {
	startOperator(t)
	ns := newNamespace(t)
	ctx := context.Background()
	createMemcached(t, ns, "cache", nil)
	old := waitConverged(t, ns, "cache", metav1.ConditionTrue)

	const hold = "kubelite.io/test-hold"
	deployments := suite.kube.AppsV1().Deployments(ns)
	if _, err := deployments.Patch(ctx, "cache", types.MergePatchType, []byte(`{"metadata":{"finalizers":["`+hold+`"]}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	release := func() {
		_, err := deployments.Patch(ctx, "cache", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("releasing the old Deployment: %v", err)
		}
	}
	t.Cleanup(release)
	if err := suite.mc.CacheV1beta1().Memcacheds(ns).Delete(ctx, "cache", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, waitLong, "the garbage collector marks the old Deployment deleted", func(ctx context.Context) (bool, string) {
		dep, err := fetchDeployment(ctx, ns, "cache")
		if err != nil {
			return false, err.Error()
		}
		return dep.DeletionTimestamp != nil, fmt.Sprintf("deletionTimestamp %v", dep.DeletionTimestamp)
	})

	createMemcached(t, ns, "cache", nil)
	var waiting metav1.Condition
	eventually(t, waitLong, "the new Memcached says what it waits for", func(ctx context.Context) (bool, string) {
		mc, err := fetchMemcached(ctx, ns, "cache")
		if err != nil {
			return false, err.Error()
		}
		p, d := condition(mc, cachev1beta1.ConditionProgressing), condition(mc, cachev1beta1.ConditionDegraded)
		waiting = p
		return p.Status == metav1.ConditionFalse && p.Reason == cachev1beta1.ReasonWaitingForPredecessor &&
				strings.Contains(p.Message, hold) && strings.Contains(p.Message, string(old.UID)) && d.Status == metav1.ConditionFalse,
			fmt.Sprintf("Progressing %+v, Degraded %+v", p, d)
	})

	released := time.Now()
	release()
	// The sync that reported the wait, at or after the condition's
	// transition, queued the recheck foreignRecheckInterval later; the
	// wait ends before the recheck can come, so only the old child's
	// deletion event can get the new Deployment created in it. The time is
	// the operator's, in whole seconds rounded down, so never late.
	recheck := waiting.LastTransitionTime.Add(foreignRecheckInterval)
	var took time.Duration
	eventually(t, time.Until(recheck), "the new Memcached owns a Deployment before its recheck at "+recheck.Format(time.TimeOnly), func(ctx context.Context) (bool, string) {
		mc, err := fetchMemcached(ctx, ns, "cache")
		if err != nil {
			return false, err.Error()
		}
		dep, err := fetchDeployment(ctx, ns, "cache")
		if err != nil {
			return false, err.Error()
		}
		ref := metav1.GetControllerOf(dep)
		took = time.Since(released)
		return ref != nil && ref.UID == mc.UID, fmt.Sprintf("controller %+v, Memcached UID %s", ref, mc.UID)
	})
	t.Logf("the new Deployment existed %s after the old one was released", took.Round(time.Millisecond))
	waitConverged(t, ns, "cache", metav1.ConditionTrue)
}

// TestIntegrationRefusedUpdateKeepsRealCounts converges a Memcached with 3
// replicas, then has an admission policy refuse every update of its
// Deployment and scales it to 4. The refused apply must not make the status
// forget the Deployment that still serves: it keeps the real counts (3
// ready), shows the refusal, and clears without an edit once the policy is
// gone.
func TestIntegrationRefusedUpdateKeepsRealCounts(t *testing.T) {
	startOperator(t)
	ns := newNamespace(t)
	createMemcached(t, ns, "cache", func(s *cachev1beta1.MemcachedSpec) { s.Replicas = ptr.To[int32](3) })
	waitConverged(t, ns, "cache", metav1.ConditionTrue)

	unblock := denyByPolicy(t, ns)
	ctx := context.Background()
	scaled, err := suite.mc.CacheV1beta1().Memcacheds(ns).Patch(ctx, "cache", types.MergePatchType,
		[]byte(`{"spec":{"replicas":4}}`), metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, waitLong, "the refusal is on the status with the real counts", func(ctx context.Context) (bool, string) {
		mc, err := fetchMemcached(ctx, ns, "cache")
		if err != nil {
			return false, err.Error()
		}
		d := condition(mc, cachev1beta1.ConditionDegraded)
		return mc.Status.ObservedGeneration == scaled.Generation && d.Reason == cachev1beta1.ReasonAdmissionDenied,
			fmt.Sprintf("status %+v", mc.Status)
	})
	mc, err := fetchMemcached(ctx, ns, "cache")
	if err != nil {
		t.Fatal(err)
	}
	if mc.Status.ReadyReplicas != 3 || mc.Status.AvailableReplicas != 3 {
		t.Errorf("ready %d, available %d replicas while the refused update is on the status; want the 3 that serve",
			mc.Status.ReadyReplicas, mc.Status.AvailableReplicas)
	}
	if a := condition(mc, cachev1beta1.ConditionAvailable); a.Status != metav1.ConditionTrue {
		t.Errorf("Available = %+v while 3 of 4 replicas serve", a)
	}
	if p := condition(mc, cachev1beta1.ConditionProgressing); p.Status != metav1.ConditionFalse || p.Reason != cachev1beta1.ReasonAdmissionDenied ||
		!strings.Contains(p.Message, "caches are frozen") {
		t.Errorf("Progressing = %+v, want False with the policy's refusal", p)
	}

	unblock()
	mc = waitConverged(t, ns, "cache", metav1.ConditionTrue)
	if mc.Generation != scaled.Generation {
		t.Errorf("generation %d -> %d: the refusal must clear without an edit", scaled.Generation, mc.Generation)
	}
	if mc.Status.ReadyReplicas != 4 {
		t.Errorf("ready replicas %d after the policy is gone, want 4", mc.Status.ReadyReplicas)
	}
}
