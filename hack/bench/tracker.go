package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	kubeinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
	clientset "github.com/kubelite/memcached-operator/pkg/generated/clientset/versioned"
	informers "github.com/kubelite/memcached-operator/pkg/generated/informers/externalversions"
	"github.com/kubelite/memcached-operator/pkg/resources"
)

// tracker watches the Memcacheds and the operator's children, so the
// harness can tell when the cluster has converged without listing every
// object again and again: at N = 10,000 a full list every few seconds is
// load on the apiserver the operator would be measured against.
type tracker struct {
	memcacheds  cache.SharedIndexInformer
	deployments cache.SharedIndexInformer
	services    cache.SharedIndexInformer
	cancel      context.CancelFunc
}

func startTracker(ctx context.Context, kube kubernetes.Interface, mcs clientset.Interface) (*tracker, error) {
	ctx, cancel := context.WithCancel(ctx)
	mcFactory := informers.NewSharedInformerFactory(mcs, 0)
	kubeFactory := kubeinformers.NewSharedInformerFactoryWithOptions(kube, 0,
		kubeinformers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.LabelSelector = resources.LabelManagedBy + "=" + resources.ManagedBy
		}))
	t := &tracker{
		memcacheds:  mcFactory.Cache().V1beta1().Memcacheds().Informer(),
		deployments: kubeFactory.Apps().V1().Deployments().Informer(),
		services:    kubeFactory.Core().V1().Services().Informer(),
		cancel:      cancel,
	}
	mcFactory.Start(ctx.Done())
	kubeFactory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), t.memcacheds.HasSynced, t.deployments.HasSynced, t.services.HasSynced) {
		cancel()
		return nil, fmt.Errorf("harness informers did not sync")
	}
	return t, nil
}

func (t *tracker) stop() { t.cancel() }

// converged reports how many Memcacheds in namespaces named prefix-* are
// at generation gen or later and have observed it, and how many of the
// operator's Deployments and Services exist there (the floor's children,
// named floor-*, are not the operator's and are not counted).
func (t *tracker) converged(prefix string, gen int64) (observed, deployments, services int) {
	inScope := func(ns, name string) bool {
		return strings.HasPrefix(ns, prefix+"-") && !strings.HasPrefix(name, floorPrefix)
	}
	for _, obj := range t.memcacheds.GetStore().List() {
		mc := obj.(*cachev1beta1.Memcached)
		if inScope(mc.Namespace, mc.Name) && mc.Generation >= gen && mc.Status.ObservedGeneration == mc.Generation {
			observed++
		}
	}
	for _, obj := range t.deployments.GetStore().List() {
		d := obj.(*appsv1.Deployment)
		if inScope(d.Namespace, d.Name) {
			deployments++
		}
	}
	for _, obj := range t.services.GetStore().List() {
		s := obj.(*corev1.Service)
		if inScope(s.Namespace, s.Name) {
			services++
		}
	}
	return observed, deployments, services
}

// waitConverged waits until n Memcacheds have reached and observed
// generation gen and each has its Deployment and Service. It reads the
// tracker's caches only, so waiting adds no requests. gen matters after a
// spec change: until the watch delivers the change, the cache still holds
// the previous generation, observed.
func (t *tracker) waitConverged(ctx context.Context, prefix string, gen int64, n int) error {
	var observed, deployments, services int
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 20*time.Minute, true, func(context.Context) (bool, error) {
		observed, deployments, services = t.converged(prefix, gen)
		return observed >= n && deployments >= n && services >= n, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for %d Memcacheds to converge at generation %d (%d observed it; %d Deployments, %d Services): %w", n, gen, observed, deployments, services, err)
	}
	return nil
}

// rolledOut reports how many Memcacheds in namespaces named prefix-* are at
// generation gen or later, have observed it, are Available and report
// their rollout Complete: Pods of the current spec run and are ready.
func (t *tracker) rolledOut(prefix string, gen int64) (done int) {
	for _, obj := range t.memcacheds.GetStore().List() {
		mc := obj.(*cachev1beta1.Memcached)
		if !strings.HasPrefix(mc.Namespace, prefix+"-") || mc.Generation < gen || mc.Status.ObservedGeneration != mc.Generation {
			continue
		}
		available := meta.IsStatusConditionTrue(mc.Status.Conditions, cachev1beta1.ConditionAvailable)
		progressing := meta.FindStatusCondition(mc.Status.Conditions, cachev1beta1.ConditionProgressing)
		if available && progressing != nil && progressing.Reason == cachev1beta1.ReasonComplete {
			done++
		}
	}
	return done
}

// waitRolledOut waits until n Memcacheds have rolled out generation gen.
func (t *tracker) waitRolledOut(ctx context.Context, prefix string, gen int64, n int) error {
	var done int
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 20*time.Minute, true, func(context.Context) (bool, error) {
		done = t.rolledOut(prefix, gen)
		return done >= n, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for %d Memcacheds to roll out generation %d (%d have): %w", n, gen, done, err)
	}
	return nil
}
