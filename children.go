package main

import (
	"context"
	"errors"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	cachev1alpha1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1alpha1"
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
	// createOnly returns a copy of desired whose apply creates the object
	// or fails with a Conflict if it exists; see createOnlyResourceVersion.
	createOnly func(desired *AC) *AC
}

// createOnlyResourceVersion turns an apply into a create that cannot land
// on an existing object. An apply that carries a resourceVersion is
// conditional on it when the object exists, and the apiserver ignores it
// when it creates the object. No object has resourceVersion "1" (etcd's
// first write already has revision 2), so the apply creates the object or,
// if someone created one after our read, fails with a Conflict instead of
// merging our fields into theirs.
const createOnlyResourceVersion = "1"

// children holds the adapters of both child kinds.
type children struct {
	deployments child[*appsv1.Deployment, appsv1ac.DeploymentApplyConfiguration]
	services    child[*corev1.Service, corev1ac.ServiceApplyConfiguration]
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
			createOnly: func(d *appsv1ac.DeploymentApplyConfiguration) *appsv1ac.DeploymentApplyConfiguration {
				cp := *d
				cp.ObjectMetaApplyConfiguration = withCreateOnlyVersion(d.ObjectMetaApplyConfiguration)
				return &cp
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
			createOnly: func(s *corev1ac.ServiceApplyConfiguration) *corev1ac.ServiceApplyConfiguration {
				cp := *s
				cp.ObjectMetaApplyConfiguration = withCreateOnlyVersion(s.ObjectMetaApplyConfiguration)
				return &cp
			},
		},
	}
}

// blockedByForeignObject reports whether the last status said a foreign
// object holds a child's name.
func blockedByForeignObject(mc *cachev1alpha1.Memcached) bool {
	cond := meta.FindStatusCondition(mc.Status.Conditions, cachev1alpha1.ConditionDegraded)
	return cond != nil && cond.Status == metav1.ConditionTrue && cond.Reason == cachev1alpha1.ReasonResourceExists
}

// withCreateOnlyVersion copies the metadata and sets
// createOnlyResourceVersion on the copy. The desired object stays
// untouched: when the create is refused, the same sync may apply it to the
// object that was in the way (an orphan to adopt), where that condition
// would always fail.
func withCreateOnlyVersion(m *metav1ac.ObjectMetaApplyConfiguration) *metav1ac.ObjectMetaApplyConfiguration {
	cp := *m
	cp.ResourceVersion = ptr.To(createOnlyResourceVersion)
	return &cp
}

// syncChild makes one child match desired and returns it as it now is, the
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
//   - Controlled by this Memcached: applied only if drift.Diff finds a value
//     that differs, so a converged child costs no write.
//   - An orphan with the operator's labels: adopted after an uncached check
//     that this Memcached is still the one the cache shows.
//   - Controlled by a deleted Memcached of the same name: left to the
//     garbage collector, reported as WaitingForPredecessor; its deletion
//     syncs this Memcached again (handleChild).
//   - Anything else: left untouched, reported as ResourceExists, and looked
//     at again after foreignRecheckInterval.
//
// A failed request is classified by childFailure.
func syncChild[T metav1.Object, AC any](ctx context.Context, c *Controller, mc *cachev1alpha1.Memcached, desired *AC, ch *child[T, AC]) (T, *problem, error) {
	obj, p, err := convergeChild(ctx, c, mc, desired, ch)
	if p == nil && err != nil {
		p, err = childFailure(ch.kind, err)
	}
	return obj, p, err
}

// convergeChild is syncChild without the classification of failures.
func convergeChild[T metav1.Object, AC any](ctx context.Context, c *Controller, mc *cachev1alpha1.Memcached, desired *AC, ch *child[T, AC]) (T, *problem, error) {
	var zero T
	logger := klog.LoggerWithValues(klog.FromContext(ctx), "kind", ch.kind)
	name := resources.ChildName(mc)

	current, err := ch.cached(mc.Namespace, name)
	if err != nil && apierrors.IsNotFound(err) {
		if blockedByForeignObject(mc) {
			current, err = ch.live(ctx, mc.Namespace, name)
		}
		if err != nil && apierrors.IsNotFound(err) {
			created, createErr := applyChild(ctx, ch, mc.Namespace, ch.createOnly(desired))
			if createErr == nil {
				logger.V(2).Info("Created child")
				return created, nil, nil
			}
			if !apierrors.IsConflict(createErr) {
				return zero, nil, createErr
			}
			logger.V(2).Info("Child exists but is not in the cache; reading it")
			current, err = ch.live(ctx, mc.Namespace, name)
			if err != nil && apierrors.IsNotFound(err) {
				return zero, nil, fmt.Errorf("%s %s/%s was in the way of its create and is gone again: %w", ch.kind, mc.Namespace, name, err)
			}
		}
	}
	if err != nil {
		return zero, nil, fmt.Errorf("getting %s %s/%s: %w", ch.kind, mc.Namespace, name, err)
	}

	switch classify(mc, current) {
	case owned:
		path := drift.Diff(desired, current)
		if path == "" {
			return current, nil, nil
		}
		updated, err := applyChild(ctx, ch, mc.Namespace, desired)
		if err != nil {
			return zero, nil, err
		}
		if current.GetAnnotations()[resources.SpecHashAnnotation] != ch.specHash(desired) {
			logger.V(2).Info("Applied spec change to child")
		} else {
			logger.V(2).Info("Repaired drift in child", "field", path)
			c.recorder.Eventf(mc, corev1.EventTypeNormal, "DriftRepaired", "Restored %s of %s %s", path, ch.kind, name)
		}
		return updated, nil, nil

	case orphan:
		if err := c.recheckOwner(ctx, mc); err != nil {
			return zero, nil, err
		}
		adopted, err := applyChild(ctx, ch, mc.Namespace, desired)
		if err != nil {
			return zero, nil, err
		}
		logger.V(2).Info("Adopted orphaned child")
		c.recorder.Eventf(mc, corev1.EventTypeNormal, "Adopted", "Adopted orphaned %s %s", ch.kind, name)
		return adopted, nil, nil

	case replaced:
		// The child belongs to a deleted Memcached of the same name; the
		// garbage collector removes it, and its deletion requeues us. The
		// slow recheck only covers a missed event.
		message := fmt.Sprintf("%s %s/%s still belongs to a deleted Memcached of the same name (UID %s) and waits for the garbage collector",
			ch.kind, mc.Namespace, name, metav1.GetControllerOf(current).UID)
		if f := current.GetFinalizers(); len(f) > 0 {
			message += fmt.Sprintf("; its finalizers %v hold it", f)
		}
		return zero, &problem{reason: cachev1alpha1.ReasonWaitingForPredecessor, message: message},
			requeueAfter(foreignRecheckInterval, errors.New(message))

	default:
		// The informers filter on the operator's labels, so a foreign
		// object's removal raises no event: look again, slowly.
		message := fmt.Sprintf("%s %s/%s already exists and is not managed by this Memcached", ch.kind, mc.Namespace, name)
		return zero, &problem{reason: cachev1alpha1.ReasonResourceExists, message: message},
			requeueAfter(foreignRecheckInterval, errors.New(message))
	}
}

// applyChild sends the apply.
func applyChild[T metav1.Object, AC any](ctx context.Context, ch *child[T, AC], namespace string, desired *AC) (T, error) {
	applied, err := ch.apply(ctx, namespace, desired)
	if err != nil {
		return applied, fmt.Errorf("applying %s: %w", ch.kind, err)
	}
	return applied, nil
}
