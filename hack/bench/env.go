package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
	clientset "github.com/kubelite/memcached-operator/pkg/generated/clientset/versioned"
	"github.com/kubelite/memcached-operator/pkg/localcluster"
	"github.com/kubelite/memcached-operator/pkg/resources"
)

// memcachedPrefix names the namespaces the measured Memcacheds live in:
// mc-0, mc-1, ...
const memcachedPrefix = "mc"

// env is one control plane with the CRD installed, the harness's clients
// and at most one operator process.
type env struct {
	cfg     Config
	cluster *localcluster.Cluster
	// kube and mc have no client-side rate limit: the harness's pace is
	// set by cfg.ClientConcurrency alone.
	kube    kubernetes.Interface
	mc      clientset.Interface
	tracker *tracker
	// op is the running operator, nil when none is.
	op *operatorProc
	// starts counts the operator's starts, to give each its own log.
	starts int
}

// newEnv starts a control plane, installs the CRD, creates the namespaces
// and starts the tracker. On error it stops whatever it started.
func newEnv(ctx context.Context, cfg Config) (_ *env, err error) {
	cc := localcluster.Config{}
	if cfg.Rollout {
		cc = localcluster.Full()
		cc.Nodes, cc.ExtraArgs, cc.PodReadyDelay = rolloutNodes(cfg.N), rolloutArgs, cfg.PodReadyDelay
	}
	c, err := localcluster.Start(ctx, cc)
	if err != nil {
		return nil, err
	}
	e := &env{cfg: cfg, cluster: c}
	defer func() {
		if err != nil {
			e.stop()
		}
	}()
	// The CRD and the finalizer policy, as artifacts/ installs them: new
	// Memcacheds come with the operator's finalizer.
	if err := c.ApplyFiles(ctx, "artifacts/crd", finalizerPolicy); err != nil {
		return nil, err
	}
	if err := waitCRDSettled(ctx, c.Config); err != nil {
		return nil, err
	}
	rc := rest.CopyConfig(c.Config)
	rc.QPS, rc.Burst = -1, 0
	if e.kube, err = kubernetes.NewForConfig(rc); err != nil {
		return nil, fmt.Errorf("building the harness's Kubernetes client: %w", err)
	}
	if e.mc, err = clientset.NewForConfig(rc); err != nil {
		return nil, fmt.Errorf("building the harness's Memcached client: %w", err)
	}
	if err := waitFinalizerPolicy(ctx, e.mc); err != nil {
		return nil, err
	}
	for i := range cfg.Namespaces {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: e.namespace(memcachedPrefix, i)}}
		if _, err := e.kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
			return nil, fmt.Errorf("creating namespace %s: %w", ns.Name, err)
		}
	}
	if e.tracker, err = startTracker(ctx, e.kube, e.mc); err != nil {
		return nil, err
	}
	return e, nil
}

// stop ends the operator, the tracker and the control plane. It is safe
// to call more than once, and on an env newEnv only partly built.
func (e *env) stop() {
	e.stopOperator()
	if e.tracker != nil {
		e.tracker.stop()
		e.tracker = nil
	}
	if e.cluster != nil {
		e.cluster.Stop()
		e.cluster = nil
	}
}

// crdCreateDelay is how long after a CRD becomes Established the apiserver
// holds every create of its custom resources (2 s, so that other
// apiservers in an HA setup see the CRD first; customresource_handler.go
// in k8s.io/apiextensions-apiserver).
const crdCreateDelay = 2 * time.Second

// waitCRDSettled waits until the Memcached CRD has been Established for
// longer than crdCreateDelay, so the first creates the bench times are not
// held by it. The condition's time has a resolution of one second, hence
// the extra second.
func waitCRDSettled(ctx context.Context, cfg *rest.Config) error {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("building a dynamic client: %w", err)
	}
	gvr := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	crd, err := dyn.Resource(gvr).Get(ctx, "memcacheds."+cachev1beta1.GroupName, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("reading the Memcached CRD: %w", err)
	}
	conditions, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	for _, c := range conditions {
		cond, _ := c.(map[string]any)
		if cond["type"] != "Established" || cond["status"] != "True" {
			continue
		}
		since, err := time.Parse(time.RFC3339, fmt.Sprint(cond["lastTransitionTime"]))
		if err != nil {
			return fmt.Errorf("the CRD's Established condition: %w", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Until(since.Add(crdCreateDelay + time.Second))):
			return nil
		}
	}
	return fmt.Errorf("the Memcached CRD is not Established")
}

// finalizerPolicy is the MutatingAdmissionPolicy that puts the operator's
// finalizer on new Memcacheds.
const finalizerPolicy = "artifacts/deploy/finalizer_policy.yaml"

// waitFinalizerPolicy waits until a create shows the finalizer policy in
// effect (the apiserver loads policies through an informer), with a dry
// run, which stores nothing.
func waitFinalizerPolicy(ctx context.Context, mc clientset.Interface) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		probe := &cachev1beta1.Memcached{ObjectMeta: metav1.ObjectMeta{Name: "probe"}}
		got, err := mc.CacheV1beta1().Memcacheds(metav1.NamespaceDefault).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		last = fmt.Sprintf("finalizers %v", got.Finalizers)
		return slices.Contains(got.Finalizers, cachev1beta1.ChildrenFinalizer), nil
	})
	if err != nil {
		return fmt.Errorf("waiting for %s to take effect: %w (last: %s)", finalizerPolicy, err, last)
	}
	return nil
}

func (e *env) namespace(prefix string, i int) string {
	return fmt.Sprintf("%s-%d", prefix, i%e.cfg.Namespaces)
}

// parallel runs f(ctx, i) for i in [0,n) with the harness's client
// concurrency. The first error cancels the ctx the other calls get, and is
// the one returned.
func (e *env) parallel(ctx context.Context, n int, f func(ctx context.Context, i int) error) error {
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(e.cfg.ClientConcurrency)
	for i := range n {
		g.Go(func() error { return f(ctx, i) })
	}
	return g.Wait()
}

// createMemcacheds creates cache-0 ... cache-<N-1> with default specs,
// spread over the namespaces named prefix-*, and hands each created object
// to created unless that is nil. created must not block.
func (e *env) createMemcacheds(ctx context.Context, prefix string, created func(*cachev1beta1.Memcached)) error {
	return e.parallel(ctx, e.cfg.N, func(ctx context.Context, i int) error {
		mc := &cachev1beta1.Memcached{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cache-%d", i), Namespace: e.namespace(prefix, i)}}
		got, err := e.mc.CacheV1beta1().Memcacheds(mc.Namespace).Create(ctx, mc, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("creating Memcached %s/%s: %w", mc.Namespace, mc.Name, err)
		}
		if created != nil {
			created(got)
		}
		return nil
	})
}

// patchAll applies the merge patch to every Memcached createMemcacheds
// made.
func (e *env) patchAll(ctx context.Context, prefix, patch string) error {
	return e.parallel(ctx, e.cfg.N, func(ctx context.Context, i int) error {
		ns, name := e.namespace(prefix, i), fmt.Sprintf("cache-%d", i)
		if _, err := e.mc.CacheV1beta1().Memcacheds(ns).Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("patching Memcached %s/%s: %w", ns, name, err)
		}
		return nil
	})
}

// createUnrelated creates n Deployments the operator does not own, with no
// replicas, in the namespace "unrelated".
func (e *env) createUnrelated(ctx context.Context, n int) error {
	return e.createDeployments(ctx, "unrelated", n, map[string]string{"app": "unrelated"}, nil, nil)
}

// createJunk creates n Deployments with no replicas in the namespace
// "junk", carrying the operator's managed-by label, so that its informers
// list them, and size bytes split between an annotation and an environment
// variable of their container. No Memcached has their names.
func (e *env) createJunk(ctx context.Context, n, size int) error {
	labels := map[string]string{resources.LabelManagedBy: resources.ManagedBy, "app": "junk"}
	half := strings.Repeat("x", size/2)
	return e.createDeployments(ctx, "junk", n, labels, map[string]string{"junk": half}, []corev1.EnvVar{{Name: "JUNK", Value: half}})
}

// createDeployments creates the namespace name and in it n Deployments
// named name-0, name-1, ... with no replicas, selecting and labelled with
// labels, and carrying annotations and, in their container, env.
func (e *env) createDeployments(ctx context.Context, name string, n int, labels, annotations map[string]string, env []corev1.EnvVar) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := e.kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating namespace %s: %w", ns.Name, err)
	}
	return e.parallel(ctx, n, func(ctx context.Context, i int) error {
		d := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", name, i), Labels: labels, Annotations: annotations},
			Spec: appsv1.DeploymentSpec{
				Replicas: ptr.To[int32](0),
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: name, Image: "nginx", Env: env}}},
				},
			},
		}
		if _, err := e.kube.AppsV1().Deployments(ns.Name).Create(ctx, d, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating Deployment %s/%s: %w", ns.Name, d.Name, err)
		}
		return nil
	})
}
