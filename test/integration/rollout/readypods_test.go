//go:build integration

package rollout

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/kubelite/memcached-operator/test/integration/framework"
)

// readyPods follows how many Pods of a selector are Ready, event by event
// in the order the apiserver wrote them, from a List taken before the
// change under test. A Pod counts as Ready while its Ready condition is
// True and it is not being deleted: a Pod that is being deleted leaves the
// Service's endpoints and DNS records at once, so no client finds it any
// more, even while its preStop delay keeps it serving.
type readyPods struct {
	mu sync.Mutex
	// pods are the Pods that exist, by name, and whether each is Ready.
	pods map[string]bool
	// fewest is the fewest Ready Pods at any moment seen, and fewestAt
	// the Pods at the first such moment.
	fewest   int
	fewestAt string
	// deleted are the Pods whose deletion the watch delivered.
	deleted []string
	// err is why the watch ended early, if it did.
	err error
	// transitions lists each change of the count of Ready Pods, for the log.
	transitions []string
	stop        func()
}

// watchReadyPods lists the Pods of selector in ns and follows them until
// the test ends or stop is called.
func watchReadyPods(t *testing.T, ns, selector string) *readyPods {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pods := framework.Kube().CoreV1().Pods(ns)
	list, err := pods.List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	w := &readyPods{pods: map[string]bool{}}
	for i := range list.Items {
		w.pods[list.Items[i].Name] = podServes(&list.Items[i])
	}
	w.fewest = w.readyLocked()
	w.fewestAt = w.describeLocked()
	w.transitions = []string{fmt.Sprintf("start: %d Ready %s", w.fewest, w.fewestAt)}
	// The retry watcher resumes from the last resourceVersion it
	// delivered if the watch closes, so no event is lost or reordered.
	rw, err := watchtools.NewRetryWatcherWithContext(ctx, list.ResourceVersion, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, options metav1.ListOptions) (watch.Interface, error) {
			options.LabelSelector = selector
			return pods.Watch(ctx, options)
		},
	})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range rw.ResultChan() {
			w.observe(ev)
		}
	}()
	var once sync.Once
	w.stop = func() {
		once.Do(func() {
			rw.Stop()
			cancel()
			<-done
		})
	}
	t.Cleanup(w.stop)
	return w
}

// podServes reports whether a Pod is Ready and not being deleted.
func podServes(p *corev1.Pod) bool {
	return p.DeletionTimestamp == nil && slices.ContainsFunc(p.Status.Conditions, func(c corev1.PodCondition) bool {
		return c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue
	})
}

func (w *readyPods) observe(ev watch.Event) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch ev.Type {
	case watch.Added, watch.Modified, watch.Deleted:
		p, ok := ev.Object.(*corev1.Pod)
		if !ok {
			return
		}
		before := w.readyLocked()
		if ev.Type == watch.Deleted {
			delete(w.pods, p.Name)
			w.deleted = append(w.deleted, p.Name)
		} else {
			w.pods[p.Name] = podServes(p)
		}
		n := w.readyLocked()
		if n != before {
			w.transitions = append(w.transitions, fmt.Sprintf("%s %s: %d Ready %s", ev.Type, p.Name, n, w.describeLocked()))
		}
		if n < w.fewest {
			w.fewest, w.fewestAt = n, w.describeLocked()
		}
	case watch.Error:
		if w.err == nil {
			w.err = fmt.Errorf("watch error: %v", ev.Object)
		}
	}
}

func (w *readyPods) readyLocked() int {
	n := 0
	for _, ready := range w.pods {
		if ready {
			n++
		}
	}
	return n
}

// describeLocked lists the Pods with their readiness.
func (w *readyPods) describeLocked() string {
	var out []string
	for name, ready := range w.pods {
		out = append(out, fmt.Sprintf("%s=%t", name, ready))
	}
	slices.Sort(out)
	return "[" + strings.Join(out, " ") + "]"
}

// state returns the Pods that exist and whether each is Ready, and the
// Pods the watch saw deleted.
func (w *readyPods) state() (map[string]bool, []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	pods := make(map[string]bool, len(w.pods))
	for k, v := range w.pods {
		pods[k] = v
	}
	return pods, slices.Clone(w.deleted)
}
