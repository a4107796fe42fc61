package main

import (
	"context"
	"errors"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
	// predecessor: controlled by an earlier Memcached of the same name
	// that has been deleted; the garbage collector is about to remove it.
	predecessor
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
	case !resources.IsMemcachedRef(ref) || ref.Name != mc.Name:
		return foreign
	case ref.UID == mc.UID:
		return owned
	default:
		return predecessor
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
