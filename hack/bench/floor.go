package main

import (
	"context"
	"fmt"
	"time"

	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
	clientset "github.com/kubelite/memcached-operator/pkg/generated/clientset/versioned"
	"github.com/kubelite/memcached-operator/pkg/resources"
)

// floorPrefix names the floor's children, so they are new objects next to
// the operator's.
const floorPrefix = "floor-"

// floorWrites issues the writes the operator makes for each new Memcached
// in the cluster: a Deployment, a Service and a PodDisruptionBudget
// applied (named floor-<name>) and a status update of the operator's
// shape, with the operator's worker concurrency and no client limit, and
// returns how long that took in seconds. The Memcacheds are listed before
// the clock starts, so that only the writes are timed.
func (e *env) floorWrites(ctx context.Context) (float64, error) {
	list, err := e.mc.CacheV1beta1().Memcacheds("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, fmt.Errorf("listing Memcacheds: %w", err)
	}
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(e.cfg.Workers)
	start := time.Now()
	for i := range list.Items {
		g.Go(func() error { return floorOne(ctx, e.kube, e.mc, &list.Items[i]) })
	}
	if err := g.Wait(); err != nil {
		return 0, err
	}
	return time.Since(start).Seconds(), nil
}

// floorWithCreates creates the N Memcacheds as a converge does and makes
// the operator's writes for each, with the operator's worker concurrency
// and no client limit, as soon as its create has returned: a converge by
// an operator that learnt of each Memcached at once and spent nothing on
// it. It returns when the last create returned and when the last write
// did, in seconds from the first create.
//
// The converges are timed from their first create, so they carry the
// creates' load on the apiserver, which floorWrites leaves out. This floor
// carries it too.
func (e *env) floorWithCreates(ctx context.Context) (createsDone, seconds float64, err error) {
	// Buffered for every Memcached, so that the creates never wait on
	// the writers; a send also gives up once a failure has cancelled ctx.
	created := make(chan *cachev1beta1.Memcached, e.cfg.N)
	g, ctx := errgroup.WithContext(ctx)
	start := time.Now()
	g.Go(func() error {
		defer close(created)
		createErr := e.createMemcacheds(ctx, memcachedPrefix, func(mc *cachev1beta1.Memcached) {
			select {
			case created <- mc:
			case <-ctx.Done():
			}
		})
		createsDone = time.Since(start).Seconds()
		return createErr
	})
	for range e.cfg.Workers {
		g.Go(func() error {
			for mc := range created {
				if err := floorOne(ctx, e.kube, e.mc, mc); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return 0, 0, err
	}
	return createsDone, time.Since(start).Seconds(), nil
}

// floorOne makes the operator's four writes for one converged Memcached.
func floorOne(ctx context.Context, kube kubernetes.Interface, mcs clientset.Interface, mc *cachev1beta1.Memcached) error {
	defaulted := resources.Default(mc)
	children, err := resources.Build(defaulted)
	if err != nil {
		return fmt.Errorf("building the children of %s/%s: %w", mc.Namespace, mc.Name, err)
	}
	dep, svc, pdb := children.Pools[0].Deployment, children.Service, children.Pools[0].PodDisruptionBudget
	dep.WithName(floorPrefix + mc.Name)
	svc.WithName(floorPrefix + mc.Name)
	pdb.WithName(floorPrefix + mc.Name)
	opts := metav1.ApplyOptions{FieldManager: "floor", Force: true}
	if _, err := kube.AppsV1().Deployments(mc.Namespace).Apply(ctx, dep, opts); err != nil {
		return fmt.Errorf("applying Deployment %s/%s: %w", mc.Namespace, *dep.Name, err)
	}
	if _, err := kube.CoreV1().Services(mc.Namespace).Apply(ctx, svc, opts); err != nil {
		return fmt.Errorf("applying Service %s/%s: %w", mc.Namespace, *svc.Name, err)
	}
	if _, err := kube.PolicyV1().PodDisruptionBudgets(mc.Namespace).Apply(ctx, pdb, opts); err != nil {
		return fmt.Errorf("applying PodDisruptionBudget %s/%s: %w", mc.Namespace, *pdb.Name, err)
	}
	// The status the operator's first sync writes for a new Memcached.
	mc.Status.ObservedGeneration = mc.Generation
	mc.Status.Selector, mc.Status.Endpoint = resources.Selector(mc), resources.Endpoint(defaulted)
	now := metav1.Now()
	for _, c := range []metav1.Condition{
		{Type: cachev1beta1.ConditionAvailable, Status: metav1.ConditionFalse, Reason: cachev1beta1.ReasonMinimumReplicasUnavailable, Message: "0 of 1 replicas are available"},
		{Type: cachev1beta1.ConditionProgressing, Status: metav1.ConditionTrue, Reason: cachev1beta1.ReasonRollingOut, Message: "0 of 1 replicas updated, 0 available"},
		{Type: cachev1beta1.ConditionDegraded, Status: metav1.ConditionFalse, Reason: cachev1beta1.ReasonAsExpected, Message: "The children match the spec"},
	} {
		c.ObservedGeneration, c.LastTransitionTime = mc.Generation, now
		meta.SetStatusCondition(&mc.Status.Conditions, c)
	}
	if _, err := mcs.CacheV1beta1().Memcacheds(mc.Namespace).UpdateStatus(ctx, mc, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("updating the status of Memcached %s/%s: %w", mc.Namespace, mc.Name, err)
	}
	return nil
}
