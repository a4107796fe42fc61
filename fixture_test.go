package main

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stypes "k8s.io/apimachinery/pkg/types"
	kubeinformers "k8s.io/client-go/informers"
	appsinformers "k8s.io/client-go/informers/apps/v1"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	core "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2/ktesting"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
	"github.com/kubelite/memcached-operator/pkg/childcache"
	"github.com/kubelite/memcached-operator/pkg/generated/clientset/versioned/fake"
	informers "github.com/kubelite/memcached-operator/pkg/generated/informers/externalversions"
	"github.com/kubelite/memcached-operator/pkg/intern"
	"github.com/kubelite/memcached-operator/pkg/metrics"
	"github.com/kubelite/memcached-operator/pkg/rollout"
)

var (
	deploymentsResource = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	servicesResource    = schema.GroupVersionResource{Version: "v1", Resource: "services"}
	pdbsResource        = schema.GroupVersionResource{Group: "policy", Version: "v1", Resource: "poddisruptionbudgets"}
	npsResource         = schema.GroupVersionResource{Group: "networking.k8s.io", Version: "v1", Resource: "networkpolicies"}
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
	npLister         []any
	secretLister     []*corev1.Secret
	configMapLister  []*corev1.ConfigMap

	objects     []runtime.Object
	kubeObjects []runtime.Object

	recorder *record.FakeRecorder
	// clock is the controller's clock and its workqueue's.
	clock *clocktesting.FakeClock

	// memcachedResync and childResync are the resync periods of the
	// controller's informer factories, 0 for none, and wrapDeployments,
	// if set, wraps its Deployment informer: for the tests of Run, which
	// start the informers.
	memcachedResync, childResync time.Duration
	wrapDeployments              func(appsinformers.DeploymentInformer) appsinformers.DeploymentInformer

	// Set by newController: the informer factories, for tests that start
	// them, and the controller's metrics.
	mcInformers   informers.SharedInformerFactory
	kubeInformers kubeinformers.SharedInformerFactory
	metrics       *metrics.Metrics
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

func (f *fixture) addNetworkPolicy(p *networkingv1.NetworkPolicy) {
	f.npLister = append(f.npLister, cachedAs(p))
	f.kubeObjects = append(f.kubeObjects, p)
}

// childTransform gives a factory's child informers the child transform,
// as newInformers does: the controller's child listers read only what it
// caches.
func childTransform() kubeinformers.SharedInformerOption {
	return kubeinformers.WithTransform(childcache.Child(intern.New(intern.DefaultCapacity)))
}

// cachedAs returns what the child transform caches of a copy of obj.
func cachedAs(obj runtime.Object) any {
	cached, _ := childcache.Child(intern.New(intern.DefaultCapacity))(obj.DeepCopyObject())
	return cached
}

func (f *fixture) addSecret(s *corev1.Secret) {
	f.secretLister = append(f.secretLister, s)
	f.kubeObjects = append(f.kubeObjects, s)
}

func (f *fixture) addConfigMap(cm *corev1.ConfigMap) {
	f.configMapLister = append(f.configMapLister, cm)
	f.kubeObjects = append(f.kubeObjects, cm)
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

// newController builds the controller over fake clientsets seeded with the
// fixture's objects, and seeds its informers' caches with the listers'
// objects. The informers are not started; tests of Run start
// f.mcInformers and f.kubeInformers.
func (f *fixture) newController(ctx context.Context) *Controller {
	f.t.Helper()
	f.client = fake.NewClientset(f.objects...)
	f.kubeClient = k8sfake.NewClientset(f.kubeObjects...)

	mcInformers := informers.NewSharedInformerFactory(f.client, f.memcachedResync)
	kubeInformers := kubeinformers.NewSharedInformerFactoryWithOptions(f.kubeClient, f.childResync, childTransform())
	f.mcInformers, f.kubeInformers = mcInformers, kubeInformers
	var deployments appsinformers.DeploymentInformer = kubeInformers.Apps().V1().Deployments()
	if f.wrapDeployments != nil {
		deployments = f.wrapDeployments(deployments)
	}
	f.metrics = newTestMetrics(f.t)
	c, err := NewController(ctx, f.kubeClient, f.client, []childcache.InformerScope{{
		Memcacheds:           mcInformers.Cache().V1beta1().Memcacheds(),
		Deployments:          deployments,
		Services:             kubeInformers.Core().V1().Services(),
		PodDisruptionBudgets: kubeInformers.Policy().V1().PodDisruptionBudgets(),
		NetworkPolicies:      kubeInformers.Networking().V1().NetworkPolicies(),
		Secrets:              kubeInformers.Core().V1().Secrets(),
		ConfigMaps:           kubeInformers.Core().V1().ConfigMaps(),
		Claims:               kubeInformers.Core().V1().PersistentVolumeClaims(),
	}}, f.metrics, f.clock, defaultMaxRetryDelay, rollout.DefaultMaxConcurrent)
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
	for _, p := range f.npLister {
		if err := kubeInformers.Networking().V1().NetworkPolicies().Informer().GetIndexer().Add(p); err != nil {
			f.t.Fatal(err)
		}
	}
	// Secrets reach the cache through the transform the operator gives
	// their informer, which keeps no data but the auth file's verdict and
	// the fingerprints of the client CA bundle's CAs.
	trim := secretTransform()
	for _, s := range f.secretLister {
		trimmed, err := trim(s.DeepCopy())
		if err != nil {
			f.t.Fatal(err)
		}
		if err := kubeInformers.Core().V1().Secrets().Informer().GetIndexer().Add(trimmed); err != nil {
			f.t.Fatal(err)
		}
	}
	// ConfigMaps too pass through their informer's transform.
	trimConfigMap := configMapTransform()
	for _, cm := range f.configMapLister {
		trimmed, err := trimConfigMap(cm.DeepCopy())
		if err != nil {
			f.t.Fatal(err)
		}
		if err := kubeInformers.Core().V1().ConfigMaps().Informer().GetIndexer().Add(trimmed); err != nil {
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

// inOrder records the requests of both fake clientsets in the order they
// are sent, list and watch left out, for tests of what must reach the
// apiserver before what (run lists the Memcached client's first). Call it
// after newController and before the sync.
func (f *fixture) inOrder() func() []core.Action {
	var mu sync.Mutex
	var sent []core.Action
	record := func(a core.Action) (bool, runtime.Object, error) {
		if a.GetVerb() != "list" && a.GetVerb() != "watch" {
			mu.Lock()
			sent = append(sent, a)
			mu.Unlock()
		}
		return false, nil, nil
	}
	f.client.PrependReactor("*", "*", record)
	f.kubeClient.PrependReactor("*", "*", record)
	return func() []core.Action {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(sent)
	}
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

// newMemcached returns a Memcached as the apiserver has it once the
// operator's first sync added its finalizer, which every sync that creates
// a child has done; tests of that first sync clear Finalizers.
func newMemcached(name string) *cachev1beta1.Memcached {
	return &cachev1beta1.Memcached{
		TypeMeta: metav1.TypeMeta{APIVersion: cachev1beta1.GroupVersion.String(), Kind: "Memcached"},
		ObjectMeta: metav1.ObjectMeta{
			Name:            name,
			Namespace:       metav1.NamespaceDefault,
			UID:             "uid-" + "1",
			Generation:      1,
			ResourceVersion: "10",
			Finalizers:      []string{cachev1beta1.ChildrenFinalizer},
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

// convergedChildren are the children a converged fixture holds; nil for
// one it has not.
type convergedChildren struct {
	dep *appsv1.Deployment
	svc *corev1.Service
	pdb *policyv1.PodDisruptionBudget
	np  *networkingv1.NetworkPolicy
}

// seedAll adds a Memcached and whichever of its children are non-nil.
func (f *fixture) seedAll(mc *cachev1beta1.Memcached, c convergedChildren) {
	f.seed(mc, c.dep, c.svc, c.pdb)
	if c.np != nil {
		f.addNetworkPolicy(c.np)
	}
}

// converge runs syncs until the controller writes nothing, feeding what the
// fake apiserver holds back into the listers, and returns the converged
// fixture contents but the NetworkPolicy (convergeAll has it too). It fails
// the test if that takes more than a few rounds.
func converge(t testing.TB, mc *cachev1beta1.Memcached) (*cachev1beta1.Memcached, *appsv1.Deployment, *corev1.Service, *policyv1.PodDisruptionBudget) {
	t.Helper()
	mc, c := convergeAll(t, mc)
	return mc, c.dep, c.svc, c.pdb
}

// convergeAll is converge with every child.
func convergeAll(t testing.TB, mc *cachev1beta1.Memcached) (*cachev1beta1.Memcached, convergedChildren) {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	var c convergedChildren
	for range 4 {
		f := newFixture(t)
		f.seedAll(mc, c)
		ctrl := f.newController(ctx)
		if o := ctrl.syncHandler(ctx, cache.MetaObjectToName(mc)); o.err != nil {
			t.Fatalf("sync: %v", o.err)
		}
		if len(writes(f.client.Actions()))+len(writes(f.kubeClient.Actions())) == 0 {
			return mc, c
		}
		var err error
		if mc, err = f.client.CacheV1beta1().Memcacheds(mc.Namespace).Get(ctx, mc.Name, metav1.GetOptions{}); err != nil {
			t.Fatal(err)
		}
		dep, err := f.kubeClient.AppsV1().Deployments(mc.Namespace).Get(ctx, mc.Name, metav1.GetOptions{})
		c.dep = liveOrNil(t, dep, err)
		svc, err := f.kubeClient.CoreV1().Services(mc.Namespace).Get(ctx, mc.Name, metav1.GetOptions{})
		c.svc = liveOrNil(t, svc, err)
		pdb, err := f.kubeClient.PolicyV1().PodDisruptionBudgets(mc.Namespace).Get(ctx, mc.Name, metav1.GetOptions{})
		c.pdb = liveOrNil(t, pdb, err)
		np, err := f.kubeClient.NetworkingV1().NetworkPolicies(mc.Namespace).Get(ctx, mc.Name, metav1.GetOptions{})
		c.np = liveOrNil(t, np, err)
	}
	t.Fatalf("controller did not converge")
	return nil, convergedChildren{}
}

// liveOrNil returns what a Get found, nil for NotFound, and fails the test
// on any other error.
func liveOrNil[T any](t testing.TB, obj *T, err error) *T {
	t.Helper()
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return obj
}

var (
	getDeployment    = expectedAction{"get", deploymentsResource, ""}
	applyDeployment  = expectedAction{"patch", deploymentsResource, ""}
	updateDeployment = expectedAction{"update", deploymentsResource, ""}
	getService       = expectedAction{"get", servicesResource, ""}
	applyService     = expectedAction{"patch", servicesResource, ""}
	getPDB           = expectedAction{"get", pdbsResource, ""}
	applyPDB         = expectedAction{"patch", pdbsResource, ""}
	getNP            = expectedAction{"get", npsResource, ""}
	applyNP          = expectedAction{"patch", npsResource, ""}
	deleteNP         = expectedAction{"delete", npsResource, ""}
	getMemcached     = expectedAction{"get", memcachedsResource, ""}
	patchMemcached   = expectedAction{"patch", memcachedsResource, ""}
	updateStatus     = expectedAction{"update", memcachedsResource, "status"}
)

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

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
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

// controlledBy is the controller reference of a child of the Memcached "cache"
// with the given UID.
func controlledBy(uid string) []metav1.OwnerReference {
	return []metav1.OwnerReference{{APIVersion: cachev1beta1.GroupVersion.String(), Kind: "Memcached", Name: "cache", UID: k8stypes.UID(uid), Controller: ptr.To(true)}}
}

// podOf returns spec.pod, creating it, so a test can set one Pod field.
func podOf(s *cachev1beta1.MemcachedSpec) *cachev1beta1.PodOverrides {
	if s.Pod == nil {
		s.Pod = &cachev1beta1.PodOverrides{}
	}
	return s.Pod
}
