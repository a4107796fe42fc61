//go:build integration

package helm

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
	clientset "github.com/kubelite/memcached-operator/pkg/generated/clientset/versioned"

	"github.com/kubelite/memcached-operator/test/integration/framework"
)

// crdName is the Memcached CRD's name.
const crdName = "memcacheds." + cachev1beta1.GroupName

// chartDir is the chart this repository ships, relative to its root.
const chartRel = "charts/memcached-operator"

// chartDir is the chart's path.
func chartDir() string { return framework.Path(chartRel) }

// helmCLI runs the helm that make helm builds against one cluster, with
// a home of its own so that no user configuration or repository cache of
// the machine plays a part.
type helmCLI struct {
	bin, kubeconfig, home string
}

// newHelm finds helm: $HELM, which make test-integration sets, else
// _output/tools/bin/helm.
func newHelm(t *testing.T, kubeconfig string) *helmCLI {
	t.Helper()
	bin := os.Getenv("HELM")
	if bin == "" {
		bin = framework.Path("_output/tools/bin/helm")
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("no helm at %s (%v): make helm builds it, and make test-integration passes it as HELM", bin, err)
	}
	bin, err := filepath.Abs(bin)
	if err != nil {
		t.Fatal(err)
	}
	return &helmCLI{bin: bin, kubeconfig: kubeconfig, home: t.TempDir()}
}

// run runs helm and fails the test, with helm's output, if it fails.
func (h *helmCLI) run(t *testing.T, args ...string) string {
	t.Helper()
	start := time.Now()
	cmd := exec.Command(h.bin, append(args, "--kubeconfig="+h.kubeconfig)...)
	cmd.Env = append(os.Environ(),
		"HELM_CACHE_HOME="+filepath.Join(h.home, "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(h.home, "config"),
		"HELM_DATA_HOME="+filepath.Join(h.home, "data"),
	)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	t.Logf("helm %s: %s", args[0], time.Since(start).Round(100*time.Millisecond))
	return string(out)
}

// olderChart copies the chart into a temporary directory with spec.paused
// taken out of its CRD: a chart from before a field was added, to upgrade
// from.
func olderChart(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "memcached-operator")
	if err := os.CopyFS(dir, os.DirFS(chartDir())); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "files", "cache.kubelite.io_memcacheds.yaml")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(raw, &crd); err != nil {
		t.Fatal(err)
	}
	for i := range crd.Spec.Versions {
		delete(crd.Spec.Versions[i].Schema.OpenAPIV3Schema.Properties["spec"].Properties, "paused")
	}
	// Through the generic form: the typed one would add
	// creationTimestamp: null and an empty status, which the template
	// carries over.
	var generic map[string]any
	b, err := yaml.Marshal(crd)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &generic); err != nil {
		t.Fatal(err)
	}
	delete(generic, "status")
	delete(generic["metadata"].(map[string]any), "creationTimestamp")
	if b, err = yaml.Marshal(generic); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// servesPaused reports whether the live CRD's v1beta1 schema has
// spec.paused.
func servesPaused(t *testing.T, crds apiextensionsclient.Interface) bool {
	t.Helper()
	crd, err := crds.ApiextensionsV1().CustomResourceDefinitions().Get(context.Background(), crdName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range crd.Spec.Versions {
		if v.Name == "v1beta1" {
			_, ok := v.Schema.OpenAPIV3Schema.Properties["spec"].Properties["paused"]
			return ok
		}
	}
	t.Fatal("the CRD serves no v1beta1")
	return false
}

// caBundle is the CA bundle the operator wrote into the CRD's conversion.
func caBundle(ctx context.Context, crds apiextensionsclient.Interface) ([]byte, error) {
	crd, err := crds.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crdName, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	if c := crd.Spec.Conversion; c != nil && c.Webhook != nil && c.Webhook.ClientConfig != nil {
		return c.Webhook.ClientConfig.CABundle, nil
	}
	return nil, nil
}

// createRestrictedNamespace makes a namespace the way docs/operations.md
// says to before helm install: labelled for the restricted Pod Security
// standard, which the operator's Pods must then pass.
func createRestrictedNamespace(t *testing.T, kube kubernetes.Interface, name string) {
	t.Helper()
	_, err := kube.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name:   name,
		Labels: map[string]string{"pod-security.kubernetes.io/enforce": "restricted"},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

// waitRolledOut waits until the Deployment has replicas Pods of its
// current template, all available: kwok makes them Ready, but runs no
// container.
func waitRolledOut(t *testing.T, kube kubernetes.Interface, ns, name string, replicas int32) *appsv1.Deployment {
	t.Helper()
	var dep *appsv1.Deployment
	framework.Eventually(t, 2*time.Minute, "Deployment "+ns+"/"+name+" rolls out", func(ctx context.Context) (bool, string) {
		var err error
		if dep, err = kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{}); err != nil {
			return false, err.Error()
		}
		s := dep.Status
		return dep.Generation == s.ObservedGeneration && ptr.Deref(dep.Spec.Replicas, 1) == replicas &&
			s.UpdatedReplicas == replicas && s.AvailableReplicas == replicas && s.Replicas == replicas, fmt.Sprintf("spec %d, status %+v", ptr.Deref(dep.Spec.Replicas, 1), s)
	})
	return dep
}

// startChartOperator runs the operator binary with the arguments of the
// release's Deployment, under the ServiceAccount the release created and
// so with exactly the release's RBAC: any Forbidden request fails the test
// (framework.Launch). What differs from its Pods is only what a Pod
// provides: the listeners bind loopback ports of their own choosing
// instead of the Pod's IP, and the namespace, which the operator reads
// from its ServiceAccount mount in a Pod, is given as flags. It logs its
// flags (-v=1), which the test reads back as the binary parsed them.
func startChartOperator(t *testing.T, dep *appsv1.Deployment) *framework.Operator {
	t.Helper()
	ctx := context.Background()
	args := dep.Spec.Template.Spec.Containers[0].Args
	local := make([]string, 0, len(args)+5)
	for _, a := range args {
		flag, value, _ := strings.Cut(a, "=")
		switch flag {
		case "--metrics-bind-address", "--health-probe-bind-address", "--webhook-bind-address":
			if _, port, err := net.SplitHostPort(value); err == nil && port != "" {
				a = flag + "=127.0.0.1:0"
			}
		}
		local = append(local, a)
	}
	name := dep.Spec.Template.Spec.ServiceAccountName
	sa, err := framework.Kube().CoreV1().ServiceAccounts(dep.Namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the Deployment's ServiceAccount: %v", err)
	}
	if sa.Labels["app.kubernetes.io/managed-by"] != "Helm" {
		t.Fatalf("ServiceAccount %s/%s is not the release's: labels %v", sa.Namespace, sa.Name, sa.Labels)
	}
	kubeconfig, err := framework.Cluster().ServiceAccountKubeconfig(ctx, dep.Namespace, name)
	if err != nil {
		t.Fatal(err)
	}
	local = append(local, "--kubeconfig="+kubeconfig, "--leader-election-namespace="+dep.Namespace, "--webhook-namespace="+dep.Namespace, "-v=1")
	// framework.Launch serves /metrics over plain HTTP unless told; the
	// release runs with the binary's default, HTTPS, unless it says.
	if !slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--metrics-secure") }) {
		local = append(local, "--metrics-secure=true")
	}
	op := framework.Launch(t, framework.Binary(), local...)
	op.User = "system:serviceaccount:" + dep.Namespace + ":" + name
	return op
}

// flag is the value the operator logged for a flag at start (-v=1), as
// it parsed its arguments: `FLAG: --name="value"`, its quotes escaped in
// the JSON format the chart sets.
func flag(t *testing.T, op *framework.Operator, name string) string {
	t.Helper()
	m := regexp.MustCompile(`FLAG: --` + regexp.QuoteMeta(name) + `=\\?"([^"\\]*)\\?"`).FindStringSubmatch(op.Log())
	if m == nil {
		t.Fatalf("the operator did not log its --%s", name)
	}
	return m[1]
}

// bindMetricsReader binds a scraper's ServiceAccount to the release's
// metrics-reader ClusterRole, as a user binds their Prometheus, and
// returns its token.
func bindMetricsReader(t *testing.T, clusterRole string) string {
	t.Helper()
	kube := framework.Kube()
	ctx := context.Background()
	if _, err := kube.RbacV1().ClusterRoles().Get(ctx, clusterRole, metav1.GetOptions{}); err != nil {
		t.Fatalf("the release's metrics reader: %v", err)
	}
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "monitoring"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	_, err := kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "prometheus-" + clusterRole},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: clusterRole},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "monitoring", Name: "prometheus"}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	token, err := framework.Cluster().ServiceAccountToken(ctx, "monitoring", "prometheus")
	if err != nil {
		t.Fatal(err)
	}
	return token
}

// waitAvailable waits until the Memcached is converged at its generation
// and Available.
func waitAvailable(t *testing.T, mcs clientset.Interface, ns, name string) *cachev1beta1.Memcached {
	t.Helper()
	var mc *cachev1beta1.Memcached
	framework.Eventually(t, framework.WaitLong, "Memcached "+ns+"/"+name+" converges", func(ctx context.Context) (bool, string) {
		var err error
		if mc, err = mcs.CacheV1beta1().Memcacheds(ns).Get(ctx, name, metav1.GetOptions{}); err != nil {
			return false, err.Error()
		}
		avail := meta.FindStatusCondition(mc.Status.Conditions, cachev1beta1.ConditionAvailable)
		prog := meta.FindStatusCondition(mc.Status.Conditions, cachev1beta1.ConditionProgressing)
		return mc.Status.ObservedGeneration == mc.Generation && avail != nil && avail.Status == metav1.ConditionTrue &&
			prog != nil && prog.Reason == cachev1beta1.ReasonComplete, fmt.Sprintf("generation %d, status %+v", mc.Generation, mc.Status)
	})
	return mc
}

// checkPlatformDefaults labels namespace ns for the platform defaults and
// waits until a dry-run create of a Memcached there is given the default
// the release's values leave on, networkPolicy: {}. The apiserver loads
// the policy through an informer.
func checkPlatformDefaults(t *testing.T, ns string) {
	t.Helper()
	ctx := context.Background()
	if _, err := framework.Kube().CoreV1().Namespaces().Patch(ctx, ns, types.MergePatchType,
		[]byte(`{"metadata":{"labels":{"cache.kubelite.io/platform-defaults":"enabled"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, framework.WaitLong, "a Memcached in a labelled namespace gets networkPolicy: {}", func(ctx context.Context) (bool, string) {
		probe := &cachev1beta1.Memcached{ObjectMeta: metav1.ObjectMeta{Name: "probe"}}
		got, err := framework.Memcacheds().CacheV1beta1().Memcacheds(ns).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			return false, err.Error()
		}
		return got.Spec.NetworkPolicy != nil, "no spec.networkPolicy"
	})
}

// TestIntegrationHelmChart installs charts/memcached-operator with helm,
// as its users do, on the package's bare control plane (one with artifacts/
// installed has objects a release cannot share), and runs
// the operator with what the release installed: the Deployment's args,
// under the release's ServiceAccount and RBAC.
//
//   - Installed from a chart whose CRD lacks spec.paused, then upgraded to
//     this one: the CRD follows the chart, which it would not from crds/.
//   - The operator converges a Memcached, writes its conversion webhook's
//     CA bundle into the CRD and answers a scrape bound to the release's
//     metrics-reader ClusterRole, without one Forbidden request.
//   - Upgraded to replicas: 3, maxConcurrentRollouts: 2 and
//     platformDefaults.enabled: the Deployment rolls to the new args, the
//     binary accepts them, the operator started with them converges a spec
//     change, and the CA bundle survives the upgrade; a Memcached written
//     in a namespace labelled for the platform defaults gets them.
//   - Uninstalled: the release's objects are gone; the CRD, the Memcached
//     and its cache's Deployment are left.
//   - A namespaced release (ci/namespaced-values.yaml) on that kept CRD
//     converges a Memcached in its namespace under Roles alone and leaves
//     the others alone; then a new cluster-wide install takes the kept CRD
//     over.
func TestIntegrationHelmChart(t *testing.T) {
	ctx := context.Background()
	start := time.Now()
	cluster := framework.Cluster()
	kube := framework.Kube()
	mcs := framework.Memcacheds()
	crds := apiextensionsclient.NewForConfigOrDie(cluster.Config)
	h := newHelm(t, cluster.KubeconfigPath)

	const (
		release = "memcached-operator"
		ns      = "memcached-operator"
		caches  = "caches"
	)
	createRestrictedNamespace(t, kube, ns)
	h.run(t, "install", release, olderChart(t), "--namespace", ns, "--wait", "--timeout=3m")
	if servesPaused(t, crds) {
		t.Fatal("the older chart's CRD has spec.paused: the test upgrades from nothing")
	}
	h.run(t, "upgrade", release, chartDir(), "--namespace", ns, "--wait", "--timeout=3m")
	if !servesPaused(t, crds) {
		t.Error("the upgrade left the CRD as the older chart had it: no spec.paused")
	}
	dep := waitRolledOut(t, kube, ns, release, 2)
	if err := exists(kube.AdmissionregistrationV1().MutatingAdmissionPolicies().Get, release+"-children-finalizer")(); err != nil {
		t.Errorf("the release's finalizer policy (finalizerPolicy: true by default): %v", err)
	}

	op := startChartOperator(t, dep)
	if v := flag(t, op, "max-concurrent-rollouts"); v != "1" {
		t.Errorf("the chart's default --max-concurrent-rollouts is %s, want 1", v)
	}
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: caches}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := mcs.CacheV1beta1().Memcacheds(caches).Create(ctx, &cachev1beta1.Memcached{ObjectMeta: metav1.ObjectMeta{Name: "cache"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitAvailable(t, mcs, caches, "cache")
	var bundle []byte
	framework.Eventually(t, time.Minute, "the operator writes the webhook's CA bundle into the CRD", func(ctx context.Context) (bool, string) {
		b, err := caBundle(ctx, crds)
		if err != nil {
			return false, err.Error()
		}
		bundle = b
		return len(b) > 0, "no bundle"
	})
	if _, err := kube.CoreV1().Secrets(ns).Get(ctx, "memcached-operator-webhook-cert", metav1.GetOptions{}); err != nil {
		t.Errorf("the webhook's Secret: %v", err)
	}
	token := bindMetricsReader(t, "memcached-operator-metrics-reader")
	framework.Eventually(t, framework.WaitLong, "/metrics for the release's metrics reader", func(context.Context) (bool, string) {
		code, body := framework.GetWithToken("https://"+op.MetricsAddr+"/metrics", token)
		return code == http.StatusOK, fmt.Sprintf("%d %s", code, body)
	})

	// A changed value, as an upgrade of the release's values: the
	// Deployment rolls (kwok's Pods), and the operator started from its
	// new args, as its new Pods would be, runs with them.
	h.run(t, "upgrade", release, chartDir(), "--namespace", ns, "--wait", "--timeout=3m",
		"--set", "replicas=3", "--set", "maxConcurrentRollouts=2", "--set", "platformDefaults.enabled=true")
	dep = waitRolledOut(t, kube, ns, release, 3)
	checkPlatformDefaults(t, caches)
	if args := dep.Spec.Template.Spec.Containers[0].Args; !slices.Contains(args, "--max-concurrent-rollouts=2") {
		t.Errorf("the upgraded Deployment's args %v lack --max-concurrent-rollouts=2", args)
	}
	if b, err := caBundle(ctx, crds); err != nil || !bytes.Equal(b, bundle) {
		t.Errorf("after the upgrade the CRD's CA bundle is %d bytes (%v), want the operator's %d: helm upgrade took it away, and with it v1alpha1", len(b), err, len(bundle))
	}
	if err := op.Terminate(time.Minute); err != nil {
		t.Errorf("stopping the release's operator: %v", err)
	}
	op = startChartOperator(t, dep)
	if v := flag(t, op, "max-concurrent-rollouts"); v != "2" {
		t.Errorf("the upgraded operator runs with --max-concurrent-rollouts %s, want 2", v)
	}
	if _, err := mcs.CacheV1beta1().Memcacheds(caches).Patch(ctx, "cache", types.MergePatchType, []byte(`{"spec":{"replicas":2}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	waitAvailable(t, mcs, caches, "cache")
	if err := op.Terminate(time.Minute); err != nil {
		t.Errorf("stopping the upgraded release's operator: %v", err)
	}

	// Uninstall: what the release created goes; what holds the caches
	// stays.
	h.run(t, "uninstall", release, "--namespace", ns, "--wait", "--timeout=3m")
	for what, check := range map[string]func() error{
		"Deployment":                              exists(kube.AppsV1().Deployments(ns).Get, release),
		"ServiceAccount":                          exists(kube.CoreV1().ServiceAccounts(ns).Get, release),
		"ClusterRole":                             exists(kube.RbacV1().ClusterRoles().Get, release),
		"ClusterRoleBinding":                      exists(kube.RbacV1().ClusterRoleBindings().Get, release),
		"ClusterRole crd-conversion":              exists(kube.RbacV1().ClusterRoles().Get, release+"-crd-conversion"),
		"Role leader-election":                    exists(kube.RbacV1().Roles(ns).Get, release+"-leader-election"),
		"Role webhook":                            exists(kube.RbacV1().Roles(ns).Get, release+"-webhook"),
		"Service webhook":                         exists(kube.CoreV1().Services(ns).Get, release+"-webhook"),
		"Service metrics":                         exists(kube.CoreV1().Services(ns).Get, release+"-metrics"),
		"PodDisruptionBudget":                     exists(kube.PolicyV1().PodDisruptionBudgets(ns).Get, release),
		"FlowSchema":                              exists(kube.FlowcontrolV1().FlowSchemas().Get, release+"-leader-election"),
		"MutatingAdmissionPolicy":                 exists(kube.AdmissionregistrationV1().MutatingAdmissionPolicies().Get, release+"-children-finalizer"),
		"MutatingAdmissionPolicyBinding":          exists(kube.AdmissionregistrationV1().MutatingAdmissionPolicyBindings().Get, release+"-children-finalizer"),
		"MutatingAdmissionPolicy defaults":        exists(kube.AdmissionregistrationV1().MutatingAdmissionPolicies().Get, release+"-defaults"),
		"MutatingAdmissionPolicyBinding defaults": exists(kube.AdmissionregistrationV1().MutatingAdmissionPolicyBindings().Get, release+"-defaults"),
		"ConfigMap defaults":                      exists(kube.CoreV1().ConfigMaps(ns).Get, release+"-defaults"),
		"ClusterRole metrics-reader":              exists(kube.RbacV1().ClusterRoles().Get, release+"-metrics-reader"),
		"ClusterRoleBinding crd-conversion":       exists(kube.RbacV1().ClusterRoleBindings().Get, release+"-crd-conversion"),
		"RoleBinding leader-election":             exists(kube.RbacV1().RoleBindings(ns).Get, release+"-leader-election"),
		"RoleBinding webhook":                     exists(kube.RbacV1().RoleBindings(ns).Get, release+"-webhook"),
	} {
		if err := check(); !apierrors.IsNotFound(err) {
			t.Errorf("after helm uninstall, %s: %v, want NotFound", what, err)
		}
	}
	for what, check := range map[string]func() error{
		"the CRD (crds.keep)": exists(crds.ApiextensionsV1().CustomResourceDefinitions().Get, crdName),
		"the Memcached":       exists(mcs.CacheV1beta1().Memcacheds(caches).Get, "cache"),
		"the cache's Deployment, and so its Pods and their data": exists(kube.AppsV1().Deployments(caches).Get, "cache"),
		"the webhook's Secret, which the operator made":          exists(kube.CoreV1().Secrets(ns).Get, "memcached-operator-webhook-cert"),
	} {
		if err := check(); err != nil {
			t.Errorf("after helm uninstall, %s: %v, want it kept", what, err)
		}
	}

	// A namespaced release, on the CRD the first one left.
	const scoped = "memcached"
	createRestrictedNamespace(t, kube, scoped)
	h.run(t, "install", release, chartDir(), "--namespace", scoped, "--values", filepath.Join(chartDir(), "ci", "namespaced-values.yaml"), "--wait", "--timeout=3m")
	dep = waitRolledOut(t, kube, scoped, release, 2)
	if _, err := kube.RbacV1().ClusterRoles().Get(ctx, release, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the namespaced release's controller ClusterRole: %v, want none", err)
	}
	op = startChartOperator(t, dep)
	if ns, webhook := flag(t, op, "namespace"), flag(t, op, "webhook-bind-address"); ns != "["+scoped+"]" || webhook != "0" {
		t.Errorf("the namespaced operator watches %s and serves the webhook at %q, want [%s] and none", ns, webhook, scoped)
	}
	before, err := mcs.CacheV1beta1().Memcacheds(caches).Get(ctx, "cache", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mcs.CacheV1beta1().Memcacheds(scoped).Create(ctx, &cachev1beta1.Memcached{ObjectMeta: metav1.ObjectMeta{Name: "cache"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitAvailable(t, mcs, scoped, "cache")
	scopedToken := bindMetricsReader(t, release+"-"+scoped+"-metrics-reader")
	framework.Eventually(t, framework.WaitLong, "/metrics of the namespaced operator for its metrics reader", func(context.Context) (bool, string) {
		code, body := framework.GetWithToken("https://"+op.MetricsAddr+"/metrics", scopedToken)
		return code == http.StatusOK, fmt.Sprintf("%d %s", code, body)
	})
	if err := op.Terminate(time.Minute); err != nil {
		t.Errorf("stopping the namespaced release's operator: %v", err)
	}
	if after, err := mcs.CacheV1beta1().Memcacheds(caches).Get(ctx, "cache", metav1.GetOptions{}); err != nil || after.ResourceVersion != before.ResourceVersion {
		t.Errorf("the namespaced operator wrote a Memcached outside its namespace: resourceVersion %s, was %s (%v)", after.ResourceVersion, before.ResourceVersion, err)
	}
	h.run(t, "uninstall", release, "--namespace", scoped, "--wait", "--timeout=3m")

	// Installing again takes over the kept CRD, which still carries the
	// first release's ownership.
	h.run(t, "install", release, chartDir(), "--namespace", ns, "--wait", "--timeout=3m")
	crd, err := crds.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crdName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if crd.Annotations["meta.helm.sh/release-namespace"] != ns || crd.Labels["app.kubernetes.io/instance"] != release {
		t.Errorf("the reinstalled release does not own the CRD: annotations %v, labels %v", crd.Annotations, crd.Labels)
	}
	waitRolledOut(t, kube, ns, release, 2)
	t.Logf("whole test: %s", time.Since(start).Round(100*time.Millisecond))
}

// exists adapts a typed client's Get to a check of existence.
func exists[T any](fn func(context.Context, string, metav1.GetOptions) (T, error), name string) func() error {
	return func() error {
		_, err := fn(context.Background(), name, metav1.GetOptions{})
		return err
	}
}
