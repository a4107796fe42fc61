package main

import (
	"context"
	"fmt"
	"maps"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/kubernetes"
	kubescheme "k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
	"github.com/kubelite/memcached-operator/pkg/childcache"
	"github.com/kubelite/memcached-operator/pkg/drift"
	clientset "github.com/kubelite/memcached-operator/pkg/generated/clientset/versioned"
	"github.com/kubelite/memcached-operator/pkg/metrics"
	"github.com/kubelite/memcached-operator/pkg/resources"
	"github.com/kubelite/memcached-operator/pkg/rollout"
)

// foreignRecheckInterval is how often a Memcached blocked by a foreign
// child is synced again to see whether the child is gone.
const foreignRecheckInterval = time.Minute

// controllerAgentName is the component name on Events and the queue name
// behind the workqueue metrics.
const controllerAgentName = "memcached-operator"

// Controller reconciles Memcached objects into a Deployment, a headless
// Service and a PodDisruptionBudget each, and a NetworkPolicy for those
// that ask for one.
type Controller struct {
	kubeClient      kubernetes.Interface
	memcachedClient clientset.Interface

	memcachedLister  *childcache.Lister[cachev1beta1.Memcached]
	deploymentLister *childcache.ChildLister[appsv1.Deployment]
	serviceLister    *childcache.ChildLister[corev1.Service]
	pdbLister        *childcache.ChildLister[policyv1.PodDisruptionBudget]
	npLister         *childcache.ChildLister[networkingv1.NetworkPolicy]
	secretLister     *childcache.Lister[corev1.Secret]
	configMapLister  *childcache.Lister[corev1.ConfigMap]
	claimLister      *childcache.Lister[corev1.PersistentVolumeClaim]
	// claimGrace is how long an extstore claim may be Pending before the
	// status calls it stuck (--extstore-claim-grace).
	claimGrace time.Duration
	// memcachedIndexers are the Memcached caches of every scope, indexed
	// by tlsSecretIndex, authSecretIndex and clientCAConfigMapIndex.
	memcachedIndexers []cache.Indexer
	// cachesSynced are the event handler registrations' HasSynced: true
	// once an informer has synced and its initial add events have reached
	// the handler. Starting the workers only then means every object is
	// already queued, so a restart syncs each Memcached once instead of
	// again whenever a child's add arrives after its owner's sync.
	cachesSynced []cache.InformerSynced
	// childrenSynced are those of cachesSynced that are not Memcacheds':
	// their lists never need conversion, so readiness always waits for
	// them (serving.Health).
	childrenSynced []cache.InformerSynced

	// workqueue holds the keys of Memcacheds to sync. A key is never handed
	// to two workers at once, so syncHandler never runs concurrently for the
	// same Memcached.
	workqueue workqueue.TypedRateLimitingInterface[cache.ObjectName]

	eventBroadcaster record.EventBroadcaster
	recorder         record.EventRecorder

	// clock is the controller's source of time for condition transitions,
	// sync durations, the drain timeout, the memo and the workqueue's
	// delays. Tests pass a fake.
	clock clock.WithTicker

	metrics *metrics.Metrics
	memo    *memo
	// fieldSets computes the fields an apply makes the operator own,
	// which the drift check compares (syncOwned).
	fieldSets *drift.FieldSets
	children  children
	// rollouts paces the rollouts the operator causes
	// (--max-concurrent-rollouts).
	rollouts *rollout.Pacer
}

// NewController wires a Controller to its informers. It starts nothing: the
// caller starts the informer factories, then calls Run.
func NewController(
	ctx context.Context,
	kubeClient kubernetes.Interface,
	memcachedClient clientset.Interface,
	scopes []childcache.InformerScope,
	m *metrics.Metrics,
	clk clock.WithTicker,
	maxRetryDelay time.Duration,
	maxConcurrentRollouts int,
) (*Controller, error) {
	logger := klog.FromContext(ctx)

	scheme := runtime.NewScheme()
	if err := kubescheme.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("building event scheme: %w", err)
	}
	if err := cachev1beta1.Install(scheme); err != nil {
		return nil, fmt.Errorf("building event scheme: %w", err)
	}
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))

	listers := childcache.NewListers(scopes)
	c := &Controller{
		kubeClient:       kubeClient,
		memcachedClient:  memcachedClient,
		memcachedLister:  listers.Memcacheds,
		deploymentLister: listers.Deployments,
		serviceLister:    listers.Services,
		pdbLister:        listers.PodDisruptionBudgets,
		npLister:         listers.NetworkPolicies,
		secretLister:     listers.Secrets,
		configMapLister:  listers.ConfigMaps,
		claimLister:      listers.Claims,
		claimGrace:       defaultClaimGrace,
		workqueue: workqueue.NewTypedRateLimitingQueueWithConfig(
			newRateLimiter(maxRetryDelay),
			workqueue.TypedRateLimitingQueueConfig[cache.ObjectName]{Name: "memcached", Clock: clk},
		),
		eventBroadcaster: broadcaster,
		recorder:         broadcaster.NewRecorder(scheme, corev1.EventSource{Component: controllerAgentName}),
		clock:            clk,
		metrics:          m,
		memo:             newMemo(clk),
		fieldSets:        drift.NewFieldSets(),
	}
	c.children = newChildren(c)
	c.rollouts = rollout.NewPacer(maxConcurrentRollouts, c.workqueue.Add)

	logger.V(4).Info("Setting up event handlers")
	memcachedHandler := cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			c.noteGeneration(obj)
			c.enqueueMemcached(obj)
		},
		// A periodic resync delivers every Memcached again with an unchanged
		// resourceVersion. It is synced all the same: that is what
		// --resync-period is for, a level-triggered recheck that also
		// catches what no event reported. A converged sync writes nothing.
		UpdateFunc: func(oldObj, newObj any) {
			if !sameResourceVersion(oldObj, newObj) {
				c.noteGeneration(newObj)
			}
			// A change of status alone is most often the controller's own
			// write. For a key that is failing, a retry with backoff is
			// already scheduled; syncing it now as well would let a failure
			// whose message differs on every try (a port in a connection
			// error) turn write, event, sync into a loop without backoff.
			if statusOnly(oldObj, newObj) && c.workqueue.NumRequeues(cache.MetaObjectToName(newObj.(*cachev1beta1.Memcached))) > 0 {
				return
			}
			c.enqueueMemcached(newObj)
		},
		DeleteFunc: func(obj any) {
			if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tombstone.Obj
			}
			if mc, ok := obj.(*cachev1beta1.Memcached); ok {
				c.memo.forget(mc.UID)
				c.rollouts.Forget(cache.MetaObjectToName(mc))
			}
			c.enqueueMemcached(obj)
		},
	}
	// A child's resync carries no change, and its Memcached's own resync
	// already syncs it, so only real child updates are handled.
	childHandler := cache.ResourceEventHandlerFuncs{
		AddFunc: c.handleChild,
		UpdateFunc: func(oldObj, newObj any) {
			if sameResourceVersion(oldObj, newObj) {
				return
			}
			c.handleChild(newObj)
		},
		DeleteFunc: c.handleChild,
	}
	// A Deployment's status changes several times in one rollout step, as
	// its controllers scale ReplicaSets and count Pods, and the Memcached's
	// status mirrors it. So a change of status alone syncs the Memcached
	// only after childStatusDelay, and the changes within that window cost
	// one sync and at most one status write. A change the sync acts on (the
	// spec, the metadata, a deletion) syncs at once. PodDisruptionBudgets,
	// whose status the disruption controller rewrites as Pods come and
	// go, are treated the same.
	statusChildHandler := childHandler
	statusChildHandler.UpdateFunc = c.handleChildUpdate
	// The rollout slots follow every Deployment event, before the
	// Memcached's sync, so that they mirror the cache.
	deploymentHandler := cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			c.observeRollout(obj, false)
			statusChildHandler.OnAdd(obj, false)
		},
		UpdateFunc: func(oldObj, newObj any) {
			c.observeRollout(newObj, false)
			statusChildHandler.OnUpdate(oldObj, newObj)
		},
		DeleteFunc: func(obj any) {
			c.observeRollout(obj, true)
			statusChildHandler.OnDelete(obj)
		},
	}
	// An update of a Secret or ConfigMap that takes a CA out of a client
	// CA bundle also warns the Memcacheds that name it: only the old and
	// the new object together show that.
	secretHandler := cache.ResourceEventHandlerFuncs{
		AddFunc: c.handleSecret,
		UpdateFunc: func(oldObj, newObj any) {
			c.warnClientCARemoved(oldObj, newObj)
			if childcache.SecretKeysChanged(oldObj, newObj) {
				c.handleSecret(newObj)
			}
		},
		DeleteFunc: c.handleSecret,
	}
	configMapHandler := cache.ResourceEventHandlerFuncs{
		AddFunc: c.handleConfigMap,
		UpdateFunc: func(oldObj, newObj any) {
			c.warnClientCARemoved(oldObj, newObj)
			if childcache.ConfigMapKeysChanged(oldObj, newObj) {
				c.handleConfigMap(newObj)
			}
		},
		DeleteFunc: c.handleConfigMap,
	}
	// A claim's phase is what the status reads of it.
	claimHandler := cache.ResourceEventHandlerFuncs{
		AddFunc: c.handleClaim,
		UpdateFunc: func(oldObj, newObj any) {
			if claimPhase(oldObj) != claimPhase(newObj) {
				c.handleClaim(newObj)
			}
		},
		DeleteFunc: c.handleClaim,
	}
	for _, s := range scopes {
		if err := s.Memcacheds.Informer().AddIndexers(cache.Indexers{
			tlsSecretIndex:         indexByTLSSecret,
			authSecretIndex:        indexByAuthSecret,
			clientCAConfigMapIndex: indexByClientCAConfigMap,
		}); err != nil {
			return nil, fmt.Errorf("adding the Memcached indexes by Secret and client CA ConfigMap: %w", err)
		}
		c.memcachedIndexers = append(c.memcachedIndexers, s.Memcacheds.Informer().GetIndexer())
		for _, h := range []struct {
			informer cache.SharedIndexInformer
			handler  cache.ResourceEventHandler
			kind     string
		}{
			{s.Memcacheds.Informer(), memcachedHandler, "Memcached"},
			{s.Deployments.Informer(), deploymentHandler, "Deployment"},
			{s.Services.Informer(), childHandler, "Service"},
			{s.PodDisruptionBudgets.Informer(), statusChildHandler, "PodDisruptionBudget"},
			{s.NetworkPolicies.Informer(), childHandler, "NetworkPolicy"},
			{s.Secrets.Informer(), secretHandler, "Secret"},
			{s.ConfigMaps.Informer(), configMapHandler, "ConfigMap"},
			{s.Claims.Informer(), claimHandler, "PersistentVolumeClaim"},
		} {
			registration, err := h.informer.AddEventHandler(h.handler)
			if err != nil {
				return nil, fmt.Errorf("adding %s event handler: %w", h.kind, err)
			}
			c.cachesSynced = append(c.cachesSynced, registration.HasSynced)
			if h.kind != "Memcached" {
				c.childrenSynced = append(c.childrenSynced, registration.HasSynced)
			}
		}
		for _, informer := range []cache.SharedIndexInformer{s.Deployments.Informer(), s.Services.Informer(), s.PodDisruptionBudgets.Informer(), s.NetworkPolicies.Informer()} {
			if err := informer.AddIndexers(cache.Indexers{childcache.OwnerIndex: childcache.IndexByOwner}); err != nil {
				return nil, fmt.Errorf("adding the child index by Memcached: %w", err)
			}
		}
	}
	return c, nil
}

// Run starts the event broadcaster, waits for the caches to sync and runs
// workers until ctx or lost is cancelled.
//
// ctx is a graceful stop: Run stops taking new keys and lets the workers
// drain the queue, finishing in-flight syncs, for up to drainTimeout; after
// that it cancels the syncs still running. lost is the loss of leadership,
// when another replica may already be writing: Run starts no further sync,
// cancels the in-flight ones and their requests at once, and drops the
// queue. It returns once every worker has stopped.
func (c *Controller) Run(ctx, lost context.Context, workers int, drainTimeout time.Duration) error {
	defer utilruntime.HandleCrashWithContext(ctx)
	defer c.workqueue.ShutDown()
	logger := klog.FromContext(ctx)

	c.eventBroadcaster.StartStructuredLogging(3)
	c.eventBroadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: c.kubeClient.CoreV1().Events("")})
	defer c.eventBroadcaster.Shutdown()

	logger.Info("Starting Memcached controller")
	defer logger.Info("Shutting down Memcached controller")

	if !cache.WaitForNamedCacheSync(controllerAgentName, ctx.Done(), c.cachesSynced...) {
		return nil // Stopped before the caches synced: nothing to drain.
	}

	// Workers get a context that outlives ctx, so that a sync running when
	// SIGTERM arrives can finish its writes instead of failing half-way,
	// but not lost.
	workCtx, cancelWork := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelWork()
	stopOnLoss := context.AfterFunc(lost, func() {
		cancelWork()
		c.workqueue.ShutDown()
	})
	defer stopOnLoss()
	logger.Info("Starting workers", "count", workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() { c.runWorker(workCtx) })
	}

	select {
	case <-lost.Done():
		logger.Info("Stopping at once, without draining the queue", "cause", context.Cause(lost))
	case <-ctx.Done():
		logger.Info("Draining the queue", "timeout", drainTimeout)
		drained := make(chan struct{})
		go func() {
			c.workqueue.ShutDownWithDrain()
			close(drained)
		}()
		select {
		case <-drained:
		case <-lost.Done():
			logger.Info("Stopping the drain at once", "cause", context.Cause(lost))
		case <-c.clock.After(drainTimeout):
			logger.Info("Drain timed out; cancelling in-flight syncs")
			cancelWork()
			c.workqueue.ShutDown()
		}
	}
	wg.Wait()
	return nil
}

// defaultMaxRetryDelay is the default of --max-retry-delay, the cap of the
// per-key backoff. client-go's default cap is 1000s, about 17 minutes; some
// failures (RBAC granted again, a network path restored) raise no event
// when they clear, so only a retry notices them, and 5 minutes bounds how
// long an object stays stuck after the fix.
const defaultMaxRetryDelay = 5 * time.Minute

// newRateLimiter is the per-key backoff alone: retries of a key wait 5ms,
// 10ms, 20ms, ... doubling up to maxDelay (for 5 minutes, reached after 16
// failures). It has no overall token bucket, unlike client-go's default
// controller limiter (10 per second, bursts of 100): every retry would take
// a token from it, so after a failure of N keys at once, say a webhook
// down, the last retry would land N/10 seconds after the cause is gone,
// 16.5 minutes for 10,000, whatever the cap. Without it each key is
// retried at most maxDelay after its last failure, whatever N is. What
// bounds the load instead is the number of workers, each sending one
// request at a time, and the apiserver's priority and fairness.
func newRateLimiter(maxDelay time.Duration) workqueue.TypedRateLimiter[cache.ObjectName] {
	return workqueue.NewTypedItemExponentialFailureRateLimiter[cache.ObjectName](5*time.Millisecond, maxDelay)
}

// runWorker processes keys until the queue shuts down.
func (c *Controller) runWorker(ctx context.Context) {
	for c.processNextWorkItem(ctx) {
	}
}

// processNextWorkItem syncs one key and reports whether the worker should go
// on.
func (c *Controller) processNextWorkItem(ctx context.Context) bool {
	key, shutdown := c.workqueue.Get()
	if shutdown {
		return false
	}
	defer c.workqueue.Done(key)
	if ctx.Err() != nil {
		// Cancelled for good (leadership lost, or the drain timed out): a
		// queue shut down without draining still hands out what it holds.
		return false
	}

	logger := klog.LoggerWithValues(klog.FromContext(ctx), "memcached", key)
	ctx = klog.NewContext(ctx, logger)
	start := c.clock.Now()
	o := c.syncRecovered(ctx, key)
	c.metrics.ObserveReconcile(o.result(), c.clock.Since(start))
	c.handleErr(ctx, key, o)
	return true
}

// syncRecovered runs syncHandler and turns a panic into a transient
// outcome, so one bad object cannot take the process down and is retried
// with backoff instead. The panic is logged with its stack first, as
// utilruntime.HandleCrash does, because the error alone would not say
// where it happened.
func (c *Controller) syncRecovered(ctx context.Context, key cache.ObjectName) (o outcome) {
	defer func() {
		if r := recover(); r != nil {
			klog.FromContext(ctx).Error(nil, "Observed a panic in sync", "panic", r, "stacktrace", string(debug.Stack()))
			o = transient(fmt.Errorf("panic in sync: %v", r))
		}
	}()
	return c.syncHandler(ctx, key)
}

// handleErr is the one place that decides what happens to a key after a
// sync, from the sync's outcome alone (outcome.go): done, not retried and
// dropped forget its backoff, a retry after a delay adds it back after
// that delay, and a transient failure requeues it through the rate
// limiter.
func (c *Controller) handleErr(ctx context.Context, key cache.ObjectName, o outcome) {
	logger := klog.FromContext(ctx)
	switch o.retry {
	case noRetry, dropKey:
		if o.err != nil {
			// Shown on the status and in an Event, and a change to the
			// Memcached syncs it again; or the namespace is going away.
			logger.V(2).Info("Not retrying", "err", o.err)
		}
		c.workqueue.Forget(key)
	case retryAfter:
		if o.err != nil {
			logger.V(2).Info("Syncing again later", "after", o.after, "reason", o.err)
		} else {
			logger.V(4).Info("Syncing again later", "after", o.after)
		}
		c.workqueue.Forget(key)
		c.workqueue.AddAfter(key, o.after)
	default:
		if isExpectedRace(o.err) {
			logger.V(2).Info("Retrying after a conflict", "err", o.err)
		} else {
			utilruntime.HandleErrorWithContext(ctx, o.err, "Error syncing Memcached; retrying", "memcached", key)
		}
		c.workqueue.AddRateLimited(key)
	}
}

// noteGeneration starts the spec-to-observed clock for a new generation.
func (c *Controller) noteGeneration(obj any) {
	if mc, ok := obj.(*cachev1beta1.Memcached); ok {
		c.memo.generations.saw(mc)
	}
}

// enqueueMemcached queues the key of a Memcached or of its tombstone.
func (c *Controller) enqueueMemcached(obj any) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	objectRef, err := cache.ObjectToName(obj)
	if err != nil {
		utilruntime.HandleError(err)
		return
	}
	c.workqueue.Add(objectRef)
}

// handleChild queues the Memcached the child belongs to
// (resources.MemcachedName), and any other whose child would take its name,
// whoever controls the child: the Memcached may own it, adopt it as an orphan, or
// wait for it to go away. In particular a child of a deleted Memcached
// wakes up its successor of the same name when the garbage collector
// finally deletes it, so the successor creates its own child at once
// rather than on its next recheck.
func (c *Controller) handleChild(obj any) {
	c.enqueueChildOwner(obj, 0)
}

// handleChildUpdate queues the Memcached of an updated child whose
// status the Memcached's depends on: after childStatusDelay if the update
// changed only the child's status, at once otherwise.
func (c *Controller) handleChildUpdate(oldObj, newObj any) {
	switch {
	case sameResourceVersion(oldObj, newObj):
	case childStatusOnly(oldObj, newObj):
		c.enqueueChildOwner(newObj, childStatusDelay)
	default:
		c.handleChild(newObj)
	}
}

// enqueueChildOwner queues the Memcacheds handleChild names after delay.
// The queue keeps one pending add per key, at the earliest time asked
// for, so the events of a window all end in the same sync.
func (c *Controller) enqueueChildOwner(obj any, delay time.Duration) {
	object, ok := obj.(metav1.Object)
	if !ok {
		tombstone, ok := obj.(cache.DeletedFinalStateUnknown)
		if !ok {
			utilruntime.HandleError(fmt.Errorf("decoding object: unexpected type %T", obj))
			return
		}
		object, ok = tombstone.Obj.(metav1.Object)
		if !ok {
			utilruntime.HandleError(fmt.Errorf("decoding tombstone: unexpected type %T", tombstone.Obj))
			return
		}
	}

	owner := resources.MemcachedName(object)
	c.enqueueByName(object.GetNamespace(), owner, delay)
	// The object may be in the way of another Memcached's child of its
	// name, whose creation its deletion allows: a zone pool's child in
	// the way of the Memcached of that name, or the reverse.
	if name := object.GetName(); name != owner {
		c.enqueueByName(object.GetNamespace(), name, delay)
	}
	for i, r := range object.GetName() {
		if r != '-' || object.GetName()[:i] == owner {
			continue
		}
		if mc, err := c.memcachedLister.Get(object.GetNamespace(), object.GetName()[:i]); err == nil && slices.Contains(mc.Spec.Zones, object.GetName()[i+1:]) {
			c.enqueueByName(mc.Namespace, mc.Name, delay)
		}
	}
}

// enqueueByName queues the named Memcached after delay, if it exists.
func (c *Controller) enqueueByName(namespace, name string, delay time.Duration) {
	mc, err := c.memcachedLister.Get(namespace, name)
	if err != nil {
		// No Memcached of that name; nothing to do. The lister only returns
		// NotFound.
		return
	}
	if delay > 0 {
		c.workqueue.AddAfter(cache.MetaObjectToName(mc), delay)
		return
	}
	c.workqueue.Add(cache.MetaObjectToName(mc))
}

// statusOnly reports an update of a Memcached that changed its status and
// nothing the sync reads besides it.
func statusOnly(oldObj, newObj any) bool {
	o, ok1 := oldObj.(*cachev1beta1.Memcached)
	n, ok2 := newObj.(*cachev1beta1.Memcached)
	return ok1 && ok2 && o.ResourceVersion != n.ResourceVersion &&
		o.Generation == n.Generation && o.DeletionTimestamp.Equal(n.DeletionTimestamp) &&
		maps.Equal(o.Labels, n.Labels) && maps.Equal(o.Annotations, n.Annotations) &&
		slices.Equal(o.Finalizers, n.Finalizers)
}

// childStatusDelay is how long a child's change of status alone waits
// before its Memcached is synced: long enough for the few status updates
// of one rollout step to arrive together, short against the seconds a
// Pod takes to start. It is also how much later a Memcached's status
// reports a change in its Deployment's, besides the key's wait in the
// queue.
const childStatusDelay = time.Second

// childStatusOnly reports an update of a child that changed nothing but
// its status: not its spec (its generation), nor the metadata the sync
// reads, nor the fields the operator's apply owns (someone taking one over
// is drift to repair at once). Only kinds whose generation counts their spec's changes qualify.
func childStatusOnly(oldObj, newObj any) bool {
	o, ok1 := oldObj.(metav1.Object)
	n, ok2 := newObj.(metav1.Object)
	return ok1 && ok2 && o.GetGeneration() == n.GetGeneration() &&
		o.GetDeletionTimestamp().Equal(n.GetDeletionTimestamp()) &&
		maps.Equal(o.GetLabels(), n.GetLabels()) && maps.Equal(o.GetAnnotations(), n.GetAnnotations()) &&
		slices.Equal(o.GetFinalizers(), n.GetFinalizers()) &&
		equality.Semantic.DeepEqual(o.GetOwnerReferences(), n.GetOwnerReferences()) &&
		childcache.OwnedFields(oldObj) == childcache.OwnedFields(newObj)
}

// sameResourceVersion reports an update that carries no change: a periodic
// resync, or an object delivered again by a relist.
func sameResourceVersion(oldObj, newObj any) bool {
	o, ok1 := oldObj.(metav1.Object)
	n, ok2 := newObj.(metav1.Object)
	return ok1 && ok2 && o.GetResourceVersion() == n.GetResourceVersion()
}

// fieldManager is the server-side apply field manager of every write.
const fieldManager = resources.ManagedBy
