//go:build integration

package main

// Fault tests that need the operator in this process: each injects its
// fault into the operator's own client transport, at an instant only the
// transport sees (between a sync's decision and its write reaching the
// apiserver, or inside a sync as a panic), and reads what the in-process
// operator's log and workqueue metrics recorded of it. From outside the
// process neither the instant nor the panic can be chosen. The fault tests
// that can be shown from outside, through the apiserver, the operator's
// /metrics and log, and signals, are in test/integration/faults.

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
	clientset "github.com/kubelite/memcached-operator/pkg/generated/clientset/versioned"
	"github.com/kubelite/memcached-operator/pkg/resources"
)

// unthrottled returns admin clients without a client-side rate limit, for
// tests that drive the cluster harder than the default 5 QPS allows.
func unthrottled(t *testing.T) (kubernetes.Interface, clientset.Interface) {
	t.Helper()
	cfg := rest.CopyConfig(suite.cluster.Config)
	cfg.QPS, cfg.Burst = -1, 0
	return kubernetes.NewForConfigOrDie(cfg), clientset.NewForConfigOrDie(cfg)
}

// workqueueRetries reads workqueue_retries_total of the "memcached" queue
// from the process-wide registry that in-process operators report to. It
// only grows, so tests compare two readings.
func workqueueRetries(t *testing.T) float64 {
	t.Helper()
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "workqueue_retries_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "name" && l.GetValue() == "memcached" {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// errorLogs returns the error-level entries an in-process operator logged.
func errorLogs(op *operator) []ktesting.LogEntry {
	var out []ktesting.LogEntry
	for _, e := range op.logs.GetBuffer().Data() {
		if e.Type == ktesting.LogError {
			out = append(out, e)
		}
	}
	return out
}

func patchSpec(t *testing.T, mc clientset.Interface, ns, name, patch string) {
	t.Helper()
	if _, err := mc.CacheV1beta1().Memcacheds(ns).Patch(context.Background(), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatalf("patching Memcached %s/%s: %v", ns, name, err)
	}
}

// deploymentMatches reports whether the Deployment runs replicas of
// memcached with -m memoryMiB, and describes it otherwise.
func deploymentMatches(ctx context.Context, ns, name string, replicas, memoryMiB int32) (bool, string) {
	dep, err := fetchDeployment(ctx, ns, name)
	if err != nil {
		return false, err.Error()
	}
	args := dep.Spec.Template.Spec.Containers[0].Args
	i := slices.Index(args, "-m")
	ok := *dep.Spec.Replicas == replicas && i >= 0 && i+1 < len(args) && args[i+1] == strconv.Itoa(int(memoryMiB))
	return ok, fmt.Sprintf("replicas %d, args %v", *dep.Spec.Replicas, args)
}

// bumpBeforeStatus runs bump once, when armed, just before the operator's
// first status write for a Memcached reaches the apiserver: after the
// operator computed the write from its cache, so the write is based on a
// resourceVersion that is no longer current.
type bumpBeforeStatus struct {
	next  http.RoundTripper
	path  string
	bump  func()
	armed atomic.Bool
}

func (b *bumpBeforeStatus) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodPut && req.URL.Path == b.path && b.armed.CompareAndSwap(true, false) {
		b.bump()
	}
	return b.next.RoundTrip(req)
}

// TestFaultConflictStorm: while a goroutine keeps bumping an annotation on
// a Memcached and on its Deployment, so that status writes from the cache
// keep hitting Conflicts, three spec changes are made. Whether a write
// lands between a bump and its event is timing; so that every run tests
// a Conflict, one more bump lands between the operator's first status
// write in the storm and the apiserver. Expected: the last spec wins,
// conflicts are retried and no conflict is logged at error level.
func TestFaultConflictStorm(t *testing.T) {
	ns := newNamespace(t)
	kube, mcClient := unthrottled(t)
	bumper := &bumpBeforeStatus{
		path: "/apis/" + cachev1beta1.GroupName + "/v1beta1/namespaces/" + ns + "/memcacheds/cache/status",
		bump: func() {
			patch := []byte(`{"metadata":{"annotations":{"storm":"before-status"}}}`)
			if _, err := mcClient.CacheV1beta1().Memcacheds(ns).Patch(context.Background(), "cache", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
				t.Errorf("bumping the Memcached before a status write: %v", err)
			}
		},
	}
	cfg := rest.CopyConfig(suite.operatorConfig)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { bumper.next = rt; return bumper })
	op := startOperatorWith(t, cfg)
	createMemcached(t, ns, "cache", nil)
	waitObserved(t, ns, "cache", 1)
	retriesBefore := workqueueRetries(t)
	mark := op.requests.Len()
	bumper.armed.Store(true)

	ctx, stopStorm := context.WithCancel(context.Background())
	var bumps atomic.Int64
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ctx.Err() == nil; i++ {
			patch := []byte(fmt.Sprintf(`{"metadata":{"annotations":{"storm":"%d"}}}`, i))
			if _, err := mcClient.CacheV1beta1().Memcacheds(ns).Patch(ctx, "cache", types.MergePatchType, patch, metav1.PatchOptions{}); err == nil {
				bumps.Add(1)
			}
			if _, err := kube.AppsV1().Deployments(ns).Patch(ctx, "cache", types.MergePatchType, patch, metav1.PatchOptions{}); err == nil {
				bumps.Add(1)
			}
			// The storm's pace, a bump pair every 10ms: part of the
			// fault, not a wait for anything.
			time.Sleep(10 * time.Millisecond)
		}
	})
	defer func() { stopStorm(); wg.Wait() }()

	stormStart := time.Now()
	for _, change := range []string{`{"spec":{"replicas":2}}`, `{"spec":{"memory":"128Mi"}}`, `{"spec":{"replicas":3}}`} {
		patchSpec(t, mcClient, ns, "cache", change)
		// The changes are spread over the storm, 300ms apart: the
		// scenario's timing, not a wait for a condition.
		time.Sleep(300 * time.Millisecond)
	}
	// The Deployment controller's status writes conflict with the storm
	// too, so status.replicas can only follow once the storm ends; the
	// operator's part, the Deployment's spec and observedGeneration, must
	// converge during it.
	eventually(t, waitLong, "the last spec converges during the storm", func(ctx context.Context) (bool, string) {
		mc, err := mcClient.CacheV1beta1().Memcacheds(ns).Get(ctx, "cache", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		ok, detail := deploymentMatches(ctx, ns, "cache", 3, 128)
		return ok && mc.Status.ObservedGeneration == mc.Generation,
			fmt.Sprintf("generation %d, status %+v; Deployment %s", mc.Generation, mc.Status, detail)
	})
	converged := time.Since(stormStart)
	// Keep storming for a while after convergence: a converged operator
	// must stay converged under it. The storm lasts at least 5 s: this is
	// the fault's window, not a wait for a condition.
	time.Sleep(5*time.Second - min(converged, 5*time.Second))
	stopStorm()
	wg.Wait()
	waitObserved(t, ns, "cache", 3)

	conflicts := op.requests.Since(mark, func(r request) bool { return r.code == http.StatusConflict })
	writes := op.requests.Since(mark, request.write)
	retries := workqueueRetries(t) - retriesBefore
	t.Logf("storm: %d annotation bumps; converged %s after the first spec change; operator sent %d writes, %d answered 409 Conflict; workqueue retries +%v",
		bumps.Load(), converged.Round(100*time.Millisecond), len(writes), len(conflicts), retries)
	if len(conflicts) == 0 {
		t.Errorf("the storm caused no Conflict, so this run tested nothing")
	}
	if retries < 1 {
		t.Errorf("workqueue_retries_total did not grow (+%v) although %d writes conflicted", retries, len(conflicts))
	}
	for _, e := range errorLogs(op) {
		if apierrors.IsConflict(e.Err) {
			t.Errorf("a conflict was logged at error level: %s: %v", e.Message, e.Err)
		}
	}
}

// raceTransport creates an object just before the operator's first write
// to it reaches the apiserver: after the operator decided, from its cache,
// that the object is missing, and before its create lands. A deterministic
// version of losing a race to another writer.
type raceTransport struct {
	next http.RoundTripper
	mu   sync.Mutex
	// create maps the path of a child to the function that creates it;
	// each runs once.
	create map[string]func() error
	errs   map[string]error
}

func (r *raceTransport) arm(path string, create func() error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.create[path] = create
}

func (r *raceTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodPatch {
		r.mu.Lock()
		if create, ok := r.create[req.URL.Path]; ok {
			delete(r.create, req.URL.Path)
			r.errs[req.URL.Path] = create()
		}
		r.mu.Unlock()
	}
	return r.next.RoundTrip(req)
}

func (r *raceTransport) err(path string) (error, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	err, ok := r.errs[path]
	return err, ok
}

// TestFaultStaleCache creates a child with the Memcached's name directly:
// right before the Memcached, right after it, or exactly between the
// operator's cache lookup that finds it missing and its create. In each case the
// operator decides before its informer has seen the child (a foreign child
// is never in the label-filtered cache at all). Expected: no second child,
// and ownership as docs/api.md defines it: whoever created the object first
// keeps it; a foreign one is left untouched and reported as ResourceExists.
func TestFaultStaleCache(t *testing.T) {
	race := &raceTransport{create: map[string]func() error{}, errs: map[string]error{}}
	cfg := rest.CopyConfig(suite.operatorConfig)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { race.next = rt; return race })
	op := startOperatorWith(t, cfg)
	ns := newNamespace(t)
	kube, mcClient := unthrottled(t)
	ctx := context.Background()

	foreignDeployment := func(name string) error {
		labels := map[string]string{"app": "someone-else"}
		_, err := kube.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
			Spec: appsv1.DeploymentSpec{
				Replicas: ptr.To[int32](0),
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx"}}},
				},
			},
		}, metav1.CreateOptions{})
		return err
	}
	foreignService := func(name string) error {
		_, err := kube.CoreV1().Services(ns).Create(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}},
		}, metav1.CreateOptions{})
		return err
	}
	const (
		before  = "before"
		after   = "after"
		between = "between the operator's cache lookup and its create"
	)
	tests := []struct {
		name        string
		kind        string
		createChild func(name string) error
		when        string
	}{
		{name: "deployment-before", kind: "Deployment", createChild: foreignDeployment, when: before},
		{name: "deployment-after", kind: "Deployment", createChild: foreignDeployment, when: after},
		{name: "deployment-between", kind: "Deployment", createChild: foreignDeployment, when: between},
		{name: "service-before", kind: "Service", createChild: foreignService, when: before},
		{name: "service-after", kind: "Service", createChild: foreignService, when: after},
		{name: "service-between", kind: "Service", createChild: foreignService, when: between},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var childErr error
			group := "/api/v1"
			if tt.kind == "Deployment" {
				group = "/apis/apps/v1"
			}
			childPath := group + "/namespaces/" + ns + "/" + strings.ToLower(tt.kind) + "s/" + tt.name
			switch tt.when {
			case before:
				childErr = tt.createChild(tt.name)
			case between:
				race.arm(childPath, func() error { return tt.createChild(tt.name) })
			}
			created, err := mcClient.CacheV1beta1().Memcacheds(ns).Create(ctx, &cachev1beta1.Memcached{
				ObjectMeta: metav1.ObjectMeta{Name: tt.name},
				Spec:       cachev1beta1.MemcachedSpec{Replicas: ptr.To[int32](0)},
			}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			switch tt.when {
			case after:
				childErr = tt.createChild(tt.name)
			case between:
				eventually(t, 30*time.Second, "the operator creates the missing child", func(context.Context) (bool, string) {
					var ran bool
					childErr, ran = race.err(childPath)
					return ran, "no write to " + childPath + " yet"
				})
			}
			// Created after the Memcached, the child may lose the race to
			// the operator; then AlreadyExists is the right answer.
			if childErr != nil && (tt.when != after || !apierrors.IsAlreadyExists(childErr)) {
				t.Fatalf("creating the %s directly: %v", tt.kind, childErr)
			}
			foreignWon := childErr == nil

			eventually(t, waitLong, "the Memcached reports the outcome", func(ctx context.Context) (bool, string) {
				mc, err := fetchMemcached(ctx, ns, tt.name)
				if err != nil {
					return false, err.Error()
				}
				degraded := meta.FindStatusCondition(mc.Status.Conditions, cachev1beta1.ConditionDegraded)
				want := metav1.ConditionFalse
				if foreignWon {
					want = metav1.ConditionTrue
				}
				return mc.Status.ObservedGeneration == mc.Generation && degraded != nil && degraded.Status == want &&
					(!foreignWon || degraded.Reason == cachev1beta1.ReasonResourceExists), fmt.Sprintf("foreign child won: %v; status %+v", foreignWon, mc.Status)
			})

			var child metav1.Object
			if tt.kind == "Deployment" {
				child, err = kube.AppsV1().Deployments(ns).Get(ctx, tt.name, metav1.GetOptions{})
			} else {
				child, err = kube.CoreV1().Services(ns).Get(ctx, tt.name, metav1.GetOptions{})
			}
			if err != nil {
				t.Fatal(err)
			}
			ref := metav1.GetControllerOf(child)
			switch {
			case foreignWon && (ref != nil || child.GetLabels()[resources.LabelManagedBy] != ""):
				t.Errorf("the foreign %s was taken over: controller %v, labels %v", tt.kind, ref, child.GetLabels())
			case foreignWon:
				for _, f := range child.GetManagedFields() {
					if f.Manager == fieldManager {
						t.Errorf("the operator wrote fields of the foreign %s: %+v", tt.kind, f)
					}
				}
				switch c := child.(type) {
				case *appsv1.Deployment:
					if c.Generation != 1 {
						t.Errorf("the foreign Deployment's spec changed: generation %d", c.Generation)
					}
				case *corev1.Service:
					if len(c.Spec.Ports) != 1 || c.Spec.Ports[0].Port != 80 || c.Spec.ClusterIP == corev1.ClusterIPNone {
						t.Errorf("the foreign Service's spec changed: %+v", c.Spec)
					}
				}
				// A create-only apply that lost the race is refused with a
				// Conflict and changes nothing; any accepted write would.
				for _, w := range op.requests.Writes() {
					if w.code < 300 && w.path == childPath {
						t.Errorf("the operator wrote to the foreign %s: %s (%d)", tt.kind, w, w.code)
					}
				}
			case ref == nil || ref.UID != created.UID:
				t.Errorf("the operator won the race but does not control the %s: %v", tt.kind, ref)
			}
			refused := op.requests.Since(0, func(r request) bool { return r.write() && r.path == childPath && r.code == http.StatusConflict })
			if tt.when == between && len(refused) == 0 {
				t.Errorf("the operator's create after the race was not refused with a Conflict: %v", op.requests.Since(0, func(r request) bool { return r.path == childPath }))
			}
			t.Logf("foreign %s created %s the Memcached; foreign object won: %v; create-only applies refused: %d", tt.kind, tt.when, foreignWon, len(refused))
		})
	}

	// No child was created twice under another name: one Deployment and one
	// Service per Memcached, whoever owns them.
	deps, err := kube.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	svcs, err := kube.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mcs, err := mcClient.CacheV1beta1().Memcacheds(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(deps.Items) != len(mcs.Items) || len(svcs.Items) != len(mcs.Items) {
		t.Errorf("%d Deployments and %d Services for %d Memcacheds, want one of each per Memcached", len(deps.Items), len(svcs.Items), len(mcs.Items))
	}
}

// panicTransport panics in place of sending a status write for one
// Memcached while armed, so that the panic happens inside syncHandler, on
// the worker's goroutine, as a bug in the sync path would.
type panicTransport struct {
	next   http.RoundTripper
	target string
	armed  atomic.Bool
	mu     sync.Mutex
	panics []time.Time
}

func (p *panicTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if p.armed.Load() && req.Method == http.MethodPut && strings.HasSuffix(req.URL.Path, p.target) {
		p.mu.Lock()
		p.panics = append(p.panics, time.Now())
		p.mu.Unlock()
		panic("injected panic in the status write of " + p.target)
	}
	return p.next.RoundTrip(req)
}

func (p *panicTransport) times() []time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.panics)
}

// TestFaultPanicInSync makes every sync of one Memcached panic for ten
// seconds. Expected: the process stays up and keeps syncing other objects;
// the panicking key is retried with growing delays; once the panics stop
// it converges.
func TestFaultPanicInSync(t *testing.T) {
	const window = 10 * time.Second
	ns := newNamespace(t)
	hook := &panicTransport{target: "/namespaces/" + ns + "/memcacheds/panicky/status"}
	hook.armed.Store(true)
	cfg := rest.CopyConfig(suite.operatorConfig)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { hook.next = rt; return hook })
	op := startOperatorWith(t, cfg)
	retriesBefore := workqueueRetries(t)

	start := time.Now()
	// At zero replicas the children change less, so fewer events requeue
	// the key ahead of its backoff.
	createMemcached(t, ns, "panicky", func(s *cachev1beta1.MemcachedSpec) { s.Replicas = ptr.To[int32](0) })
	createMemcached(t, ns, "calm", nil)
	// The process survives the panics and syncs other objects meanwhile:
	// calm's status is written while every sync of panicky panics. Its
	// Pod need not be Ready for that, which takes minReadySeconds.
	waitObserved(t, ns, "calm", 1)
	// The fault holds for the window at least, so that the backoff grows
	// past a second, and on a slow machine until calm was observed: the
	// bound on the panics below is of the time it held.
	time.Sleep(window - time.Since(start))
	hook.armed.Store(false)
	armed, disarmed := time.Since(start), time.Now()
	panics := hook.times()

	// Backoff doubles from 5ms: a key failing for d is tried about
	// log2(d/5ms)+1 times (12 in 10 s), plus once per resync (every
	// testResync) and once per event on the Memcached or its children,
	// which queue it at once: a handful at zero replicas, 15 allowed. A
	// hot loop would make thousands.
	limit := int(math.Log2(float64(armed/(5*time.Millisecond)))) + 1 + int(armed/testResync) + 15
	if len(panics) < 3 || len(panics) > limit {
		t.Errorf("%d panicking syncs in %s, want a few retries with backoff (3 to %d)", len(panics), armed.Round(100*time.Millisecond), limit)
	}
	var longest time.Duration
	for i := 1; i < len(panics); i++ {
		longest = max(longest, panics[i].Sub(panics[i-1]))
	}
	if longest < time.Second {
		t.Errorf("the longest delay between retries was %s; the backoff did not grow", longest)
	}
	if !slices.ContainsFunc(errorLogs(op), func(e ktesting.LogEntry) bool { return strings.Contains(fmt.Sprint(e.Err), "injected panic") }) {
		t.Errorf("the panic was not logged as an error")
	}
	waitConverged(t, ns, "panicky", metav1.ConditionFalse)
	// Read once panicky has converged: by then the worker has requeued the
	// key after each panic, the last one included.
	if retries := workqueueRetries(t) - retriesBefore; retries < float64(len(panics)) {
		t.Errorf("workqueue_retries_total grew by %v for %d panics", retries, len(panics))
	}
	t.Logf("%d panics in %s (delays %s), then converged %s after the panics stopped",
		len(panics), armed.Round(100*time.Millisecond), delays(panics), time.Since(disarmed).Round(100*time.Millisecond))
}

func delays(times []time.Time) string {
	var out []string
	for i := 1; i < len(times); i++ {
		out = append(out, times[i].Sub(times[i-1]).Round(time.Millisecond).String())
	}
	return strings.Join(out, " ")
}

// waitObserved waits until the status describes the current generation
// with the given Deployment replica count. It needs only the operator and
// the Deployment controller, not Pods becoming ready.
func waitObserved(t *testing.T, ns, name string, replicas int32) {
	t.Helper()
	eventually(t, waitLong, "status observes the spec", func(ctx context.Context) (bool, string) {
		mc, err := fetchMemcached(ctx, ns, name)
		if err != nil {
			return false, err.Error()
		}
		return mc.Status.ObservedGeneration == mc.Generation && mc.Status.Replicas == replicas, fmt.Sprintf("generation %d, status %+v", mc.Generation, mc.Status)
	})
}
