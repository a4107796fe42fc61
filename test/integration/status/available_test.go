//go:build integration

package status

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
	"github.com/kubelite/memcached-operator/pkg/deployutil"
	"github.com/kubelite/memcached-operator/test/integration/framework"
)

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
	t.Parallel()
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
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ns := framework.NewNamespace(t)
			op := framework.StartOperator(t, ns)
			const name = "unschedulable"
			framework.CreateMemcached(t, ns, name, func(s *cachev1beta1.MemcachedSpec) {
				s.Replicas = ptr.To(tt.replicas)
				framework.PodOf(s).NodeSelector = map[string]string{"kubelite.io/no-such-node": "true"}
			})
			ctx := context.Background()
			if tt.maxUnavailableOne {
				// A paused Deployment gets no ReplicaSet: pause once the
				// Pods exist.
				framework.Eventually(t, framework.WaitLong, "the Deployment has its Pod", func(ctx context.Context) (bool, string) {
					dep, err := framework.GetDeployment(ctx, ns, name)
					if err != nil {
						return false, err.Error()
					}
					return dep.Status.Replicas == tt.replicas, fmt.Sprintf("Deployment status %+v", dep.Status)
				})
				framework.PatchSpec(t, ns, name, `{"spec":{"paused":true}}`)
				framework.WaitProgressing(t, ns, name, cachev1beta1.ReasonPaused)
				strategy := []byte(`{"spec":{"strategy":{"rollingUpdate":{"maxUnavailable":1,"maxSurge":"25%"}}}}`)
				if _, err := framework.Kube().AppsV1().Deployments(ns).Patch(ctx, name, types.StrategicMergePatchType, strategy, metav1.PatchOptions{FieldManager: "another-rendering"}); err != nil {
					t.Fatal(err)
				}
			}
			// Wait until the Deployment controller has created every Pod
			// and the Memcached's status reflects that Deployment.
			framework.Eventually(t, framework.WaitLong, "the Deployment has all its Pods and the Memcached has seen it", func(ctx context.Context) (bool, string) {
				dep, err := framework.GetDeployment(ctx, ns, name)
				if err != nil {
					return false, err.Error()
				}
				mc, err := framework.GetMemcached(ctx, ns, name)
				if err != nil {
					return false, err.Error()
				}
				return dep.Status.ObservedGeneration == dep.Generation && dep.Status.Replicas == tt.replicas &&
						mc.Status.Replicas == tt.replicas && mc.Status.ObservedGeneration == mc.Generation,
					fmt.Sprintf("Deployment status %+v, Memcached status %+v", dep.Status, mc.Status)
			})
			if tt.maxUnavailableOne {
				dep, err := framework.GetDeployment(ctx, ns, name)
				if err != nil {
					t.Fatal(err)
				}
				if c := deployutil.Condition(dep, appsv1.DeploymentAvailable); c == nil || c.Status != corev1.ConditionTrue {
					t.Fatalf("the Deployment's Available = %+v; the test needs the case where it is True with no Pod available", c)
				}
			}
			staysUnavailableThroughTwoResyncs(t, op, ns, name)

			framework.PatchSpec(t, ns, name, `{"spec":{"paused":false,"pod":{"nodeSelector":null}}}`)
			framework.WaitConverged(t, ns, name, metav1.ConditionTrue)
			dep, err := framework.GetDeployment(ctx, ns, name)
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

// staysUnavailableThroughTwoResyncs reads the Memcached, the only one op
// syncs, until op has run two resync passes over it, and fails the test
// as soon as one read shows it Available, or with a Pod available: every
// sync in between must keep saying False. The passes are counted as
// Operator.WaitTwoResyncs counts them: two resync periods and two more
// syncs.
func staysUnavailableThroughTwoResyncs(t *testing.T, op *framework.Operator, ns, name string) {
	t.Helper()
	mark, err := op.Syncs()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	var violation string
	framework.Eventually(t, 3*framework.Resync+30*time.Second, "two resync passes with Available False", func(ctx context.Context) (bool, string) {
		mc, err := framework.GetMemcached(ctx, ns, name)
		if err != nil {
			return false, err.Error()
		}
		if c := framework.Condition(mc, cachev1beta1.ConditionAvailable); c.Status != metav1.ConditionFalse ||
			c.Reason != cachev1beta1.ReasonMinimumReplicasUnavailable || mc.Status.AvailableReplicas != 0 {
			violation = fmt.Sprintf("Available = %s/%s (%q) with %d available Pods, want False/%s",
				c.Status, c.Reason, c.Message, mc.Status.AvailableReplicas, cachev1beta1.ReasonMinimumReplicasUnavailable)
			return true, ""
		}
		n, err := op.Syncs()
		if err != nil {
			return false, err.Error()
		}
		return n >= mark+2 && time.Since(start) >= 2*framework.Resync,
			fmt.Sprintf("%v of 2 syncs after %s of %s", n-mark, time.Since(start).Round(time.Millisecond), 2*framework.Resync)
	})
	if violation != "" {
		t.Fatal(violation)
	}
}
