package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	appsinformers "k8s.io/client-go/informers/apps/v1"
	core "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
)

func TestSyncRecoversPanic(t *testing.T) {
	mc := newMemcached("cache")
	f := newFixture(t)
	f.addMemcached(mc)
	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.BufferLogs(true)))
	ctx := klog.NewContext(context.Background(), logger)
	c := f.newController(ctx)
	f.kubeClient.PrependReactor("patch", "deployments", func(core.Action) (bool, runtime.Object, error) {
		panic("boom")
	})
	key := cache.MetaObjectToName(mc)
	o := c.syncRecovered(ctx, key)
	if !isTransient(o) || o.err == nil || !strings.Contains(o.err.Error(), "boom") {
		t.Fatalf("syncRecovered = %+v, want the panic as a transient error", o)
	}
	// The stack names the frame that panicked, which the error cannot.
	if logs := logger.GetSink().(ktesting.Underlier).GetBuffer().String(); !strings.Contains(logs, "Observed a panic") || !strings.Contains(logs, "TestSyncRecoversPanic") {
		t.Errorf("the panic was not logged with its stack:\n%s", logs)
	}
	c.handleErr(ctx, key, o)
	if c.workqueue.NumRequeues(key) != 1 {
		t.Errorf("panicking key was not requeued with backoff")
	}
}

func TestHandleChild(t *testing.T) {
	mc := newMemcached("cache")
	tests := []struct {
		name    string
		obj     any
		wantKey bool
	}{
		{name: "owned Deployment", obj: &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "cache", Namespace: "default", OwnerReferences: controlledBy(string(mc.UID))}}, wantKey: true},
		// Its deletion is what the successor of the same name waits for.
		{name: "Deployment of a deleted predecessor", obj: &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "cache", Namespace: "default", OwnerReferences: controlledBy("old")}}, wantKey: true},
		{name: "foreign Service of the same name", obj: &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "cache", Namespace: "default"}}, wantKey: true},
		{name: "unrelated Service", obj: &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"}}},
		{name: "tombstone", obj: cache.DeletedFinalStateUnknown{Key: "default/cache", Obj: &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "cache", Namespace: "default", OwnerReferences: controlledBy(string(mc.UID))}}}, wantKey: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			f.addMemcached(mc)
			_, ctx := ktesting.NewTestContext(t)
			c := f.newController(ctx)
			c.handleChild(tt.obj)
			if got := c.workqueue.Len() == 1; got != tt.wantKey {
				t.Errorf("queued = %v, want %v", got, tt.wantKey)
			}
		})
	}
}

func TestChildStatusOnly(t *testing.T) {
	base := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{
		Name: "cache", Namespace: "default", ResourceVersion: "5", Generation: 2,
		Labels: map[string]string{"app": "memcached"}, Annotations: map[string]string{"a": "1"},
		OwnerReferences: controlledBy("uid-1"),
	}}
	tests := []struct {
		name   string
		change func(d *appsv1.Deployment)
		want   bool
	}{
		{name: "status", change: func(d *appsv1.Deployment) { d.Status.ReadyReplicas = 1 }, want: true},
		{name: "spec", change: func(d *appsv1.Deployment) { d.Generation = 3 }},
		{name: "label", change: func(d *appsv1.Deployment) { d.Labels = map[string]string{"app": "other"} }},
		{name: "annotation", change: func(d *appsv1.Deployment) { d.Annotations = nil }},
		{name: "owner", change: func(d *appsv1.Deployment) { d.OwnerReferences = controlledBy("uid-2") }},
		{name: "orphaned", change: func(d *appsv1.Deployment) { d.OwnerReferences = nil }},
		{name: "finalizer", change: func(d *appsv1.Deployment) { d.Finalizers = []string{"example.com/hold"} }},
		{name: "deletion", change: func(d *appsv1.Deployment) { d.DeletionTimestamp = &metav1.Time{Time: time.Now()} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			updated := base.DeepCopy()
			updated.ResourceVersion = "6"
			tt.change(updated)
			if got := childStatusOnly(base, updated); got != tt.want {
				t.Errorf("childStatusOnly = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestChildStatusUpdatesCoalesce checks that the status updates of a
// Deployment within childStatusDelay end in one queued sync, made when the
// delay has passed, while a change of its spec is queued at once.
func TestChildStatusUpdatesCoalesce(t *testing.T) {
	mc := newMemcached("cache")
	f := newFixture(t)
	f.addMemcached(mc)
	_, ctx := ktesting.NewTestContext(t)
	c := f.newController(ctx)

	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "cache", Namespace: "default", ResourceVersion: "1", Generation: 1, OwnerReferences: controlledBy(string(mc.UID))}}
	for i := range 3 {
		updated := d.DeepCopy()
		updated.ResourceVersion = strconv.Itoa(i + 2)
		updated.Status.Replicas = int32(i + 1)
		c.handleChildUpdate(d, updated)
		d = updated
		f.clock.Step(childStatusDelay / 4)
	}
	if n := c.workqueue.Len(); n != 0 {
		t.Fatalf("queue length %d before the delay passed, want 0", n)
	}
	f.clock.Step(childStatusDelay / 4)
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		return c.workqueue.Len() == 1, nil
	}); err != nil {
		t.Fatalf("the Memcached was not queued once the delay had passed: queue length %d", c.workqueue.Len())
	}
	key, _ := c.workqueue.Get()
	c.workqueue.Done(key)

	changed := d.DeepCopy()
	changed.ResourceVersion, changed.Generation = "9", 2
	c.handleChildUpdate(d, changed)
	if n := c.workqueue.Len(); n != 1 {
		t.Errorf("queue length %d right after a spec change, want 1", n)
	}
}

func TestSameResourceVersion(t *testing.T) {
	a := &corev1.Service{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "5"}}
	b := a.DeepCopy()
	if !sameResourceVersion(a, b) {
		t.Errorf("a resync with an unchanged resourceVersion was not recognised")
	}
	b.ResourceVersion = "6"
	if sameResourceVersion(a, b) {
		t.Errorf("a real update was taken for a resync")
	}
}

// slowDeployments hands out an informer whose handlers get each event only
// after a delay, as in a busy process: the informer has long synced when
// the handler has seen its initial adds.
type slowDeployments struct {
	appsinformers.DeploymentInformer
	delay time.Duration
}

func (s slowDeployments) Informer() cache.SharedIndexInformer {
	return slowInformer{SharedIndexInformer: s.DeploymentInformer.Informer(), delay: s.delay}
}

type slowInformer struct {
	cache.SharedIndexInformer
	delay time.Duration
}

func (s slowInformer) AddEventHandler(h cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	return s.SharedIndexInformer.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, isInInitialList bool) {
			time.Sleep(s.delay)
			h.OnAdd(obj, isInInitialList)
		},
		UpdateFunc: h.OnUpdate,
		DeleteFunc: h.OnDelete,
	})
}

// TestRunSyncsEachMemcachedOnceAtStart starts the controller over converged
// objects, as after a restart, with the Deployments' add events delayed.
// The workers must start only once the informers' initial add events have
// reached the handlers; otherwise a Memcached synced before its
// Deployment's add event arrives is synced again. (Waiting for the
// informers' own HasSynced instead fails this test.)
func TestRunSyncsEachMemcachedOnceAtStart(t *testing.T) {
	const n = 20
	f := newFixture(t)
	for i := range n {
		mc := newMemcached(fmt.Sprintf("cache-%d", i))
		mc.UID = k8stypes.UID(fmt.Sprintf("uid-%d", i))
		mc, dep, svc, pdb := converge(t, mc)
		// In the clients only: the informers list them.
		f.objects = append(f.objects, mc)
		f.kubeObjects = append(f.kubeObjects, dep, svc, pdb)
	}
	f.wrapDeployments = func(d appsinformers.DeploymentInformer) appsinformers.DeploymentInformer {
		return slowDeployments{DeploymentInformer: d, delay: 20 * time.Millisecond}
	}

	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	c := f.newController(ctx)
	f.mcInformers.Start(ctx.Done())
	f.kubeInformers.Start(ctx.Done())
	defer f.mcInformers.Shutdown()
	defer f.kubeInformers.Shutdown()
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx, context.Background(), 4, time.Second) }()

	// Once the workers have synced each Memcached once, every handler
	// registration has synced (the workers wait for that), so every
	// initial add event has been handled and has queued whatever it
	// queues; the drain of a graceful stop then finishes every sync
	// queued.
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return f.metrics.Reconciles() >= n, nil
	}); err != nil {
		t.Fatalf("%v of %d Memcacheds synced after 10s", f.metrics.Reconciles(), n)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}

	if got := f.metrics.Reconciles(); got != n {
		t.Errorf("%v syncs for %d converged Memcacheds, want one each", got, n)
	}
	if w := append(writes(f.client.Actions()), writes(f.kubeClient.Actions())...); len(w) > 0 {
		t.Errorf("writes to converged objects: %v", describe(w))
	}
}

// TestResyncSyncsMemcachedsNotChildren checks what --resync-period does: a
// resync syncs every Memcached again, from the cache and without a write,
// while the children's resyncs queue nothing of their own.
func TestResyncSyncsMemcachedsNotChildren(t *testing.T) {
	mc, dep, svc, pdb := converge(t, newMemcached("cache"))
	f := newFixture(t)
	f.objects = append(f.objects, mc)
	f.kubeObjects = append(f.kubeObjects, dep, svc, pdb)
	// One second is the shortest resync client-go allows. The Memcacheds
	// resync later, so a key queued before is a child's resync's.
	f.childResync, f.memcachedResync = time.Second, 3*time.Second
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	c := f.newController(ctx)
	// A handler of the test's own counts the children's resyncs: the
	// signal that the controller's handlers have seen them too.
	var childResyncs atomic.Int32
	for _, informer := range []cache.SharedIndexInformer{
		f.kubeInformers.Apps().V1().Deployments().Informer(),
		f.kubeInformers.Core().V1().Services().Informer(),
		f.kubeInformers.Policy().V1().PodDisruptionBudgets().Informer(),
	} {
		if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{UpdateFunc: func(oldObj, newObj any) {
			if sameResourceVersion(oldObj, newObj) {
				childResyncs.Add(1)
			}
		}}); err != nil {
			t.Fatal(err)
		}
	}
	f.mcInformers.Start(ctx.Done())
	f.kubeInformers.Start(ctx.Done())
	defer func() {
		cancel()
		f.mcInformers.Shutdown()
		f.kubeInformers.Shutdown()
	}()
	if !cache.WaitForCacheSync(ctx.Done(), c.cachesSynced...) {
		t.Fatal("caches did not sync")
	}
	key := cache.MetaObjectToName(mc)
	take := func(what string) {
		t.Helper()
		got, _ := c.workqueue.Get()
		c.workqueue.Done(got)
		if got != key {
			t.Fatalf("%s: queued %v, want %v", what, got, key)
		}
	}
	take("initial add")

	// Each handler of an informer gets its resync in turn, so once the
	// test's handler has seen all three, the controller's have too.
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, f.memcachedResync, true, func(context.Context) (bool, error) {
		return childResyncs.Load() >= 3, nil
	}); err != nil {
		t.Fatalf("the children did not resync: %d resync events", childResyncs.Load())
	}
	if n := c.workqueue.Len(); n != 0 {
		t.Errorf("child resyncs queued %d keys, want none", n)
	}
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 2*f.memcachedResync, true, func(context.Context) (bool, error) {
		return c.workqueue.Len() > 0, nil
	}); err != nil {
		t.Fatalf("the Memcached's resync did not queue it: %v", err)
	}
	take("resync")
	if o := c.syncHandler(ctx, key); o.err != nil {
		t.Fatalf("sync on resync: %v", o.err)
	}
	if w := append(writes(f.client.Actions()), writes(f.kubeClient.Actions())...); len(w) > 0 {
		t.Errorf("a resync of a converged Memcached wrote: %v", describe(w))
	}
	c.workqueue.ShutDown()
}

func TestStatusOnly(t *testing.T) {
	base := newMemcached("cache")
	base.ResourceVersion, base.Generation = "5", 2
	tests := []struct {
		name   string
		mutate func(*cachev1beta1.Memcached)
		want   bool
	}{
		{name: "status", mutate: func(mc *cachev1beta1.Memcached) { mc.ResourceVersion = "6"; mc.Status.ObservedGeneration = 2 }, want: true},
		{name: "resync", mutate: func(*cachev1beta1.Memcached) {}},
		{name: "spec", mutate: func(mc *cachev1beta1.Memcached) { mc.ResourceVersion, mc.Generation = "6", 3 }},
		{name: "label", mutate: func(mc *cachev1beta1.Memcached) { mc.ResourceVersion = "6"; mc.Labels = map[string]string{"a": "b"} }},
		{name: "finalizer", mutate: func(mc *cachev1beta1.Memcached) { mc.ResourceVersion = "6"; mc.Finalizers = []string{"x"} }},
		{name: "deletion", mutate: func(mc *cachev1beta1.Memcached) {
			mc.ResourceVersion = "6"
			mc.DeletionTimestamp = &metav1.Time{Time: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			updated := base.DeepCopy()
			tt.mutate(updated)
			if got := statusOnly(base, updated); got != tt.want {
				t.Errorf("statusOnly = %v, want %v", got, tt.want)
			}
		})
	}
}
