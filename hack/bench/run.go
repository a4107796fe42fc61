package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

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

	cachev1alpha1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1alpha1"
	clientset "github.com/kubelite/memcached-operator/pkg/generated/clientset/versioned"
	"github.com/kubelite/memcached-operator/pkg/localcluster"
	"github.com/kubelite/memcached-operator/pkg/resources"
)

// Config is one size to measure.
type Config struct {
	N                 int
	Namespaces        int
	Unrelated         int
	Idle              time.Duration
	Binary            string
	ClientConcurrency int
	Workers           int
	// ProfileDir, if set, receives a CPU profile of the operator taken
	// during the converge with the client rate limit off, and a heap
	// profile of a fresh start over N converged objects.
	ProfileDir string
}

// Result holds every figure for one N.
type Result struct {
	N int `json:"n"`

	// WallSeconds is how long the bench took for this N, both clusters
	// included.
	WallSeconds float64 `json:"wallSeconds"`

	ConvergeDefaultSeconds   float64 `json:"convergeDefaultSeconds"`
	ConvergeUnlimitedSeconds float64 `json:"convergeUnlimitedSeconds"`
	// CreatesDefaultSeconds and CreatesUnlimitedSeconds are when, within
	// each converge, the harness's last create of a Memcached returned.
	// Creating the Memcacheds is part of the converge time and not of the
	// floor, and it shares the apiserver with the operator's writes.
	CreatesDefaultSeconds   float64 `json:"createsDoneDefaultSeconds"`
	CreatesUnlimitedSeconds float64 `json:"createsDoneUnlimitedSeconds"`
	// FloorSeconds is the time plain client-go takes for the operator's
	// writes with the operator's concurrency and no client limit: what the
	// control plane itself allows. Both converge times are compared with it.
	FloorSeconds float64 `json:"floorSeconds"`

	WritesPerObjectScratch    map[string]float64 `json:"writesPerObjectFromScratch"`
	WritesPerObjectSpecChange map[string]float64 `json:"writesPerObjectSpecChange"`
	WritesIdle                map[string]float64 `json:"writesDuringIdleWithResyncs"`
	ReadsPerObjectScratch     float64            `json:"readsPerObjectFromScratch"`
	SpecChangeSeconds         float64            `json:"specChangeSeconds"`

	PeakRSSBytes         float64 `json:"peakRSSBytes"`
	HeapInuseBytes       float64 `json:"heapInuseBytes"`
	HeapBytesPerObject   float64 `json:"heapBytesPerObject"`
	HeapWithUnrelated    float64 `json:"heapInuseBytesWithUnrelatedDeployments"`
	UnrelatedDeployments int     `json:"unrelatedDeployments"`

	StartupSeconds float64            `json:"startupSeconds"`
	StartupWrites  map[string]float64 `json:"startupWrites"`
	// StartupSyncs is how many syncs the restart ran; N when each
	// Memcached is synced once.
	StartupSyncs float64 `json:"startupSyncs"`

	IdleCPUSeconds float64 `json:"idleCPUSeconds"`
	IdleSeconds    float64 `json:"idleWindowSeconds"`
}

func sum(m map[string]float64) float64 {
	var s float64
	for _, v := range m {
		s += v
	}
	return s
}

func runSize(ctx context.Context, cfg Config) (r Result, err error) {
	r = Result{N: cfg.N}
	began := time.Now()
	defer func() { r.WallSeconds = time.Since(began).Seconds() }()
	step := func(format string, args ...any) {
		fmt.Printf("  [N=%d %6.1fs] "+format+"\n", append([]any{cfg.N, time.Since(began).Seconds()}, args...)...)
	}

	// Run 1: default flags. Everything but the unlimited converge time and
	// the floor.
	env, err := newEnv(ctx, cfg)
	if err != nil {
		return r, err
	}
	defer env.stop()

	op, err := env.startOperator(nil)
	if err != nil {
		return r, err
	}
	before := op.scrape()
	step("creating %d Memcacheds over %d namespaces", cfg.N, cfg.Namespaces)
	start := time.Now()
	if err := env.createMemcacheds(ctx, "mc"); err != nil {
		return r, err
	}
	r.CreatesDefaultSeconds = time.Since(start).Seconds()
	if err := env.tracker.waitConverged(ctx, "mc", 1, cfg.N); err != nil {
		return r, err
	}
	r.ConvergeDefaultSeconds = time.Since(start).Seconds()
	after := op.scrape()
	r.WritesPerObjectScratch = perObject(after.writesSince(before), cfg.N)
	r.ReadsPerObjectScratch = (after.reads - before.reads) / float64(cfg.N)
	step("converged in %.1fs", r.ConvergeDefaultSeconds)

	// The patch moves every Memcached to generation 2.
	step("changing the spec of every Memcached")
	before = op.scrape()
	start = time.Now()
	if err := env.patchAll(ctx, "mc", `{"spec":{"memoryMB":96}}`); err != nil {
		return r, err
	}
	if err := env.tracker.waitConverged(ctx, "mc", 2, cfg.N); err != nil {
		return r, err
	}
	r.SpecChangeSeconds = time.Since(start).Seconds()
	after = op.scrape()
	r.WritesPerObjectSpecChange = perObject(after.writesSince(before), cfg.N)

	step("idle for %s (resync period %s)", cfg.Idle, resyncPeriod)
	if err := op.waitIdle(ctx); err != nil {
		return r, err
	}
	before = op.scrape()
	cpu0 := op.cpuSeconds()
	time.Sleep(cfg.Idle)
	r.IdleCPUSeconds = op.cpuSeconds() - cpu0
	r.IdleSeconds = cfg.Idle.Seconds()
	after = op.scrape()
	r.WritesIdle = after.writesSince(before)
	r.PeakRSSBytes = op.peakRSS()

	step("restarting the operator over the converged cluster")
	op.stop()
	start = time.Now()
	op, err = env.startOperator(nil)
	if err != nil {
		return r, err
	}
	base := op.scrape() // Process-local counters start at zero.
	if err := op.waitDrained(ctx, cfg.N); err != nil {
		return r, err
	}
	r.StartupSeconds = time.Since(start).Seconds()
	// Counted once nothing has synced for a while, so that late syncs and
	// their writes are included.
	if err := op.waitIdle(ctx); err != nil {
		return r, err
	}
	settled := op.scrape()
	r.StartupWrites = settled.writesSince(base)
	r.StartupSyncs = settled.reconciles

	if cfg.Unrelated > 0 {
		step("creating %d unrelated Deployments and restarting", cfg.Unrelated)
		op.stop()
		if err := env.createUnrelated(ctx, cfg.Unrelated); err != nil {
			return r, err
		}
		op, err = env.startOperator(nil)
		if err != nil {
			return r, err
		}
		if err := op.waitDrained(ctx, cfg.N); err != nil {
			return r, err
		}
		r.HeapWithUnrelated = op.settledHeap("")
		r.UnrelatedDeployments = cfg.Unrelated
		// The baseline for the comparison is the restart over the second
		// cluster below, without them.
	}
	op.stop()
	env.stop()

	// Run 2: --kube-api-qps=-1 on a fresh cluster.
	env, err = newEnv(ctx, cfg)
	if err != nil {
		return r, err
	}
	op, err = env.startOperator([]string{"--kube-api-qps=-1"})
	if err != nil {
		return r, err
	}
	step("converging with the client rate limit off")
	profiled := make(chan error, 1)
	if cfg.ProfileDir != "" {
		go func() { profiled <- op.cpuProfile(cfg.ProfileDir, cfg.N) }()
	} else {
		profiled <- nil
	}
	start = time.Now()
	if err := env.createMemcacheds(ctx, "mc"); err != nil {
		return r, err
	}
	r.CreatesUnlimitedSeconds = time.Since(start).Seconds()
	if err := env.tracker.waitConverged(ctx, "mc", 1, cfg.N); err != nil {
		return r, err
	}
	r.ConvergeUnlimitedSeconds = time.Since(start).Seconds()
	if err := <-profiled; err != nil {
		return r, fmt.Errorf("CPU profile: %w", err)
	}
	if err := op.waitIdle(ctx); err != nil {
		return r, err
	}
	// Heap of a fresh start over N converged objects, for the comparison
	// with unrelated Deployments above.
	op.stop()
	op, err = env.startOperator([]string{"--kube-api-qps=-1"})
	if err != nil {
		return r, err
	}
	if err := op.waitDrained(ctx, cfg.N); err != nil {
		return r, err
	}
	heapProfile := ""
	if cfg.ProfileDir != "" {
		heapProfile = filepath.Join(cfg.ProfileDir, fmt.Sprintf("heap-N%d.pprof", cfg.N))
	}
	r.HeapInuseBytes = op.settledHeap(heapProfile)
	r.HeapBytesPerObject = r.HeapInuseBytes / float64(cfg.N)
	op.stop()
	step("floor: the same writes from plain client-go, no client limit")
	if r.FloorSeconds, err = env.floor(ctx); err != nil {
		return r, err
	}
	env.stop()
	step("done")
	return r, nil
}

// defaultQPS and defaultBurst are the operator's --kube-api-qps and
// --kube-api-burst defaults (options.go in the repository root, which is
// package main and cannot be imported), printed with the results.
const (
	defaultQPS   = 200
	defaultBurst = 400
)

// resyncPeriod is the operator's --resync-period in the bench: short, so
// the idle window covers resyncs.
const resyncPeriod = 20 * time.Second

func perObject(m map[string]float64, n int) map[string]float64 {
	out := map[string]float64{}
	for k, v := range m {
		out[k] = v / float64(n)
	}
	return out
}

// env is one control plane with the CRD installed.
type env struct {
	cfg     Config
	cluster *localcluster.Cluster
	kube    kubernetes.Interface
	mc      clientset.Interface
	tracker *tracker
	ops     []*operatorProc
}

func newEnv(ctx context.Context, cfg Config) (*env, error) {
	c, err := localcluster.Start(ctx, localcluster.Config{})
	if err != nil {
		return nil, err
	}
	if err := c.ApplyFiles(ctx, "artifacts/crd"); err != nil {
		c.Stop()
		return nil, err
	}
	if err := waitCRDSettled(ctx, c.Config); err != nil {
		c.Stop()
		return nil, err
	}
	rc := rest.CopyConfig(c.Config)
	rc.QPS, rc.Burst = -1, 0
	e := &env{cfg: cfg, cluster: c, kube: kubernetes.NewForConfigOrDie(rc), mc: clientset.NewForConfigOrDie(rc)}
	for i := range cfg.Namespaces {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: e.namespace("mc", i)}}
		if _, err := e.kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
			e.stop()
			return nil, err
		}
	}
	if e.tracker, err = startTracker(ctx, e.kube, e.mc); err != nil {
		e.stop()
		return nil, err
	}
	return e, nil
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
		return err
	}
	gvr := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	crd, err := dyn.Resource(gvr).Get(ctx, "memcacheds."+cachev1alpha1.GroupName, metav1.GetOptions{})
	if err != nil {
		return err
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

func (e *env) stop() {
	for _, op := range e.ops {
		op.stop()
	}
	e.ops = nil
	if e.tracker != nil {
		e.tracker.stop()
		e.tracker = nil
	}
	if e.cluster != nil {
		e.cluster.Stop()
		e.cluster = nil
	}
}

func (e *env) namespace(prefix string, i int) string {
	return fmt.Sprintf("%s-%d", prefix, i%e.cfg.Namespaces)
}

// parallel runs f(i) for i in [0,n) with the harness's client concurrency.
func (e *env) parallel(n int, f func(i int) error) error {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	next := make(chan int)
	for range e.cfg.ClientConcurrency {
		wg.Go(func() {
			for i := range next {
				if err := f(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	return first
}

func (e *env) createMemcacheds(ctx context.Context, prefix string) error {
	return e.parallel(e.cfg.N, func(i int) error {
		mc := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cache-%d", i), Namespace: e.namespace(prefix, i)}}
		_, err := e.mc.CacheV1alpha1().Memcacheds(mc.Namespace).Create(ctx, mc, metav1.CreateOptions{})
		return err
	})
}

func (e *env) patchAll(ctx context.Context, prefix, patch string) error {
	return e.parallel(e.cfg.N, func(i int) error {
		_, err := e.mc.CacheV1alpha1().Memcacheds(e.namespace(prefix, i)).Patch(ctx, fmt.Sprintf("cache-%d", i), types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		return err
	})
}

func (e *env) createUnrelated(ctx context.Context, n int) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "unrelated"}}
	if _, err := e.kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		return err
	}
	labels := map[string]string{"app": "unrelated"}
	return e.parallel(n, func(i int) error {
		d := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("web-%d", i), Labels: labels},
			Spec: appsv1.DeploymentSpec{
				Replicas: ptr.To[int32](0),
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx"}}},
				},
			},
		}
		_, err := e.kube.AppsV1().Deployments("unrelated").Create(ctx, d, metav1.CreateOptions{})
		return err
	})
}

// floorPrefix names the floor's children, so they are new objects next to
// the operator's.
const floorPrefix = "floor-"

// floor issues, with the operator stopped, the writes the operator makes
// for each of the N Memcacheds: a Deployment and a Service applied (named
// floor-<name>) and a status update that changes the status, with the
// operator's worker concurrency and no client limit, and returns how long
// that took. It reuses the Memcacheds of the converge phase, listed before
// the clock starts, so that only the writes are timed.
func (e *env) floor(ctx context.Context) (float64, error) {
	rc := rest.CopyConfig(e.cluster.Config)
	rc.QPS, rc.Burst = -1, 0
	kube := kubernetes.NewForConfigOrDie(rc)
	mcs := clientset.NewForConfigOrDie(rc)
	list, err := mcs.CacheV1alpha1().Memcacheds("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}

	work := make(chan *cachev1alpha1.Memcached)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	start := time.Now()
	for range e.cfg.Workers {
		wg.Go(func() {
			for mc := range work {
				if err := floorOne(ctx, kube, mcs, mc); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		})
	}
	for i := range list.Items {
		work <- &list.Items[i]
	}
	close(work)
	wg.Wait()
	return time.Since(start).Seconds(), first
}

func floorOne(ctx context.Context, kube kubernetes.Interface, mcs clientset.Interface, mc *cachev1alpha1.Memcached) error {
	dep, err := resources.Deployment(mc)
	if err != nil {
		return err
	}
	svc, err := resources.Service(mc)
	if err != nil {
		return err
	}
	dep.WithName(floorPrefix + mc.Name)
	svc.WithName(floorPrefix + mc.Name)
	opts := metav1.ApplyOptions{FieldManager: "floor", Force: true}
	if _, err := kube.AppsV1().Deployments(mc.Namespace).Apply(ctx, dep, opts); err != nil {
		return err
	}
	if _, err := kube.CoreV1().Services(mc.Namespace).Apply(ctx, svc, opts); err != nil {
		return err
	}
	// A status the size of the operator's, different from the stored one:
	// an unchanged status would be a no-op the apiserver skips.
	mc.Status.ObservedGeneration = mc.Generation
	mc.Status.Selector = resources.Selector(mc)
	now := metav1.Now()
	for i := range mc.Status.Conditions {
		mc.Status.Conditions[i].LastTransitionTime = now
		mc.Status.Conditions[i].Message = "floor"
	}
	_, err = mcs.CacheV1alpha1().Memcacheds(mc.Namespace).UpdateStatus(ctx, mc, metav1.UpdateOptions{})
	return err
}

// operatorProc is the operator binary under measurement.
type operatorProc struct {
	cmd         *exec.Cmd
	metricsAddr string
	exited      chan struct{}
}

func (e *env) startOperator(extra []string) (*operatorProc, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := l.Addr().String()
	_ = l.Close()
	args := append([]string{
		"--kubeconfig=" + e.cluster.KubeconfigPath,
		"--leader-elect=false",
		"--metrics-bind-address=" + addr,
		"--health-probe-bind-address=0",
		"--resync-period=" + resyncPeriod.String(),
		"--workers=" + strconv.Itoa(e.cfg.Workers),
		"--enable-profiling",
	}, extra...)
	cmd := exec.Command(e.cfg.Binary, args...)
	logFile, err := os.Create(e.cluster.Dir + "/operator.log")
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	op := &operatorProc{cmd: cmd, metricsAddr: addr, exited: make(chan struct{})}
	go func() { _ = cmd.Wait(); _ = logFile.Close(); close(op.exited) }()
	e.ops = append(e.ops, op)
	err = wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		_, ok := op.get()
		return ok, nil
	})
	return op, err
}

// profileSeconds is how much of the unlimited converge the CPU profile
// covers; it starts with the first create.
const profileSeconds = 10

// cpuProfile saves a CPU profile from the operator's pprof endpoint (the
// bench runs it with --enable-profiling) to dir/cpu-N<n>.pprof.
func (op *operatorProc) cpuProfile(dir string, n int) error {
	resp, err := http.Get(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", op.metricsAddr, profileSeconds))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("pprof: %s", resp.Status)
	}
	f, err := os.Create(filepath.Join(dir, fmt.Sprintf("cpu-N%d.pprof", n)))
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

func (op *operatorProc) stop() {
	select {
	case <-op.exited:
		return
	default:
	}
	_ = op.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-op.exited:
	case <-time.After(40 * time.Second):
		_ = op.cmd.Process.Kill()
		<-op.exited
	}
}

func (op *operatorProc) get() (string, bool) {
	resp, err := http.Get("http://" + op.metricsAddr + "/metrics")
	if err != nil {
		return "", false
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return string(body), err == nil && resp.StatusCode == http.StatusOK
}

// sample is what the bench reads from /metrics.
type sample struct {
	writes     map[string]float64 // by HTTP method
	reads      float64
	reconciles float64
	depth      float64
	heapInuse  float64
}

func (op *operatorProc) scrape() sample {
	s := sample{writes: map[string]float64{}}
	body, _ := op.get()
	sc := bufio.NewScanner(strings.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) < 2 {
			continue
		}
		v, err := strconv.ParseFloat(fields[len(fields)-1], 64)
		if err != nil {
			continue
		}
		switch {
		case strings.HasPrefix(line, "rest_client_requests_total{"):
			method := label(line, "method")
			if method == "GET" {
				s.reads += v
			} else {
				s.writes[method] += v
			}
		case strings.HasPrefix(line, "memcached_operator_reconcile_total{"):
			s.reconciles += v
		case strings.HasPrefix(line, `workqueue_depth{name="memcached"}`):
			s.depth = v
		case strings.HasPrefix(line, "go_memstats_heap_inuse_bytes "):
			s.heapInuse = v
		}
	}
	return s
}

func label(line, name string) string {
	i := strings.Index(line, name+`="`)
	if i < 0 {
		return ""
	}
	rest := line[i+len(name)+2:]
	return rest[:strings.Index(rest, `"`)]
}

func (s sample) writesSince(before sample) map[string]float64 {
	out := map[string]float64{}
	for k, v := range s.writes {
		if d := v - before.writes[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

// waitDrained waits until the operator has synced at least n objects and
// its queue is empty.
func (op *operatorProc) waitDrained(ctx context.Context, n int) error {
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 20*time.Minute, true, func(context.Context) (bool, error) {
		s := op.scrape()
		return s.reconciles >= float64(n) && s.depth == 0, nil
	})
}

// waitIdle waits until the operator has not synced anything for 3 seconds.
func (op *operatorProc) waitIdle(ctx context.Context) error {
	last, since := -1.0, time.Now()
	return wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 10*time.Minute, true, func(context.Context) (bool, error) {
		s := op.scrape()
		if s.reconciles != last || s.depth != 0 {
			last, since = s.reconciles, time.Now()
		}
		return time.Since(since) > 3*time.Second, nil
	})
}

// settledHeap forces a GC through the heap profile endpoint and returns
// the heap in use, so the figure is what the caches hold rather than
// garbage not yet collected. The profile is saved to saveTo unless that is
// empty.
func (op *operatorProc) settledHeap(saveTo string) float64 {
	resp, err := http.Get("http://" + op.metricsAddr + "/debug/pprof/heap?gc=1")
	if err == nil {
		var out io.Writer = io.Discard
		if saveTo != "" {
			f, ferr := os.Create(saveTo)
			if ferr != nil {
				fmt.Fprintf(os.Stderr, "heap profile not saved: %v\n", ferr)
			} else {
				defer f.Close()
				out = f
			}
		}
		_, _ = io.Copy(out, resp.Body)
		_ = resp.Body.Close()
	}
	return op.scrape().heapInuse
}

func (op *operatorProc) procStatus(key string) float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", op.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, key+":") {
			kb, _ := strconv.ParseFloat(strings.Fields(line)[1], 64)
			return kb * 1024
		}
	}
	return 0
}

func (op *operatorProc) peakRSS() float64 { return op.procStatus("VmHWM") }

// cpuSeconds is the process's user plus system CPU time.
func (op *operatorProc) cpuSeconds() float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", op.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	fields := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+2:]))
	utime, _ := strconv.ParseFloat(fields[11], 64)
	stime, _ := strconv.ParseFloat(fields[12], 64)
	return (utime + stime) / 100 // USER_HZ is 100 on Linux.
}

func printResult(r Result) {
	ratio := func(a, b float64) string {
		if b == 0 {
			return "n/a"
		}
		return fmt.Sprintf("%.2fx", a/b)
	}
	fmt.Printf("\nN = %d\n", r.N)
	fmt.Printf("  %-44s %10.1fs\n", "floor (plain client-go, no client limit)", r.FloorSeconds)
	fmt.Printf("  %-44s %10.1fs   ratio to floor %s   (creates done at %.1fs)\n", fmt.Sprintf("converge, default flags (qps %d, burst %d)", defaultQPS, defaultBurst), r.ConvergeDefaultSeconds, ratio(r.ConvergeDefaultSeconds, r.FloorSeconds), r.CreatesDefaultSeconds)
	fmt.Printf("  %-44s %10.1fs   ratio to floor %s   (creates done at %.1fs)\n", "converge, --kube-api-qps=-1", r.ConvergeUnlimitedSeconds, ratio(r.ConvergeUnlimitedSeconds, r.FloorSeconds), r.CreatesUnlimitedSeconds)
	fmt.Printf("  %-44s %10.2f   %v\n", "writes per object, from scratch", sum(r.WritesPerObjectScratch), r.WritesPerObjectScratch)
	fmt.Printf("  %-44s %10.2f\n", "reads (GET) per object, from scratch", r.ReadsPerObjectScratch)
	fmt.Printf("  %-44s %10.2f   %v (%.1fs)\n", "writes per object, one spec change", sum(r.WritesPerObjectSpecChange), r.WritesPerObjectSpecChange, r.SpecChangeSeconds)
	fmt.Printf("  %-44s %10.0f   over %.0fs with resyncs every %s\n", "writes while idle (resyncs)", sum(r.WritesIdle), r.IdleSeconds, resyncPeriod)
	fmt.Printf("  %-44s %10.1f MiB\n", "peak RSS (VmHWM)", r.PeakRSSBytes/(1<<20))
	fmt.Printf("  %-44s %10.1f MiB   %.1f KiB per Memcached\n", "heap in use after restart, GC'd", r.HeapInuseBytes/(1<<20), r.HeapBytesPerObject/1024)
	if r.UnrelatedDeployments > 0 && r.HeapInuseBytes > 0 {
		fmt.Printf("  %-44s %10.1f MiB   %+.1f%% with %d unrelated Deployments\n", "heap in use with unrelated Deployments", r.HeapWithUnrelated/(1<<20), 100*(r.HeapWithUnrelated-r.HeapInuseBytes)/r.HeapInuseBytes, r.UnrelatedDeployments)
	}
	fmt.Printf("  %-44s %10.1fs   writes %v, %.0f syncs\n", "restart: caches synced and queue drained", r.StartupSeconds, r.StartupWrites, r.StartupSyncs)
	fmt.Printf("  %-44s %10.2fs   over %.0fs\n", "idle CPU", r.IdleCPUSeconds, r.IdleSeconds)
	fmt.Printf("  %-44s %10.1fs\n", "bench wall clock for this N", r.WallSeconds)
}
