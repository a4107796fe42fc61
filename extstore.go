package main

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/kubelite/memcached-operator/pkg/resources"
)

// defaultClaimGrace is --extstore-claim-grace: long enough for a
// provisioner to make a cloud disk, which takes seconds to about a
// minute, so that a claim on its way to being bound is not reported.
const defaultClaimGrace = 2 * time.Minute

// maxClaimsNamed bounds the claims the status message names.
const maxClaimsNamed = 3

// handleClaim queues the Memcached whose Pod's extstore claim changed
// phase, appeared or went: the claim carries its instance label.
func (c *Controller) handleClaim(obj any) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	claim, ok := obj.(*corev1.PersistentVolumeClaim)
	if !ok {
		utilruntime.HandleError(fmt.Errorf("decoding PersistentVolumeClaim: unexpected type %T", obj))
		return
	}
	if name := claim.Labels[resources.LabelInstance]; name != "" {
		c.workqueue.Add(cache.ObjectName{Namespace: claim.Namespace, Name: name})
	}
}

// claimPhase is the phase of a cached claim, "" for anything else.
func claimPhase(obj any) corev1.PersistentVolumeClaimPhase {
	if claim, ok := obj.(*corev1.PersistentVolumeClaim); ok {
		return claim.Status.Phase
	}
	return ""
}

// stuckClaims reads the extstore claims of the sync's Memcached and
// returns a message naming those Pending for at least claimGrace, "" if
// none is, and how long until the next Pending one reaches it, 0 if none
// will. A Pod cannot start until its claim is bound, and the claim's
// Events, not its status, say why it is not: no provisioner, a
// StorageClass that does not exist, or with a class that binds on first
// use the Pod's own scheduling. A claim a quota refuses is never made, and
// shows only as the Deployment's ProgressDeadlineExceeded.
func (c *Controller) stuckClaims(s *memcachedSync, now time.Time) (string, time.Duration) {
	if s.defaulted.Spec.Extstore == nil {
		return "", 0
	}
	mc := s.mc
	claims, err := c.claimLister.ListIn(mc.Namespace, labels.SelectorFromSet(labels.Set{resources.LabelInstance: mc.Name}))
	if err != nil {
		utilruntime.HandleError(fmt.Errorf("listing the extstore claims of %s/%s: %w", mc.Namespace, mc.Name, err))
		return "", 0
	}
	var stuck []string
	var recheck time.Duration
	for _, claim := range claims {
		if claim.Status.Phase != corev1.ClaimPending {
			continue
		}
		pending := now.Sub(claim.CreationTimestamp.Time)
		if pending < c.claimGrace {
			if wait := c.claimGrace - pending; recheck == 0 || wait < recheck {
				recheck = wait
			}
			continue
		}
		class := "the default StorageClass"
		if name := ptr.Deref(claim.Spec.StorageClassName, ""); name != "" {
			class = "StorageClass " + name
		} else if claim.Spec.StorageClassName != nil {
			class = "no StorageClass"
		}
		stuck = append(stuck, fmt.Sprintf("%s (%s)", claim.Name, class))
	}
	if len(stuck) == 0 {
		return "", recheck
	}
	slices.Sort(stuck)
	named := stuck[:min(len(stuck), maxClaimsNamed)]
	more := ""
	if len(stuck) > len(named) {
		more = fmt.Sprintf(" and %d more", len(stuck)-len(named))
	}
	// The message says nothing that changes while the claims wait, such
	// as for how long, so that it costs one status write, not one a sync.
	return fmt.Sprintf("The extstore claims of %d Pods have been Pending for more than %s, and those Pods cannot start until they are bound: %s%s; kubectl describe pvc shows why (the provisioner, the StorageClass, or the Pod's scheduling)",
		len(stuck), c.claimGrace, strings.Join(named, ", "), more), recheck
}
