//go:build integration

// Package children tests what a Memcached becomes: the children the
// operator creates, keeps and gives up, and that a converged operator sends
// no writes.
package children

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
	"github.com/kubelite/memcached-operator/pkg/localcluster"
	"github.com/kubelite/memcached-operator/pkg/resources"
	"github.com/kubelite/memcached-operator/test/integration/framework"
)

// zones are the zones of the package's two nodes, one each, for the
// Memcacheds with spec.zones among the spec shapes.
var zones = []string{"zone-a", "zone-b"}

func TestMain(m *testing.M) {
	framework.Main(m, framework.Config{Zones: zones})
}

func TestIntegrationCreate(t *testing.T) {
	t.Parallel()
	ns := framework.NewNamespace(t)
	framework.StartOperator(t, ns)
	framework.CreateMemcached(t, ns, "cache", func(s *cachev1beta1.MemcachedSpec) {
		s.Replicas = ptr.To[int32](2)
		s.Memory = ptr.To(resource.MustParse("128Mi"))
	})
	mc := framework.WaitConverged(t, ns, "cache", metav1.ConditionTrue)

	ctx := context.Background()
	dep, err := framework.GetDeployment(ctx, ns, "cache")
	if err != nil {
		t.Fatal(err)
	}
	svc, err := framework.Kube().CoreV1().Services(ns).Get(ctx, "cache", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wantLabels := resources.Labels(mc)
	for _, obj := range []metav1.Object{dep, svc} {
		for k, v := range wantLabels {
			if obj.GetLabels()[k] != v {
				t.Errorf("%T label %s = %q, want %q", obj, k, obj.GetLabels()[k], v)
			}
		}
		ref := metav1.GetControllerOf(obj)
		if ref == nil || ref.UID != mc.UID || !ptr.Deref(ref.BlockOwnerDeletion, false) || ref.Kind != "Memcached" {
			t.Errorf("%T controller reference = %+v, want Memcached %s", obj, ref, mc.UID)
		}
	}
	c := dep.Spec.Template.Spec.Containers[0]
	if want := []string{"-m", "128", "-c", "1024", "-t", "4", "-p", "11211"}; !slices.Equal(c.Args, want) {
		t.Errorf("args = %v, want %v", c.Args, want)
	}
	if got := c.Resources.Limits.Memory().String(); got != "192Mi" { // 128 + 16 + 16 + 32
		t.Errorf("memory limit = %s, want 192Mi", got)
	}
	if ru := dep.Spec.Strategy.RollingUpdate; *dep.Spec.Replicas != 2 || ru.MaxUnavailable.IntValue() != 0 || ru.MaxSurge.IntValue() != 1 {
		t.Errorf("replicas %d, strategy %+v", *dep.Spec.Replicas, dep.Spec.Strategy)
	}
	if svc.Spec.ClusterIP != corev1.ClusterIPNone || svc.Spec.PublishNotReadyAddresses || svc.Spec.Ports[0].Name != "memcache" {
		t.Errorf("Service spec = %+v, want headless with a memcache port", svc.Spec)
	}
	if mc.Status.ReadyReplicas != 2 || mc.Status.AvailableReplicas != 2 || mc.Status.Endpoint != "cache."+ns+".svc:11211" ||
		mc.Status.Selector != resources.Selector(mc) {
		t.Errorf("status = %+v", mc.Status)
	}
}

func TestIntegrationScale(t *testing.T) {
	t.Parallel()
	ns := framework.NewNamespace(t)
	framework.StartOperator(t, ns)
	framework.CreateMemcached(t, ns, "cache", nil)
	framework.WaitConverged(t, ns, "cache", metav1.ConditionTrue)

	// What `kubectl scale mc/cache --replicas=3` does.
	ctx := context.Background()
	rc := framework.Memcacheds().CacheV1beta1().RESTClient()
	scale := &autoscalingv1.Scale{}
	if err := rc.Get().Namespace(ns).Resource("memcacheds").Name("cache").SubResource("scale").Do(ctx).Into(scale); err != nil {
		t.Fatalf("reading the scale subresource: %v", err)
	}
	scale.Spec.Replicas = 3
	if err := rc.Put().Namespace(ns).Resource("memcacheds").Name("cache").SubResource("scale").Body(scale).Do(ctx).Error(); err != nil {
		t.Fatalf("writing the scale subresource: %v", err)
	}
	framework.Eventually(t, framework.WaitLong, "Deployment and status follow the scale", func(ctx context.Context) (bool, string) {
		dep, err := framework.GetDeployment(ctx, ns, "cache")
		if err != nil {
			return false, err.Error()
		}
		mc, err := framework.GetMemcached(ctx, ns, "cache")
		if err != nil {
			return false, err.Error()
		}
		return *dep.Spec.Replicas == 3 && mc.Status.Replicas == 3 && mc.Status.ReadyReplicas == 3 && mc.Status.ObservedGeneration == mc.Generation,
			fmt.Sprintf("deployment replicas %d, status %+v", *dep.Spec.Replicas, mc.Status)
	})
	if err := rc.Get().Namespace(ns).Resource("memcacheds").Name("cache").SubResource("scale").Do(ctx).Into(scale); err != nil {
		t.Fatal(err)
	}
	if scale.Status.Replicas != 3 || scale.Status.Selector == "" {
		t.Errorf("scale status = %+v, want 3 replicas and a selector", scale.Status)
	}
}

func TestIntegrationSpecChange(t *testing.T) {
	t.Parallel()
	ns := framework.NewNamespace(t)
	framework.StartOperator(t, ns)
	framework.CreateMemcached(t, ns, "cache", func(s *cachev1beta1.MemcachedSpec) { s.Replicas = ptr.To[int32](2) })
	framework.WaitConverged(t, ns, "cache", metav1.ConditionTrue)
	ctx := context.Background()
	before, _ := framework.GetDeployment(ctx, ns, "cache")

	patch := []byte(`{"spec":{"image":"memcached:1.6.40","memory":"256Mi"}}`)
	if _, err := framework.Memcacheds().CacheV1beta1().Memcacheds(ns).Patch(ctx, "cache", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	mc := framework.WaitConverged(t, ns, "cache", metav1.ConditionTrue)
	dep, err := framework.GetDeployment(ctx, ns, "cache")
	if err != nil {
		t.Fatal(err)
	}
	c := dep.Spec.Template.Spec.Containers[0]
	if c.Image != "memcached:1.6.40" || c.Args[1] != "256" || c.Resources.Limits.Memory().String() != "336Mi" {
		t.Errorf("container after change: image %s args %v limit %s", c.Image, c.Args, c.Resources.Limits.Memory())
	}
	if dep.Generation == before.Generation {
		t.Errorf("Deployment generation did not change: no rollout")
	}
	if dep.Status.UpdatedReplicas != 2 || mc.Status.UpdatedReplicas != 2 {
		t.Errorf("rollout incomplete: deployment %+v, memcached %+v", dep.Status, mc.Status)
	}
}

func TestIntegrationDrift(t *testing.T) {
	t.Parallel()
	ns := framework.NewNamespace(t)
	framework.StartOperator(t, ns)
	framework.CreateMemcached(t, ns, "cache", func(s *cachev1beta1.MemcachedSpec) { s.Replicas = ptr.To[int32](2) })
	framework.WaitConverged(t, ns, "cache", metav1.ConditionTrue)
	ctx := context.Background()

	// What `kubectl rollout restart` does, as a different field manager.
	restart := []byte(`{"spec":{"template":{"metadata":{"annotations":{"kubectl.kubernetes.io/restartedAt":"2026-11-30T00:00:00Z"}}}}}`)
	if _, err := framework.Kube().AppsV1().Deployments(ns).Patch(ctx, "cache", types.StrategicMergePatchType, restart, metav1.PatchOptions{FieldManager: "kubectl-rollout"}); err != nil {
		t.Fatal(err)
	}
	// Someone scales the Deployment and swaps the image behind the
	// operator's back.
	edit := []byte(`{"spec":{"replicas":5,"template":{"spec":{"containers":[{"name":"memcached","image":"memcached:evil"}]}}}}`)
	if _, err := framework.Kube().AppsV1().Deployments(ns).Patch(ctx, "cache", types.StrategicMergePatchType, edit, metav1.PatchOptions{FieldManager: "kubectl-edit"}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, framework.WaitLong, "Deployment edits are put back", func(ctx context.Context) (bool, string) {
		dep, err := framework.GetDeployment(ctx, ns, "cache")
		if err != nil {
			return false, err.Error()
		}
		img := dep.Spec.Template.Spec.Containers[0].Image
		return *dep.Spec.Replicas == 2 && img == cachev1beta1.DefaultImage, fmt.Sprintf("replicas %d image %s", *dep.Spec.Replicas, img)
	})
	dep, _ := framework.GetDeployment(ctx, ns, "cache")
	if dep.Spec.Template.Annotations["kubectl.kubernetes.io/restartedAt"] == "" {
		t.Errorf("the rollout restart annotation was removed: %v", dep.Spec.Template.Annotations)
	}

	if err := framework.Kube().CoreV1().Services(ns).Delete(ctx, "cache", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, framework.WaitLong, "deleted Service is recreated", func(ctx context.Context) (bool, string) {
		svc, err := framework.Kube().CoreV1().Services(ns).Get(ctx, "cache", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return metav1.GetControllerOf(svc) != nil, "recreated without controller"
	})
}

func TestIntegrationSteadyStateSendsNoWrites(t *testing.T) {
	t.Parallel()
	ns := framework.NewNamespace(t)
	op := framework.StartOperator(t, ns)
	for i := range 3 {
		framework.CreateMemcached(t, ns, fmt.Sprintf("cache-%d", i), func(s *cachev1beta1.MemcachedSpec) {
			s.Monitoring = &cachev1beta1.Monitoring{Exporter: &cachev1beta1.Exporter{Enabled: true}}
			s.Pod = &cachev1beta1.PodOverrides{Tolerations: []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "cache", Effect: corev1.TaintEffectNoSchedule}}}
			s.Resources = &cachev1beta1.ResourceOverrides{Limits: &cachev1beta1.ResourceAmounts{CPU: "1"}}
		})
	}
	for i := range 3 {
		framework.WaitConverged(t, ns, fmt.Sprintf("cache-%d", i), metav1.ConditionTrue)
	}
	// Let the Deployment controller's last status writes arrive and be
	// synced, then start counting.
	op.WaitQuiet(t)
	writesBefore := len(op.Writes(t))
	syncsBefore := syncs(t, op)

	// Force a sync of every object without changing anything the operator
	// owns: a label on each Memcached. Then wait for two resync passes.
	ctx := context.Background()
	for i := range 3 {
		patch := []byte(`{"metadata":{"labels":{"touched":"yes"}}}`)
		if _, err := framework.Memcacheds().CacheV1beta1().Memcacheds(ns).Patch(ctx, fmt.Sprintf("cache-%d", i), types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	framework.Eventually(t, 30*time.Second, "the touched objects are synced", func(context.Context) (bool, string) {
		n := syncs(t, op)
		return n >= syncsBefore+3, fmt.Sprintf("%v syncs", n-syncsBefore)
	})
	// The resyncs sync the objects again, or zero writes would prove
	// nothing about them.
	op.WaitTwoResyncs(t, 3)
	if writes := op.Writes(t)[writesBefore:]; len(writes) > 0 {
		t.Errorf("converged operator sent %d writes across two resync periods: %v", len(writes), writes)
	}
}

func TestIntegrationDeleteCollectsChildren(t *testing.T) {
	t.Parallel()
	ns := framework.NewNamespace(t)
	framework.StartOperator(t, ns)
	framework.CreateMemcached(t, ns, "cache", nil)
	framework.WaitConverged(t, ns, "cache", metav1.ConditionTrue)
	ctx := context.Background()
	if err := framework.Memcacheds().CacheV1beta1().Memcacheds(ns).Delete(ctx, "cache", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, framework.WaitLong, "the garbage collector deletes the children", func(ctx context.Context) (bool, string) {
		_, depErr := framework.GetDeployment(ctx, ns, "cache")
		_, svcErr := framework.Kube().CoreV1().Services(ns).Get(ctx, "cache", metav1.GetOptions{})
		return apierrors.IsNotFound(depErr) && apierrors.IsNotFound(svcErr), fmt.Sprintf("deployment: %v, service: %v", depErr, svcErr)
	})
}

func TestIntegrationOrphanAndAdopt(t *testing.T) {
	t.Parallel()
	ns := framework.NewNamespace(t)
	framework.StartOperator(t, ns)
	framework.CreateMemcached(t, ns, "cache", func(s *cachev1beta1.MemcachedSpec) {
		s.DeletionPolicy = cachev1beta1.DeletionPolicyOrphan
	})
	mc := framework.WaitConverged(t, ns, "cache", metav1.ConditionTrue)
	if !slices.Contains(mc.Finalizers, cachev1beta1.ChildrenFinalizer) {
		t.Fatalf("finalizers = %v, want %s", mc.Finalizers, cachev1beta1.ChildrenFinalizer)
	}
	ctx := context.Background()
	// A canary that only the Memcached owns: once the garbage collector
	// has deleted it, it has acted on the Memcached's deletion, and would
	// have deleted the children with it had they kept their owner.
	canary := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "gc-canary", OwnerReferences: []metav1.OwnerReference{{
		APIVersion: cachev1beta1.GroupVersion.String(), Kind: "Memcached", Name: mc.Name, UID: mc.UID,
	}}}}
	if _, err := framework.Kube().CoreV1().ConfigMaps(ns).Create(ctx, canary, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := framework.Memcacheds().CacheV1beta1().Memcacheds(ns).Delete(ctx, "cache", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, framework.WaitLong, "the Memcached goes away and the garbage collector deletes its canary", func(ctx context.Context) (bool, string) {
		_, err := framework.GetMemcached(ctx, ns, "cache")
		_, canaryErr := framework.Kube().CoreV1().ConfigMaps(ns).Get(ctx, canary.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err) && apierrors.IsNotFound(canaryErr), fmt.Sprint(err, canaryErr)
	})
	dep, err := framework.GetDeployment(ctx, ns, "cache")
	if err != nil {
		t.Fatalf("orphaned Deployment is gone: %v", err)
	}
	svc, err := framework.Kube().CoreV1().Services(ns).Get(ctx, "cache", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("orphaned Service is gone: %v", err)
	}
	if len(dep.OwnerReferences) != 0 || len(svc.OwnerReferences) != 0 {
		t.Errorf("orphans keep ownerReferences: %v, %v", dep.OwnerReferences, svc.OwnerReferences)
	}

	next := framework.CreateMemcached(t, ns, "cache", nil)
	framework.Eventually(t, framework.WaitLong, "the new Memcached adopts the orphans", func(ctx context.Context) (bool, string) {
		dep, err1 := framework.GetDeployment(ctx, ns, "cache")
		svc, err2 := framework.Kube().CoreV1().Services(ns).Get(ctx, "cache", metav1.GetOptions{})
		if err1 != nil || err2 != nil {
			return false, fmt.Sprint(err1, err2)
		}
		d, s := metav1.GetControllerOf(dep), metav1.GetControllerOf(svc)
		return d != nil && s != nil && d.UID == next.UID && s.UID == next.UID, fmt.Sprintf("%+v %+v", d, s)
	})
	framework.WaitConverged(t, ns, "cache", metav1.ConditionTrue)
}

func TestIntegrationForeignChild(t *testing.T) {
	t.Parallel()
	ns := framework.NewNamespace(t)
	op := framework.StartOperator(t, ns)
	ctx := context.Background()
	labels := map[string]string{"app": "someone-else"}
	foreign, err := framework.Kube().AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "cache"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx"}}},
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Let the Deployment controller finish its own writes first, so the
	// resourceVersion below only moves if the operator touches it.
	framework.Eventually(t, framework.WaitLong, "foreign Deployment settles", func(ctx context.Context) (bool, string) {
		d, err := framework.GetDeployment(ctx, ns, "cache")
		if err != nil {
			return false, err.Error()
		}
		foreign = d
		return d.Status.ObservedGeneration == d.Generation && d.Status.AvailableReplicas == 1, fmt.Sprintf("%+v", d.Status)
	})

	framework.CreateMemcached(t, ns, "cache", nil)
	framework.Eventually(t, framework.WaitLong, "Degraded/ResourceExists", func(ctx context.Context) (bool, string) {
		mc, err := framework.GetMemcached(ctx, ns, "cache")
		if err != nil {
			return false, err.Error()
		}
		c := meta.FindStatusCondition(mc.Status.Conditions, cachev1beta1.ConditionDegraded)
		return c != nil && c.Status == metav1.ConditionTrue && c.Reason == cachev1beta1.ReasonResourceExists, fmt.Sprintf("%+v", c)
	})
	framework.Eventually(t, 30*time.Second, "a Warning Event", func(ctx context.Context) (bool, string) {
		events, err := framework.Kube().CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, e := range events.Items {
			if e.Reason == cachev1beta1.ReasonResourceExists && e.Type == corev1.EventTypeWarning && e.InvolvedObject.Kind == "Memcached" {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d events", len(events.Items))
	})
	// The Deployment controller may still update the foreign object's
	// status; what must hold is that the operator never wrote to it.
	after, err := framework.GetDeployment(ctx, ns, "cache")
	if err != nil {
		t.Fatal(err)
	}
	for _, entry := range after.ManagedFields {
		if entry.Manager == resources.ManagedBy {
			t.Errorf("the operator manages fields of the foreign Deployment: %+v", entry)
		}
	}
	if len(after.OwnerReferences) != 0 || after.Spec.Template.Spec.Containers[0].Image != "nginx" || after.Generation != foreign.Generation {
		t.Errorf("foreign Deployment was changed: ownerReferences %v, generation %d -> %d", after.OwnerReferences, foreign.Generation, after.Generation)
	}
	// The operator's first attempts are create-only applies, which the
	// apiserver refuses with a Conflict because the name is taken; they
	// change nothing. No write may be accepted.
	for _, w := range op.Requests(t, foreignDeployment(localcluster.AuditEvent.Write)) {
		if w.Code() != http.StatusConflict {
			t.Errorf("the operator wrote to the foreign Deployment: %s (%d)", w, w.Code())
		}
	}
	// Once the status says ResourceExists, a sync (a recheck, or any
	// change to the Memcached) only reads the foreign object.
	op.WaitQuiet(t)
	mark := len(op.Requests(t, foreignDeployment(anyRequest)))
	before := syncs(t, op)
	if _, err := framework.Memcacheds().CacheV1beta1().Memcacheds(ns).Patch(ctx, "cache", types.MergePatchType, []byte(`{"metadata":{"labels":{"touched":"yes"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 30*time.Second, "the touched Memcached is synced", func(context.Context) (bool, string) {
		return syncs(t, op) > before, "no sync yet"
	})
	op.WaitQuiet(t)
	since := op.Requests(t, foreignDeployment(anyRequest))[mark:]
	if w := slices.DeleteFunc(slices.Clone(since), func(e localcluster.AuditEvent) bool { return !e.Write() }); len(w) > 0 {
		t.Errorf("a sync of a Memcached known to be blocked sent writes to the foreign Deployment: %v", w)
	}
	if !slices.ContainsFunc(since, func(e localcluster.AuditEvent) bool { return e.Verb == "get" }) {
		t.Errorf("the blocked Memcached's sync did not look at the foreign Deployment")
	}
}

func TestIntegrationBadInputRejected(t *testing.T) {
	ns := framework.NewNamespace(t)
	tests := []struct {
		name     string
		object   string // metadata.name; "bad" when empty
		spec     string
		wantText string
	}{
		{name: "dotted name", object: "my.cache", spec: `{}`, wantText: "metadata.name must be a DNS-1035 label"},
		{name: "name longer than 63", object: strings.Repeat("a", 64), spec: `{}`, wantText: "metadata.name must be a DNS-1035 label"},
		{name: "name starting with a digit", object: "1cache", spec: `{}`, wantText: "metadata.name must be a DNS-1035 label"},
		{name: "negative replicas", spec: `{"replicas":-1}`, wantText: "spec.replicas"},
		{name: "too little memory", spec: `{"memory":"1Mi"}`, wantText: "spec.memory"},
		{name: "empty image", spec: `{"image":""}`, wantText: "spec.image"},
		{name: "image with whitespace", spec: `{"image":"memcached latest"}`, wantText: "spec.image"},
		{name: "memory limit below memory", spec: `{"memory":"512Mi","resources":{"limits":{"memory":"256Mi"}}}`, wantText: "spec.resources.limits.memory"},
		{name: "unknown deletion policy", spec: `{"deletionPolicy":"Keep"}`, wantText: "spec.deletionPolicy"},
		{name: "exporter port clash", spec: `{"port":9150,"monitoring":{"exporter":{"enabled":true}}}`, wantText: "spec.port"},
		{name: "memory not in whole mebibytes", spec: `{"memory":"1000M"}`, wantText: "spec.memory"},
		{name: "extra -m", spec: `{"extraArgs":["-m","128"]}`, wantText: "spec.extraArgs: Invalid value: must not set -m or --memory-limit; use spec.memory"},
		{name: "extra -m glued to its value", spec: `{"extraArgs":["-m128"]}`, wantText: "use spec.memory"},
		{name: "extra -c behind a flag without a value", spec: `{"extraArgs":["-vc","10"]}`, wantText: "use spec.maxConnections"},
		{name: "extra --threads=", spec: `{"extraArgs":["--threads=8"]}`, wantText: "use spec.threads"},
		{name: "extra long flag abbreviated", spec: `{"extraArgs":["--conn-lim","10"]}`, wantText: "use spec.maxConnections"},
		{name: "extra --port", spec: `{"extraArgs":["--port","1"]}`, wantText: "use spec.port"},
		{name: "extra -U", spec: `{"extraArgs":["-U","11211"]}`, wantText: "-U or --udp-port"},
		{name: "extra --listen", spec: `{"extraArgs":["--listen=0.0.0.0"]}`, wantText: "-l or --listen"},
		{name: "extra -u", spec: `{"extraArgs":["-u","root"]}`, wantText: "securityContext sets the user"},
		{name: "extra -Z", spec: `{"extraArgs":["-Z"]}`, wantText: "must not set -Z or --enable-ssl; use spec.tls"},
		{name: "extra ssl_key", spec: `{"extraArgs":["-o","ssl_key=/tmp/key.pem"]}`, wantText: "must not set ssl_chain_cert or ssl_key; use spec.tls"},
		{name: "TLS Secret name with capitals", spec: `{"tls":{"secretName":"Cache_TLS"}}`, wantText: "spec.tls.secretName"},
		{name: "TLS without a Secret name", spec: `{"tls":{}}`, wantText: "spec.tls.secretName"},
		{name: "extra -I", spec: `{"extraArgs":["-I","2m"]}`, wantText: "use spec.maxItemSize"},
		{name: "extra --daemon", spec: `{"extraArgs":["--daemon"]}`, wantText: "-d or --daemon"},
		{name: "extra -s", spec: `{"extraArgs":["-s","/tmp/sock"]}`, wantText: "-s or --unix-socket"},
		{name: "max item size over half the memory", spec: `{"memory":"64Mi","maxItemSize":"33Mi"}`, wantText: "spec.maxItemSize: Invalid value"},
		{name: "max item size not in kibibytes", spec: `{"maxItemSize":"1500"}`, wantText: "spec.maxItemSize"},
		{name: "max item size too small", spec: `{"maxItemSize":"512"}`, wantText: "spec.maxItemSize"},
		{name: "both budgets", spec: `{"podDisruptionBudget":{"maxUnavailable":1,"minAvailable":1}}`, wantText: "set at most one of maxUnavailable and minAvailable"},
		{name: "budget percentage over 100", spec: `{"podDisruptionBudget":{"maxUnavailable":"150%"}}`, wantText: "spec.podDisruptionBudget.maxUnavailable"},
		{name: "negative budget", spec: `{"podDisruptionBudget":{"minAvailable":-1}}`, wantText: "spec.podDisruptionBudget.minAvailable"},
		{name: "operator's label on the Pods", spec: `{"pod":{"labels":{"app.kubernetes.io/instance":"other"}}}`, wantText: "spec.pod.labels"},
		{name: "operator's annotation prefix", spec: `{"pod":{"annotations":{"cache.kubelite.io/x":"y"}}}`, wantText: "spec.pod.annotations"},
		{name: "preStop delay as long as the grace period", spec: `{"pod":{"preStopDelaySeconds":30}}`, wantText: "spec.pod.preStopDelaySeconds"},
		{name: "preStop delay beyond a set grace period", spec: `{"pod":{"terminationGracePeriodSeconds":10,"preStopDelaySeconds":20}}`, wantText: "spec.pod.preStopDelaySeconds"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			object := tt.object
			if object == "" {
				object = "bad"
			}
			body := fmt.Sprintf(`{"apiVersion":"cache.kubelite.io/v1beta1","kind":"Memcached","metadata":{"name":%q},"spec":%s}`, object, tt.spec)
			err := framework.Memcacheds().CacheV1beta1().RESTClient().Post().Namespace(ns).Resource("memcacheds").
				SetHeader("Content-Type", "application/json").Body([]byte(body)).Do(context.Background()).Error()
			if !apierrors.IsInvalid(err) {
				t.Fatalf("create error = %v, want Invalid", err)
			}
			if !strings.Contains(err.Error(), tt.wantText) {
				t.Errorf("error %q does not name %s", err, tt.wantText)
			}
		})
	}
}

func TestIntegrationRestartSendsNoWrites(t *testing.T) {
	t.Parallel()
	ns := framework.NewNamespace(t)
	first := framework.StartOperator(t, ns)
	for i := range 3 {
		framework.CreateMemcached(t, ns, fmt.Sprintf("cache-%d", i), nil)
	}
	for i := range 3 {
		framework.WaitConverged(t, ns, fmt.Sprintf("cache-%d", i), metav1.ConditionTrue)
	}
	first.WaitQuiet(t)
	if err := first.Terminate(time.Minute); err != nil {
		t.Fatalf("stopping the first operator: %v", err)
	}

	second := framework.StartOperator(t, ns)
	framework.Eventually(t, time.Minute, "the restarted operator syncs every Memcached", func(context.Context) (bool, string) {
		n := syncs(t, second)
		return n >= 3, fmt.Sprintf("%v of 3", n)
	})
	second.WaitQuiet(t)
	if writes := second.Writes(t); len(writes) > 0 {
		t.Errorf("restarted operator sent %d writes over a converged cluster: %v", len(writes), writes)
	}
}

// TestIntegrationBinary is the end-to-end smoke test: the built binary, run
// as a separate process under the shipped ServiceAccount with JSON logs,
// converges a Memcached, logs every sync line with the object's key, and
// exits 0 on SIGTERM.
func TestIntegrationBinary(t *testing.T) {
	t.Parallel()
	ns := framework.NewNamespace(t)
	op := framework.StartOperator(t, ns, "--logging-format=json", "-v=2")
	framework.CreateMemcached(t, ns, "cache", func(s *cachev1beta1.MemcachedSpec) { s.Replicas = ptr.To[int32](2) })
	mc := framework.WaitConverged(t, ns, "cache", metav1.ConditionTrue)
	if mc.Status.AvailableReplicas != 2 {
		t.Errorf("availableReplicas = %d, want 2", mc.Status.AvailableReplicas)
	}

	start := time.Now()
	if err := op.Terminate(time.Minute); err != nil {
		t.Errorf("after SIGTERM: %v", err)
	}
	t.Logf("exited %s after SIGTERM", time.Since(start).Round(time.Millisecond))

	var created bool
	for _, line := range strings.Split(strings.TrimSpace(op.Log()), "\n") {
		var entry map[string]any
		if err := json.Unmarshal([]byte(line), &entry); err != nil {
			t.Errorf("log line is not JSON: %q", line)
			continue
		}
		if entry["msg"] == "Created child" {
			created = true
			if entry["memcached"] == nil {
				t.Errorf("sync log line without the object key: %q", line)
			}
		}
		if strings.Contains(strings.ToLower(line), "forbidden") {
			t.Errorf("operator log shows a Forbidden error: %q", line)
		}
	}
	if !created {
		t.Errorf("no \"Created child\" line in the log")
	}
}

// syncs is how many syncs op has finished; it fails the test if /metrics
// does not answer.
func syncs(t *testing.T, op *framework.Operator) float64 {
	t.Helper()
	n, err := op.Syncs()
	if err != nil {
		t.Fatalf("reading the operator's metrics: %v", err)
	}
	return n
}

// foreignDeployment matches the requests of match for the Deployment
// named cache, which TestIntegrationForeignChild creates by hand.
func foreignDeployment(match func(localcluster.AuditEvent) bool) func(localcluster.AuditEvent) bool {
	return func(e localcluster.AuditEvent) bool {
		return e.Resource() == "deployments" && e.Name() == "cache" && match(e)
	}
}

func anyRequest(localcluster.AuditEvent) bool { return true }
