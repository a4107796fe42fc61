//go:build integration

package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	cachev1alpha1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1alpha1"
)

// condition returns the Memcached's condition of type condType, or an
// empty one.
func condition(mc *cachev1alpha1.Memcached, condType string) metav1.Condition {
	if c := meta.FindStatusCondition(mc.Status.Conditions, condType); c != nil {
		return *c
	}
	return metav1.Condition{}
}

// TestIntegrationAvailableNeedsAServingPod creates caches whose Pods cannot
// schedule. The Deployment of one replica calls itself Available (it
// tolerates maxUnavailable 1 of 1); the Memcached must not, at 1 replica or
// at 3, and turns Available once the Pods can run.
func TestIntegrationAvailableNeedsAServingPod(t *testing.T) {
	startOperator(t)
	ns := newNamespace(t)
	for _, replicas := range []int32{1, 3} {
		t.Run(fmt.Sprintf("replicas %d", replicas), func(t *testing.T) {
			name := fmt.Sprintf("unschedulable-%d", replicas)
			createMemcached(t, ns, name, func(s *cachev1alpha1.MemcachedSpec) {
				s.Replicas = ptr.To(replicas)
				s.NodeSelector = map[string]string{"kubelite.io/no-such-node": "true"}
			})
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
				return dep.Status.ObservedGeneration == dep.Generation && dep.Status.Replicas == replicas &&
						mc.Status.Replicas == replicas && mc.Status.ObservedGeneration == mc.Generation,
					fmt.Sprintf("Deployment status %+v, Memcached status %+v", dep.Status, mc.Status)
			})
			if replicas == 1 {
				dep, err := fetchDeployment(context.Background(), ns, name)
				if err != nil {
					t.Fatal(err)
				}
				if c := deploymentCondition(dep, appsv1.DeploymentAvailable); c == nil || c.Status != corev1.ConditionTrue {
					t.Fatalf("the Deployment's Available = %+v; the test needs the case where it is True with no Pod available", c)
				}
			}
			// Two resync periods: every sync in between must keep saying
			// False.
			deadline := time.Now().Add(2 * testResync)
			for time.Now().Before(deadline) {
				mc, err := fetchMemcached(context.Background(), ns, name)
				if err != nil {
					t.Fatal(err)
				}
				if c := condition(mc, cachev1alpha1.ConditionAvailable); c.Status != metav1.ConditionFalse ||
					c.Reason != cachev1alpha1.ReasonMinimumReplicasUnavailable || mc.Status.AvailableReplicas != 0 {
					t.Fatalf("Available = %s/%s (%q) with %d available Pods, want False/%s",
						c.Status, c.Reason, c.Message, mc.Status.AvailableReplicas, cachev1alpha1.ReasonMinimumReplicasUnavailable)
				}
				time.Sleep(200 * time.Millisecond)
			}

			patchSpec(t, suite.mc, ns, name, `{"spec":{"nodeSelector":null}}`)
			waitConverged(t, ns, name, metav1.ConditionTrue)
		})
	}
}
