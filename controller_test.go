package main

import (
	"context"
	"errors"
	"fmt"
	"k8s.io/apimachinery/pkg/api/resource"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/util/wait"
	kubeinformers "k8s.io/client-go/informers"
	appsinformers "k8s.io/client-go/informers/apps/v1"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	core "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
	"github.com/kubelite/memcached-operator/pkg/childcache"
	"github.com/kubelite/memcached-operator/pkg/generated/clientset/versioned/fake"
	informers "github.com/kubelite/memcached-operator/pkg/generated/informers/externalversions"
	"github.com/kubelite/memcached-operator/pkg/intern"
	"github.com/kubelite/memcached-operator/pkg/metrics"
	"github.com/kubelite/memcached-operator/pkg/resources"
)

var (
	deploymentsResource = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	servicesResource    = schema.GroupVersionResource{Version: "v1", Resource: "services"}
	pdbsResource        = schema.GroupVersionResource{Group: "policy", Version: "v1", Resource: "poddisruptionbudgets"}
	memcachedsResource  = schema.GroupVersionResource{Group: cachev1beta1.GroupName, Version: "v1beta1", Resource: "memcacheds"}
)

// fixture is a controller over fake clientsets, in sample-controller's
// style: objects seeded into the listers are what the controller's caches
// show, objects seeded into the clients are what the apiserver has.
type fixture struct {
	t testing.TB

	client     *fake.Clientset
	kubeClient *k8sfake.Clientset

	memcachedLister []*cachev1beta1.Memcached
	// The child kinds are cached as the child transform makes them.
	deploymentLister []any
	serviceLister    []any
	pdbLister        []any
	secretLister     []*corev1.Secret

	objects     []runtime.Object
	kubeObjects []runtime.Object

	recorder *record.FakeRecorder
	// clock is the controller's clock and its workqueue's.
	clock *clocktesting.FakeClock
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	return &fixture{t: t, recorder: record.NewFakeRecorder(10), clock: clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))}
}

// addMemcached seeds mc into the lister and the client.
func (f *fixture) addMemcached(mc *cachev1beta1.Memcached) {
	f.memcachedLister = append(f.memcachedLister, mc)
	f.objects = append(f.objects, mc)
}

// The child kinds are cached as the informers cache them, trimmed by
// childcache.Child, and served whole by the clientset.

func (f *fixture) addDeployment(d *appsv1.Deployment) {
	f.deploymentLister = append(f.deploymentLister, cachedAs(d))
	f.kubeObjects = append(f.kubeObjects, d)
}

func (f *fixture) addService(s *corev1.Service) {
	f.serviceLister = append(f.serviceLister, cachedAs(s))
	f.kubeObjects = append(f.kubeObjects, s)
}

func (f *fixture) addPDB(p *policyv1.PodDisruptionBudget) {
	f.pdbLister = append(f.pdbLister, cachedAs(p))
	f.kubeObjects = append(f.kubeObjects, p)
}

// childTransform gives a factory's child informers the child transform,
// as newInformers does: the controller's child listers read only what it
// caches.
func childTransform() kubeinformers.SharedInformerOption {
	return kubeinformers.WithTransform(childcache.Child(intern.New(intern.DefaultCapacity), childCacheConfig()))
}

// cachedAs returns what the child transform caches of a copy of obj.
func cachedAs(obj runtime.Object) any {
	cached, _ := childcache.Child(intern.New(intern.DefaultCapacity), childCacheConfig())(obj.DeepCopyObject())
	return cached
}

func (f *fixture) addSecret(s *corev1.Secret) {
	f.secretLister = append(f.secretLister, s)
	f.kubeObjects = append(f.kubeObjects, s)
}

// seed adds a Memcached and whichever of its children are non-nil.
func (f *fixture) seed(mc *cachev1beta1.Memcached, dep *appsv1.Deployment, svc *corev1.Service, pdb *policyv1.PodDisruptionBudget) {
	f.addMemcached(mc)
	if dep != nil {
		f.addDeployment(dep)
	}
	if svc != nil {
		f.addService(svc)
	}
	if pdb != nil {
		f.addPDB(pdb)
	}
}

func (f *fixture) newController(ctx context.Context) *Controller {
	f.t.Helper()
	f.client = fake.NewClientset(f.objects...)
	f.kubeClient = k8sfake.NewClientset(f.kubeObjects...)

	mcInformers := informers.NewSharedInformerFactory(f.client, 0)
	kubeInformers := kubeinformers.NewSharedInformerFactoryWithOptions(f.kubeClient, 0, childTransform())

	c, err := NewController(ctx, f.kubeClient, f.client, []childcache.InformerScope{{
		Memcacheds:           mcInformers.Cache().V1beta1().Memcacheds(),
		Deployments:          kubeInformers.Apps().V1().Deployments(),
		Services:             kubeInformers.Core().V1().Services(),
		PodDisruptionBudgets: kubeInformers.Policy().V1().PodDisruptionBudgets(),
		Secrets:              kubeInformers.Core().V1().Secrets(),
	}}, newTestMetrics(f.t), f.clock, defaultMaxRetryDelay)
	if err != nil {
		f.t.Fatalf("NewController: %v", err)
	}
	c.recorder = f.recorder

	for _, mc := range f.memcachedLister {
		if err := mcInformers.Cache().V1beta1().Memcacheds().Informer().GetIndexer().Add(mc); err != nil {
			f.t.Fatal(err)
		}
	}
	for _, d := range f.deploymentLister {
		if err := kubeInformers.Apps().V1().Deployments().Informer().GetIndexer().Add(d); err != nil {
			f.t.Fatal(err)
		}
	}
	for _, s := range f.serviceLister {
		if err := kubeInformers.Core().V1().Services().Informer().GetIndexer().Add(s); err != nil {
			f.t.Fatal(err)
		}
	}
	for _, p := range f.pdbLister {
		if err := kubeInformers.Policy().V1().PodDisruptionBudgets().Informer().GetIndexer().Add(p); err != nil {
			f.t.Fatal(err)
		}
	}
	for _, s := range f.secretLister {
		if err := kubeInformers.Core().V1().Secrets().Informer().GetIndexer().Add(s); err != nil {
			f.t.Fatal(err)
		}
	}
	return c
}

func newTestMetrics(t testing.TB) *metrics.Metrics {
	t.Helper()
	m, err := metrics.New(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// run syncs key and returns the actions both clients saw and the sync's
// outcome.
func (f *fixture) run(key cache.ObjectName) ([]core.Action, outcome) {
	f.t.Helper()
	_, ctx := ktesting.NewTestContext(f.t)
	c := f.newController(ctx)
	o := c.syncHandler(ctx, key)
	return append(filterInformerActions(f.client.Actions()), filterInformerActions(f.kubeClient.Actions())...), o
}

// filterInformerActions drops the list and watch calls informers make.
func filterInformerActions(actions []core.Action) []core.Action {
	var out []core.Action
	for _, a := range actions {
		if a.GetVerb() == "list" || a.GetVerb() == "watch" {
			continue
		}
		out = append(out, a)
	}
	return out
}

// expectedAction is what the test cares about in an action.
type expectedAction struct {
	verb        string
	resource    schema.GroupVersionResource
	subresource string
}

func (e expectedAction) String() string {
	s := e.verb + " " + e.resource.Resource
	if e.subresource != "" {
		s += "/" + e.subresource
	}
	return s
}

func describe(actions []core.Action) []string {
	var out []string
	for _, a := range actions {
		out = append(out, expectedAction{verb: a.GetVerb(), resource: a.GetResource(), subresource: a.GetSubresource()}.String())
	}
	return out
}

func checkActions(t *testing.T, want []expectedAction, got []core.Action) {
	t.Helper()
	var wantS []string
	for _, w := range want {
		wantS = append(wantS, w.String())
	}
	gotS := describe(got)
	if strings.Join(wantS, ", ") != strings.Join(gotS, ", ") {
		t.Errorf("actions:\n got: %v\nwant: %v", gotS, wantS)
	}
}

// writes returns the actions that change state.
func writes(actions []core.Action) []core.Action {
	var out []core.Action
	for _, a := range actions {
		switch a.GetVerb() {
		case "get", "list", "watch":
		default:
			out = append(out, a)
		}
	}
	return out
}

func newMemcached(name string) *cachev1beta1.Memcached {
	return &cachev1beta1.Memcached{
		TypeMeta: metav1.TypeMeta{APIVersion: cachev1beta1.GroupVersion.String(), Kind: "Memcached"},
		ObjectMeta: metav1.ObjectMeta{
			Name:            name,
			Namespace:       metav1.NamespaceDefault,
			UID:             "uid-" + "1",
			Generation:      1,
			ResourceVersion: "10",
		},
		Spec: cachev1beta1.MemcachedSpec{
			Replicas:       ptr.To[int32](2),
			Image:          cachev1beta1.DefaultImage,
			Memory:         ptr.To(resource.MustParse("64Mi")),
			MaxConnections: 1024,
			Threads:        4,
			Port:           cachev1beta1.DefaultPort,
			DeletionPolicy: cachev1beta1.DeletionPolicyDelete,
		},
	}
}

// converge runs syncs until the controller writes nothing, feeding what the
// fake apiserver holds back into the listers, and returns the converged
// fixture contents. It fails the test if that takes more than a few rounds.
func converge(t testing.TB, mc *cachev1beta1.Memcached) (*cachev1beta1.Memcached, *appsv1.Deployment, *corev1.Service, *policyv1.PodDisruptionBudget) {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	var dep *appsv1.Deployment
	var svc *corev1.Service
	var pdb *policyv1.PodDisruptionBudget
	for range 4 {
		f := newFixture(t)
		f.seed(mc, dep, svc, pdb)
		c := f.newController(ctx)
		if o := c.syncHandler(ctx, cache.MetaObjectToName(mc)); o.err != nil {
			t.Fatalf("sync: %v", o.err)
		}
		if len(writes(f.client.Actions()))+len(writes(f.kubeClient.Actions())) == 0 {
			return mc, dep, svc, pdb
		}
		var err error
		if mc, err = f.client.CacheV1beta1().Memcacheds(mc.Namespace).Get(ctx, mc.Name, metav1.GetOptions{}); err != nil {
			t.Fatal(err)
		}
		if dep, err = f.kubeClient.AppsV1().Deployments(mc.Namespace).Get(ctx, mc.Name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
			dep = nil
		} else if err != nil {
			t.Fatal(err)
		}
		if svc, err = f.kubeClient.CoreV1().Services(mc.Namespace).Get(ctx, mc.Name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
			svc = nil
		} else if err != nil {
			t.Fatal(err)
		}
		if pdb, err = f.kubeClient.PolicyV1().PodDisruptionBudgets(mc.Namespace).Get(ctx, mc.Name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
			pdb = nil
		} else if err != nil {
			t.Fatal(err)
		}
	}
	t.Fatalf("controller did not converge")
	return nil, nil, nil, nil
}

var (
	getDeployment    = expectedAction{"get", deploymentsResource, ""}
	applyDeployment  = expectedAction{"patch", deploymentsResource, ""}
	updateDeployment = expectedAction{"update", deploymentsResource, ""}
	getService       = expectedAction{"get", servicesResource, ""}
	applyService     = expectedAction{"patch", servicesResource, ""}
	getPDB           = expectedAction{"get", pdbsResource, ""}
	applyPDB         = expectedAction{"patch", pdbsResource, ""}
	getMemcached     = expectedAction{"get", memcachedsResource, ""}
	patchMemcached   = expectedAction{"patch", memcachedsResource, ""}
	updateStatus     = expectedAction{"update", memcachedsResource, "status"}
)

func TestSyncCreatesChildren(t *testing.T) {
	mc := newMemcached("cache")
	f := newFixture(t)
	f.addMemcached(mc)
	_, ctx := ktesting.NewTestContext(t)
	c := f.newController(ctx)
	key := cache.MetaObjectToName(mc)
	if o := c.syncHandler(ctx, key); o.err != nil {
		t.Fatalf("sync: %v", o.err)
	}
	// The status waits for the new Deployment to catch up; no Deployment
	// controller runs here, so it is written once the wait is over.
	checkActions(t, []expectedAction{applyDeployment, applyService, applyPDB}, append(filterInformerActions(f.client.Actions()), filterInformerActions(f.kubeClient.Actions())...))
	f.clock.Step(deploymentControllerWait)
	if o := c.syncHandler(ctx, key); o.err != nil {
		t.Fatalf("sync after the wait: %v", o.err)
	}

	dep, err := f.kubeClient.AppsV1().Deployments(mc.Namespace).Get(ctx, mc.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("Deployment was not created: %v", err)
	}
	if got := ptr.Deref(dep.Spec.Replicas, -1); got != 2 {
		t.Errorf("Deployment replicas = %d, want 2", got)
	}
	ref := metav1.GetControllerOf(dep)
	if ref == nil || ref.UID != mc.UID || !ptr.Deref(ref.BlockOwnerDeletion, false) {
		t.Errorf("Deployment controller reference = %+v, want one to UID %s with blockOwnerDeletion", ref, mc.UID)
	}
	if _, err := f.kubeClient.CoreV1().Services(mc.Namespace).Get(ctx, mc.Name, metav1.GetOptions{}); err != nil {
		t.Fatalf("Service was not created: %v", err)
	}

	got, err := f.client.CacheV1beta1().Memcacheds(mc.Namespace).Get(ctx, mc.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status.ObservedGeneration != mc.Generation {
		t.Errorf("observedGeneration = %d, want %d", got.Status.ObservedGeneration, mc.Generation)
	}
	if want := "cache.default.svc:11211"; got.Status.Endpoint != want {
		t.Errorf("endpoint = %q, want %q", got.Status.Endpoint, want)
	}
	for _, cond := range []string{cachev1beta1.ConditionAvailable, cachev1beta1.ConditionProgressing, cachev1beta1.ConditionDegraded} {
		if meta.FindStatusCondition(got.Status.Conditions, cond) == nil {
			t.Errorf("condition %s missing", cond)
		}
	}
}

// TestSyncCreateIsCreateOnly covers a child the cache does not show but the
// apiserver has: a foreign object, invisible to the label-filtered
// informers, or one created after the informer's last event. The create
// carries a resourceVersion no object has, so the apiserver refuses it
// instead of merging into the other object; the sync then reads the object
// and reports it as foreign.
func TestSyncCreateIsCreateOnly(t *testing.T) {
	mc := newMemcached("cache")
	f := newFixture(t)
	f.addMemcached(mc)
	// In the apiserver only, not in the cache.
	f.kubeObjects = append(f.kubeObjects, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "cache", Namespace: mc.Namespace}})
	_, ctx := ktesting.NewTestContext(t)
	c := f.newController(ctx)
	var sent []string
	f.kubeClient.PrependReactor("patch", "deployments", func(action core.Action) (bool, runtime.Object, error) {
		sent = append(sent, string(action.(core.PatchAction).GetPatch()))
		return true, nil, apierrors.NewConflict(schema.GroupResource{Group: "apps", Resource: "deployments"}, "cache", errors.New("the object has been modified"))
	})
	o := c.syncHandler(ctx, cache.MetaObjectToName(mc))
	if !isRequeue(o, foreignRecheckInterval) {
		t.Fatalf("sync error = %v, want a requeue after %s", o, foreignRecheckInterval)
	}
	if len(sent) != 1 || !strings.Contains(sent[0], `"resourceVersion":"`+createOnlyResourceVersion+`"`) {
		t.Errorf("creating apply = %v, want one carrying resourceVersion %q", sent, createOnlyResourceVersion)
	}

	// Blocked already: the recheck reads and sends no write.
	blocked, err := f.client.CacheV1beta1().Memcacheds(mc.Namespace).Get(ctx, mc.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f2 := newFixture(t)
	f2.addMemcached(blocked)
	f2.kubeObjects = append(f2.kubeObjects, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "cache", Namespace: mc.Namespace}})
	svc, _ := f.kubeClient.CoreV1().Services(mc.Namespace).Get(ctx, mc.Name, metav1.GetOptions{})
	f2.addService(svc)
	pdb, _ := f.kubeClient.PolicyV1().PodDisruptionBudgets(mc.Namespace).Get(ctx, mc.Name, metav1.GetOptions{})
	f2.addPDB(pdb)
	actions, o := f2.run(cache.MetaObjectToName(blocked))
	if !isRequeue(o, foreignRecheckInterval) {
		t.Fatalf("recheck error = %v, want a requeue after %s", o, foreignRecheckInterval)
	}
	checkActions(t, []expectedAction{getDeployment}, actions)
}

// TestSyncBlockedMemcachedCreatesOnceForeignObjectIsGone covers the
// recheck of a Memcached blocked by a foreign object: once the object is
// gone, the read finds nothing and the child is created.
func TestSyncBlockedMemcachedCreatesOnceForeignObjectIsGone(t *testing.T) {
	mc := newMemcached("cache")
	mc.Status.Conditions = []metav1.Condition{{
		Type: cachev1beta1.ConditionDegraded, Status: metav1.ConditionTrue, Reason: cachev1beta1.ReasonResourceExists,
	}}
	f := newFixture(t)
	f.addMemcached(mc)
	_, ctx := ktesting.NewTestContext(t)
	c := f.newController(ctx)
	key := cache.MetaObjectToName(mc)
	if o := c.syncHandler(ctx, key); o.err != nil {
		t.Fatalf("sync: %v", o.err)
	}
	checkActions(t, []expectedAction{getDeployment, applyDeployment, getService, applyService, getPDB, applyPDB}, append(filterInformerActions(f.client.Actions()), filterInformerActions(f.kubeClient.Actions())...))
	// The status waits for the new Deployment to catch up (syncStatus).
	f.clock.Step(deploymentControllerWait)
	if o := c.syncHandler(ctx, key); o.err != nil {
		t.Fatalf("sync after the wait: %v", o.err)
	}
	got, err := f.client.CacheV1beta1().Memcacheds(mc.Namespace).Get(context.Background(), mc.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c := meta.FindStatusCondition(got.Status.Conditions, cachev1beta1.ConditionDegraded); c == nil || c.Status != metav1.ConditionFalse {
		t.Errorf("Degraded = %+v, want False once the children exist", c)
	}
}

func TestSyncConvergedSendsNoWrites(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*cachev1beta1.Memcached)
	}{
		{name: "defaults"},
		{name: "exporter and scheduling", mutate: func(mc *cachev1beta1.Memcached) {
			mc.Spec.Monitoring = &cachev1beta1.Monitoring{Exporter: &cachev1beta1.Exporter{Enabled: true, Image: cachev1beta1.DefaultExporterImage}}
			podOf(&mc.Spec).NodeSelector = map[string]string{"disk": "ssd"}
			podOf(&mc.Spec).Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "cache", Effect: corev1.TaintEffectNoSchedule}}
			mc.Spec.Resources = &cachev1beta1.ResourceOverrides{Limits: &cachev1beta1.ResourceAmounts{CPU: "1"}}
		}},
		{name: "paused", mutate: func(mc *cachev1beta1.Memcached) { mc.Spec.Paused = true }},
		{name: "orphan policy", mutate: func(mc *cachev1beta1.Memcached) { mc.Spec.DeletionPolicy = cachev1beta1.DeletionPolicyOrphan }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mc := newMemcached("cache")
			if tt.mutate != nil {
				tt.mutate(mc)
			}
			mc, dep, svc, pdb := converge(t, mc)

			f := newFixture(t)
			f.seed(mc, dep, svc, pdb)
			actions, o := f.run(cache.MetaObjectToName(mc))
			if o.err != nil {
				t.Fatalf("sync: %v", o.err)
			}
			checkActions(t, nil, actions)
			if len(f.recorder.Events) != 0 {
				t.Errorf("converged sync emitted an Event: %s", <-f.recorder.Events)
			}
		})
	}
}

func TestSyncRepairsDrift(t *testing.T) {
	tests := []struct {
		name    string
		drift   func(*appsv1.Deployment, *corev1.Service) (*appsv1.Deployment, *corev1.Service)
		want    []expectedAction
		check   func(t *testing.T, dep *appsv1.Deployment, svc *corev1.Service)
		wantEvt string
	}{
		{
			name: "replicas edited",
			drift: func(d *appsv1.Deployment, s *corev1.Service) (*appsv1.Deployment, *corev1.Service) {
				d.Spec.Replicas = ptr.To[int32](7)
				return d, s
			},
			want: []expectedAction{getDeployment, applyDeployment},
			check: func(t *testing.T, d *appsv1.Deployment, _ *corev1.Service) {
				if got := ptr.Deref(d.Spec.Replicas, -1); got != 2 {
					t.Errorf("replicas = %d, want 2", got)
				}
			},
			wantEvt: "DriftRepaired Restored spec.replicas of Deployment",
		},
		{
			name: "image edited",
			drift: func(d *appsv1.Deployment, s *corev1.Service) (*appsv1.Deployment, *corev1.Service) {
				d.Spec.Template.Spec.Containers[0].Image = "memcached:evil"
				return d, s
			},
			want: []expectedAction{getDeployment, applyDeployment},
			check: func(t *testing.T, d *appsv1.Deployment, _ *corev1.Service) {
				if got := d.Spec.Template.Spec.Containers[0].Image; got != cachev1beta1.DefaultImage {
					t.Errorf("image = %q, want %q", got, cachev1beta1.DefaultImage)
				}
			},
			wantEvt: "DriftRepaired Restored spec.template.spec.containers[0].image of Deployment",
		},
		{
			name: "operator label removed",
			drift: func(d *appsv1.Deployment, s *corev1.Service) (*appsv1.Deployment, *corev1.Service) {
				delete(s.Labels, resources.LabelManagedBy)
				return d, s
			},
			want:    []expectedAction{getService, applyService},
			wantEvt: "DriftRepaired Restored metadata.labels[app.kubernetes.io/managed-by] of Service",
		},
		{
			name: "service deleted",
			drift: func(d *appsv1.Deployment, _ *corev1.Service) (*appsv1.Deployment, *corev1.Service) {
				return d, nil
			},
			want: []expectedAction{applyService},
		},
		{
			name: "restart annotation and foreign label added",
			drift: func(d *appsv1.Deployment, s *corev1.Service) (*appsv1.Deployment, *corev1.Service) {
				if d.Spec.Template.Annotations == nil {
					d.Spec.Template.Annotations = map[string]string{}
				}
				d.Spec.Template.Annotations["kubectl.kubernetes.io/restartedAt"] = "2026-01-01T00:00:00Z"
				d.Labels["team"] = "web"
				return d, s
			},
			want: nil,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mc, dep, svc, pdb := converge(t, newMemcached("cache"))
			dep, svc = editedBy(t, "kubectl-edit", dep, svc, tt.drift)

			f := newFixture(t)
			f.seed(mc, dep, svc, pdb)
			actions, o := f.run(cache.MetaObjectToName(mc))
			if o.err != nil {
				t.Fatalf("sync: %v", o.err)
			}
			checkActions(t, tt.want, actions)
			if tt.check != nil {
				ctx := context.Background()
				d, _ := f.kubeClient.AppsV1().Deployments(mc.Namespace).Get(ctx, mc.Name, metav1.GetOptions{})
				s, _ := f.kubeClient.CoreV1().Services(mc.Namespace).Get(ctx, mc.Name, metav1.GetOptions{})
				tt.check(t, d, s)
			}
			checkEvent(t, f.recorder, tt.wantEvt)
		})
	}
}

// editedBy applies edit to copies of a converged Deployment and Service and
// writes what it returns as field manager manager would with an update,
// the way kubectl edit does: the result's managedFields then say who owns
// each changed field. A nil result stands for a deleted object.
func editedBy(t *testing.T, manager string, dep *appsv1.Deployment, svc *corev1.Service,
	edit func(*appsv1.Deployment, *corev1.Service) (*appsv1.Deployment, *corev1.Service)) (*appsv1.Deployment, *corev1.Service) {
	t.Helper()
	ctx := context.Background()
	client := k8sfake.NewClientset(dep, svc)
	d, s := edit(dep.DeepCopy(), svc.DeepCopy())
	opts := metav1.UpdateOptions{FieldManager: manager}
	var err error
	if d != nil {
		if d, err = client.AppsV1().Deployments(d.Namespace).Update(ctx, d, opts); err != nil {
			t.Fatalf("editing the Deployment: %v", err)
		}
	}
	if s != nil {
		if s, err = client.CoreV1().Services(s.Namespace).Update(ctx, s, opts); err != nil {
			t.Fatalf("editing the Service: %v", err)
		}
	}
	return d, s
}

// checkEvent asserts that the recorder holds exactly one Event with the
// reason want, or none when want is empty.
func checkEvent(t *testing.T, r *record.FakeRecorder, want string) {
	t.Helper()
	var got []string
	for len(r.Events) > 0 {
		got = append(got, <-r.Events)
	}
	switch {
	case want == "" && len(got) > 0:
		t.Errorf("unexpected Events: %v", got)
	case want != "" && (len(got) != 1 || !strings.Contains(got[0], " "+want+" ")):
		t.Errorf("Events = %v, want one with reason %s", got, want)
	}
}

func TestSyncForeignChild(t *testing.T) {
	tests := []struct {
		name  string
		owner []metav1.OwnerReference
	}{
		{name: "no owner and no operator labels"},
		{name: "controlled by another kind", owner: []metav1.OwnerReference{{
			APIVersion: "example.com/v1", Kind: "Other", Name: "cache", UID: "other", Controller: ptr.To(true),
		}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mc := newMemcached("cache")
			f := newFixture(t)
			f.addMemcached(mc)
			foreign := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{
				Name: "cache", Namespace: mc.Namespace, ResourceVersion: "3", OwnerReferences: tt.owner,
			}}
			f.addDeployment(foreign)

			actions, o := f.run(cache.MetaObjectToName(mc))
			if !isRequeue(o, foreignRecheckInterval) {
				t.Fatalf("sync error = %v, want a requeue after %s", o, foreignRecheckInterval)
			}
			for _, a := range writes(actions) {
				if a.GetResource() == deploymentsResource {
					t.Errorf("foreign Deployment was written: %v", describe([]core.Action{a}))
				}
			}
			got, _ := f.client.CacheV1beta1().Memcacheds(mc.Namespace).Get(context.Background(), mc.Name, metav1.GetOptions{})
			cond := meta.FindStatusCondition(got.Status.Conditions, cachev1beta1.ConditionDegraded)
			if cond == nil || cond.Status != metav1.ConditionTrue || cond.Reason != cachev1beta1.ReasonResourceExists {
				t.Errorf("Degraded = %+v, want True/%s", cond, cachev1beta1.ReasonResourceExists)
			}
			checkEvent(t, f.recorder, cachev1beta1.ReasonResourceExists)
		})
	}
}

func TestSyncForeignChildWarnsOnce(t *testing.T) {
	mc, _, _, pdb := converge(t, newMemcached("cache"))
	// Degraded is already ResourceExists: syncing again must not repeat the
	// Event or write the status.
	mc.Status.Conditions = nil
	f := newFixture(t)
	f.addMemcached(mc)
	f.addDeployment(&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "cache", Namespace: mc.Namespace}})
	_, o := f.run(cache.MetaObjectToName(mc))
	if !isRequeue(o, foreignRecheckInterval) {
		t.Fatalf("sync error = %v, want a requeue after %s", o, foreignRecheckInterval)
	}
	mc, _ = f.client.CacheV1beta1().Memcacheds(mc.Namespace).Get(context.Background(), mc.Name, metav1.GetOptions{})

	f2 := newFixture(t)
	f2.addMemcached(mc)
	f2.addDeployment(&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "cache", Namespace: mc.Namespace}})
	svc, _ := f.kubeClient.CoreV1().Services(mc.Namespace).Get(context.Background(), mc.Name, metav1.GetOptions{})
	f2.addService(svc)
	f2.addPDB(pdb)
	actions, o := f2.run(cache.MetaObjectToName(mc))
	if !isRequeue(o, foreignRecheckInterval) {
		t.Fatalf("second sync error = %v, want a requeue after %s", o, foreignRecheckInterval)
	}
	checkActions(t, nil, writes(actions))
	checkEvent(t, f2.recorder, "")
}

func TestSyncAdoptsOrphan(t *testing.T) {
	mc, dep, svc, pdb := converge(t, newMemcached("cache"))
	orphanDep := dep.DeepCopy()
	orphanDep.OwnerReferences = nil

	f := newFixture(t)
	f.seed(mc, nil, svc, pdb)
	f.addDeployment(orphanDep)
	actions, o := f.run(cache.MetaObjectToName(mc))
	if o.err != nil {
		t.Fatalf("sync: %v", o.err)
	}
	// The orphan is read whole (the cache holds its metadata only), the
	// apply takes ownership, the update removes what the operator would
	// not have created.
	checkActions(t, []expectedAction{getMemcached, getDeployment, applyDeployment, updateDeployment}, actions)
	got, _ := f.kubeClient.AppsV1().Deployments(mc.Namespace).Get(context.Background(), mc.Name, metav1.GetOptions{})
	if ref := metav1.GetControllerOf(got); ref == nil || ref.UID != mc.UID {
		t.Errorf("controller reference after adoption = %+v, want UID %s", ref, mc.UID)
	}
	checkEvent(t, f.recorder, "Adopted")
}

func TestSyncDoesNotAdoptForReplacedMemcached(t *testing.T) {
	mc, dep, svc, pdb := converge(t, newMemcached("cache"))
	orphanDep := dep.DeepCopy()
	orphanDep.OwnerReferences = nil

	f := newFixture(t)
	f.memcachedLister = append(f.memcachedLister, mc)
	replacement := mc.DeepCopy()
	replacement.UID = "uid-2"
	f.objects = append(f.objects, replacement)
	f.addDeployment(orphanDep)
	f.addService(svc)
	f.addPDB(pdb)
	actions, o := f.run(cache.MetaObjectToName(mc))
	if !isTransient(o) || !errors.Is(o.err, errOwnerChanged) {
		t.Fatalf("sync error = %v, want a transient errOwnerChanged", o.err)
	}
	// A race with the cache: no write, not even to the status.
	checkActions(t, []expectedAction{getMemcached, getDeployment}, actions)
}

func TestSyncChildOfDeletedPredecessorWaits(t *testing.T) {
	mc, dep, svc, pdb := converge(t, newMemcached("cache"))
	old := dep.DeepCopy()
	old.OwnerReferences[0].UID = "uid-old"

	old.Finalizers = []string{"example.com/hold"}

	f := newFixture(t)
	f.seed(mc, old, svc, pdb)
	actions, o := f.run(cache.MetaObjectToName(mc))
	if !isRequeue(o, foreignRecheckInterval) {
		t.Fatalf("sync error = %v, want a requeue after %s", o, foreignRecheckInterval)
	}
	checkActions(t, []expectedAction{updateStatus}, writes(actions))
	got, err := f.client.CacheV1beta1().Memcacheds(mc.Namespace).Get(context.Background(), mc.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	prog := meta.FindStatusCondition(got.Status.Conditions, cachev1beta1.ConditionProgressing)
	degraded := meta.FindStatusCondition(got.Status.Conditions, cachev1beta1.ConditionDegraded)
	if prog == nil || prog.Status != metav1.ConditionFalse || prog.Reason != cachev1beta1.ReasonWaitingForPredecessor ||
		!strings.Contains(prog.Message, "example.com/hold") {
		t.Errorf("Progressing = %+v, want False/%s naming the finalizer", prog, cachev1beta1.ReasonWaitingForPredecessor)
	}
	if degraded == nil || degraded.Status != metav1.ConditionFalse {
		t.Errorf("Degraded = %+v, want False: the garbage collector ends the wait", degraded)
	}
}

func TestSyncFinalizer(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	tests := []struct {
		name   string
		mutate func(*cachev1beta1.Memcached)
		want   []expectedAction
		// wantFinalizer is whether the finalizer is present afterwards.
		wantFinalizer bool
		// wantOwnerRefs is whether the children keep their ownerReferences.
		wantOwnerRefs bool
	}{
		{
			name: "orphan policy adds the finalizer",
			mutate: func(mc *cachev1beta1.Memcached) {
				mc.Spec.DeletionPolicy = cachev1beta1.DeletionPolicyOrphan
			},
			want:          []expectedAction{patchMemcached},
			wantFinalizer: true,
			wantOwnerRefs: true,
		},
		{
			name: "delete policy removes the finalizer",
			mutate: func(mc *cachev1beta1.Memcached) {
				mc.Finalizers = []string{"example.com/other", cachev1beta1.OrphanFinalizer}
			},
			want:          []expectedAction{patchMemcached},
			wantOwnerRefs: true,
		},
		{
			name: "deletion with orphan policy releases the children first",
			mutate: func(mc *cachev1beta1.Memcached) {
				mc.Spec.DeletionPolicy = cachev1beta1.DeletionPolicyOrphan
				mc.Finalizers = []string{cachev1beta1.OrphanFinalizer}
				mc.DeletionTimestamp = &now
			},
			want: []expectedAction{
				patchMemcached,
				getDeployment, {"patch", deploymentsResource, ""},
				getService, {"patch", servicesResource, ""},
				getPDB, {"patch", pdbsResource, ""},
			},
		},
		{
			name: "deletion with delete policy leaves the children to the garbage collector",
			mutate: func(mc *cachev1beta1.Memcached) {
				mc.Finalizers = []string{"example.com/other"}
				mc.DeletionTimestamp = &now
			},
			want:          nil,
			wantOwnerRefs: true,
		},
		{
			name: "deletion of a paused orphan still releases the children",
			mutate: func(mc *cachev1beta1.Memcached) {
				mc.Spec.Paused = true
				mc.Spec.DeletionPolicy = cachev1beta1.DeletionPolicyOrphan
				mc.Finalizers = []string{cachev1beta1.OrphanFinalizer}
				mc.DeletionTimestamp = &now
			},
			want: []expectedAction{
				patchMemcached,
				getDeployment, {"patch", deploymentsResource, ""},
				getService, {"patch", servicesResource, ""},
				getPDB, {"patch", pdbsResource, ""},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mc, dep, svc, pdb := converge(t, newMemcached("cache"))
			mc = mc.DeepCopy()
			tt.mutate(mc)

			f := newFixture(t)
			f.seed(mc, dep, svc, pdb)
			actions, o := f.run(cache.MetaObjectToName(mc))
			if o.err != nil {
				t.Fatalf("sync: %v", o.err)
			}
			checkActions(t, tt.want, actions)

			ctx := context.Background()
			got, err := f.client.CacheV1beta1().Memcacheds(mc.Namespace).Get(ctx, mc.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if has := containsString(got.Finalizers, cachev1beta1.OrphanFinalizer); has != tt.wantFinalizer {
				t.Errorf("finalizers = %v, want orphan finalizer present = %v", got.Finalizers, tt.wantFinalizer)
			}
			if containsString(mc.Finalizers, "example.com/other") && !containsString(got.Finalizers, "example.com/other") {
				t.Errorf("another controller's finalizer was removed: %v", got.Finalizers)
			}
			d, _ := f.kubeClient.AppsV1().Deployments(mc.Namespace).Get(ctx, mc.Name, metav1.GetOptions{})
			s, _ := f.kubeClient.CoreV1().Services(mc.Namespace).Get(ctx, mc.Name, metav1.GetOptions{})
			p, _ := f.kubeClient.PolicyV1().PodDisruptionBudgets(mc.Namespace).Get(ctx, mc.Name, metav1.GetOptions{})
			for _, obj := range []metav1.Object{d, s, p} {
				if has := len(obj.GetOwnerReferences()) > 0; has != tt.wantOwnerRefs {
					t.Errorf("%T ownerReferences = %v, want present = %v", obj, obj.GetOwnerReferences(), tt.wantOwnerRefs)
				}
			}
		})
	}
}

// TestSyncMemcachedGoneDuringFinalizerPatch covers a cache that still
// shows a Memcached the apiserver has already removed: the finalizer patch
// finds nothing, and that is success, not an error to log and retry.
func TestSyncMemcachedGoneDuringFinalizerPatch(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	tests := []struct {
		name   string
		mutate func(*cachev1beta1.Memcached)
	}{
		{name: "adding the finalizer", mutate: func(mc *cachev1beta1.Memcached) {
			mc.Spec.DeletionPolicy = cachev1beta1.DeletionPolicyOrphan
		}},
		{name: "removing the finalizer after deletion", mutate: func(mc *cachev1beta1.Memcached) {
			mc.Finalizers = []string{cachev1beta1.OrphanFinalizer}
			mc.DeletionTimestamp = &now
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mc := newMemcached("cache")
			tt.mutate(mc)
			f := newFixture(t)
			f.memcachedLister = append(f.memcachedLister, mc) // In the cache only.
			_, ctx := ktesting.NewTestContext(t)
			c := f.newController(ctx)
			if o := c.syncHandler(ctx, cache.MetaObjectToName(mc)); o.err != nil {
				t.Errorf("sync error = %v, want nil for a Memcached that is gone", o.err)
			}
		})
	}
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestSyncInvalidSpec(t *testing.T) {
	t.Run("requests above limits", func(t *testing.T) {
		mc, dep, svc, pdb := converge(t, newMemcached("cache"))
		mc = mc.DeepCopy()
		mc.Generation++
		mc.Spec.Replicas = ptr.To[int32](5)
		mc.Spec.Resources = &cachev1beta1.ResourceOverrides{
			Requests: &cachev1beta1.ResourceAmounts{CPU: "2"},
			Limits:   &cachev1beta1.ResourceAmounts{CPU: "1"},
		}
		f := newFixture(t)
		f.seed(mc, dep, svc, pdb)
		actions, o := f.run(cache.MetaObjectToName(mc))
		if !isPermanent(o) {
			t.Fatalf("sync error = %v, want a permanent error", o.err)
		}
		checkActions(t, []expectedAction{updateStatus}, actions)
		checkDegraded(t, f, mc, cachev1beta1.ReasonInvalidSpec, "spec.resources.requests.cpu")
		checkEvent(t, f.recorder, cachev1beta1.ReasonInvalidSpec)
	})

	t.Run("apiserver rejects the Deployment", func(t *testing.T) {
		mc := newMemcached("cache")
		podOf(&mc.Spec).Tolerations = []corev1.Toleration{{Key: "k", Operator: "Sometimes"}}
		f := newFixture(t)
		f.addMemcached(mc)
		_, ctx := ktesting.NewTestContext(t)
		c := f.newController(ctx)
		f.kubeClient.PrependReactor("patch", "deployments", func(core.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewInvalid(schema.GroupKind{Group: "apps", Kind: "Deployment"}, "cache",
				field.ErrorList{field.NotSupported(field.NewPath("spec", "template", "spec", "tolerations").Index(0).Child("operator"), "Sometimes", []string{"Equal", "Exists"})})
		})
		o := c.syncHandler(ctx, cache.MetaObjectToName(mc))
		if !isPermanent(o) {
			t.Fatalf("sync error = %v, want a permanent error", o.err)
		}
		checkDegraded(t, f, mc, cachev1beta1.ReasonInvalidSpec, "tolerations[0].operator")
	})
}

// TestSyncForbiddenChild covers RBAC that does not let the operator write a
// child: the Memcached says so in Degraded, and the key is retried with
// backoff, since a grant raises no event.
func TestSyncForbiddenChild(t *testing.T) {
	mc := newMemcached("cache")
	f := newFixture(t)
	f.addMemcached(mc)
	_, ctx := ktesting.NewTestContext(t)
	c := f.newController(ctx)
	f.kubeClient.PrependReactor("patch", "deployments", func(core.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "apps", Resource: "deployments"}, "cache",
			errors.New(`User "system:serviceaccount:memcached-operator:memcached-operator" cannot patch resource "deployments"`))
	})
	key := cache.MetaObjectToName(mc)
	o := c.syncHandler(ctx, key)
	if !apierrors.IsForbidden(o.err) || !isTransient(o) {
		t.Fatalf("sync error = %v, want the Forbidden error, transient", o.err)
	}
	checkDegraded(t, f, mc, cachev1beta1.ReasonForbidden, "cannot patch")
	checkEvent(t, f.recorder, cachev1beta1.ReasonForbidden)
	if _, err := f.kubeClient.CoreV1().Services(mc.Namespace).Get(ctx, mc.Name, metav1.GetOptions{}); err != nil {
		t.Errorf("the Service, which RBAC allows, was not created: %v", err)
	}
	c.handleErr(ctx, key, o)
	if c.workqueue.NumRequeues(key) != 1 {
		t.Errorf("Forbidden key was not requeued with backoff")
	}
}

// TestSyncRefusedUpdateKeepsTheDeployment covers an apply to an existing
// Deployment that admission refuses: the status reports the Deployment
// that still serves, with its counts, next to the refusal, instead of a
// missing Deployment.
func TestSyncRefusedUpdateKeepsTheDeployment(t *testing.T) {
	mc, dep, svc, pdb := converge(t, newMemcached("cache"))
	dep.Status = appsv1.DeploymentStatus{ObservedGeneration: dep.Generation, Replicas: 2, UpdatedReplicas: 2, ReadyReplicas: 2, AvailableReplicas: 2}
	mc.Spec.Replicas = ptr.To[int32](3)
	mc.Generation++
	f := newFixture(t)
	f.seed(mc, dep, svc, pdb)
	_, ctx := ktesting.NewTestContext(t)
	c := f.newController(ctx)
	denial := `deployments.apps "cache" is forbidden: ValidatingAdmissionPolicy 'freeze' with binding 'freeze' denied request: frozen`
	f.kubeClient.PrependReactor("patch", "deployments", func(core.Action) (bool, runtime.Object, error) {
		return true, nil, &apierrors.StatusError{ErrStatus: metav1.Status{
			Status: metav1.StatusFailure, Code: 422, Reason: metav1.StatusReasonInvalid, Message: denial,
			Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{{Message: denial}}},
		}}
	})
	o := c.syncHandler(ctx, cache.MetaObjectToName(mc))
	if !isTransient(o) || o.reason != cachev1beta1.ReasonAdmissionDenied {
		t.Fatalf("sync outcome = %+v, want AdmissionDenied, retried with backoff", o)
	}
	checkDegraded(t, f, mc, cachev1beta1.ReasonAdmissionDenied, "frozen")
	got, err := f.client.CacheV1beta1().Memcacheds(mc.Namespace).Get(context.Background(), mc.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status.ReadyReplicas != 2 || got.Status.AvailableReplicas != 2 {
		t.Errorf("status replicas ready %d, available %d; want the 2 that serve", got.Status.ReadyReplicas, got.Status.AvailableReplicas)
	}
	if a := meta.FindStatusCondition(got.Status.Conditions, cachev1beta1.ConditionAvailable); a == nil || a.Reason == cachev1beta1.ReasonDeploymentMissing {
		t.Errorf("Available = %+v while the Deployment serves", a)
	}
}

func checkDegraded(t *testing.T, f *fixture, mc *cachev1beta1.Memcached, reason, messagePart string) {
	t.Helper()
	got, err := f.client.CacheV1beta1().Memcacheds(mc.Namespace).Get(context.Background(), mc.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cond := meta.FindStatusCondition(got.Status.Conditions, cachev1beta1.ConditionDegraded)
	if cond == nil || cond.Status != metav1.ConditionTrue || cond.Reason != reason || !strings.Contains(cond.Message, messagePart) {
		t.Errorf("Degraded = %+v, want True/%s mentioning %q", cond, reason, messagePart)
	}
	if got.Status.ObservedGeneration != mc.Generation {
		t.Errorf("observedGeneration = %d, want %d", got.Status.ObservedGeneration, mc.Generation)
	}
}

func TestSyncPaused(t *testing.T) {
	mc, dep, svc, pdb := converge(t, newMemcached("cache"))
	mc = mc.DeepCopy()
	mc.Generation++
	mc.Spec.Paused = true
	mc.Spec.Replicas = ptr.To[int32](9)
	f := newFixture(t)
	f.seed(mc, dep, svc, pdb)
	actions, o := f.run(cache.MetaObjectToName(mc))
	if o.err != nil {
		t.Fatalf("sync: %v", o.err)
	}
	checkActions(t, []expectedAction{updateStatus}, actions)
	got, _ := f.client.CacheV1beta1().Memcacheds(mc.Namespace).Get(context.Background(), mc.Name, metav1.GetOptions{})
	cond := meta.FindStatusCondition(got.Status.Conditions, cachev1beta1.ConditionProgressing)
	if cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != cachev1beta1.ReasonPaused {
		t.Errorf("Progressing = %+v, want False/%s", cond, cachev1beta1.ReasonPaused)
	}
}

func TestSyncMemcachedGone(t *testing.T) {
	f := newFixture(t)
	actions, o := f.run(cache.ObjectName{Namespace: "default", Name: "gone"})
	if o.err != nil {
		t.Fatalf("sync: %v", o.err)
	}
	checkActions(t, nil, actions)
}

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

// controlledBy is the controller reference of a child of the Memcached "cache"
// with the given UID.
func controlledBy(uid string) []metav1.OwnerReference {
	return []metav1.OwnerReference{{APIVersion: cachev1beta1.GroupVersion.String(), Kind: "Memcached", Name: "cache", UID: k8stypes.UID(uid), Controller: ptr.To(true)}}
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

func TestSyncSkipsStatusWriteFromStaleCache(t *testing.T) {
	mc := newMemcached("cache")
	f := newFixture(t)
	f.addMemcached(mc)
	_, ctx := ktesting.NewTestContext(t)
	c := f.newController(ctx)
	key := cache.MetaObjectToName(mc)
	if o := c.syncHandler(ctx, key); o.err != nil {
		t.Fatalf("first sync: %v", o.err)
	}
	first := len(writes(f.client.Actions()))

	// The lister still holds the Memcached as it was before our status
	// write, as an informer does until the write's event arrives.
	if o := c.syncHandler(ctx, key); o.err != nil {
		t.Fatalf("second sync: %v", o.err)
	}
	if got := writes(f.client.Actions())[first:]; len(got) != 0 {
		t.Errorf("a sync from the stale cache wrote again: %v", describe(got))
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
	var objects, kubeObjects []runtime.Object
	for i := range n {
		mc := newMemcached(fmt.Sprintf("cache-%d", i))
		mc.UID = k8stypes.UID(fmt.Sprintf("uid-%d", i))
		mc, dep, svc, pdb := converge(t, mc)
		objects = append(objects, mc)
		kubeObjects = append(kubeObjects, dep, svc, pdb)
	}

	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	client := fake.NewClientset(objects...)
	kubeClient := k8sfake.NewClientset(kubeObjects...)
	mcInformers := informers.NewSharedInformerFactory(client, 0)
	kubeInformers := kubeinformers.NewSharedInformerFactoryWithOptions(kubeClient, 0, childTransform())
	m := newTestMetrics(t)
	c, err := NewController(ctx, kubeClient, client, []childcache.InformerScope{{
		Memcacheds:           mcInformers.Cache().V1beta1().Memcacheds(),
		Deployments:          slowDeployments{DeploymentInformer: kubeInformers.Apps().V1().Deployments(), delay: 20 * time.Millisecond},
		Services:             kubeInformers.Core().V1().Services(),
		PodDisruptionBudgets: kubeInformers.Policy().V1().PodDisruptionBudgets(),
		Secrets:              kubeInformers.Core().V1().Secrets(),
	}}, m, clock.RealClock{}, defaultMaxRetryDelay)
	if err != nil {
		t.Fatal(err)
	}
	mcInformers.Start(ctx.Done())
	kubeInformers.Start(ctx.Done())
	defer mcInformers.Shutdown()
	defer kubeInformers.Shutdown()
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx, context.Background(), 4, time.Second) }()

	deadline := time.Now().Add(10 * time.Second)
	for m.Reconciles() < n || c.workqueue.Len() > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%v of %d Memcacheds synced after 10s", m.Reconciles(), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Late add events would queue more syncs; give them time to show.
	time.Sleep(300 * time.Millisecond)
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}

	if got := m.Reconciles(); got != n {
		t.Errorf("%v syncs for %d converged Memcacheds, want one each", got, n)
	}
	if w := append(writes(client.Actions()), writes(kubeClient.Actions())...); len(w) > 0 {
		t.Errorf("writes to converged objects: %v", describe(w))
	}
}

// TestResyncSyncsMemcachedsNotChildren checks what --resync-period does: a
// resync syncs every Memcached again, from the cache and without a write,
// while the children's resyncs queue nothing of their own.
func TestResyncSyncsMemcachedsNotChildren(t *testing.T) {
	mc, dep, svc, pdb := converge(t, newMemcached("cache"))
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	client := fake.NewClientset(mc)
	kubeClient := k8sfake.NewClientset(dep, svc, pdb)
	// One second is the shortest resync client-go allows; the Memcacheds
	// resync only at eight, so anything queued before five is a child's.
	const childResync, memcachedResync, childrenOnly = time.Second, 8 * time.Second, 5 * time.Second
	mcInformers := informers.NewSharedInformerFactory(client, memcachedResync)
	kubeInformers := kubeinformers.NewSharedInformerFactoryWithOptions(kubeClient, childResync, childTransform())
	c, err := NewController(ctx, kubeClient, client, []childcache.InformerScope{{
		Memcacheds:           mcInformers.Cache().V1beta1().Memcacheds(),
		Deployments:          kubeInformers.Apps().V1().Deployments(),
		Services:             kubeInformers.Core().V1().Services(),
		PodDisruptionBudgets: kubeInformers.Policy().V1().PodDisruptionBudgets(),
		Secrets:              kubeInformers.Core().V1().Secrets(),
	}}, newTestMetrics(t), clock.RealClock{}, defaultMaxRetryDelay)
	if err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	mcInformers.Start(ctx.Done())
	kubeInformers.Start(ctx.Done())
	defer func() {
		cancel()
		mcInformers.Shutdown()
		kubeInformers.Shutdown()
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

	time.Sleep(time.Until(started.Add(childrenOnly)))
	if n := c.workqueue.Len(); n != 0 {
		t.Errorf("child resyncs queued %d keys, want none", n)
	}
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 2*memcachedResync, true, func(context.Context) (bool, error) {
		return c.workqueue.Len() > 0, nil
	})
	if err != nil {
		t.Fatalf("the Memcached's resync did not queue it: %v", err)
	}
	take("resync")
	if o := c.syncHandler(ctx, key); o.err != nil {
		t.Fatalf("sync on resync: %v", o.err)
	}
	if w := append(writes(client.Actions()), writes(kubeClient.Actions())...); len(w) > 0 {
		t.Errorf("a resync of a converged Memcached wrote: %v", describe(w))
	}
	c.workqueue.ShutDown()
}

// TestSyncTwoChildrenFailDifferently covers a Deployment and a Service that
// fail for different causes in one sync: the status shows both messages
// under the reason rechecked soonest, and the key is retried as the most
// urgent outcome says (outcome.go).
func TestSyncTwoChildrenFailDifferently(t *testing.T) {
	foreignDeployment := func(f *fixture, mc *cachev1beta1.Memcached) {
		f.addDeployment(&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: mc.Name, Namespace: mc.Namespace, ResourceVersion: "3"}})
	}
	refuse := func(resource string, o error) func(*fixture) {
		return func(f *fixture) {
			f.kubeClient.PrependReactor("patch", resource, func(core.Action) (bool, runtime.Object, error) { return true, nil, o })
		}
	}
	forbidden := apierrors.NewForbidden(servicesResource.GroupResource(), "cache", errors.New("cannot patch services"))
	invalid := apierrors.NewInvalid(schema.GroupKind{Group: "apps", Kind: "Deployment"}, "cache",
		field.ErrorList{field.Invalid(field.NewPath("spec"), "x", "rejected")})
	tests := []struct {
		name       string
		seed       func(*fixture, *cachev1beta1.Memcached)
		react      []func(*fixture)
		wantReason string
		// wantMessage is part of Degraded's message.
		wantMessage string
		// wantRetry is how handleErr will treat the error.
		wantRetry string
	}{
		{
			name:       "foreign Deployment, Service refused by RBAC",
			seed:       foreignDeployment,
			react:      []func(*fixture){refuse("services", forbidden)},
			wantReason: cachev1beta1.ReasonForbidden, wantMessage: "not managed by this Memcached; applying Service", wantRetry: "backoff",
		},
		{
			name:       "foreign Deployment, Service timed out",
			seed:       foreignDeployment,
			react:      []func(*fixture){refuse("services", apierrors.NewTimeoutError("slow", 1))},
			wantReason: cachev1beta1.ReasonAPIServerError, wantMessage: "Deployment default/cache already exists", wantRetry: "backoff",
		},
		{
			name: "Deployment rejected, foreign Service",
			seed: func(f *fixture, mc *cachev1beta1.Memcached) {
				f.addService(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: mc.Name, Namespace: mc.Namespace, ResourceVersion: "3"}})
			},
			react:      []func(*fixture){refuse("deployments", invalid)},
			wantReason: cachev1beta1.ReasonResourceExists, wantMessage: "rejected the Deployment", wantRetry: "requeue",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mc := newMemcached("cache")
			f := newFixture(t)
			f.addMemcached(mc)
			tt.seed(f, mc)
			_, ctx := ktesting.NewTestContext(t)
			c := f.newController(ctx)
			for _, r := range tt.react {
				r(f)
			}
			o := c.syncHandler(ctx, cache.MetaObjectToName(mc))
			var got string
			switch {
			case isTransient(o):
				got = "backoff"
			case isRequeue(o, foreignRecheckInterval):
				got = "requeue"
			case isPermanent(o):
				got = "never"
			}
			if got != tt.wantRetry {
				t.Errorf("sync error %v is retried by %q, want %q", o, got, tt.wantRetry)
			}
			checkDegraded(t, f, mc, tt.wantReason, tt.wantMessage)
		})
	}
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

// TestFinalizeFailureIsOnStatus refuses the orphaning patch, as
// OwnerReferencesPermissionEnforcement does without delete on the child:
// the Memcached being deleted must say why it is stuck, and keep its
// finalizer.
func TestFinalizeFailureIsOnStatus(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	mc, dep, svc, pdb := converge(t, newMemcached("cache"))
	mc = mc.DeepCopy()
	mc.Spec.DeletionPolicy = cachev1beta1.DeletionPolicyOrphan
	mc.Finalizers = []string{cachev1beta1.OrphanFinalizer}
	mc.DeletionTimestamp = &now

	f := newFixture(t)
	f.seed(mc, dep, svc, pdb)
	_, ctx := ktesting.NewTestContext(t)
	c := f.newController(ctx)
	refused := apierrors.NewForbidden(deploymentsResource.GroupResource(), "cache", errors.New("cannot set an ownerRef on a resource you can't delete"))
	f.kubeClient.PrependReactor("patch", "deployments", func(core.Action) (bool, runtime.Object, error) { return true, nil, refused })

	o := c.syncHandler(ctx, cache.MetaObjectToName(mc))
	if !isTransient(o) {
		t.Fatalf("sync error = %v, want a transient error", o.err)
	}
	checkDegraded(t, f, mc, cachev1beta1.ReasonForbidden, "Cannot release the children before deletion")
	got, err := f.client.CacheV1beta1().Memcacheds(mc.Namespace).Get(context.Background(), mc.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !containsString(got.Finalizers, cachev1beta1.OrphanFinalizer) {
		t.Errorf("the finalizer was removed although the children were not released: %v", got.Finalizers)
	}
}

// podOf returns spec.pod, creating it, so a test can set one Pod field.
func podOf(s *cachev1beta1.MemcachedSpec) *cachev1beta1.PodOverrides {
	if s.Pod == nil {
		s.Pod = &cachev1beta1.PodOverrides{}
	}
	return s.Pod
}
