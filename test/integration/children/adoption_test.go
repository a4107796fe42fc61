//go:build integration

package children

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
	"github.com/kubelite/memcached-operator/pkg/resources"
	"github.com/kubelite/memcached-operator/test/integration/framework"
)

// handMadeOrphans creates a Deployment, a Service and a PodDisruptionBudget
// named name that carry the operator's labels and no controller, as someone
// might write them by hand, with extras the operator would never set.
func handMadeOrphans(t *testing.T, ns, name string, mutateDep func(*appsv1.Deployment), mutateSvc func(*corev1.Service), mutatePDB func(*policyv1.PodDisruptionBudget)) {
	t.Helper()
	ctx := context.Background()
	mc := &cachev1beta1.Memcached{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
	labels := resources.Labels(mc)
	podLabels := maps.Clone(labels)
	podLabels["hand-made"] = "true"
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: map[string]string{"hand-made": "true"}},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: resources.SelectorLabels(mc)},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels},
				Spec: corev1.PodSpec{
					ServiceAccountName: "hand-made",
					Containers: []corev1.Container{
						{Name: "memcached", Image: cachev1beta1.DefaultImage, Env: []corev1.EnvVar{{Name: "HAND_MADE", Value: "true"}},
							VolumeMounts: []corev1.VolumeMount{{Name: "scratch", MountPath: "/scratch"}}},
						{Name: "sidecar", Image: "busybox"},
					},
					Volumes: []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
				},
			},
		},
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: corev1.ServiceSpec{
			ClusterIP: corev1.ClusterIPNone,
			Selector:  resources.SelectorLabels(mc),
			Ports: []corev1.ServicePort{
				{Name: "memcache", Port: cachev1beta1.DefaultPort, TargetPort: intstr.FromInt32(cachev1beta1.DefaultPort)},
				{Name: "hand-made", Port: 9999},
			},
		},
	}
	if mutateDep != nil {
		mutateDep(dep)
	}
	if mutateSvc != nil {
		mutateSvc(svc)
	}
	if _, err := framework.Kube().AppsV1().Deployments(ns).Create(ctx, dep, metav1.CreateOptions{FieldManager: "hand"}); err != nil {
		t.Fatal(err)
	}
	if _, err := framework.Kube().CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{FieldManager: "hand"}); err != nil {
		t.Fatal(err)
	}
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: map[string]string{"hand-made": "true"}},
		Spec: policyv1.PodDisruptionBudgetSpec{
			Selector:       &metav1.LabelSelector{MatchLabels: podLabels},
			MaxUnavailable: ptr.To(intstr.FromString("90%")),
		},
	}
	if mutatePDB != nil {
		mutatePDB(pdb)
	}
	if _, err := framework.Kube().PolicyV1().PodDisruptionBudgets(ns).Create(ctx, pdb, metav1.CreateOptions{FieldManager: "hand"}); err != nil {
		t.Fatal(err)
	}
}

// TestIntegrationAdoptionReplacesHandMadeOrphans adopts orphans written by
// hand and requires them to end up exactly as the operator creates its own
// children: the same as those of a Memcached of the same spec that never
// had an orphan, up to the name.
func TestIntegrationAdoptionReplacesHandMadeOrphans(t *testing.T) {
	t.Parallel()
	ns := framework.NewNamespace(t)
	framework.StartOperator(t, ns)
	ctx := context.Background()
	handMadeOrphans(t, ns, "adopter", nil, nil, nil)
	adopter := framework.CreateMemcached(t, ns, "adopter", nil)
	framework.CreateMemcached(t, ns, "reference", nil)
	framework.WaitConverged(t, ns, "adopter", metav1.ConditionTrue)
	framework.WaitConverged(t, ns, "reference", metav1.ConditionTrue)

	got, err := framework.GetDeployment(ctx, ns, "adopter")
	if err != nil {
		t.Fatal(err)
	}
	want, err := framework.GetDeployment(ctx, ns, "reference")
	if err != nil {
		t.Fatal(err)
	}
	if ref := metav1.GetControllerOf(got); ref == nil || ref.UID != adopter.UID {
		t.Fatalf("the orphan was not adopted: controller %+v", ref)
	}
	// The instance label is the only difference a name makes.
	want.Spec.Template.Labels[resources.LabelInstance] = "adopter"
	want.Spec.Selector.MatchLabels[resources.LabelInstance] = "adopter"
	for _, c := range want.Spec.Template.Spec.TopologySpreadConstraints {
		c.LabelSelector.MatchLabels[resources.LabelInstance] = "adopter"
	}
	if !equality.Semantic.DeepEqual(got.Spec, want.Spec) {
		t.Errorf("adopted Deployment spec differs from the operator's own:\n got %+v\nwant %+v", got.Spec.Template.Spec, want.Spec.Template.Spec)
	}
	if _, ok := got.Annotations["hand-made"]; ok {
		t.Errorf("adopted Deployment keeps the hand-made annotation: %v", got.Annotations)
	}

	svc, err := framework.Kube().CoreV1().Services(ns).Get(ctx, "adopter", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Name != "memcache" {
		t.Errorf("adopted Service ports = %+v, want only memcache", svc.Spec.Ports)
	}
	if ref := metav1.GetControllerOf(svc); ref == nil || ref.UID != adopter.UID {
		t.Errorf("the Service was not adopted: controller %+v", ref)
	}

	gotPDB, err := framework.Kube().PolicyV1().PodDisruptionBudgets(ns).Get(ctx, "adopter", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wantPDB, err := framework.Kube().PolicyV1().PodDisruptionBudgets(ns).Get(ctx, "reference", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wantPDB.Spec.Selector.MatchLabels[resources.LabelInstance] = "adopter"
	if ref := metav1.GetControllerOf(gotPDB); ref == nil || ref.UID != adopter.UID {
		t.Errorf("the PodDisruptionBudget was not adopted: controller %+v", ref)
	}
	if !equality.Semantic.DeepEqual(gotPDB.Spec, wantPDB.Spec) {
		t.Errorf("adopted PodDisruptionBudget spec = %+v, want the operator's own %+v", gotPDB.Spec, wantPDB.Spec)
	}
	if _, ok := gotPDB.Annotations["hand-made"]; ok {
		t.Errorf("adopted PodDisruptionBudget keeps the hand-made annotation: %v", gotPDB.Annotations)
	}
	for _, entry := range got.ManagedFields {
		if entry.Manager == "hand" {
			t.Errorf("the hand-made manager still owns fields of the adopted Deployment: %s", entry.FieldsV1)
		}
	}
}

// TestIntegrationUnadoptableOrphans covers orphans that differ in a field
// that cannot change: they are left alone, the Memcached says what to
// delete, and deleting them lets it converge.
func TestIntegrationUnadoptableOrphans(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		mutateDep   func(*appsv1.Deployment)
		mutateSvc   func(*corev1.Service)
		mutatePDB   func(*policyv1.PodDisruptionBudget)
		kind        string
		wantMessage string
	}{
		{
			name: "Deployment selector differs",
			mutateDep: func(d *appsv1.Deployment) {
				d.Spec.Selector.MatchLabels["tier"] = "cache"
				d.Spec.Template.Labels["tier"] = "cache"
			},
			kind:        "Deployment",
			wantMessage: "its selector",
		},
		{
			name:        "Service has a cluster IP",
			mutateSvc:   func(s *corev1.Service) { s.Spec.ClusterIP = "" },
			kind:        "Service",
			wantMessage: "its clusterIP",
		},
		{
			name: "PodDisruptionBudget sets minAvailable",
			mutatePDB: func(p *policyv1.PodDisruptionBudget) {
				p.Spec.MaxUnavailable, p.Spec.MinAvailable = nil, ptr.To(intstr.FromInt32(1))
			},
			kind:        "PodDisruptionBudget",
			wantMessage: "it sets minAvailable where the operator sets maxUnavailable",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ns := framework.NewNamespace(t)
			framework.StartOperator(t, ns)
			ctx := context.Background()
			handMadeOrphans(t, ns, "cache", tt.mutateDep, tt.mutateSvc, tt.mutatePDB)
			framework.CreateMemcached(t, ns, "cache", nil)
			framework.Eventually(t, framework.WaitLong, "Degraded=ResourceExists naming the orphan", func(ctx context.Context) (bool, string) {
				mc, err := framework.GetMemcached(ctx, ns, "cache")
				if err != nil {
					return false, err.Error()
				}
				d := framework.Condition(mc, cachev1beta1.ConditionDegraded)
				return d.Status == metav1.ConditionTrue && d.Reason == cachev1beta1.ReasonResourceExists &&
					strings.Contains(d.Message, tt.kind+" "+ns+"/cache") && strings.Contains(d.Message, tt.wantMessage) &&
					strings.Contains(d.Message, "delete it"), fmt.Sprintf("Degraded %+v", d)
			})
			var err error
			switch tt.kind {
			case "Deployment":
				var dep *appsv1.Deployment
				if dep, err = framework.GetDeployment(ctx, ns, "cache"); err == nil && metav1.GetControllerOf(dep) != nil {
					t.Errorf("the unadoptable Deployment was adopted")
				}
				err = framework.Kube().AppsV1().Deployments(ns).Delete(ctx, "cache", metav1.DeleteOptions{})
			case "Service":
				var svc *corev1.Service
				if svc, err = framework.Kube().CoreV1().Services(ns).Get(ctx, "cache", metav1.GetOptions{}); err == nil && metav1.GetControllerOf(svc) != nil {
					t.Errorf("the unadoptable Service was adopted")
				}
				err = framework.Kube().CoreV1().Services(ns).Delete(ctx, "cache", metav1.DeleteOptions{})
			default:
				var pdb *policyv1.PodDisruptionBudget
				if pdb, err = framework.Kube().PolicyV1().PodDisruptionBudgets(ns).Get(ctx, "cache", metav1.GetOptions{}); err == nil && metav1.GetControllerOf(pdb) != nil {
					t.Errorf("the unadoptable PodDisruptionBudget was adopted")
				}
				err = framework.Kube().PolicyV1().PodDisruptionBudgets(ns).Delete(ctx, "cache", metav1.DeleteOptions{})
			}
			if err != nil && !apierrors.IsNotFound(err) {
				t.Fatal(err)
			}
			// It carries the operator's labels: its deletion is an event,
			// so this converges without waiting for the minute's recheck.
			framework.WaitConverged(t, ns, "cache", metav1.ConditionTrue)
		})
	}
}
