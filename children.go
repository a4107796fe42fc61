package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	networkingv1ac "k8s.io/client-go/applyconfigurations/networking/v1"
	policyv1ac "k8s.io/client-go/applyconfigurations/policy/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
	"github.com/kubelite/memcached-operator/pkg/drift"
	"github.com/kubelite/memcached-operator/pkg/resources"
)

// applyOptions force-applies: the operator takes back any field it owns that
// someone else changed. It only ever applies to objects it controls or has
// just decided to adopt.
var applyOptions = metav1.ApplyOptions{FieldManager: fieldManager, Force: true}

// child adapts one child kind (T is its typed object, AC its apply
// configuration) to syncChild. The adapters are built once per controller,
// so a sync that changes nothing allocates no closures.
type child[T metav1.Object, AC any] struct {
	kind string
	// cached reads the informer cache: the child and the digest of the
	// fields the operator's apply owns in it.
	cached func(namespace, name string) (T, string, error)
	// owned reads the informer cache: the children of the named
	// Memcached, of any UID (childcache.OwnerIndex).
	owned func(namespace, memcachedName string) ([]T, error)
	// client is the kind's typed client of a namespace.
	client func(namespace string) childClient[T, AC]
	// meta points at the apply configuration's metadata, which every kind
	// embeds under the same name but no interface reaches.
	meta func(desired *AC) **metav1ac.ObjectMetaApplyConfiguration
	// unadoptable says why an orphan cannot become desired, because a
	// field that differs is immutable; "" if it can.
	unadoptable func(orphan T, desired *AC) string
}

// childClient is what the controller uses of a kind's typed client.
type childClient[T any, AC any] interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
	Apply(ctx context.Context, desired *AC, opts metav1.ApplyOptions) (T, error)
	Update(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error)
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (T, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
}

// createOnlyResourceVersion turns an apply into a create that cannot land
// on an existing object. An apply that carries a resourceVersion is
// conditional on it when the object exists, and the apiserver ignores it
// when it creates the object. No object has resourceVersion "1" (etcd's
// first write already has revision 2), so the apply creates the object or,
// if someone created one after our read, fails with a Conflict instead of
// merging our fields into theirs.
const createOnlyResourceVersion = "1"

// children holds the adapters of the child kinds.
type children struct {
	deployments child[*appsv1.Deployment, appsv1ac.DeploymentApplyConfiguration]
	services    child[*corev1.Service, corev1ac.ServiceApplyConfiguration]
	pdbs        child[*policyv1.PodDisruptionBudget, policyv1ac.PodDisruptionBudgetApplyConfiguration]
	// networkPolicies exist only for a spec with networkPolicy set
	// (syncNetworkPolicy).
	networkPolicies child[*networkingv1.NetworkPolicy, networkingv1ac.NetworkPolicyApplyConfiguration]
}

func newChildren(c *Controller) children {
	return children{
		deployments: child[*appsv1.Deployment, appsv1ac.DeploymentApplyConfiguration]{
			kind:   "Deployment",
			cached: c.deploymentLister.Get,
			owned:  c.deploymentLister.Owned,
			client: func(namespace string) childClient[*appsv1.Deployment, appsv1ac.DeploymentApplyConfiguration] {
				return c.kubeClient.AppsV1().Deployments(namespace)
			},
			meta: func(d *appsv1ac.DeploymentApplyConfiguration) **metav1ac.ObjectMetaApplyConfiguration {
				return &d.ObjectMetaApplyConfiguration
			},
			unadoptable: func(orphan *appsv1.Deployment, d *appsv1ac.DeploymentApplyConfiguration) string {
				if !maps.Equal(orphan.Spec.Selector.MatchLabels, d.Spec.Selector.MatchLabels) || len(orphan.Spec.Selector.MatchExpressions) > 0 {
					return fmt.Sprintf("its selector %s differs from %v and cannot be changed",
						metav1.FormatLabelSelector(orphan.Spec.Selector), d.Spec.Selector.MatchLabels)
				}
				return ""
			},
		},
		services: child[*corev1.Service, corev1ac.ServiceApplyConfiguration]{
			kind:   "Service",
			cached: c.serviceLister.Get,
			owned:  c.serviceLister.Owned,
			client: func(namespace string) childClient[*corev1.Service, corev1ac.ServiceApplyConfiguration] {
				return c.kubeClient.CoreV1().Services(namespace)
			},
			meta: func(s *corev1ac.ServiceApplyConfiguration) **metav1ac.ObjectMetaApplyConfiguration {
				return &s.ObjectMetaApplyConfiguration
			},
			unadoptable: func(orphan *corev1.Service, s *corev1ac.ServiceApplyConfiguration) string {
				if want := ptr.Deref(s.Spec.ClusterIP, ""); orphan.Spec.ClusterIP != want {
					return fmt.Sprintf("its clusterIP %q is not %q and cannot be changed", orphan.Spec.ClusterIP, want)
				}
				return ""
			},
		},
		pdbs: child[*policyv1.PodDisruptionBudget, policyv1ac.PodDisruptionBudgetApplyConfiguration]{
			kind:   "PodDisruptionBudget",
			cached: c.pdbLister.Get,
			owned:  c.pdbLister.Owned,
			client: func(namespace string) childClient[*policyv1.PodDisruptionBudget, policyv1ac.PodDisruptionBudgetApplyConfiguration] {
				return c.kubeClient.PolicyV1().PodDisruptionBudgets(namespace)
			},
			meta: func(p *policyv1ac.PodDisruptionBudgetApplyConfiguration) **metav1ac.ObjectMetaApplyConfiguration {
				return &p.ObjectMetaApplyConfiguration
			},
			// Every field of a PodDisruptionBudget's spec can be updated,
			// but the adopting apply cannot set maxUnavailable next to a
			// minAvailable that another manager owns, or the reverse: the
			// apiserver refuses a budget with both.
			unadoptable: func(orphan *policyv1.PodDisruptionBudget, p *policyv1ac.PodDisruptionBudgetApplyConfiguration) string {
				switch {
				case orphan.Spec.MinAvailable != nil && p.Spec.MaxUnavailable != nil:
					return "it sets minAvailable where the operator sets maxUnavailable"
				case orphan.Spec.MaxUnavailable != nil && p.Spec.MinAvailable != nil:
					return "it sets maxUnavailable where the operator sets minAvailable"
				}
				return ""
			},
		},
		networkPolicies: child[*networkingv1.NetworkPolicy, networkingv1ac.NetworkPolicyApplyConfiguration]{
			kind:   "NetworkPolicy",
			cached: c.npLister.Get,
			owned:  c.npLister.Owned,
			client: func(namespace string) childClient[*networkingv1.NetworkPolicy, networkingv1ac.NetworkPolicyApplyConfiguration] {
				return c.kubeClient.NetworkingV1().NetworkPolicies(namespace)
			},
			meta: func(p *networkingv1ac.NetworkPolicyApplyConfiguration) **metav1ac.ObjectMetaApplyConfiguration {
				return &p.ObjectMetaApplyConfiguration
			},
			// Every field of a NetworkPolicy's spec can be updated, and the
			// replacement drops the rules and egress an orphan carried.
			unadoptable: func(*networkingv1.NetworkPolicy, *networkingv1ac.NetworkPolicyApplyConfiguration) string { return "" },
		},
	}
}

// name returns the name of a desired child.
func (ch *child[T, AC]) name(desired *AC) string {
	return ptr.Deref((*ch.meta(desired)).Name, "")
}

// memoKey names a desired child in the memo of applied fields: by kind and
// name, since a Memcached with zones has a Deployment for each.
func (ch *child[T, AC]) memoKey(desired *AC) string {
	return ch.kind + "/" + ch.name(desired)
}

// specHash returns the spec-hash annotation of a desired child.
func (ch *child[T, AC]) specHash(desired *AC) string {
	return (*ch.meta(desired)).Annotations[resources.SpecHashAnnotation]
}

// withMeta returns a copy of desired whose metadata edit has changed;
// desired itself stays untouched.
func (ch *child[T, AC]) withMeta(desired *AC, edit func(*metav1ac.ObjectMetaApplyConfiguration)) *AC {
	cp := *desired
	meta := **ch.meta(&cp)
	edit(&meta)
	*ch.meta(&cp) = &meta
	return &cp
}

// blockedByForeignObject reports whether the last status said a foreign
// object holds a child's name.
func blockedByForeignObject(mc *cachev1beta1.Memcached) bool {
	cond := meta.FindStatusCondition(mc.Status.Conditions, cachev1beta1.ConditionDegraded)
	return cond != nil && cond.Status == metav1.ConditionTrue && cond.Reason == cachev1beta1.ReasonResourceExists
}

// createOnly sets createOnlyResourceVersion on a copy of the metadata (see
// withMeta). The desired object stays untouched: when the create is
// refused, the same sync may apply it to the object that was in the way (an
// orphan to adopt), where that condition would always fail.
func createOnly(m *metav1ac.ObjectMetaApplyConfiguration) {
	m.ResourceVersion = ptr.To(createOnlyResourceVersion)
}

// markAdopting adds resources.AdoptingAnnotation to a copy of the metadata.
func markAdopting(m *metav1ac.ObjectMetaApplyConfiguration) {
	m.Annotations = maps.Clone(m.Annotations)
	if m.Annotations == nil {
		m.Annotations = map[string]string{}
	}
	m.Annotations[resources.AdoptingAnnotation] = "true"
}

// observedChild is a child as a sync found or left it.
type observedChild[T metav1.Object] struct {
	// obj is the child, or the zero T if this Memcached controls none.
	obj T
	// live is set when obj is the apiserver's answer to this sync, a
	// write or a read of a child the cache did not hold, rather than the
	// cached object.
	live bool
}

// liveChild is a child the apiserver answered this sync with.
func liveChild[T metav1.Object](obj T) observedChild[T] {
	return observedChild[T]{obj: obj, live: true}
}

// syncChild makes one child match desired, and returns it as it now is and
// the outcome. What it does depends on who owns the object of the child's
// name (classify), one function per case:
//
//   - none in the cache: createChild;
//   - controlled by this Memcached: syncOwned;
//   - an orphan with the operator's labels: adoptOrphan;
//   - controlled by a deleted Memcached of the same name:
//     waitForPredecessor;
//   - anything else: foreignChild.
//
// A failed request is classified by failed. A child that exists keeps
// being reported when a write to it fails, so that the status shows what
// serves.
func syncChild[T metav1.Object, AC any](ctx context.Context, c *Controller, mc *cachev1beta1.Memcached, desired *AC, ch *child[T, AC]) (observedChild[T], outcome) {
	current, digest, err := ch.cached(mc.Namespace, ch.name(desired))
	live := false
	if apierrors.IsNotFound(err) {
		var created bool
		if current, created, err = createChild(ctx, c, mc, desired, ch); created {
			return liveChild(current), done
		}
		live = true
	}
	if err != nil {
		return observedChild[T]{}, failed(ch.kind, err)
	}
	switch classify(mc, current) {
	case owned:
		if live {
			// The cache keeps the digest in place of managedFields; an
			// object the apiserver answered with has them.
			digest = drift.Owned(current.GetManagedFields(), fieldManager)
		}
		return syncOwned(ctx, c, mc, desired, ch, observedChild[T]{obj: current, live: live}, digest)
	case orphan:
		return adoptOrphan(ctx, c, mc, desired, ch, current, live)
	case predecessor:
		return observedChild[T]{}, waitForPredecessor(ch.kind, current)
	default:
		return observedChild[T]{}, foreignChild(ch.kind, current)
	}
}

// createChild creates a child that the cache does not hold, with a
// create-only apply (see createOnlyResourceVersion), and reports whether it
// did. The child informers only see objects with the operator's labels, so
// a miss does not prove the name is free: the create-only apply creates the
// child, or is refused with a Conflict and changes nothing if any object
// holds the name. That object is then read from the apiserver and returned,
// to be classified like a cached one. A Memcached already blocked by a
// foreign object reads first, so its once-a-minute recheck sends no write
// while the object is there, and creates the child once it is gone.
func createChild[T metav1.Object, AC any](ctx context.Context, c *Controller, mc *cachev1beta1.Memcached, desired *AC, ch *child[T, AC]) (T, bool, error) {
	logger := klog.FromContext(ctx)
	name := ch.name(desired)
	client := ch.client(mc.Namespace)
	if blockedByForeignObject(mc) {
		inTheWay, err := client.Get(ctx, name, metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			return inTheWay, false, wrapGet(ch.kind, mc.Namespace, name, err)
		}
	}
	created, err := applyChild(ctx, ch, mc.Namespace, ch.withMeta(desired, createOnly))
	if err == nil {
		logger.V(2).Info("Created child", "kind", ch.kind)
		c.rememberApplied(mc, ch.memoKey(desired), ch.specHash(desired), created)
		return created, true, nil
	}
	if !apierrors.IsConflict(err) {
		var none T
		return none, false, err
	}
	logger.V(2).Info("Child exists but is not in the cache; reading it", "kind", ch.kind)
	inTheWay, err := client.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return inTheWay, false, fmt.Errorf("%s %s/%s was in the way of its create and is gone again: %w", ch.kind, mc.Namespace, name, err)
	}
	return inTheWay, false, wrapGet(ch.kind, mc.Namespace, name, err)
}

// wrapGet names the child a failed read was for; nil stays nil.
func wrapGet(kind, namespace, name string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("getting %s %s/%s: %w", kind, namespace, name, err)
}

// syncOwned makes a child this Memcached controls match desired. It is
// applied only if its spec-hash annotation is not that of desired, or the
// fields the operator's apply owns in it (ownedFields) are not those an
// apply of desired owns: someone who changes a field the operator set
// takes it out of the operator's managedFields entry. So a converged child
// costs no write, and the cache needs no copy of the values
// (childcache.Child).
func syncOwned[T metav1.Object, AC any](ctx context.Context, c *Controller, mc *cachev1beta1.Memcached, desired *AC, ch *child[T, AC], current observedChild[T], ownedFields string) (observedChild[T], outcome) {
	if _, adopting := current.obj.GetAnnotations()[resources.AdoptingAnnotation]; adopting {
		// An adoption whose replacement failed: apply again, so that the
		// operator's apply owns every field of today's spec, and replace
		// from the apply's answer, which has the managedFields the cache
		// lacks.
		applied, err := applyChild(ctx, ch, mc.Namespace, ch.withMeta(desired, markAdopting))
		if err != nil {
			return current, failed(ch.kind, err)
		}
		return replaceAdopted(ctx, ch, applied, desired)
	}
	if v, ok := resources.RenderingOf(current.obj.GetAnnotations()); ok && v > resources.RenderingVersion {
		return current, renderedByNewer(ch.kind, current.obj, v)
	}
	specHash := ch.specHash(desired)
	if current.obj.GetAnnotations()[resources.SpecHashAnnotation] == specHash {
		applied, err := c.appliedFields(mc, ch.memoKey(desired), specHash, desired)
		if err != nil {
			return current, failed(ch.kind, err)
		}
		if ownedFields == applied {
			return current, done
		}
		return repairDrift(ctx, c, mc, desired, ch, current)
	}
	updated, err := applyChild(ctx, ch, mc.Namespace, desired)
	if err != nil {
		return current, failed(ch.kind, err)
	}
	c.rememberApplied(mc, ch.memoKey(desired), specHash, updated)
	klog.FromContext(ctx).V(2).Info("Applied spec change to child", "kind", ch.kind)
	return liveChild(updated), done
}

// repairDrift applies desired over a child whose spec hash matches but
// whose fields someone else took over, and names what changed in an Event.
// It reads the child first to say which field: the cache holds only the
// digest of what the operator owns.
func repairDrift[T metav1.Object, AC any](ctx context.Context, c *Controller, mc *cachev1beta1.Memcached, desired *AC, ch *child[T, AC], current observedChild[T]) (observedChild[T], outcome) {
	name := ch.name(desired)
	changed := "fields another field manager took over"
	if live, err := ch.client(mc.Namespace).Get(ctx, name, metav1.GetOptions{}); err == nil {
		if path := drift.Diff(desired, live); path != "" {
			changed = path
		}
	}
	updated, err := applyChild(ctx, ch, mc.Namespace, desired)
	if err != nil {
		return current, failed(ch.kind, err)
	}
	c.rememberApplied(mc, ch.memoKey(desired), ch.specHash(desired), updated)
	klog.FromContext(ctx).V(2).Info("Repaired drift in child", "kind", ch.kind, "field", changed)
	c.recorder.Eventf(mc, corev1.EventTypeNormal, "DriftRepaired", "Restored %s of %s %s", changed, ch.kind, name)
	return liveChild(updated), done
}

// adoptOrphan takes over a child that has the operator's labels and no
// controller, left behind by a Memcached with deletionPolicy Orphan. It is
// read from the apiserver (the cache holds only its metadata), adopted
// after an uncached check that this Memcached is still the one the cache
// shows, then replaced with exactly what the operator would have created
// (replacementOf). An orphan that differs in an immutable field (a
// Deployment's selector, a Service's clusterIP) is left alone and reported
// as ResourceExists, with a message that says to delete it; one being
// deleted is waited for.
func adoptOrphan[T metav1.Object, AC any](ctx context.Context, c *Controller, mc *cachev1beta1.Memcached, desired *AC, ch *child[T, AC], current T, live bool) (observedChild[T], outcome) {
	name := ch.name(desired)
	if current.GetDeletionTimestamp() != nil {
		// Adopting would take over an object on its way out, and the
		// replacement would drop what holds it. Its deletion is an event,
		// since it carries the operator's labels.
		return observedChild[T]{}, recheckLater(cachev1beta1.ReasonWaitingForPredecessor,
			fmt.Errorf("%s %s/%s is an orphan being deleted; waiting for it to go%s", ch.kind, mc.Namespace, name, heldBy(current)))
	}
	if !live {
		// The cache holds only an orphan's metadata (childcache); whether
		// and how to adopt it depends on its spec.
		var err error
		if current, err = ch.client(mc.Namespace).Get(ctx, name, metav1.GetOptions{}); err != nil {
			return observedChild[T]{}, failed(ch.kind, fmt.Errorf("getting orphaned %s %s/%s: %w", ch.kind, mc.Namespace, name, err))
		}
		if classify(mc, current) != orphan {
			return observedChild[T]{}, failed(ch.kind, fmt.Errorf("%w: %s %s/%s is no longer an orphan", errOwnerChanged, ch.kind, mc.Namespace, name))
		}
	}
	if why := ch.unadoptable(current, desired); why != "" {
		// It carries the operator's labels, so its deletion syncs this
		// Memcached; the recheck only covers a missed event.
		return observedChild[T]{}, recheckLater(cachev1beta1.ReasonResourceExists,
			fmt.Errorf("%s %s/%s is an orphan this Memcached cannot adopt: %s; delete it to let the operator create its own", ch.kind, mc.Namespace, name, why))
	}
	if err := c.recheckOwner(ctx, mc); err != nil {
		return observedChild[T]{}, failed(ch.kind, err)
	}
	// The apply takes the orphan over and makes every field the operator
	// sets its own; the replacement then removes the rest.
	applied, err := applyChild(ctx, ch, mc.Namespace, ch.withMeta(desired, markAdopting))
	if err != nil {
		return observedChild[T]{}, failed(ch.kind, err)
	}
	klog.FromContext(ctx).V(2).Info("Adopted orphaned child", "kind", ch.kind)
	c.recorder.Eventf(mc, corev1.EventTypeNormal, "Adopted", "Adopted orphaned %s %s", ch.kind, name)
	return replaceAdopted(ctx, ch, applied, desired)
}

// renderedByNewer reports a child that an operator with a newer rendering
// applied. Re-applying this operator's rendering would undo the newer one's
// rollout, and the newer one would redo it when it leads again; the child
// changes again, not to be undone, when the newer operator leads. Its
// annotations changing is an event, so nothing is rechecked.
func renderedByNewer(kind string, current metav1.Object, v int) outcome {
	return blocked(cachev1beta1.ReasonRenderedByNewerOperator,
		fmt.Errorf("%s %s/%s was applied by an operator with rendering %d, newer than this operator's %d, which leaves it as it is; finish the operator upgrade, or after a deliberate downgrade remove its annotation %s",
			kind, current.GetNamespace(), current.GetName(), v, resources.RenderingVersion, resources.RenderingAnnotation), noRetry, 0)
}

// waitForPredecessor reports a child that belongs to a deleted Memcached of
// the same name. The garbage collector removes it, and its deletion syncs
// this Memcached again (handleChild); the slow recheck only covers a
// missed event.
func waitForPredecessor(kind string, current metav1.Object) outcome {
	return recheckLater(cachev1beta1.ReasonWaitingForPredecessor,
		fmt.Errorf("%s %s/%s still belongs to a deleted Memcached of the same name (UID %s) and waits for the garbage collector%s",
			kind, current.GetNamespace(), current.GetName(), metav1.GetControllerOf(current).UID, heldBy(current)))
}

// recheckLater is the outcome of a child that waits for an object to go:
// shown with reason, and looked at again after foreignRecheckInterval.
func recheckLater(reason string, err error) outcome {
	return blocked(reason, err, retryAfter, foreignRecheckInterval)
}

// foreignChild reports an object of the child's name that the operator may
// not touch. The informers filter on the operator's labels, so its removal
// raises no event: the sync looks again, slowly.
//
// An object that another Memcached controls is named as its: the pool of a
// Memcached's zone and another Memcached can want the same name (a with
// zone b, and a-b), and the message says which cache holds it. Both are in
// the one namespace, so it names nothing a tenant of another could not
// see.
func foreignChild(kind string, current metav1.Object) outcome {
	if ref := metav1.GetControllerOf(current); ref != nil && ref.Kind == "Memcached" && strings.HasPrefix(ref.APIVersion, cachev1beta1.GroupName+"/") {
		return recheckLater(cachev1beta1.ReasonResourceExists,
			fmt.Errorf("%s %s/%s already exists and belongs to Memcached %s; rename one of the two Memcacheds or the zone, since a zone pool takes the name <name>-<zone>",
				kind, current.GetNamespace(), current.GetName(), ref.Name))
	}
	return recheckLater(cachev1beta1.ReasonResourceExists,
		fmt.Errorf("%s %s/%s already exists and is not managed by this Memcached", kind, current.GetNamespace(), current.GetName()))
}

// appliedFields returns the digest of the fields an apply of desired, the
// desired child known to the memo as child (child.memoKey) with spec hash
// specHash, makes the operator own.
// The answer to the operator's last apply of that configuration says it
// (rememberApplied); without one, after a start or when another replica
// made that apply, it is computed from the type's schema, which costs
// several times a whole converged sync, and remembered. A changed spec
// hash needs neither: the child is applied anyway.
func (c *Controller) appliedFields(mc *cachev1beta1.Memcached, child, specHash string, desired any) (string, error) {
	if digest, ok := c.memo.appliedFields.lookup(mc.UID, child, specHash); ok {
		return digest, nil
	}
	digest, err := c.fieldSets.Applied(desired)
	if err != nil {
		return "", fmt.Errorf("listing the fields of the desired %s: %w", child, err)
	}
	c.memo.appliedFields.remember(mc.UID, child, specHash, digest)
	return digest, nil
}

// rememberApplied records what the operator owns in an apply's answer as
// the digest of the configuration with spec hash specHash. Only an apply
// of exactly the desired configuration may be recorded: one that marks an
// adoption owns an annotation more.
func (c *Controller) rememberApplied(mc *cachev1beta1.Memcached, child, specHash string, applied metav1.Object) {
	if digest := drift.Owned(applied.GetManagedFields(), fieldManager); digest != "" {
		c.memo.appliedFields.remember(mc.UID, child, specHash, digest)
	}
}

// heldBy names, for a status message, the finalizers that keep an object
// that waits for deletion; "" if it has none.
func heldBy(obj metav1.Object) string {
	if f := obj.GetFinalizers(); len(f) > 0 {
		return fmt.Sprintf("; its finalizers %v hold it", f)
	}
	return ""
}

// replaceAdopted writes desired over a child adopted from an orphan (see
// replacementOf), which also removes resources.AdoptingAnnotation. The
// adopted child stays the one reported if the update fails.
func replaceAdopted[T metav1.Object, AC any](ctx context.Context, ch *child[T, AC], adopted T, desired *AC) (observedChild[T], outcome) {
	replacement, err := replacementOf(adopted, desired)
	if err == nil {
		replacement, err = ch.client(adopted.GetNamespace()).Update(ctx, replacement, metav1.UpdateOptions{FieldManager: fieldManager})
	}
	if err != nil {
		return liveChild(adopted), failed(ch.kind, fmt.Errorf("replacing adopted %s: %w", ch.kind, err))
	}
	klog.FromContext(ctx).V(2).Info("Replaced adopted child with the operator's", "kind", ch.kind)
	return liveChild(replacement), done
}

// replacementOf returns desired as a typed object, to be written over
// adopted with an update. Server-side apply alone would only
// set the operator's fields on an adopted orphan, and keep whatever else it
// carries, such as an extra container, another serviceAccountName or
// volumes; the update makes the child exactly what the operator would have
// created, except for the finalizers and non-controller owners others
// hold it by. It keeps adopted's resourceVersion, so it fails with a Conflict
// if the child changed since the apply, and only the operator's entries of
// managedFields, so the fields it applied stay solely its own and dropping
// one from the spec later removes it from the child.
func replacementOf[T metav1.Object, AC any](adopted T, desired *AC) (T, error) {
	var replacement T
	body, err := json.Marshal(desired)
	if err != nil {
		return replacement, fmt.Errorf("encoding the desired object: %w", err)
	}
	// T is a pointer type: decoding into its nil value allocates the
	// object.
	if err := json.Unmarshal(body, &replacement); err != nil {
		return replacement, fmt.Errorf("decoding the desired object: %w", err)
	}
	replacement.SetResourceVersion(adopted.GetResourceVersion())
	// What others hold the object by stays: their finalizers, and owners
	// that are not its controller, for their garbage collection.
	replacement.SetFinalizers(adopted.GetFinalizers())
	refs := replacement.GetOwnerReferences()
	for _, ref := range adopted.GetOwnerReferences() {
		if !ptr.Deref(ref.Controller, false) {
			refs = append(refs, ref)
		}
	}
	replacement.SetOwnerReferences(refs)
	var mine []metav1.ManagedFieldsEntry
	for _, entry := range adopted.GetManagedFields() {
		if entry.Manager == fieldManager {
			mine = append(mine, entry)
		}
	}
	replacement.SetManagedFields(mine)
	return replacement, nil
}

// applyChild sends the apply.
func applyChild[T metav1.Object, AC any](ctx context.Context, ch *child[T, AC], namespace string, desired *AC) (T, error) {
	applied, err := ch.client(namespace).Apply(ctx, desired, applyOptions)
	if err != nil {
		return applied, fmt.Errorf("applying %s: %w", ch.kind, err)
	}
	return applied, nil
}
