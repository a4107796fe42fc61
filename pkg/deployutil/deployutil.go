package deployutil

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/kubelite/memcached-operator/pkg/drift"
)

// Condition returns the Deployment's condition of type t, or nil.
func Condition(dep *appsv1.Deployment, t appsv1.DeploymentConditionType) *appsv1.DeploymentCondition {
	for i := range dep.Status.Conditions {
		if dep.Status.Conditions[i].Type == t {
			return &dep.Status.Conditions[i]
		}
	}
	return nil
}

// ReplicaFailure returns the Deployment's ReplicaFailure condition while
// it is True: its ReplicaSet could not create a Pod.
func ReplicaFailure(dep *appsv1.Deployment) *appsv1.DeploymentCondition {
	if c := Condition(dep, appsv1.DeploymentReplicaFailure); c != nil && c.Status == corev1.ConditionTrue {
		return c
	}
	return nil
}

// ProgressDeadlineExceeded mirrors how the Deployment controller reports a
// stuck rollout.
func ProgressDeadlineExceeded(dep *appsv1.Deployment) bool {
	cond := Condition(dep, appsv1.DeploymentProgressing)
	return cond != nil && cond.Status == corev1.ConditionFalse && cond.Reason == "ProgressDeadlineExceeded"
}

// Complete reports whether the Deployment controller has seen the latest
// template and every one of want replicas runs it and is available.
func Complete(dep *appsv1.Deployment, want int32) bool {
	return dep.Status.ObservedGeneration >= dep.Generation &&
		dep.Status.UpdatedReplicas == want &&
		dep.Status.Replicas == want &&
		dep.Status.AvailableReplicas == want
}

// RollingOut reports a Deployment whose rollout has not completed and can
// go on: not paused, and its replicas not all running its template and
// available.
func RollingOut(dep *appsv1.Deployment) bool {
	return !dep.Spec.Paused && !Complete(dep, ptr.Deref(dep.Spec.Replicas, 1))
}

// ReplacingPods reports a Deployment that is replacing Pods of an older
// template and can go on: not paused, and its controller has not yet
// observed the current generation, or not every wanted replica runs the
// current template, or Pods of an older one remain. A Pod that is down
// while every replica runs the current template is no rollout; a scale-up
// whose new Pods are not there yet counts as one.
func ReplacingPods(dep *appsv1.Deployment) bool {
	want := ptr.Deref(dep.Spec.Replicas, 1)
	return !dep.Spec.Paused && (dep.Status.ObservedGeneration < dep.Generation ||
		dep.Status.UpdatedReplicas < want || dep.Status.Replicas > want)
}

// PausedBy reports whether manager's server-side apply owns the
// Deployment's spec.paused. It reads the managedFields of an object the
// apiserver answered with, and those of a cached one alike when the cache
// keeps that manager's claim.
func PausedBy(dep *appsv1.Deployment, manager string) bool {
	return drift.OwnsField(dep.ManagedFields, manager, "spec", "paused")
}

// Available is the rule for a cache's Available=True: at least one Pod is
// available, and at most MissingTolerated of the want replicas are
// missing. The Deployment's own Available condition is not the rule: it
// asks for replicas minus the rolling update's maxUnavailable, which the
// operator renders as 0, so a cache of three that lost one Pod to a node
// drain would stop being Available, while a Deployment carrying another
// strategy (kept by a paused Memcached, or edited by hand) with one
// replica and maxUnavailable 1 calls itself Available with nothing able
// to serve.
func Available(dep *appsv1.Deployment, want int32) bool {
	available := dep.Status.AvailableReplicas
	return available >= 1 && available >= want-MissingTolerated
}

// MissingTolerated is how many of its wanted replicas a cache may miss and
// stay Available: one, the shard a crashed Pod or a node drain under the
// default PodDisruptionBudget takes. A cache missing one shard serves
// every key, with misses for that shard's; the MemcachedUnavailable alert
// reads Available with the same tolerance.
const MissingTolerated = 1
