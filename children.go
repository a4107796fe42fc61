package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
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
// so a sync that changes nothing allocates no clients or closures.
type child[T metav1.Object, AC any] struct {
	kind string
	// specHash returns the hash annotation of a desired object.
	specHash func(desired *AC) string
	// cached reads the informer cache.
	cached func(namespace, name string) (T, error)
	// live reads the apiserver, bypassing the cache.
	live func(ctx context.Context, namespace, name string) (T, error)
	// apply sends a server-side apply.
	apply func(ctx context.Context, namespace string, desired *AC) (T, error)
	// withMeta returns a copy of desired whose metadata edit has changed;
	// desired itself stays untouched.
	withMeta func(desired *AC, edit func(*metav1ac.ObjectMetaApplyConfiguration)) *AC
	// unadoptable says why an orphan cannot become desired, because a
	// field that differs is immutable; "" if it can.
	unadoptable func(orphan T, desired *AC) string
	// replace writes desired over an adopted object with an update, as
	// replaceAdopted describes.
	replace func(ctx context.Context, adopted T, desired *AC) (T, error)
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
}

func newChildren(c *Controller) children {
	return children{
		deployments: child[*appsv1.Deployment, appsv1ac.DeploymentApplyConfiguration]{
			kind: "Deployment",
			specHash: func(d *appsv1ac.DeploymentApplyConfiguration) string {
				return d.Annotations[resources.SpecHashAnnotation]
			},
			cached: c.deploymentLister.Get,
			live: func(ctx context.Context, namespace, name string) (*appsv1.Deployment, error) {
				return c.kubeClient.AppsV1().Deployments(namespace).Get(ctx, name, metav1.GetOptions{})
			},
			apply: func(ctx context.Context, namespace string, d *appsv1ac.DeploymentApplyConfiguration) (*appsv1.Deployment, error) {
				return c.kubeClient.AppsV1().Deployments(namespace).Apply(ctx, d, applyOptions)
			},
			withMeta: func(d *appsv1ac.DeploymentApplyConfiguration, edit func(*metav1ac.ObjectMetaApplyConfiguration)) *appsv1ac.DeploymentApplyConfiguration {
				cp, meta := *d, *d.ObjectMetaApplyConfiguration
				edit(&meta)
				cp.ObjectMetaApplyConfiguration = &meta
				return &cp
			},
			unadoptable: func(orphan *appsv1.Deployment, d *appsv1ac.DeploymentApplyConfiguration) string {
				if !maps.Equal(orphan.Spec.Selector.MatchLabels, d.Spec.Selector.MatchLabels) || len(orphan.Spec.Selector.MatchExpressions) > 0 {
					return fmt.Sprintf("its selector %s differs from %v and cannot be changed",
						metav1.FormatLabelSelector(orphan.Spec.Selector), d.Spec.Selector.MatchLabels)
				}
				return ""
			},
			replace: func(ctx context.Context, adopted *appsv1.Deployment, d *appsv1ac.DeploymentApplyConfiguration) (*appsv1.Deployment, error) {
				replacement := &appsv1.Deployment{}
				if err := replacementOf(adopted, d, replacement); err != nil {
					return nil, err
				}
				return c.kubeClient.AppsV1().Deployments(adopted.Namespace).Update(ctx, replacement, metav1.UpdateOptions{FieldManager: fieldManager})
			},
		},
		services: child[*corev1.Service, corev1ac.ServiceApplyConfiguration]{
			kind:     "Service",
			specHash: func(s *corev1ac.ServiceApplyConfiguration) string { return s.Annotations[resources.SpecHashAnnotation] },
			cached:   c.serviceLister.Get,
			live: func(ctx context.Context, namespace, name string) (*corev1.Service, error) {
				return c.kubeClient.CoreV1().Services(namespace).Get(ctx, name, metav1.GetOptions{})
			},
			apply: func(ctx context.Context, namespace string, s *corev1ac.ServiceApplyConfiguration) (*corev1.Service, error) {
				return c.kubeClient.CoreV1().Services(namespace).Apply(ctx, s, applyOptions)
			},
			withMeta: func(s *corev1ac.ServiceApplyConfiguration, edit func(*metav1ac.ObjectMetaApplyConfiguration)) *corev1ac.ServiceApplyConfiguration {
				cp, meta := *s, *s.ObjectMetaApplyConfiguration
				edit(&meta)
				cp.ObjectMetaApplyConfiguration = &meta
				return &cp
			},
			unadoptable: func(orphan *corev1.Service, s *corev1ac.ServiceApplyConfiguration) string {
				if want := ptr.Deref(s.Spec.ClusterIP, ""); orphan.Spec.ClusterIP != want {
					return fmt.Sprintf("its clusterIP %q is not %q and cannot be changed", orphan.Spec.ClusterIP, want)
				}
				return ""
			},
			replace: func(ctx context.Context, adopted *corev1.Service, s *corev1ac.ServiceApplyConfiguration) (*corev1.Service, error) {
				replacement := &corev1.Service{}
				if err := replacementOf(adopted, s, replacement); err != nil {
					return nil, err
				}
				return c.kubeClient.CoreV1().Services(adopted.Namespace).Update(ctx, replacement, metav1.UpdateOptions{FieldManager: fieldManager})
			},
		},
		pdbs: child[*policyv1.PodDisruptionBudget, policyv1ac.PodDisruptionBudgetApplyConfiguration]{
			kind: "PodDisruptionBudget",
			specHash: func(p *policyv1ac.PodDisruptionBudgetApplyConfiguration) string {
				return p.Annotations[resources.SpecHashAnnotation]
			},
			cached: c.pdbLister.Get,
			live: func(ctx context.Context, namespace, name string) (*policyv1.PodDisruptionBudget, error) {
				return c.kubeClient.PolicyV1().PodDisruptionBudgets(namespace).Get(ctx, name, metav1.GetOptions{})
			},
			apply: func(ctx context.Context, namespace string, p *policyv1ac.PodDisruptionBudgetApplyConfiguration) (*policyv1.PodDisruptionBudget, error) {
				return c.kubeClient.PolicyV1().PodDisruptionBudgets(namespace).Apply(ctx, p, applyOptions)
			},
			withMeta: func(p *policyv1ac.PodDisruptionBudgetApplyConfiguration, edit func(*metav1ac.ObjectMetaApplyConfiguration)) *policyv1ac.PodDisruptionBudgetApplyConfiguration {
				cp, meta := *p, *p.ObjectMetaApplyConfiguration
				edit(&meta)
				cp.ObjectMetaApplyConfiguration = &meta
				return &cp
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
			replace: func(ctx context.Context, adopted *policyv1.PodDisruptionBudget, p *policyv1ac.PodDisruptionBudgetApplyConfiguration) (*policyv1.PodDisruptionBudget, error) {
				replacement := &policyv1.PodDisruptionBudget{}
				if err := replacementOf(adopted, p, replacement); err != nil {
					return nil, err
				}
				return c.kubeClient.PolicyV1().PodDisruptionBudgets(adopted.Namespace).Update(ctx, replacement, metav1.UpdateOptions{FieldManager: fieldManager})
			},
		},
	}
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

// syncChild makes one child match desired and returns it as it now is,
// whether that is the apiserver's answer to this sync (a write, or a read
// of a child the cache did not hold) rather than the cached object, the
// problem the status should show, if any, and an error that says how to
// retry (errors.go).
//
//   - Missing from the cache: a create-only apply (see
//     createOnlyResourceVersion). The child informers only see objects with
//     the operator's labels, so a miss does not prove the name is free; the
//     create-only apply creates the child, or is refused with a Conflict
//     and changes nothing if any object holds the name. Only then is the
//     object read from the apiserver and classified like a cached one. A
//     Memcached already blocked by a foreign object reads first, so its
//     once-a-minute recheck sends no write while the object is there, and
//     creates the child once it is gone.
//   - Controlled by this Memcached: applied only if its spec-hash
//     annotation is not that of desired, or the fields the operator's
//     apply owns in it (ownedFields) are not those an apply of desired
//     owns: someone who changes a field the operator set takes it out of
//     the operator's managedFields entry. So a converged child costs no
//     write, and the cache needs no copy of the values (trimChild).
//   - An orphan with the operator's labels: read from the apiserver (the
//     cache holds only its metadata), adopted after an uncached check
//     that this Memcached is still the one the cache shows, then replaced
//     with exactly what the operator would have created (replacementOf).
//     An orphan that differs in an immutable field (a Deployment's
//     selector, a Service's clusterIP) is left alone and reported as
//     ResourceExists, with a message that says to delete it.
//   - Controlled by a deleted Memcached of the same name: left to the
//     garbage collector, reported as WaitingForPredecessor; its deletion
//     syncs this Memcached again (handleChild).
//   - Anything else: left untouched, reported as ResourceExists, and looked
//     at again after foreignRecheckInterval.
//
// A failed request is classified by childFailure.
func syncChild[T metav1.Object, AC any](ctx context.Context, c *Controller, mc *cachev1beta1.Memcached, desired *AC, ch *child[T, AC]) (T, bool, *problem, error) {
	obj, fresh, p, err := convergeChild(ctx, c, mc, desired, ch)
	if p == nil && err != nil {
		p, err = childFailure(ch.kind, err)
	}
	return obj, fresh, p, err
}

// convergeChild is syncChild without the classification of failures.
func convergeChild[T metav1.Object, AC any](ctx context.Context, c *Controller, mc *cachev1beta1.Memcached, desired *AC, ch *child[T, AC]) (T, bool, *problem, error) {
	var zero T
	logger := klog.LoggerWithValues(klog.FromContext(ctx), "kind", ch.kind)
	name := resources.ChildName(mc)

	current, err := ch.cached(mc.Namespace, name)
	fromCache := err == nil
	if err != nil && apierrors.IsNotFound(err) {
		if blockedByForeignObject(mc) {
			current, err = ch.live(ctx, mc.Namespace, name)
		}
		if err != nil && apierrors.IsNotFound(err) {
			created, createErr := applyChild(ctx, ch, mc.Namespace, ch.withMeta(desired, createOnly))
			if createErr == nil {
				logger.V(2).Info("Created child")
				c.rememberApplied(mc, ch.kind, ch.specHash(desired), created)
				return created, true, nil, nil
			}
			if !apierrors.IsConflict(createErr) {
				return zero, false, nil, createErr
			}
			logger.V(2).Info("Child exists but is not in the cache; reading it")
			current, err = ch.live(ctx, mc.Namespace, name)
			if err != nil && apierrors.IsNotFound(err) {
				return zero, false, nil, fmt.Errorf("%s %s/%s was in the way of its create and is gone again: %w", ch.kind, mc.Namespace, name, err)
			}
		}
	}
	if err != nil {
		return zero, false, nil, fmt.Errorf("getting %s %s/%s: %w", ch.kind, mc.Namespace, name, err)
	}

	switch classify(mc, current) {
	case owned:
		if _, adopting := current.GetAnnotations()[resources.AdoptingAnnotation]; adopting {
			// An adoption whose replacement failed: apply again, so that
			// the operator's apply owns every field of today's spec, and
			// replace from the apply's answer, which has the managedFields
			// the cache lacks.
			applied, err := applyChild(ctx, ch, mc.Namespace, ch.withMeta(desired, markAdopting))
			if err != nil {
				return zero, false, nil, err
			}
			return replaceAdopted(ctx, ch, applied, desired)
		}
		specHash := ch.specHash(desired)
		specChanged := current.GetAnnotations()[resources.SpecHashAnnotation] != specHash
		var changed string
		if !specChanged {
			applied, err := c.appliedFields(mc, ch.kind, specHash, desired)
			if err != nil {
				return zero, false, nil, err
			}
			if ownedFields(current) == applied {
				return current, !fromCache, nil, nil
			}
			// Before a repair, read the child to name what changed; the
			// cache holds only the digest of what the operator owns.
			changed = "fields another field manager took over"
			if live, err := ch.live(ctx, mc.Namespace, name); err == nil {
				if path := drift.Diff(desired, live); path != "" {
					changed = path
				}
			}
		}
		updated, err := applyChild(ctx, ch, mc.Namespace, desired)
		if err != nil {
			return zero, false, nil, err
		}
		c.rememberApplied(mc, ch.kind, specHash, updated)
		if specChanged {
			logger.V(2).Info("Applied spec change to child")
		} else {
			logger.V(2).Info("Repaired drift in child", "field", changed)
			c.recorder.Eventf(mc, corev1.EventTypeNormal, "DriftRepaired", "Restored %s of %s %s", changed, ch.kind, name)
		}
		return updated, true, nil, nil

	case orphan:
		if current.GetDeletionTimestamp() != nil {
			// Adopting would take over an object on its way out, and the
			// replacement would drop what holds it. Its deletion is an
			// event, since it carries the operator's labels.
			message := fmt.Sprintf("%s %s/%s is an orphan being deleted; waiting for it to go", ch.kind, mc.Namespace, name) + heldBy(current)
			return zero, false, &problem{reason: cachev1beta1.ReasonWaitingForPredecessor, message: message},
				requeueAfter(foreignRecheckInterval, errors.New(message))
		}
		if fromCache {
			// The cache holds only an orphan's metadata (trimChild);
			// whether and how to adopt it depends on its spec.
			if current, err = ch.live(ctx, mc.Namespace, name); err != nil {
				return zero, false, nil, fmt.Errorf("getting orphaned %s %s/%s: %w", ch.kind, mc.Namespace, name, err)
			}
			if classify(mc, current) != orphan {
				return zero, false, nil, fmt.Errorf("%w: %s %s/%s is no longer an orphan", errOwnerChanged, ch.kind, mc.Namespace, name)
			}
		}
		if why := ch.unadoptable(current, desired); why != "" {
			// It carries the operator's labels, so its deletion syncs
			// this Memcached; the recheck only covers a missed event.
			message := fmt.Sprintf("%s %s/%s is an orphan this Memcached cannot adopt: %s; delete it to let the operator create its own", ch.kind, mc.Namespace, name, why)
			return zero, false, &problem{reason: cachev1beta1.ReasonResourceExists, message: message},
				requeueAfter(foreignRecheckInterval, errors.New(message))
		}
		if err := c.recheckOwner(ctx, mc); err != nil {
			return zero, false, nil, err
		}
		// The apply takes the orphan over and makes every field the
		// operator sets its own; the replacement then removes the rest.
		applied, err := applyChild(ctx, ch, mc.Namespace, ch.withMeta(desired, markAdopting))
		if err != nil {
			return zero, false, nil, err
		}
		logger.V(2).Info("Adopted orphaned child")
		c.recorder.Eventf(mc, corev1.EventTypeNormal, "Adopted", "Adopted orphaned %s %s", ch.kind, name)
		return replaceAdopted(ctx, ch, applied, desired)

	case replaced:
		// The child belongs to a deleted Memcached of the same name; the
		// garbage collector removes it, and its deletion requeues us. The
		// slow recheck only covers a missed event.
		message := fmt.Sprintf("%s %s/%s still belongs to a deleted Memcached of the same name (UID %s) and waits for the garbage collector",
			ch.kind, mc.Namespace, name, metav1.GetControllerOf(current).UID) + heldBy(current)
		return zero, false, &problem{reason: cachev1beta1.ReasonWaitingForPredecessor, message: message},
			requeueAfter(foreignRecheckInterval, errors.New(message))

	default:
		// The informers filter on the operator's labels, so a foreign
		// object's removal raises no event: look again, slowly.
		message := fmt.Sprintf("%s %s/%s already exists and is not managed by this Memcached", ch.kind, mc.Namespace, name)
		return zero, false, &problem{reason: cachev1beta1.ReasonResourceExists, message: message},
			requeueAfter(foreignRecheckInterval, errors.New(message))
	}
}

// appliedFields returns the digest of the fields an apply of desired, a
// kind's desired child with spec hash specHash, makes the operator own.
// The answer to the operator's last apply of that configuration says it
// (rememberApplied); without one, after a start or when another replica
// made that apply, it is computed from the type's schema, which costs
// several times a whole converged sync, and remembered. A changed spec
// hash needs neither: the child is applied anyway.
func (c *Controller) appliedFields(mc *cachev1beta1.Memcached, kind, specHash string, desired any) (string, error) {
	if digest, ok := c.memo.appliedFields(mc.UID, kind, specHash); ok {
		return digest, nil
	}
	digest, err := c.fieldSets.Applied(desired)
	if err != nil {
		return "", fmt.Errorf("listing the fields of the desired %s: %w", kind, err)
	}
	c.memo.setAppliedFields(mc.UID, kind, specHash, digest)
	return digest, nil
}

// rememberApplied records what the operator owns in an apply's answer as
// the digest of the configuration with spec hash specHash. Only an apply
// of exactly the desired configuration may be recorded: one that marks an
// adoption owns an annotation more.
func (c *Controller) rememberApplied(mc *cachev1beta1.Memcached, kind, specHash string, applied metav1.Object) {
	if digest := ownedFields(applied); digest != "" {
		c.memo.setAppliedFields(mc.UID, kind, specHash, digest)
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
// replacementOf), which also removes resources.AdoptingAnnotation.
func replaceAdopted[T metav1.Object, AC any](ctx context.Context, ch *child[T, AC], adopted T, desired *AC) (T, bool, *problem, error) {
	replaced, err := ch.replace(ctx, adopted, desired)
	if err != nil {
		var zero T
		return zero, false, nil, fmt.Errorf("replacing adopted %s: %w", ch.kind, err)
	}
	klog.FromContext(ctx).V(2).Info("Replaced adopted child with the operator's", "kind", ch.kind)
	return replaced, true, nil, nil
}

// replacementOf fills replacement (a typed object) with desired, to be
// written over adopted with an update. Server-side apply alone would only
// set the operator's fields on an adopted orphan, and keep whatever else it
// carries, such as an extra container, another serviceAccountName or
// volumes; the update makes the child exactly what the operator would have
// created, except for the finalizers and non-controller owners others
// hold it by. It keeps adopted's resourceVersion, so it fails with a Conflict
// if the child changed since the apply, and only the operator's entries of
// managedFields, so the fields it applied stay solely its own and dropping
// one from the spec later removes it from the child.
func replacementOf[T metav1.Object, AC any](adopted T, desired *AC, replacement T) error {
	body, err := json.Marshal(desired)
	if err != nil {
		return fmt.Errorf("encoding the desired object: %w", err)
	}
	if err := json.Unmarshal(body, replacement); err != nil {
		return fmt.Errorf("decoding the desired object: %w", err)
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
	return nil
}

// applyChild sends the apply.
func applyChild[T metav1.Object, AC any](ctx context.Context, ch *child[T, AC], namespace string, desired *AC) (T, error) {
	applied, err := ch.apply(ctx, namespace, desired)
	if err != nil {
		return applied, fmt.Errorf("applying %s: %w", ch.kind, err)
	}
	return applied, nil
}
