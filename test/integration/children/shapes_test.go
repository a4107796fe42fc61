//go:build integration

package children

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
	"github.com/kubelite/memcached-operator/pkg/localcluster"
	"github.com/kubelite/memcached-operator/test/integration/framework"
)

// shapesZones are the zones of the zones row of specShapes: the zones of
// the package's nodes.
var shapesZones = zones

// specShapes is one Memcached per field of the spec, set in a way the
// apiserver may default or normalize. A value the apiserver stores
// differently from how the operator compares it is an endless write loop
// in production; this table is where a new spec field gets its row.
var specShapes = []struct {
	name   string
	mutate func(*cachev1beta1.MemcachedSpec)
}{
	{name: "defaults", mutate: func(*cachev1beta1.MemcachedSpec) {}},
	{name: "replicas", mutate: func(s *cachev1beta1.MemcachedSpec) { s.Replicas = ptr.To[int32](3) }},
	{name: "zones", mutate: func(s *cachev1beta1.MemcachedSpec) {
		s.Replicas, s.Zones = ptr.To[int32](2), shapesZones
	}},
	{name: "sizing", mutate: func(s *cachev1beta1.MemcachedSpec) {
		s.Memory, s.MaxConnections, s.Threads, s.Port = ptr.To(resource.MustParse("256Mi")), 4096, 2, 11311
	}},
	{name: "affinity", mutate: func(s *cachev1beta1.MemcachedSpec) {
		framework.PodOf(s).Affinity = &corev1.Affinity{
			NodeAffinity: &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{
				Weight:     10,
				Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "pool", Operator: corev1.NodeSelectorOpIn, Values: []string{"cache"}}}},
			}}},
			PodAntiAffinity: &corev1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
				Weight: 50,
				PodAffinityTerm: corev1.PodAffinityTerm{
					TopologyKey:   corev1.LabelTopologyZone,
					LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": "memcached"}},
				},
			}}},
		}
	}},
	{name: "tls", mutate: func(s *cachev1beta1.MemcachedSpec) {
		s.TLS = &cachev1beta1.TLS{SecretName: shapesTLSSecret}
		s.Monitoring = &cachev1beta1.Monitoring{Exporter: &cachev1beta1.Exporter{Enabled: true}}
	}},
	{name: "tls with a plaintext port", mutate: func(s *cachev1beta1.MemcachedSpec) {
		s.Port = 11212
		s.TLS = &cachev1beta1.TLS{SecretName: shapesTLSSecret, PlaintextPort: 11211}
		s.NetworkPolicy = &cachev1beta1.NetworkPolicy{}
	}},
	{name: "extstore", mutate: func(s *cachev1beta1.MemcachedSpec) {
		s.Extstore = &cachev1beta1.Extstore{Size: resource.MustParse("1Gi"), StorageClassName: ptr.To(shapesExtstoreClass)}
	}},
	{name: "node selector", mutate: func(s *cachev1beta1.MemcachedSpec) {
		framework.PodOf(s).NodeSelector = map[string]string{corev1.LabelOSStable: "linux"}
	}},
	{name: "tolerations", mutate: func(s *cachev1beta1.MemcachedSpec) {
		framework.PodOf(s).Tolerations = []corev1.Toleration{
			{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "cache", Effect: corev1.TaintEffectNoSchedule},
			{Key: "node.kubernetes.io/unreachable", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](30)},
			// No operator: the apiserver does not default it to Equal.
			{Key: "spot", Value: "true"},
		}
	}},
	{name: "priority class", mutate: func(s *cachev1beta1.MemcachedSpec) { framework.PodOf(s).PriorityClassName = shapesPriorityClass }},
	{name: "resources in canonical form", mutate: func(s *cachev1beta1.MemcachedSpec) {
		s.Resources = &cachev1beta1.ResourceOverrides{
			Requests: &cachev1beta1.ResourceAmounts{CPU: "250m", Memory: "200Mi"},
			Limits:   &cachev1beta1.ResourceAmounts{CPU: "1", Memory: "256Mi"},
		}
	}},
	{name: "resources the apiserver rewrites", mutate: func(s *cachev1beta1.MemcachedSpec) {
		// 0.5 is stored as 500m, 1Gi stays, 2000m becomes 2.
		s.Resources = &cachev1beta1.ResourceOverrides{
			Requests: &cachev1beta1.ResourceAmounts{CPU: "0.5"},
			Limits:   &cachev1beta1.ResourceAmounts{CPU: "2000m", Memory: "1Gi"},
		}
	}},
	{name: "exporter", mutate: func(s *cachev1beta1.MemcachedSpec) {
		s.Monitoring = &cachev1beta1.Monitoring{Exporter: &cachev1beta1.Exporter{Enabled: true}}
	}},
	{name: "exporter disabled", mutate: func(s *cachev1beta1.MemcachedSpec) {
		s.Monitoring = &cachev1beta1.Monitoring{Exporter: &cachev1beta1.Exporter{Enabled: false}}
	}},
	{name: "max item size and extra arguments", mutate: func(s *cachev1beta1.MemcachedSpec) {
		s.MaxItemSize = ptr.To(resource.MustParse("2Mi"))
		s.ExtraArgs = []string{"-o", "lru_crawler,lru_maintainer", "--disable-cas", "-vv"}
	}},
	{name: "disruption budget as a percentage", mutate: func(s *cachev1beta1.MemcachedSpec) {
		s.PodDisruptionBudget = &cachev1beta1.DisruptionBudget{MaxUnavailable: ptr.To(intstr.FromString("50%"))}
	}},
	{name: "disruption budget as minAvailable", mutate: func(s *cachev1beta1.MemcachedSpec) {
		s.Replicas = ptr.To[int32](3)
		s.PodDisruptionBudget = &cachev1beta1.DisruptionBudget{MinAvailable: ptr.To(intstr.FromInt32(2))}
	}},
	{name: "pod labels, annotations and pull secrets", mutate: func(s *cachev1beta1.MemcachedSpec) {
		p := framework.PodOf(s)
		p.Labels = map[string]string{"team": "web", "example.com/cost-center": "42"}
		p.Annotations = map[string]string{"sidecar.istio.io/inject": "false", "example.com/empty": ""}
		p.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "registry"}, {Name: "mirror"}}
	}},
	{name: "stop timing", mutate: func(s *cachev1beta1.MemcachedSpec) {
		framework.PodOf(s).TerminationGracePeriodSeconds = ptr.To[int64](45)
		framework.PodOf(s).PreStopDelaySeconds = ptr.To[int32](0)
	}},
	{name: "spread constraints", mutate: func(s *cachev1beta1.MemcachedSpec) {
		framework.PodOf(s).TopologySpreadConstraints = []corev1.TopologySpreadConstraint{
			// No labelSelector: the operator adds the Pods' selector and
			// matchLabelKeys.
			{MaxSkew: 1, TopologyKey: corev1.LabelTopologyZone, WhenUnsatisfiable: corev1.ScheduleAnyway,
				NodeTaintsPolicy: ptr.To(corev1.NodeInclusionPolicyIgnore)},
			{MaxSkew: 2, TopologyKey: corev1.LabelHostname, WhenUnsatisfiable: corev1.ScheduleAnyway,
				LabelSelector:      &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": "memcached"}},
				NodeAffinityPolicy: ptr.To(corev1.NodeInclusionPolicyHonor)},
		}
	}},
	{name: "network policy, empty", mutate: func(s *cachev1beta1.MemcachedSpec) { s.NetworkPolicy = &cachev1beta1.NetworkPolicy{} }},
	{name: "network policy with clients and metrics", mutate: func(s *cachev1beta1.MemcachedSpec) {
		s.Monitoring = &cachev1beta1.Monitoring{Exporter: &cachev1beta1.Exporter{Enabled: true}}
		s.NetworkPolicy = &cachev1beta1.NetworkPolicy{
			Clients: []cachev1beta1.NetworkPolicyPeer{
				{NamespaceSelector: &cachev1beta1.LabelSelector{MatchLabels: map[string]string{"team": "web"}}},
				// Empty selectors, which the apiserver keeps as {}.
				{PodSelector: &cachev1beta1.LabelSelector{}},
				{
					NamespaceSelector: &cachev1beta1.LabelSelector{MatchExpressions: []cachev1beta1.LabelSelectorRequirement{
						{Key: "kubernetes.io/metadata.name", Operator: "In", Values: []string{"api", "web"}},
						{Key: "quarantined", Operator: "DoesNotExist"},
					}},
					PodSelector: &cachev1beta1.LabelSelector{MatchLabels: map[string]string{"role": "frontend"}},
				},
			},
			Metrics: []cachev1beta1.NetworkPolicyPeer{{NamespaceSelector: &cachev1beta1.LabelSelector{}}},
		}
	}},
	{name: "min ready seconds", mutate: func(s *cachev1beta1.MemcachedSpec) { s.MinReadySeconds = ptr.To[int32](30) }},
	{name: "min ready seconds 0", mutate: func(s *cachev1beta1.MemcachedSpec) { s.MinReadySeconds = ptr.To[int32](0) }},
	{name: "paused", mutate: func(s *cachev1beta1.MemcachedSpec) { s.Paused = true }},
	{name: "orphan policy", mutate: func(s *cachev1beta1.MemcachedSpec) { s.DeletionPolicy = cachev1beta1.DeletionPolicyOrphan }},
}

const shapesPriorityClass = "memcached-operator-test"

// shapesTLSSecret is the Secret of the tls row.
const shapesTLSSecret = "shapes-tls"

// shapesExtstoreClass is the StorageClass of the extstore row's claim,
// which binds to the volume the test makes of that class.
const shapesExtstoreClass = "shapes-extstore"

// shapeName is the Memcached of specShapes[i].
func shapeName(i int) string { return fmt.Sprintf("shape-%d", i) }

// TestIntegrationZeroWritesAcrossSpecShapes converges one Memcached per row
// of specShapes, then requires zero writes while each is touched and
// resynced, and again after a restart of the operator.
func TestIntegrationZeroWritesAcrossSpecShapes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	classes := framework.Kube().SchedulingV1().PriorityClasses()
	if _, err := classes.Create(ctx, &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: shapesPriorityClass}, Value: 1000}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = classes.Delete(context.Background(), shapesPriorityClass, metav1.DeleteOptions{}) })
	ns := framework.NewNamespace(t)
	first := framework.StartOperator(t, ns)
	// The apiserver checks only that both keys are there; the bytes stand
	// for a certificate and key, which no container reads under kwok.
	if _, err := framework.Kube().CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: shapesTLSSecret},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{corev1.TLSCertKey: []byte("certificate shapes"), corev1.TLSPrivateKeyKey: []byte("key shapes")},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	createVolume(t, shapesExtstoreClass, shapesExtstoreClass, "1Gi")
	for i, shape := range specShapes {
		framework.CreateMemcached(t, ns, shapeName(i), shape.mutate)
	}
	for i, shape := range specShapes {
		framework.Eventually(t, framework.WaitLong, shape.name+" converges", func(ctx context.Context) (bool, string) {
			mc, err := framework.GetMemcached(ctx, ns, shapeName(i))
			if err != nil {
				return false, err.Error()
			}
			p := framework.Condition(mc, cachev1beta1.ConditionProgressing)
			return mc.Status.ObservedGeneration == mc.Generation &&
					(p.Reason == cachev1beta1.ReasonComplete || p.Reason == cachev1beta1.ReasonPaused),
				fmt.Sprintf("generation %d, status %+v", mc.Generation, mc.Status)
		})
	}
	first.WaitQuiet(t)

	// Touch every Memcached (a label: a sync, and nothing the operator
	// owns), then wait for two resync passes over them.
	mark, before := len(first.Writes(t)), syncs(t, first)
	for i := range specShapes {
		patch := []byte(`{"metadata":{"labels":{"touched":"yes"}}}`)
		if _, err := framework.Memcacheds().CacheV1beta1().Memcacheds(ns).Patch(ctx, shapeName(i), types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	framework.Eventually(t, 30*time.Second, "the touched objects are synced", func(context.Context) (bool, string) {
		n := syncs(t, first)
		return n >= before+float64(len(specShapes)), fmt.Sprintf("%v syncs", n-before)
	})
	// The operator watches this test's namespace alone, so the passes
	// are counted over its Memcacheds.
	first.WaitTwoResyncs(t, len(specShapes))
	reportShapeWrites(t, "touched and resynced", first.Writes(t)[mark:], ns)
	if err := first.Terminate(time.Minute); err != nil {
		t.Fatalf("stopping the first operator: %v", err)
	}

	second := framework.StartOperator(t, ns)
	framework.Eventually(t, 60*time.Second, "the restarted operator syncs every Memcached", func(context.Context) (bool, string) {
		n := syncs(t, second)
		return n >= float64(len(specShapes)), fmt.Sprintf("%v of %d", n, len(specShapes))
	})
	second.WaitQuiet(t)
	reportShapeWrites(t, "after a restart", second.Writes(t), ns)
}

// reportShapeWrites fails the test for each write, naming the row of
// specShapes it went to.
func reportShapeWrites(t *testing.T, when string, writes []localcluster.AuditEvent, ns string) {
	t.Helper()
	for _, w := range writes {
		row := "no row"
		for i, shape := range specShapes {
			// A zone pool's children are named after the Memcached and
			// the zone.
			if w.Namespace() == ns && (w.Name() == shapeName(i) || strings.HasPrefix(w.Name(), shapeName(i)+"-")) {
				row = shape.name
			}
		}
		t.Errorf("%s: write %s (%s): a converged Memcached must cost no write", when, w, row)
	}
}

// TestIntegrationFieldRemoval removes what the spec once asked for: the
// exporter (its sidecar and the Service's metrics port) and one of two
// tolerations. The children must lose them.
func TestIntegrationFieldRemoval(t *testing.T) {
	t.Parallel()
	ns := framework.NewNamespace(t)
	framework.StartOperator(t, ns)
	ctx := context.Background()
	framework.CreateMemcached(t, ns, "cache", func(s *cachev1beta1.MemcachedSpec) {
		s.Monitoring = &cachev1beta1.Monitoring{Exporter: &cachev1beta1.Exporter{Enabled: true}}
		framework.PodOf(s).Tolerations = []corev1.Toleration{
			{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "cache", Effect: corev1.TaintEffectNoSchedule},
			{Key: "spot", Operator: corev1.TolerationOpExists},
		}
	})
	framework.WaitConverged(t, ns, "cache", metav1.ConditionTrue)
	dep, err := framework.GetDeployment(ctx, ns, "cache")
	if err != nil {
		t.Fatal(err)
	}
	if len(dep.Spec.Template.Spec.Containers) != 2 || len(dep.Spec.Template.Spec.Tolerations) != 2 {
		t.Fatalf("before the removal: %d containers, tolerations %v; want the exporter and two tolerations",
			len(dep.Spec.Template.Spec.Containers), dep.Spec.Template.Spec.Tolerations)
	}

	framework.PatchSpec(t, ns, "cache", `{"spec":{"monitoring":{"exporter":{"enabled":false}},"pod":{"tolerations":[{"key":"dedicated","operator":"Equal","value":"cache","effect":"NoSchedule"}]}}}`)
	framework.Eventually(t, framework.WaitLong, "the children lose the removed fields", func(ctx context.Context) (bool, string) {
		dep, err := framework.GetDeployment(ctx, ns, "cache")
		if err != nil {
			return false, err.Error()
		}
		svc, err := framework.Kube().CoreV1().Services(ns).Get(ctx, "cache", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		var containers, ports []string
		for _, c := range dep.Spec.Template.Spec.Containers {
			containers = append(containers, c.Name)
		}
		for _, p := range svc.Spec.Ports {
			ports = append(ports, p.Name)
		}
		tolerations := dep.Spec.Template.Spec.Tolerations
		ok := len(containers) == 1 && slices.Equal(ports, []string{"memcache"}) &&
			len(tolerations) == 1 && tolerations[0].Key == "dedicated"
		return ok, fmt.Sprintf("containers %v, Service ports %v, tolerations %v", containers, ports, tolerations)
	})
	mc := framework.WaitConverged(t, ns, "cache", metav1.ConditionTrue)
	if strings.Contains(fmt.Sprint(mc.Status.Conditions), "Degraded") && framework.Condition(mc, cachev1beta1.ConditionDegraded).Status != metav1.ConditionFalse {
		t.Errorf("Degraded after the removal: %+v", framework.Condition(mc, cachev1beta1.ConditionDegraded))
	}
}
