//go:build integration

package children

import (
	"context"
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
	"github.com/kubelite/memcached-operator/pkg/resources"
	"github.com/kubelite/memcached-operator/test/integration/framework"
)

// cachePods lists the Pods of Memcached name that are not being deleted.
func cachePods(ctx context.Context, ns, name string) ([]corev1.Pod, error) {
	mc := &cachev1beta1.Memcached{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
	list, err := framework.Kube().CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: resources.Selector(mc)})
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(list.Items, func(p corev1.Pod) bool { return p.DeletionTimestamp != nil }), nil
}

// TestIntegrationDisruptionBudget drains like kubectl drain does, through
// the eviction API, and requires the budget to stop the second eviction
// while the first Pod's replacement is not ready. It then changes the
// budget by hand (drift), and through the spec from maxUnavailable to
// minAvailable.
//
// It does not run in parallel: it cordons every node of the package's
// control plane, which would leave the Pods of the other tests Pending.
// The parallel tests start only once it has ended.
func TestIntegrationDisruptionBudget(t *testing.T) {
	ns := framework.NewNamespace(t)
	framework.StartOperator(t, ns)
	ctx := context.Background()
	mc := framework.CreateMemcached(t, ns, "cache", func(s *cachev1beta1.MemcachedSpec) { s.Replicas = ptr.To[int32](3) })
	framework.WaitConverged(t, ns, "cache", metav1.ConditionTrue)

	pdbs := framework.Kube().PolicyV1().PodDisruptionBudgets(ns)
	pdb, err := pdbs.Get(ctx, "cache", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ref := metav1.GetControllerOf(pdb); ref == nil || ref.UID != mc.UID {
		t.Errorf("PodDisruptionBudget controller = %+v, want the Memcached", ref)
	}
	if pdb.Spec.MaxUnavailable == nil || *pdb.Spec.MaxUnavailable != intstr.FromInt32(1) || pdb.Spec.MinAvailable != nil {
		t.Errorf("budget = maxUnavailable %v, minAvailable %v; want maxUnavailable 1 only", pdb.Spec.MaxUnavailable, pdb.Spec.MinAvailable)
	}

	// The disruption controller in kube-controller-manager counts the
	// healthy Pods; evictions are refused until it has.
	framework.Eventually(t, framework.WaitLong, "the budget allows one disruption", func(ctx context.Context) (bool, string) {
		pdb, err := pdbs.Get(ctx, "cache", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return pdb.Status.CurrentHealthy == 3 && pdb.Status.DisruptionsAllowed == 1, fmt.Sprintf("status %+v", pdb.Status)
	})
	pods, err := cachePods(ctx, ns, "cache")
	if err != nil {
		t.Fatal(err)
	}
	if len(pods) != 3 {
		t.Fatalf("%d Pods, want 3", len(pods))
	}
	// Cordon every node first, as kubectl drain does. kwok makes a
	// replacement Ready at once, so without it the budget could allow the
	// second eviction by the time it is sent; cordoned, the replacement
	// stays Pending and the budget must hold.
	framework.SetUnschedulable(t, true)
	t.Cleanup(func() { framework.SetUnschedulable(t, false) })
	evict := func(pod string) error {
		return framework.Kube().PolicyV1().Evictions(ns).Evict(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: pod, Namespace: ns}})
	}
	if err := evict(pods[0].Name); err != nil {
		t.Fatalf("first eviction: %v", err)
	}
	framework.Eventually(t, framework.WaitLong, "the budget allows no more disruptions", func(ctx context.Context) (bool, string) {
		pdb, err := pdbs.Get(ctx, "cache", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return pdb.Status.DisruptionsAllowed == 0, fmt.Sprintf("status %+v", pdb.Status)
	})
	if err := evict(pods[1].Name); !apierrors.IsTooManyRequests(err) {
		t.Errorf("second eviction while one Pod is down: %v, want 429 Too Many Requests from the budget", err)
	}
	framework.SetUnschedulable(t, false)

	// Drift: someone loosens the budget; the operator restores it.
	if _, err := pdbs.Patch(ctx, "cache", types.MergePatchType, []byte(`{"spec":{"maxUnavailable":3}}`), metav1.PatchOptions{FieldManager: "someone"}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, framework.WaitLong, "the budget is restored", func(ctx context.Context) (bool, string) {
		pdb, err := pdbs.Get(ctx, "cache", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return pdb.Spec.MaxUnavailable != nil && *pdb.Spec.MaxUnavailable == intstr.FromInt32(1), fmt.Sprintf("maxUnavailable %v", pdb.Spec.MaxUnavailable)
	})

	// From maxUnavailable to minAvailable: one apply sets the one and
	// drops the other, which the operator owns.
	framework.PatchSpec(t, ns, "cache", `{"spec":{"podDisruptionBudget":{"minAvailable":"50%"}}}`)
	framework.Eventually(t, framework.WaitLong, "the budget follows the spec", func(ctx context.Context) (bool, string) {
		pdb, err := pdbs.Get(ctx, "cache", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return pdb.Spec.MaxUnavailable == nil && pdb.Spec.MinAvailable != nil && *pdb.Spec.MinAvailable == intstr.FromString("50%"),
			fmt.Sprintf("maxUnavailable %v, minAvailable %v", pdb.Spec.MaxUnavailable, pdb.Spec.MinAvailable)
	})
	framework.WaitConverged(t, ns, "cache", metav1.ConditionTrue)
}

// TestIntegrationPodSettings checks that what spec.pod and the memcached
// flags ask for reaches the Pods the Deployment controller creates, and
// leaves them when the spec drops it.
func TestIntegrationPodSettings(t *testing.T) {
	t.Parallel()
	ns := framework.NewNamespace(t)
	framework.StartOperator(t, ns)
	ctx := context.Background()
	framework.CreateMemcached(t, ns, "cache", func(s *cachev1beta1.MemcachedSpec) {
		s.Replicas = ptr.To[int32](2)
		s.MaxItemSize = ptr.To(resource.MustParse("2Mi"))
		s.ExtraArgs = []string{"-o", "lru_crawler", "--disable-cas"}
		p := framework.PodOf(s)
		p.Labels = map[string]string{"team": "web"}
		p.Annotations = map[string]string{"example.com/owner": "web"}
		p.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "registry"}}
		p.TerminationGracePeriodSeconds = ptr.To[int64](40)
		p.PreStopDelaySeconds = ptr.To[int32](10)
	})
	framework.WaitConverged(t, ns, "cache", metav1.ConditionTrue)

	pods, err := cachePods(ctx, ns, "cache")
	if err != nil {
		t.Fatal(err)
	}
	if len(pods) != 2 {
		t.Fatalf("%d Pods, want 2", len(pods))
	}
	for _, pod := range pods {
		spec := pod.Spec
		c := spec.Containers[0]
		wantArgs := []string{"-m", "64", "-c", "1024", "-t", "4", "-p", "11211", "-I", "2048k", "-o", "lru_crawler", "--disable-cas"}
		switch {
		case pod.Labels["team"] != "web" || pod.Labels[resources.LabelInstance] != "cache":
			t.Errorf("Pod %s labels = %v", pod.Name, pod.Labels)
		case pod.Annotations["example.com/owner"] != "web":
			t.Errorf("Pod %s annotations = %v", pod.Name, pod.Annotations)
		case len(spec.ImagePullSecrets) != 1 || spec.ImagePullSecrets[0].Name != "registry":
			t.Errorf("Pod %s imagePullSecrets = %v", pod.Name, spec.ImagePullSecrets)
		case ptr.Deref(spec.TerminationGracePeriodSeconds, 0) != 40:
			t.Errorf("Pod %s terminationGracePeriodSeconds = %v", pod.Name, ptr.Deref(spec.TerminationGracePeriodSeconds, 0))
		case c.Lifecycle == nil || c.Lifecycle.PreStop == nil || c.Lifecycle.PreStop.Sleep == nil || c.Lifecycle.PreStop.Sleep.Seconds != 10:
			t.Errorf("Pod %s preStop = %+v, want a 10 s sleep", pod.Name, c.Lifecycle)
		case !slices.Equal(c.Args, wantArgs):
			t.Errorf("Pod %s args = %v, want %v", pod.Name, c.Args, wantArgs)
		}
		// The default spreading reaches the Pods, and the apiserver has
		// merged the Pod's own pod-template-hash into each selector.
		var keys []string
		for _, tsc := range spec.TopologySpreadConstraints {
			keys = append(keys, tsc.TopologyKey)
			hash := pod.Labels["pod-template-hash"]
			if tsc.LabelSelector == nil || !labelSelectorHas(tsc.LabelSelector, "pod-template-hash", hash) {
				t.Errorf("Pod %s spread constraint %s selector %v does not hold its pod-template-hash %q", pod.Name, tsc.TopologyKey, tsc.LabelSelector, hash)
			}
		}
		if !slices.Equal(keys, []string{corev1.LabelHostname, corev1.LabelTopologyZone}) {
			t.Errorf("Pod %s spread over %v, want nodes and zones", pod.Name, keys)
		}
	}

	framework.PatchSpec(t, ns, "cache", `{"spec":{"extraArgs":null,"pod":{"labels":null,"imagePullSecrets":null}}}`)
	framework.Eventually(t, framework.WaitLong, "the template loses what the spec dropped", func(ctx context.Context) (bool, string) {
		dep, err := framework.GetDeployment(ctx, ns, "cache")
		if err != nil {
			return false, err.Error()
		}
		tmpl := dep.Spec.Template
		_, team := tmpl.Labels["team"]
		args := tmpl.Spec.Containers[0].Args
		return !team && len(tmpl.Spec.ImagePullSecrets) == 0 && !slices.Contains(args, "--disable-cas"),
			fmt.Sprintf("labels %v, imagePullSecrets %v, args %v", tmpl.Labels, tmpl.Spec.ImagePullSecrets, args)
	})
	framework.WaitConverged(t, ns, "cache", metav1.ConditionTrue)
}

// labelSelectorHas reports whether s requires key=value, in its labels or
// in an In expression with that one value.
func labelSelectorHas(s *metav1.LabelSelector, key, value string) bool {
	if s.MatchLabels[key] == value && value != "" {
		return true
	}
	for _, e := range s.MatchExpressions {
		if e.Key == key && e.Operator == metav1.LabelSelectorOpIn && slices.Equal(e.Values, []string{value}) {
			return true
		}
	}
	return false
}
