package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	appsinformers "k8s.io/client-go/informers/apps/v1"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	kubescheme "k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	cachev1alpha1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1alpha1"
	clientset "github.com/kubelite/memcached-operator/pkg/generated/clientset/versioned"
	informers "github.com/kubelite/memcached-operator/pkg/generated/informers/externalversions/cache/v1alpha1"
	listers "github.com/kubelite/memcached-operator/pkg/generated/listers/cache/v1alpha1"
	"github.com/kubelite/memcached-operator/pkg/metrics"
	"github.com/kubelite/memcached-operator/pkg/resources"
)

// controllerAgentName is the component name on Events and the queue name
// behind the workqueue metrics.
const controllerAgentName = "memcached-operator"

// Controller reconciles Memcached objects into a Deployment and a headless
// Service each.
type Controller struct {
	kubeClient      kubernetes.Interface
	memcachedClient clientset.Interface

	memcachedLister  listers.MemcachedLister
	deploymentLister appslisters.DeploymentLister
	serviceLister    corelisters.ServiceLister
	cachesSynced     []cache.InformerSynced

	// workqueue holds the keys of Memcacheds to sync. A key is never handed
	// to two workers at once, so syncHandler never runs concurrently for the
	// same Memcached.
	workqueue workqueue.TypedRateLimitingInterface[cache.ObjectName]

	eventBroadcaster record.EventBroadcaster
	recorder         record.EventRecorder

	// clock stamps condition transitions; tests replace it with a fake.
	clock clock.PassiveClock

	metrics *metrics.Metrics
}

// NewController wires a Controller to its informers. It starts nothing: the
// caller starts the informer factories, then calls Run.
func NewController(
	ctx context.Context,
	kubeClient kubernetes.Interface,
	memcachedClient clientset.Interface,
	memcachedInformer informers.MemcachedInformer,
	deploymentInformer appsinformers.DeploymentInformer,
	serviceInformer coreinformers.ServiceInformer,
	m *metrics.Metrics,
) (*Controller, error) {
	logger := klog.FromContext(ctx)

	scheme := runtime.NewScheme()
	if err := kubescheme.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("building event scheme: %w", err)
	}
	if err := cachev1alpha1.Install(scheme); err != nil {
		return nil, fmt.Errorf("building event scheme: %w", err)
	}
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))

	c := &Controller{
		kubeClient:       kubeClient,
		memcachedClient:  memcachedClient,
		memcachedLister:  memcachedInformer.Lister(),
		deploymentLister: deploymentInformer.Lister(),
		serviceLister:    serviceInformer.Lister(),
		cachesSynced: []cache.InformerSynced{
			memcachedInformer.Informer().HasSynced,
			deploymentInformer.Informer().HasSynced,
			serviceInformer.Informer().HasSynced,
		},
		// The default controller rate limiter takes the larger of a per-key
		// exponential backoff and an overall token bucket. Per key, retries
		// wait 5ms, 10ms, 20ms, ... doubling up to 1000s (about 17 minutes,
		// reached after 18 failures); overall, requeues are limited to 10 per
		// second with bursts of 100.
		workqueue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.DefaultTypedControllerRateLimiter[cache.ObjectName](),
			workqueue.TypedRateLimitingQueueConfig[cache.ObjectName]{Name: "memcached"},
		),
		eventBroadcaster: broadcaster,
		recorder:         broadcaster.NewRecorder(scheme, corev1.EventSource{Component: controllerAgentName}),
		clock:            clock.RealClock{},
		metrics:          m,
	}

	logger.V(4).Info("Setting up event handlers")
	if _, err := memcachedInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: c.enqueueMemcached,
		UpdateFunc: func(oldObj, newObj any) {
			if sameResourceVersion(oldObj, newObj) {
				return
			}
			c.enqueueMemcached(newObj)
		},
		DeleteFunc: c.enqueueMemcached,
	}); err != nil {
		return nil, fmt.Errorf("adding Memcached event handler: %w", err)
	}
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
	if _, err := deploymentInformer.Informer().AddEventHandler(childHandler); err != nil {
		return nil, fmt.Errorf("adding Deployment event handler: %w", err)
	}
	if _, err := serviceInformer.Informer().AddEventHandler(childHandler); err != nil {
		return nil, fmt.Errorf("adding Service event handler: %w", err)
	}
	return c, nil
}

// Run starts the event broadcaster, waits for the caches to sync and runs
// workers until ctx is cancelled. It returns once the workers have stopped.
func (c *Controller) Run(ctx context.Context, workers int) error {
	defer utilruntime.HandleCrashWithContext(ctx)
	defer c.workqueue.ShutDown()
	logger := klog.FromContext(ctx)

	c.eventBroadcaster.StartStructuredLogging(3)
	c.eventBroadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: c.kubeClient.CoreV1().Events("")})
	defer c.eventBroadcaster.Shutdown()

	logger.Info("Starting Memcached controller")
	defer logger.Info("Shutting down Memcached controller")

	if !cache.WaitForNamedCacheSync(controllerAgentName, ctx.Done(), c.cachesSynced...) {
		return errors.New("failed to wait for caches to sync")
	}

	logger.Info("Starting workers", "count", workers)
	done := make(chan struct{})
	for range workers {
		go func() {
			defer func() { done <- struct{}{} }()
			wait.UntilWithContext(ctx, c.runWorker, time.Second)
		}()
	}
	<-ctx.Done()
	c.workqueue.ShutDown()
	for range workers {
		<-done
	}
	return nil
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

	logger := klog.LoggerWithValues(klog.FromContext(ctx), "memcached", key)
	ctx = klog.NewContext(ctx, logger)
	start := c.clock.Now()
	err := c.syncRecovered(ctx, key)
	c.metrics.ObserveReconcile(resultOf(err), c.clock.Since(start))
	c.handleErr(ctx, err, key)
	return true
}

// syncRecovered runs syncHandler and turns a panic into an error, so one bad
// object cannot take the process down and is retried with backoff instead.
func (c *Controller) syncRecovered(ctx context.Context, key cache.ObjectName) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic in sync: %v", r)
		}
	}()
	return c.syncHandler(ctx, key)
}

// handleErr is the one place that decides what happens to a key after a
// sync: success and terminal errors forget its backoff, transient errors
// requeue it through the rate limiter.
func (c *Controller) handleErr(ctx context.Context, err error, key cache.ObjectName) {
	logger := klog.FromContext(ctx)
	if err == nil {
		c.workqueue.Forget(key)
		return
	}
	if errors.Is(err, errNamespaceTerminating) {
		logger.V(2).Info("Not retrying: the namespace is being deleted", "err", err)
		c.workqueue.Forget(key)
		return
	}
	if errors.Is(err, errTerminal) {
		// Retrying cannot fix this; the problem is on the status and in an
		// Event, and a change to the object or its children syncs it again.
		logger.V(2).Info("Not retrying", "err", err)
		c.workqueue.Forget(key)
		return
	}
	if isExpectedRace(err) {
		logger.V(2).Info("Retrying after a conflict", "err", err)
	} else {
		utilruntime.HandleErrorWithContext(ctx, err, "Error syncing Memcached; retrying", "memcached", key)
	}
	c.workqueue.AddRateLimited(key)
}

// resultOf maps a sync error to the result label of the reconcile metrics.
func resultOf(err error) string {
	switch {
	case err == nil:
		return metrics.ResultSuccess
	case errors.Is(err, errTerminal):
		return metrics.ResultTerminal
	default:
		return metrics.ResultError
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

// handleChild queues the Memcached a Deployment or Service belongs to. A
// child with a Memcached controller reference maps to that Memcached only if
// its UID matches, so a child of a deleted Memcached does not wake up a new
// one of the same name. A child without one maps to the Memcached of the
// same name, if any: that Memcached may be waiting for a foreign object of
// its name to go away, or may adopt an orphan.
func (c *Controller) handleChild(obj any) {
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

	mc, err := c.memcachedLister.Memcacheds(object.GetNamespace()).Get(object.GetName())
	if err != nil {
		// No Memcached of that name; nothing to do. The lister only returns
		// NotFound.
		return
	}
	if ref := metav1.GetControllerOf(object); ref != nil && isMemcachedRef(ref) && ref.UID != mc.UID {
		return
	}
	c.workqueue.Add(cache.MetaObjectToName(mc))
}

func isMemcachedRef(ref *metav1.OwnerReference) bool {
	return ref.Kind == "Memcached" && ref.APIVersion == cachev1alpha1.GroupVersion.String()
}

// sameResourceVersion reports a periodic resync, which carries no change.
func sameResourceVersion(oldObj, newObj any) bool {
	o, ok1 := oldObj.(metav1.Object)
	n, ok2 := newObj.(metav1.Object)
	return ok1 && ok2 && o.GetResourceVersion() == n.GetResourceVersion()
}

// fieldManager is the server-side apply field manager of every write.
const fieldManager = resources.ManagedBy
