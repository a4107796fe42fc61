package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
	"github.com/kubelite/memcached-operator/pkg/resources"
)

// legacyOrphanFinalizer is the finalizer an operator of an earlier release
// put on a Memcached only while its deletionPolicy was Orphan. A Memcached
// synced by such an operator may still carry it: finalize honours it as it
// does ChildrenFinalizer, and syncFinalizer replaces it.
const legacyOrphanFinalizer = "cache.kubelite.io/orphan-children"

// ours reports one of the finalizers this operator lifts in finalize.
func ours(f string) bool {
	return f == cachev1beta1.ChildrenFinalizer || f == legacyOrphanFinalizer
}

// syncFinalizer makes sure the Memcached carries ChildrenFinalizer, and
// only that one of ours, and returns the Memcached as the apiserver now
// has it. syncHandler calls it before it creates any child, whatever the
// deletion policy: the garbage collector then cannot act on the
// Memcached's deletion before finalize has applied the policy in force at
// that moment, even if the operator is down, failing over or backlogged
// when the Memcached is deleted. It is only called for objects that are
// not being deleted; the patch carries the resourceVersion it was
// computed from, so it cannot add the finalizer to an object whose
// deletion started after the cache saw it.
func (c *Controller) syncFinalizer(ctx context.Context, mc *cachev1beta1.Memcached) (*cachev1beta1.Memcached, error) {
	if slices.Contains(mc.Finalizers, cachev1beta1.ChildrenFinalizer) && !slices.Contains(mc.Finalizers, legacyOrphanFinalizer) {
		return mc, nil
	}
	// One patch replaces the legacy finalizer, so the Memcached is never
	// without one of ours.
	finalizers := append(slices.DeleteFunc(slices.Clone(mc.Finalizers), ours), cachev1beta1.ChildrenFinalizer)
	updated, err := c.patchFinalizers(ctx, mc, finalizers)
	if err != nil {
		return nil, err
	}
	klog.FromContext(ctx).V(2).Info("Added the finalizer", "finalizer", cachev1beta1.ChildrenFinalizer)
	return updated, nil
}

// finalize runs for a Memcached that is being deleted. With the deletion
// policy Orphan it first releases the children, then removes the
// finalizer; the order matters, since the garbage collector deletes any
// child that still points at the Memcached once the Memcached is gone.
// With Delete it removes the finalizer and the garbage collector deletes
// the children. Without one of our finalizers there is nothing left to
// do: the operator never synced the Memcached, so it made no children, or
// someone removed the finalizer by hand, and the garbage collector deletes
// whatever children still point at it.
//
// Deletion is honoured even when the Memcached is paused: a paused object
// that could never be deleted would be worse than one whose children change.
func (c *Controller) finalize(ctx context.Context, mc *cachev1beta1.Memcached) outcome {
	if !slices.ContainsFunc(mc.Finalizers, ours) {
		return done
	}
	if mc.Spec.DeletionPolicy == cachev1beta1.DeletionPolicyOrphan {
		if err := c.orphanChildren(ctx, mc); err != nil {
			return c.reportFinalizeFailure(ctx, mc, err)
		}
	}
	finalizers := slices.DeleteFunc(slices.Clone(mc.Finalizers), ours)
	if _, err := c.patchFinalizers(ctx, mc, finalizers); err != nil {
		if apierrors.IsNotFound(err) {
			// The cache had not yet seen an earlier removal go through, and
			// the Memcached is already gone.
			klog.FromContext(ctx).V(2).Info("Memcached is already gone")
			return done
		}
		return transient(err)
	}
	klog.FromContext(ctx).V(2).Info("Removed the finalizer; the Memcached can go", "deletionPolicy", mc.Spec.DeletionPolicy)
	return done
}

// reportFinalizeFailure shows why the children cannot be released on the
// status of the Memcached being deleted, which otherwise would sit with
// its finalizer and no reason (such as RBAC or an admission plugin refusing
// to change the children's ownerReferences).
func (c *Controller) reportFinalizeFailure(ctx context.Context, mc *cachev1beta1.Memcached, err error) outcome {
	o := failed("child", err)
	if !o.shown() {
		return o
	}
	o.message = "Cannot release the children before deletion (deletionPolicy Orphan): " + o.message
	s := &memcachedSync{mc: mc, defaulted: resources.Default(mc), outcome: o}
	s.pools, s.retiring = c.cachedPools(mc, s.defaulted)
	s.record(c.holdRollouts(mc, s.pools))
	s.record(c.syncStatus(ctx, s))
	return s.outcome
}

// patchFinalizers replaces the finalizer list with a merge patch that is
// conditional on the resourceVersion the list was computed from, so a
// finalizer someone else added in the meantime is never dropped.
func (c *Controller) patchFinalizers(ctx context.Context, mc *cachev1beta1.Memcached, finalizers []string) (*cachev1beta1.Memcached, error) {
	var list any = finalizers
	if len(finalizers) == 0 {
		list = nil // null deletes the field in a merge patch.
	}
	body, err := json.Marshal(map[string]any{
		"metadata": map[string]any{
			"resourceVersion": mc.ResourceVersion,
			"finalizers":      list,
		},
	})
	if err != nil {
		return nil, fmt.Errorf("encoding finalizer patch: %w", err)
	}
	updated, err := c.memcachedClient.CacheV1beta1().Memcacheds(mc.Namespace).Patch(ctx, mc.Name, types.MergePatchType, body, metav1.PatchOptions{FieldManager: fieldManager})
	if err != nil {
		return nil, fmt.Errorf("patching finalizers: %w", err)
	}
	return updated, nil
}

// orphanChildren removes this Memcached's ownerReferences from its
// children, so the garbage collector leaves them serving after the
// Memcached is gone. It reads the children from the apiserver rather than
// the cache: a child the cache has not seen yet would otherwise be deleted.
func (c *Controller) orphanChildren(ctx context.Context, mc *cachev1beta1.Memcached) error {
	if err := orphanChildrenOf(ctx, c, mc, &c.children.deployments); err != nil {
		return err
	}
	if err := orphanChildrenOf(ctx, c, mc, &c.children.services); err != nil {
		return err
	}
	if err := orphanChildrenOf(ctx, c, mc, &c.children.pdbs); err != nil {
		return err
	}
	// The orphaned Pods go on serving, so their policy stays with them.
	return orphanChildrenOf(ctx, c, mc, &c.children.networkPolicies)
}

// orphanChildrenOf orphans the children of one kind: by the names the
// Memcached gives them, its own and those of the pools of spec.zones, read
// from the apiserver, and any other the cache shows it controls, such as
// the pool of a zone that was taken out of spec.zones.
func orphanChildrenOf[T metav1.Object, AC any](ctx context.Context, c *Controller, mc *cachev1beta1.Memcached, ch *child[T, AC]) error {
	names := []string{resources.ChildName(mc)}
	for _, zone := range mc.Spec.Zones {
		names = append(names, resources.PoolName(mc, zone))
	}
	cached, err := ch.owned(mc.Namespace, mc.Name)
	if err != nil {
		return fmt.Errorf("listing %ss to orphan from cache: %w", ch.kind, err)
	}
	for _, obj := range cached {
		if !slices.Contains(names, obj.GetName()) {
			names = append(names, obj.GetName())
		}
	}
	for _, name := range names {
		if err := orphanChild(ctx, c, mc, ch, name); err != nil {
			return err
		}
	}
	return nil
}

// orphanChild removes this Memcached's ownerReference from one child.
func orphanChild[T metav1.Object, AC any](ctx context.Context, c *Controller, mc *cachev1beta1.Memcached, ch *child[T, AC], name string) error {
	client := ch.client(mc.Namespace)
	obj, err := client.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("getting %s to orphan: %w", ch.kind, err)
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
		return fmt.Errorf("encoding %s orphan patch: %w", ch.kind, err)
	}
	if _, err := client.Patch(ctx, obj.GetName(), types.MergePatchType, body, metav1.PatchOptions{FieldManager: fieldManager}); err != nil {
		return fmt.Errorf("orphaning %s: %w", ch.kind, err)
	}
	klog.FromContext(ctx).V(2).Info("Orphaned child", "kind", ch.kind)
	c.recorder.Eventf(mc, corev1.EventTypeNormal, "Orphaned", "Removed the owner reference from %s %s so it outlives the Memcached", ch.kind, obj.GetName())
	return nil
}
