package main

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	networkingv1ac "k8s.io/client-go/applyconfigurations/networking/v1"

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
// and only if it is still that object (deleteChild's preconditions).
// Anything else of the policy's name, such as a foreign policy or an
// orphan, is not this Memcached's and is left alone,
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
	if classify(mc, current) != owned || current.DeletionTimestamp != nil || c.memo.writes.gone(mc.UID, current) {
		// Not ours to delete, on its way out, or deleted by an earlier
		// sync whose DELETE the cache has not seen yet.
		return done
	}
	deleted, o := deleteChild(ctx, c, mc, ch, current)
	if deleted {
		c.recorder.Eventf(mc, corev1.EventTypeNormal, "NetworkPolicyDeleted", "Deleted NetworkPolicy %s: spec.networkPolicy is not set", current.Name)
	}
	return o
}
