//go:build integration

package conversion

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagemigrationv1 "k8s.io/api/storagemigration/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	cachev1alpha1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1alpha1"
	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
	clientset "github.com/kubelite/memcached-operator/pkg/generated/clientset/versioned"
	"github.com/kubelite/memcached-operator/pkg/localcluster"
	"github.com/kubelite/memcached-operator/test/integration/framework"
)

// previousRelease is the last commit whose CRD served v1alpha1 alone and
// whose operator worked in it: the release users upgrade from.
const previousRelease = "5cc1e6b8562449770316b789c4b883fb250380ab"

// upgradeObjects is how many Memcacheds the old release converges before
// the upgrade.
const upgradeObjects = 12

// upgradeReplicas is the replica count of the i-th of them.
func upgradeReplicas(i int) int32 { return int32(1 + i%2) }

// previousReleaseTree extracts previousRelease from this repository's git
// history into a temporary directory and builds its operator there.
func previousReleaseTree(t *testing.T) (dir, binary string) {
	t.Helper()
	dir = t.TempDir()
	tarball := filepath.Join(t.TempDir(), "previous.tar")
	// From the repository's root: from a subdirectory, git archive would
	// take only that subdirectory.
	archive := exec.Command("git", "archive", "--format=tar", "-o", tarball, previousRelease)
	archive.Dir = framework.Path(".")
	if out, err := archive.CombinedOutput(); err != nil {
		t.Fatalf("git archive %s (the test needs this repository's history): %v\n%s", previousRelease, err, out)
	}
	if out, err := exec.Command("tar", "-x", "-f", tarball, "-C", dir).CombinedOutput(); err != nil {
		t.Fatalf("unpacking the previous release: %v\n%s", err, out)
	}
	binary = filepath.Join(dir, "memcached-operator-previous")
	build := exec.Command("go", "build", "-o", binary, ".")
	build.Dir = dir
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the previous release: %v\n%s", err, out)
	}
	return dir, binary
}

// TestIntegrationUpgradeToV1beta1 upgrades in place, on a cluster of its
// own: the previous release's CRD and operator converge Memcacheds stored
// as v1alpha1; then this release's CRD, RBAC and operator replace them and
// a StorageVersionMigration rewrites the objects, and the CRD ends with
// storedVersions [v1beta1]. The schema change needs one write per child:
// moving its ownerReference from v1alpha1 to v1beta1, so that v1alpha1 can
// be removed one day without leaving the garbage collector a reference it
// cannot resolve. This release also changes the Pod template's defaults
// (spreading, the preStop delay) and adds a PodDisruptionBudget, so each
// cache rolls once: the Pod templates may differ in exactly those fields,
// Service specs not at all, and the migration itself changes nothing and
// costs no write.
//
// Its cluster is its own, not the package's, so it runs beside the other
// tests of the package and its operators are none of theirs.
func TestIntegrationUpgradeToV1beta1(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	oldTree, oldBinary := previousReleaseTree(t)

	cluster, err := localcluster.Start(ctx, localcluster.Config{ControllerManager: true, Scheduler: true, Kwok: true, Nodes: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Stop)
	kube := kubernetes.NewForConfigOrDie(cluster.Config)
	mc := clientset.NewForConfigOrDie(cluster.Config)
	crds := apiextensionsclient.NewForConfigOrDie(cluster.Config)

	// The previous release, as its users run it.
	old := filepath.Join(oldTree, "artifacts")
	if err := cluster.ApplyFiles(ctx, filepath.Join(old, "crd"), filepath.Join(old, "namespace.yaml"), filepath.Join(old, "rbac")); err != nil {
		t.Fatal(err)
	}
	oldKubeconfig, err := cluster.ServiceAccountKubeconfig(ctx, "memcached-operator", "memcached-operator")
	if err != nil {
		t.Fatal(err)
	}
	previous := framework.LaunchOn(t, oldBinary, oldKubeconfig)
	for i := range upgradeObjects {
		_, err := mc.CacheV1alpha1().Memcacheds("default").Create(ctx, &cachev1alpha1.Memcached{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cache-%d", i)},
			Spec: cachev1alpha1.MemcachedSpec{
				Replicas: ptr.To(upgradeReplicas(i)),
				MemoryMB: int32(64 * (1 + i%3)),
				Exporter: &cachev1alpha1.ExporterSpec{Enabled: i%4 == 0},
			},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
	framework.Eventually(t, 3*time.Minute, "the previous release converges every Memcached", func(ctx context.Context) (bool, string) {
		list, err := mc.CacheV1alpha1().Memcacheds("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		ready := 0
		for _, m := range list.Items {
			for _, c := range m.Status.Conditions {
				if c.Type == cachev1alpha1.ConditionAvailable && c.Status == metav1.ConditionTrue && m.Status.ObservedGeneration == m.Generation {
					ready++
				}
			}
		}
		return ready == upgradeObjects, fmt.Sprintf("%d of %d Available", ready, upgradeObjects)
	})
	before := childrenState(t, kube)
	if err := previous.Terminate(framework.WaitLong); err != nil {
		t.Fatalf("stopping the previous release: %v", err)
	}

	// This release: CRD and RBAC applied over the old ones, then the
	// operator, outside the cluster with its webhook URL.
	if err := cluster.ApplyFiles(ctx, framework.Path("artifacts/crd"), framework.Path("artifacts/rbac")); err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := cluster.ServiceAccountKubeconfig(ctx, "memcached-operator", "memcached-operator")
	if err != nil {
		t.Fatal(err)
	}
	webhookAddr := framework.FreeAddr(t)
	// The resync period is the framework's, short against the 10 h of
	// production, so that the test can wait for resyncs (WaitTwoResyncs).
	// A resync of a Memcached whose child is refused only repeats the
	// refusal: its status, and so the writes counted below, stay as they
	// are.
	current := framework.LaunchOn(t, framework.Binary(), kubeconfig, "--resync-period="+framework.Resync.String(),
		"--webhook-bind-address="+webhookAddr, "--webhook-url=https://"+webhookAddr+"/convert")
	framework.Eventually(t, framework.WaitLong, "v1alpha1-stored objects read as v1beta1", func(ctx context.Context) (bool, string) {
		list, err := mc.CacheV1beta1().Memcacheds("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		return len(list.Items) == upgradeObjects, fmt.Sprintf("%d objects", len(list.Items))
	})
	current.WaitReady(t)
	framework.Eventually(t, framework.WaitLong, "every child's ownerReference names v1beta1", func(ctx context.Context) (bool, string) {
		stale := 0
		deps, err := kube.AppsV1().Deployments("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		svcs, err := kube.CoreV1().Services("default").List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/managed-by"})
		if err != nil {
			return false, err.Error()
		}
		refs := [][]metav1.OwnerReference{}
		for _, d := range deps.Items {
			refs = append(refs, d.OwnerReferences)
		}
		for _, s := range svcs.Items {
			refs = append(refs, s.OwnerReferences)
		}
		for _, r := range refs {
			if len(r) != 1 || r[0].APIVersion != "cache.kubelite.io/v1beta1" {
				stale++
			}
		}
		return stale == 0 && len(refs) == 2*upgradeObjects, fmt.Sprintf("%d of %d children still name v1alpha1", stale, len(refs))
	})
	// Settled: every Memcached complete again, and no write while the
	// operator resyncs them all twice. The new PodDisruptionBudgets can be
	// refused for a while: the apiserver's
	// OwnerReferencesPermissionEnforcement resolves the owner's kind
	// through a discovery cache that learns v1beta1 only on its next
	// refresh, and refuses blockOwnerDeletion until then (a minute here).
	// The operator shows APIServerError meanwhile and retries every 5 s.
	var settled int
	framework.Eventually(t, 3*time.Minute, "the upgraded operator settles", func(ctx context.Context) (bool, string) {
		list, err := mc.CacheV1beta1().Memcacheds("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, m := range list.Items {
			for _, c := range m.Status.Conditions {
				if c.Type == cachev1beta1.ConditionProgressing && c.Reason != cachev1beta1.ReasonComplete {
					return false, m.Name + " is " + c.Reason
				}
			}
		}
		before, err := restWrites(current)
		if err != nil {
			return false, err.Error()
		}
		current.WaitTwoResyncs(t, upgradeObjects)
		settled, err = restWrites(current)
		if err != nil {
			return false, err.Error()
		}
		return settled == before, fmt.Sprintf("%d writes across two resyncs", settled-before)
	})
	// The webhook's Secret and CRD patch, and per Memcached: the patch
	// that adds the finalizer; three child writes (the Deployment's and
	// Service's applies and the PodDisruptionBudget's create); the
	// Warning Event of the refusal; status updates for the refusal shown
	// and cleared, for Complete, and for each state of the roll the
	// operator's status sync sees, one Pod at a time (maxSurge 1): at most
	// four per Pod (the new one created, Ready, available minReadySeconds
	// later, the old one gone), fewer when its 1 s wait for the
	// Deployment's status coalesces them. The roll is operator-caused, so
	// it is paced (--max-concurrent-rollouts=1): a Memcached waiting for
	// its turn also writes that status, an Event when it queues and one
	// when it starts. Refused creates are counted apart. Measured for 12
	// Memcacheds: 90 and 113 in two runs without the finalizer patch and
	// pacing, 117 with the patch, 131 with pacing, 142 on 2026-12-05 with
	// minReadySeconds 10 by default.
	ok, refused, err := writesByOutcome(current)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the upgraded operator sent %d writes (%d more refused) for %d Memcacheds before the migration", ok, refused, upgradeObjects)
	lo, hi := 2+4*upgradeObjects, 2
	for i := range upgradeObjects {
		finalizer, children, refusalEvent := 1, 3, 1
		statuses := 3 + 4*int(upgradeReplicas(i)) // refusal shown and cleared, Complete; the roll
		paced := 3                                // the queued status, two Events
		hi += finalizer + children + refusalEvent + statuses + paced
	}
	if ok < lo || ok > hi {
		t.Errorf("the upgraded operator sent %d successful writes before the migration, want %d to %d", ok, lo, hi)
	}
	settledState := childrenState(t, kube)
	for name, was := range before {
		now, ok := settledState[name]
		if strings.HasPrefix(name, "pod/") || !ok {
			continue // Pods roll once; their successors are compared below.
		}
		if withoutReleaseDefaults(t, now) != withoutReleaseDefaults(t, was) {
			t.Errorf("%s changed across the upgrade beyond this release's new defaults:\n before %s\n after  %s", name, was, now)
		}
	}

	if err := cluster.ApplyFiles(ctx, framework.Path("artifacts/migration")); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, framework.WaitLong, "the StorageVersionMigration succeeds", func(ctx context.Context) (bool, string) {
		svm, err := kube.StoragemigrationV1().StorageVersionMigrations().Get(ctx, "memcacheds-v1beta1", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, c := range svm.Status.Conditions {
			if c.Type == string(storagemigrationv1.MigrationSucceeded) && c.Status == metav1.ConditionTrue {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%+v", svm.Status.Conditions)
	})
	framework.Eventually(t, framework.WaitLong, "storedVersions is [v1beta1]", func(ctx context.Context) (bool, string) {
		crd, err := crds.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crdName, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return strings.Join(crd.Status.StoredVersions, ",") == "v1beta1", fmt.Sprint(crd.Status.StoredVersions)
	})
	// The migration's rewrites reach the operator as updates with the same
	// generation. Whether or not they sync a Memcached, its resyncs after
	// the migration do, from a cache that holds the rewritten object: wait
	// for two of them, then count.
	current.WaitTwoResyncs(t, upgradeObjects)
	after := childrenState(t, kube)
	for name, was := range settledState {
		if now := after[name]; now != was {
			t.Errorf("%s changed during the migration:\n before %s\n after  %s", name, was, now)
		}
	}
	writes, err := restWrites(current)
	if err != nil {
		t.Fatal(err)
	}
	if writes != settled {
		t.Errorf("the operator sent %d writes during the migration, want 0", writes-settled)
	}
	list, err := mc.CacheV1beta1().Memcacheds("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range list.Items {
		if m.Status.ObservedGeneration != m.Generation {
			t.Errorf("%s: observedGeneration %d, generation %d", m.Name, m.Status.ObservedGeneration, m.Generation)
		}
	}
}

// restWrites sums the operator's rest_client_requests_total over the
// methods that write, whatever the answer.
func restWrites(op *framework.Operator) (int, error) {
	m, err := op.Metrics()
	if err != nil {
		return 0, err
	}
	var total float64
	for method, n := range m.SumBy("rest_client_requests_total", "method", nil) {
		if method != http.MethodGet && method != http.MethodHead {
			total += n
		}
	}
	return int(total), nil
}

// writesByOutcome sums the operator's rest_client_requests_total over the
// write methods, apart by whether the apiserver accepted them.
func writesByOutcome(op *framework.Operator) (ok, refused int, err error) {
	m, err := op.Metrics()
	if err != nil {
		return 0, 0, err
	}
	for _, method := range []string{http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		for code, n := range m.SumBy("rest_client_requests_total", "code", map[string]string{"method": method}) {
			if strings.HasPrefix(code, "2") {
				ok += int(n)
			} else {
				refused += int(n)
			}
		}
	}
	return ok, refused, nil
}

// withoutReleaseDefaults drops from a Deployment's recorded state (see
// childrenState) what this release builds differently for every cache: the
// scheduling defaults and the memcached container's preStop hook.
func withoutReleaseDefaults(t *testing.T, state string) string {
	t.Helper()
	replicas, template, found := strings.Cut(state, ", template ")
	if !found {
		return state
	}
	var tmpl corev1.PodTemplateSpec
	if err := json.Unmarshal([]byte(template), &tmpl); err != nil {
		t.Fatal(err)
	}
	tmpl.Spec.Affinity, tmpl.Spec.TopologySpreadConstraints = nil, nil
	for i := range tmpl.Spec.Containers {
		tmpl.Spec.Containers[i].Lifecycle = nil
	}
	out, err := json.Marshal(tmpl)
	if err != nil {
		t.Fatal(err)
	}
	return replicas + ", template " + string(out)
}

// childrenState describes, per child, what the caches run on: a
// Deployment's replicas and Pod template, a Service's spec, a Pod's UID
// and restarts.
func childrenState(t *testing.T, kube kubernetes.Interface) map[string]string {
	t.Helper()
	ctx := context.Background()
	state := map[string]string{}
	deps, err := kube.AppsV1().Deployments("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range deps.Items {
		template, err := json.Marshal(d.Spec.Template)
		if err != nil {
			t.Fatal(err)
		}
		state["deployment/"+d.Name] = fmt.Sprintf("replicas %d, template %s", ptr.Deref(d.Spec.Replicas, 0), template)
	}
	svcs, err := kube.CoreV1().Services("default").List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/managed-by"})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range svcs.Items {
		spec, err := json.Marshal(s.Spec)
		if err != nil {
			t.Fatal(err)
		}
		state["service/"+s.Name] = string(spec)
	}
	pods, err := kube.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		restarts := int32(0)
		for _, c := range p.Status.ContainerStatuses {
			restarts += c.RestartCount
		}
		state["pod/"+p.Name] = fmt.Sprintf("uid %s, restarts %d", p.UID, restarts)
	}
	return state
}
