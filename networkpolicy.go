package main

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	networkingv1ac "k8s.io/client-go/applyconfigurations/networking/v1"
	"k8s.io/klog/v2"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
	"github.com/kubelite/memcached-operator/pkg/resources"
)

// syncNetworkPolicy makes the NetworkPolicy child match the spec. With
// spec.networkPolicy set it is synced like every other child (syncChild);
// left out, the Memcached has none, and the one it controls, if any, is
// deleted (deleteNetworkPolicy). Either way it is one step of the sync with
// one outcome.
func (c *Controller) syncNetworkPolicy(ctx context.Context, mc *cachev1beta1.Memcached, desired *networkingv1ac.NetworkPolicyApplyConfiguration) outcome {
	if desired != nil {
		_, o := syncChild(ctx, c, mc, desired, &c.children.networkPolicies)
		return o
	}
	return c.deleteNetworkPolicy(ctx, mc)
}

// deleteNetworkPolicy deletes the NetworkPolicy this Memcached controls,
// once its spec no longer asks for one. Like the pools the spec no longer
// asks for (syncPools), and unlike the other children, which live as long
// as their Memcached and which the garbage collector deletes with it, it
// can go while its Memcached stays.
//
// Only a policy the cache shows as controlled by this Memcached is deleted,
// and only if it is still that object: the request carries the cached UID
// and resourceVersion as preconditions, so a policy of the same name
// created since, or one changed since (someone may have taken it over by
// removing the ownerReference), is refused with a Conflict, retried once
// the cache has caught up. Anything else of the policy's name, such as a
// foreign policy or an orphan, is not this Memcached's and is left alone,
// unreported: a Memcached that asks for no policy has nothing it blocks.
// The cache only holds objects with the operator's labels, so a policy of
// this Memcached whose labels someone removed is out of its sight and stays.
func (c *Controller) deleteNetworkPolicy(ctx context.Context, mc *cachev1beta1.Memcached) outcome {
	ch := &c.children.networkPolicies
	current, _, err := ch.cached(mc.Namespace, resources.ChildName(mc))
	if apierrors.IsNotFound(err) {
		return done
	}
	if err != nil {
		return failed(ch.kind, err)
	}
	if classify(mc, current) != owned || current.DeletionTimestamp != nil {
		return done
	}
	if deleted, ok := c.memo.deletedPolicies.get(mc.UID); ok && deleted == current.UID {
		// Deleted by an earlier sync; the cache has not seen it go. A
		// sync in between, for the Deployment's events of the same spec
		// change, would send a DELETE bound to be answered NotFound.
		return done
	}
	uid, rv := current.UID, current.ResourceVersion
	err = c.kubeClient.NetworkingV1().NetworkPolicies(mc.Namespace).Delete(ctx, current.Name, metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &rv},
	})
	switch {
	case apierrors.IsNotFound(err):
		// Deleted by someone else since the cache saw it.
		return done
	case err != nil:
		return failed(ch.kind, fmt.Errorf("deleting NetworkPolicy: %w", err))
	}
	c.memo.deletedPolicies.update(mc.UID, func(deleted *types.UID) { *deleted = uid })
	klog.FromContext(ctx).V(2).Info("Deleted child the spec no longer asks for", "kind", ch.kind)
	c.recorder.Eventf(mc, corev1.EventTypeNormal, "NetworkPolicyDeleted", "Deleted NetworkPolicy %s: spec.networkPolicy is not set", current.Name)
	return done
}
