package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
	"github.com/kubelite/memcached-operator/pkg/resources"
)

// ownership is how a child with the Memcached's name relates to it.
type ownership int

const (
	// owned: this Memcached is the controller.
	owned ownership = iota
	// orphan: no controller, but the operator's labels for this name; a
	// Memcached with deletionPolicy Orphan left it behind.
	orphan
	// replaced: controlled by an earlier Memcached of the same name that
	// has been deleted; the garbage collector is about to remove it.
	replaced
	// foreign: anything else. The operator never touches it.
	foreign
)

// classify decides who a child belongs to. It checks the controller
// reference's UID, not just its name, so a child of a deleted Memcached is
// never mistaken for one of its successor.
func classify(mc *cachev1beta1.Memcached, obj metav1.Object) ownership {
	ref := metav1.GetControllerOf(obj)
	switch {
	case ref == nil && resources.HasOperatorLabels(obj.GetLabels(), mc.Name):
		return orphan
	case ref == nil:
		return foreign
	case !isMemcachedRef(ref) || ref.Name != mc.Name:
		return foreign
	case ref.UID == mc.UID:
		return owned
	default:
		return replaced
	}
}

// errOwnerChanged marks an adoption called off because the cache is stale:
// the Memcached, or the orphan, changed since it was cached. It is a race
// with the cache, not a problem to show: the informer's event for the
// change syncs the key again.
var errOwnerChanged = errors.New("not adopting: the object changed since it was cached")

// recheckOwner reads the Memcached from the apiserver before an adoption.
// The cache may still show a Memcached that was deleted and recreated under
// the same name; adopting for the stale one would hand the child to an
// owner that no longer exists and let the garbage collector delete it.
func (c *Controller) recheckOwner(ctx context.Context, mc *cachev1beta1.Memcached) error {
	fresh, err := c.memcachedClient.CacheV1beta1().Memcacheds(mc.Namespace).Get(ctx, mc.Name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("rechecking Memcached before adoption: %w", err)
	}
	if fresh.UID != mc.UID {
		return fmt.Errorf("%w: it was replaced (UID %s, cached UID %s)", errOwnerChanged, fresh.UID, mc.UID)
	}
	if fresh.DeletionTimestamp != nil {
		return fmt.Errorf("%w: it is being deleted", errOwnerChanged)
	}
	return nil
}

// orphanChildren removes this Memcached's ownerReferences from its
// children, so the garbage collector leaves them serving after the
// Memcached is gone. It reads the children from the apiserver rather than
// the cache: a child the cache has not seen yet would otherwise be deleted.
func (c *Controller) orphanChildren(ctx context.Context, mc *cachev1beta1.Memcached) error {
	name := resources.ChildName(mc)
	deployments := c.kubeClient.AppsV1().Deployments(mc.Namespace)
	services := c.kubeClient.CoreV1().Services(mc.Namespace)
	pdbs := c.kubeClient.PolicyV1().PodDisruptionBudgets(mc.Namespace)

	dep, err := deployments.Get(ctx, name, metav1.GetOptions{})
	if err := orphanOne(ctx, c, mc, "Deployment", dep, err, func(ctx context.Context, patch []byte) error {
		_, err := deployments.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: fieldManager})
		return err
	}); err != nil {
		return err
	}
	svc, err := services.Get(ctx, name, metav1.GetOptions{})
	if err := orphanOne(ctx, c, mc, "Service", svc, err, func(ctx context.Context, patch []byte) error {
		_, err := services.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: fieldManager})
		return err
	}); err != nil {
		return err
	}
	pdb, err := pdbs.Get(ctx, name, metav1.GetOptions{})
	return orphanOne(ctx, c, mc, "PodDisruptionBudget", pdb, err, func(ctx context.Context, patch []byte) error {
		_, err := pdbs.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: fieldManager})
		return err
	})
}

func orphanOne(ctx context.Context, c *Controller, mc *cachev1beta1.Memcached, kind string, obj metav1.Object, getErr error, patch func(context.Context, []byte) error) error {
	if apierrors.IsNotFound(getErr) {
		return nil
	}
	if getErr != nil {
		return fmt.Errorf("getting %s to orphan: %w", kind, getErr)
	}
	var keep []metav1.OwnerReference
	for _, ref := range obj.GetOwnerReferences() {
		if ref.UID != mc.UID {
			keep = append(keep, ref)
		}
	}
	if len(keep) == len(obj.GetOwnerReferences()) {
		return nil
	}
	// The resourceVersion makes the merge patch conditional: if the child
	// changed since the read, the patch fails with a Conflict and the sync
	// is retried, instead of writing back a stale ownerReferences list.
	body, err := json.Marshal(map[string]any{
		"metadata": map[string]any{
			"resourceVersion": obj.GetResourceVersion(),
			"ownerReferences": keep,
		},
	})
	if err != nil {
		return fmt.Errorf("encoding %s orphan patch: %w", kind, err)
	}
	if err := patch(ctx, body); err != nil {
		return fmt.Errorf("orphaning %s: %w", kind, err)
	}
	klog.FromContext(ctx).V(2).Info("Orphaned child", "kind", kind)
	c.recorder.Eventf(mc, corev1.EventTypeNormal, "Orphaned", "Removed the owner reference from %s %s so it outlives the Memcached", kind, obj.GetName())
	return nil
}
