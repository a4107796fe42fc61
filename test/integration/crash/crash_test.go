//go:build integration

package crash

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
	clientset "github.com/kubelite/memcached-operator/pkg/generated/clientset/versioned"
	informers "github.com/kubelite/memcached-operator/pkg/generated/informers/externalversions"
	"github.com/kubelite/memcached-operator/pkg/localcluster"
	"github.com/kubelite/memcached-operator/pkg/resources"
	"github.com/kubelite/memcached-operator/test/integration/framework"
)

// TestFaultCrashMidSync SIGKILLs the operator binary while 400 Memcacheds
// in 10 namespaces are converging, and starts it again. Expected: every
// Memcached converges, with exactly one Deployment and one Service each,
// controlled by it, and no managed child without its Memcached; no
// Memcached ever reports a child of its own as someone else's.
//
// 400 keep the 16 workers busy until well after the kill, so that it
// catches several syncs half-way; what the restart costs at scale is make
// bench's "restart" figure.
//
// It is the package's only test: 400 Memcacheds synced by 16 workers
// without a client-side limit take the machine's cores, and their
// namespaces are left to the garbage collector when it ends.
func TestFaultCrashMidSync(t *testing.T) {
	const namespaces, perNamespace = 10, 40
	const total = namespaces * perNamespace
	kube, mcClient := framework.Unthrottled()
	ctx := context.Background()
	var nss []string
	for range namespaces {
		nss = append(nss, framework.NewNamespace(t))
	}
	framework.ReleaseAtEnd(t, mcClient, nss...)
	misread := watchReasons(t, mcClient, nss, cachev1beta1.ReasonResourceExists, cachev1beta1.ReasonWaitingForPredecessor)
	// 16 workers keep about as many syncs in flight, so that the kill
	// catches several half-way; with 4 it caught about two, and none
	// about one run in ten.
	watched := "--namespace=" + strings.Join(nss, ",")
	first := framework.Launch(t, framework.Binary(), watched, "--kube-api-qps=-1", "--workers=16")

	// converged returns the Memcacheds whose status describes their
	// generation, by namespace/name; nil if a list fails.
	converged := func() map[string]*cachev1beta1.Memcached {
		out := map[string]*cachev1beta1.Memcached{}
		for _, ns := range nss {
			list, err := mcClient.CacheV1beta1().Memcacheds(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return nil
			}
			for i, mc := range list.Items {
				if mc.Generation > 0 && mc.Status.ObservedGeneration == mc.Generation {
					out[ns+"/"+mc.Name] = &list.Items[i]
				}
			}
		}
		return out
	}

	// One Memcached first, until its rollout is complete: what the restart
	// must not rewrite. Among the others its Complete would wait for the
	// operator's next sync of it, queued behind the first syncs of all
	// the Memcacheds created meanwhile, and the kill, waiting for it,
	// would come once every one had converged.
	start := time.Now()
	framework.CreateMemcached(t, nss[0], "cache-0", func(s *cachev1beta1.MemcachedSpec) { s.Replicas = ptr.To[int32](0) })
	framework.WaitProgressing(t, nss[0], "cache-0", cachev1beta1.ReasonComplete)
	var wg sync.WaitGroup
	errs := make(chan error, total)
	for w := range 16 {
		wg.Go(func() {
			// The i-th is cache-(i/namespaces) in namespace i%namespaces;
			// the 0th is created.
			for i := w; i < total; i += 16 {
				if i == 0 {
					continue
				}
				mc := &cachev1beta1.Memcached{
					ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cache-%d", i/namespaces)},
					Spec:       cachev1beta1.MemcachedSpec{Replicas: ptr.To[int32](0)},
				}
				if _, err := mcClient.CacheV1beta1().Memcacheds(nss[i%namespaces]).Create(ctx, mc, metav1.CreateOptions{}); err != nil {
					errs <- err
				}
			}
		})
	}
	// Under the race detector, on a loaded machine, a quarter has taken
	// close to four minutes.
	framework.Eventually(t, 10*time.Minute, "a quarter of the Memcacheds converge, one of them complete", func(context.Context) (bool, string) {
		all := converged()
		complete := 0
		for _, mc := range all {
			if framework.Condition(mc, cachev1beta1.ConditionProgressing).Reason == cachev1beta1.ReasonComplete {
				complete++
			}
		}
		return len(all) >= total/4 && complete > 0, fmt.Sprintf("%d converged, %d complete", len(all), complete)
	})
	first.Kill()
	killed := time.Now()
	halfDone := childrenWithoutStatus(t, mcClient, kube, nss)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("creating Memcacheds: %v", err)
	}
	// Taken once every create is done, seconds after the kill: no write of
	// the dead process can still be on its way.
	convergedAtKill := converged()
	atKill := len(convergedAtKill)
	if atKill >= total {
		t.Fatalf("all %d Memcacheds converged before the kill; the crash hit nothing in flight", total)
	}
	// The kill must have hit syncs half-way: a child written, the status
	// not yet. Otherwise the restart proves nothing about them.
	if halfDone == 0 {
		t.Fatalf("at the kill no Memcached had a child without a status; the crash hit no sync half-way")
	}

	restarted := time.Now()
	second := framework.Launch(t, framework.Binary(), watched, "--kube-api-qps=-1")
	// Under the race detector, hundreds of Memcacheds take minutes.
	framework.Eventually(t, 10*time.Minute, "every Memcached converges after the restart", func(context.Context) (bool, string) {
		n := len(converged())
		return n == total, fmt.Sprintf("%d of %d converged", n, total)
	})
	recovered := time.Since(restarted)
	// A half-done child misread as someone else's would be reported as
	// such (ResourceExists, WaitingForPredecessor), and its Memcached
	// would wait for the recheck after foreignRecheckInterval.
	if seen := misread(); len(seen) > 0 {
		t.Errorf("%d Memcacheds reported a child of their own as someone else's: %s", len(seen), strings.Join(seen[:min(5, len(seen))], "; "))
	}
	// Every Memcached shows its generation observed, but the restarted
	// operator may still owe a status write (once the Deployment
	// controller has observed the new Deployment) or be finishing a
	// sync: what it wrote is read once it has gone quiet.
	second.WaitQuiet(t)
	// The restarted operator must not write what was done: a Memcached
	// whose rollout was complete at the kill, which only the operator's
	// status writes change, keeps its resourceVersion.
	after := converged()
	// The others converged at the kill were written while their
	// Deployment's controller had not yet observed it: each owes the one
	// status write that says the rollout is complete.
	done, rewritten, owed := 0, 0, 0
	for key, mc := range convergedAtKill {
		if framework.Condition(mc, cachev1beta1.ConditionProgressing).Reason != cachev1beta1.ReasonComplete {
			owed++
			continue
		}
		done++
		if after[key].ResourceVersion != mc.ResourceVersion {
			rewritten++
		}
	}
	if done == 0 || rewritten > 0 {
		t.Errorf("the restarted operator wrote the status of %d of the %d Memcacheds complete at the kill", rewritten, done)
	}
	// The restarted operator's writes, counted once it has gone quiet:
	// the apiserver has answered all that it took. The first operator died
	// before the second started, so none of them is its.
	requests := second.Requests(t, func(e localcluster.AuditEvent) bool {
		return e.Write() && slices.Contains(nss, e.Namespace())
	})
	writes := len(requests)
	t.Logf("killed %s after the first create with %d of %d converged (%d of them complete) and %d half-done; the restarted operator converged the rest in %s (%s after its start) and sent %d writes",
		killed.Sub(start).Round(100*time.Millisecond), atKill, total, done, halfDone, time.Since(killed).Round(100*time.Millisecond), recovered.Round(100*time.Millisecond), writes)
	// Each Memcached not converged at the kill needs at most the patch
	// that adds the finalizer (if the first operator had not), a
	// Deployment, a Service, a PodDisruptionBudget and two status writes:
	// one when its children exist, one when the Deployment controller has
	// observed the new Deployment (the two coalesce when it is quick).
	// Those converged but not complete owe one status write each; the
	// complete ones nothing.
	if limit := 6*(total-atKill) + owed; writes > limit {
		byKind := map[string]int{}
		for _, e := range requests {
			byKind[fmt.Sprintf("%s %s (%d)", e.Verb, e.Resource(), e.Code())]++
		}
		t.Errorf("the restarted operator sent %d writes for %d Memcacheds not converged at the kill and %d not complete, want at most %d; by kind: %v",
			writes, total-atKill, owed, limit, byKind)
	}

	selector := metav1.ListOptions{LabelSelector: resources.LabelManagedBy + "=" + resources.ManagedBy}
	for _, ns := range nss {
		mcs, err := mcClient.CacheV1beta1().Memcacheds(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		uids := map[string]types.UID{}
		for _, mc := range mcs.Items {
			uids[mc.Name] = mc.UID
		}
		deps, err := kube.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		svcs, err := kube.CoreV1().Services(ns).List(ctx, selector)
		if err != nil {
			t.Fatal(err)
		}
		var children []metav1.Object
		for i := range deps.Items {
			children = append(children, &deps.Items[i])
		}
		for i := range svcs.Items {
			children = append(children, &svcs.Items[i])
		}
		if len(deps.Items) != len(uids) || len(svcs.Items) != len(uids) {
			t.Errorf("namespace %s: %d Memcacheds, %d Deployments, %d managed Services; want one of each per Memcached",
				ns, len(uids), len(deps.Items), len(svcs.Items))
		}
		for _, c := range children {
			if ref := metav1.GetControllerOf(c); ref == nil || ref.UID != uids[c.GetName()] {
				t.Errorf("%s/%s (%T) is not controlled by its Memcached: %+v", ns, c.GetName(), c, ref)
			}
		}
	}
}

// watchReasons watches the Memcacheds of namespaces until the test ends and
// returns a function that lists, as "namespace/name Type=Reason", each
// that has shown a condition with one of reasons, however briefly.
func watchReasons(t *testing.T, mcClient clientset.Interface, namespaces []string, reasons ...string) func() []string {
	t.Helper()
	var mu sync.Mutex
	seen := map[string]bool{}
	observe := func(obj any) {
		mc, ok := obj.(*cachev1beta1.Memcached)
		if !ok || !slices.Contains(namespaces, mc.Namespace) {
			return
		}
		for _, c := range mc.Status.Conditions {
			if slices.Contains(reasons, c.Reason) {
				mu.Lock()
				seen[fmt.Sprintf("%s/%s %s=%s", mc.Namespace, mc.Name, c.Type, c.Reason)] = true
				mu.Unlock()
			}
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	factory := informers.NewSharedInformerFactory(mcClient, 0)
	informer := factory.Cache().V1beta1().Memcacheds().Informer()
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    observe,
		UpdateFunc: func(_, obj any) { observe(obj) },
	}); err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		out := slices.Collect(maps.Keys(seen))
		slices.Sort(out)
		return out
	}
}

// childrenWithoutStatus counts the Memcacheds that have a Deployment they
// control but no status yet: syncs caught half-way.
func childrenWithoutStatus(t *testing.T, mcClient clientset.Interface, kube kubernetes.Interface, nss []string) int {
	t.Helper()
	ctx := context.Background()
	n := 0
	for _, ns := range nss {
		mcs, err := mcClient.CacheV1beta1().Memcacheds(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		deps, err := kube.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		controlled := map[types.UID]bool{}
		for i := range deps.Items {
			if ref := metav1.GetControllerOf(&deps.Items[i]); ref != nil {
				controlled[ref.UID] = true
			}
		}
		for _, mc := range mcs.Items {
			if mc.Status.ObservedGeneration == 0 && controlled[mc.UID] {
				n++
			}
		}
	}
	return n
}
