package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
	"github.com/kubelite/memcached-operator/pkg/childcache"
	"github.com/kubelite/memcached-operator/pkg/drift"
	"github.com/kubelite/memcached-operator/pkg/resources"
	"github.com/kubelite/memcached-operator/pkg/rollout"
)

// DeferOperatorRolloutsAnnotation on a Memcached, set to "true", opts it
// out of the rollouts the operator causes: it takes a new Pod template
// only with its next change of the template's inputs in its spec
// (resources.TemplateInputs), and until then runs the template it
// has, including whatever a new template would have fixed.
const DeferOperatorRolloutsAnnotation = "cache.kubelite.io/defer-operator-rollouts"

// paceDeployment decides whether the sync may apply the desired Deployment
// of a pool now. A change the spec asked for, or one that does not touch
// the Pod template, goes through at once. An operator-caused one
// (operatorCaused) waits for a slot (rollout.Pacer), or for the next
// change of its template inputs if the Memcached opted out; either shows on
// the status and in an Event, and meanwhile the rest of the Deployment is
// applied without the template (syncHeldDeployment). paced tells
// syncDeployment that the apply it makes was granted a slot.
func (c *Controller) paceDeployment(ctx context.Context, mc *cachev1beta1.Memcached, p *resources.Pool) (paced bool, o outcome) {
	key := cache.ObjectName{Namespace: mc.Namespace, Name: resources.PoolName(mc, p.Zone)}
	dep, _, err := c.deploymentLister.Get(key.Namespace, key.Name)
	if err != nil || classify(mc, dep) != owned {
		dep = nil
	}
	c.handOverRollout(mc, key, dep, p.Deployment.Annotations[resources.TemplateInputsAnnotation])
	if dep == nil || !operatorCaused(mc, dep, p.Deployment) {
		c.rollouts.Withdraw(key)
		return false, done
	}
	if mc.Annotations[DeferOperatorRolloutsAnnotation] == "true" {
		c.announce(ctx, mc, dep, p.Deployment, cachev1beta1.ReasonOperatorRolloutDeferred, func(change string) string {
			return fmt.Sprintf("The operator renders a new Pod template%s; it is deferred until the next change of the spec that reaches the Pod template (annotation %s)", change, DeferOperatorRolloutsAnnotation)
		})
		return false, waitsForEvent(cachev1beta1.ReasonOperatorRolloutDeferred, fmt.Sprintf(
			"the operator renders a new Pod template (rendering %s, Deployment %s); it is deferred until the next change of the spec that reaches the Pod template, because the Memcached has the annotation %s",
			renderingOfDesired(), renderingOf(dep), DeferOperatorRolloutsAnnotation))
	}
	if ok, holders := c.rollouts.Acquire(key, cache.MetaObjectToName(mc), p.Deployment.Annotations[resources.TemplateInputsAnnotation]); !ok {
		klog.FromContext(ctx).V(4).Info("Operator rollout waits for a slot", "deployment", key, "holders", holders)
		c.announce(ctx, mc, dep, p.Deployment, cachev1beta1.ReasonOperatorRolloutQueued, func(change string) string {
			return fmt.Sprintf("The operator renders a new Pod template%s; it rolls when one of the rollout slots frees, now held by %s", change, rollout.DescribeHolders(mc.Namespace, holders))
		})
		// The message names no holder: it would change, and cost every
		// waiting Memcached a status write, each time a slot passes on.
		return false, outcome{
			reason: cachev1beta1.ReasonOperatorRolloutQueued,
			message: fmt.Sprintf("the operator's new Pod template (rendering %s, Deployment %s) waits for one of the %d rollout slots (--max-concurrent-rollouts)",
				renderingOfDesired(), renderingOf(dep), c.rollouts.Limit()),
			// A slot that frees wakes the Memcached; the recheck only
			// covers a wake that went to a key that no longer needed it.
			retry: retryAfter,
			after: foreignRecheckInterval,
		}
	}
	c.announce(ctx, mc, dep, p.Deployment, "OperatorRollout", func(change string) string {
		return "Rolling out the operator's new Pod template" + change
	})
	return true, done
}

// handOverRollout ends the operator's hold on the rollout of the pool
// Deployment key, dep as the cache shows it (nil if this Memcached does
// not control it), once the rollout is no longer the operator's: inputs,
// the template inputs of the Memcached's spec (resources.TemplateInputs),
// are not those the slot was granted at, so its owner changed the template
// (a scale changes none), or its admin deferred the operator's rollouts.
// Every sync of a pool calls it, whether or not it applies the pool, so
// that a halted rollout is released even by a spec change that holds the
// Deployment.
func (c *Controller) handOverRollout(mc *cachev1beta1.Memcached, key cache.ObjectName, dep *appsv1.Deployment, inputs string) {
	if mc.Annotations[DeferOperatorRolloutsAnnotation] == "true" {
		c.rollouts.Release(key, dep)
		return
	}
	c.rollouts.TakeOver(key, inputs, dep)
}

// haltedRollout reports, as OperatorRolloutHalted, a pool's Deployment
// that holds a rollout slot for the operator's new template and missed
// its progress deadline: by design it keeps the slot, so that a template
// that cannot roll out reaches no other cache, and so it holds back the
// operator's rollouts of every other cache while it stays. The message
// says how to end it; it names nothing of another namespace.
func (c *Controller) haltedRollout(mc *cachev1beta1.Memcached, dep *appsv1.Deployment) outcome {
	if dep == nil || !c.rollouts.Halted(cache.MetaObjectToName(dep), dep) {
		return done
	}
	return waitsForEvent(cachev1beta1.ReasonOperatorRolloutHalted, fmt.Sprintf(
		"the operator's new Pod template (rendering %s) did not roll out on Deployment %s within its progress deadline, and the rollout holds one of the %d rollout slots (--max-concurrent-rollouts), so the operator's rollouts of other caches wait: "+
			"its Pods say why it cannot roll; a change of this Memcached's Pod template in its spec (not a scale) takes the rollout over and frees the slot, and so does the annotation %s=true",
		renderingOfDesired(), dep.Name, c.rollouts.Limit(), DeferOperatorRolloutsAnnotation))
}

// operatorCaused reports whether applying desired over dep, a Deployment
// the Memcached controls that runs Pods, would change its Pod template
// although the spec's inputs to it did not change: dep was applied from
// the same template inputs (resources.TemplateInputsAnnotation), whatever
// else of the spec changed since, and its template is not the one
// rendered now.
// A Deployment applied before the operator recorded those inputs counts as
// applied from them if it was applied from the current generation; one
// applied before the operator recorded its generation does once the status
// has observed it, so that an upgrade from such a release is paced too.
func operatorCaused(mc *cachev1beta1.Memcached, dep *appsv1.Deployment, desired *appsv1ac.DeploymentApplyConfiguration) bool {
	if desired.Annotations[resources.TemplateHashAnnotation] == dep.Annotations[resources.TemplateHashAnnotation] {
		return false
	}
	if v, ok := resources.RenderingOf(dep.Annotations); ok && v > resources.RenderingVersion {
		// Not this operator's to change at all (syncOwned).
		return false
	}
	if ptr.Deref(dep.Spec.Replicas, 1) == 0 && dep.Status.Replicas == 0 {
		// No Pod to restart: a scale from zero starts its Pods on the
		// new template, not on the old one to restart them later.
		return false
	}
	if inputs, recorded := dep.Annotations[resources.TemplateInputsAnnotation]; recorded {
		return inputs == desired.Annotations[resources.TemplateInputsAnnotation]
	}
	applied, recorded := dep.Annotations[resources.GenerationAnnotation]
	if !recorded {
		return mc.Status.ObservedGeneration == mc.Generation
	}
	return applied == strconv.FormatInt(mc.Generation, 10)
}

// announce sends an Event with reason and the message made of the
// template change, unless the status already shows that reason: one per
// wait, not one per sync, and the read of the Deployment that describes
// the change only then.
func (c *Controller) announce(ctx context.Context, mc *cachev1beta1.Memcached, dep *appsv1.Deployment, desired *appsv1ac.DeploymentApplyConfiguration, reason string, message func(change string) string) {
	if cond := meta.FindStatusCondition(mc.Status.Conditions, cachev1beta1.ConditionProgressing); cond != nil && cond.Reason == reason {
		return
	}
	c.recorder.Event(mc, corev1.EventTypeNormal, reason, message(c.templateChange(ctx, dep, desired)))
}

// templateChange describes, for an Event, how the operator's Pod template
// differs from the Deployment's. The cache holds no template, so it reads
// the Deployment once; without it, the message names the renderings only.
func (c *Controller) templateChange(ctx context.Context, dep *appsv1.Deployment, desired *appsv1ac.DeploymentApplyConfiguration) string {
	change := fmt.Sprintf(" (rendering %s, Deployment %s)", renderingOfDesired(), renderingOf(dep))
	live, err := c.kubeClient.AppsV1().Deployments(dep.Namespace).Get(ctx, dep.Name, metav1.GetOptions{})
	if err != nil {
		klog.FromContext(ctx).V(2).Info("Could not read the Deployment to describe the template change", "err", err)
		return change
	}
	if path := drift.Diff(desired.Spec.Template, &live.Spec.Template); path != "" {
		return change + ": spec.template." + path + " changes"
	}
	return change
}

// renderingOf is the rendering a child records, for messages.
func renderingOf(obj metav1.Object) string {
	if v, ok := resources.RenderingOf(obj.GetAnnotations()); ok {
		return strconv.Itoa(v)
	}
	return "unrecorded"
}

func renderingOfDesired() string { return strconv.Itoa(resources.RenderingVersion) }

// startedRollout settles the slot granted to the Deployment's apply: held
// until the generation the apply gave it completes, or given back if the
// apply did not go through (it is asked for again on the retry).
func (c *Controller) startedRollout(mc *cachev1beta1.Memcached, key cache.ObjectName, dep observedChild[*appsv1.Deployment], o outcome) {
	if o.err != nil || !dep.live {
		c.rollouts.Withdraw(key)
		return
	}
	c.rollouts.Started(key, dep.obj.Generation)
	// The Deployment's events since the grant were not counted against
	// the slot; if the rollout has completed already (a template the
	// Deployment controller had nothing to roll for), the cache says so.
	if cached, _, err := c.deploymentLister.Get(key.Namespace, key.Name); err == nil {
		c.rollouts.Observe(key, cache.MetaObjectToName(mc), cached)
	}
}

// observeRollout updates the rollout slots from a Deployment event; a
// Deployment that is gone, or on its way out, frees its Memcached's slot.
func (c *Controller) observeRollout(obj any, gone bool) {
	dep, ok := childcache.DeploymentOf(obj)
	if !ok {
		return
	}
	key := cache.MetaObjectToName(dep)
	owner := cache.ObjectName{Namespace: dep.Namespace, Name: resources.MemcachedName(dep)}
	if gone || dep.DeletionTimestamp != nil {
		dep = nil
	}
	c.rollouts.Observe(key, owner, dep)
}

// syncHeldDeployment applies to dep, the cached Deployment of a pool whose
// new Pod template waits (paceDeployment), everything desired asks for but
// that template: a scale or any other change outside the template, and the
// repair of drift there, go through while the template waits
// (resources.HoldTemplate). The cache tells whether anything outside the
// template may differ: the spec hash a held apply records
// (resources.HeldSpecHash), and the digest of the fields the operator owns
// against that of the last held apply. Only then is the Deployment read,
// for the template it runs, and synced as any owned child is.
//
// A Deployment whose template the operator owns no field of, which only
// someone's forced apply of the whole template makes, is left as it is:
// its changes wait for the slot with the template.
func (c *Controller) syncHeldDeployment(ctx context.Context, mc *cachev1beta1.Memcached, desired *appsv1ac.DeploymentApplyConfiguration, dep *appsv1.Deployment) (observedChild[*appsv1.Deployment], outcome) {
	ch := &c.children.deployments
	current := observedChild[*appsv1.Deployment]{obj: dep}
	heldHash, err := resources.HeldSpecHash(desired, dep.Annotations)
	if err != nil {
		return current, failed(ch.kind, err)
	}
	_, ownedFields, err := c.deploymentLister.Get(dep.Namespace, dep.Name)
	if err != nil {
		return current, failed(ch.kind, err)
	}
	if dep.Annotations[resources.SpecHashAnnotation] == heldHash {
		if applied, ok := c.memo.appliedFields.lookup(mc.UID, ch.memoKey(desired), heldHash); ok && applied == ownedFields {
			return current, done
		}
	}
	live, err := ch.client(dep.Namespace).Get(ctx, dep.Name, metav1.GetOptions{})
	if err != nil {
		return current, failed(ch.kind, wrapGet(ch.kind, dep.Namespace, dep.Name, err))
	}
	if classify(mc, live) != owned {
		// The cache is behind; its event syncs the Memcached again.
		return current, failed(ch.kind, fmt.Errorf("the Deployment %s/%s changed owner since it was cached", dep.Namespace, dep.Name))
	}
	held, err := resources.HoldTemplate(desired, live)
	if errors.Is(err, resources.ErrNoTemplate) {
		klog.FromContext(ctx).V(2).Info("Holding no Deployment change while its template waits", "err", err)
		return liveChild(live), done
	}
	if err != nil {
		return liveChild(live), failed(ch.kind, err)
	}
	return syncOwned(ctx, c, mc, held, ch, liveChild(live), drift.Owned(live.ManagedFields, fieldManager))
}
