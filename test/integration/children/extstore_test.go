//go:build integration

package children

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
	"github.com/kubelite/memcached-operator/pkg/resources"
	"github.com/kubelite/memcached-operator/test/integration/framework"
)

// TestIntegrationExtstoreClaims runs a Memcached of two replicas with
// spec.extstore on the real control plane, with a PersistentVolume for
// each Pod made by the test. Expected: kube-controller-manager's ephemeral
// volume controller creates one claim per Pod, <pod>-extstore, owned by
// the Pod and labelled with the Memcached's selector; each binds to one of
// the volumes and the Pods run; deleting the Memcached deletes the claims
// with the Pods.
//
// The StorageClass is named after the test's namespace and does not
// exist: the volume binder then binds at once to a volume of that class,
// and no other test's claim can take these cluster-wide volumes.
func TestIntegrationExtstoreClaims(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := framework.NewNamespace(t)
	framework.StartOperator(t, ns)
	class := ns + "-extstore"
	for i := range 2 {
		createVolume(t, fmt.Sprintf("%s-%d", class, i), class, "1Gi")
	}
	framework.CreateMemcached(t, ns, "cache", func(s *cachev1beta1.MemcachedSpec) {
		s.Replicas = ptr.To[int32](2)
		s.Extstore = &cachev1beta1.Extstore{Size: resource.MustParse("1Gi"), StorageClassName: ptr.To(class)}
	})
	mc := framework.WaitConverged(t, ns, "cache", metav1.ConditionTrue)

	pods, err := framework.Kube().CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: mc.Status.Selector})
	if err != nil {
		t.Fatal(err)
	}
	claims, err := framework.Kube().CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{LabelSelector: mc.Status.Selector})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 2 || len(claims.Items) != 2 {
		t.Fatalf("%d Pods and %d claims with the Memcached's selector, want 2 of each", len(pods.Items), len(claims.Items))
	}
	for _, pod := range pods.Items {
		name := pod.Name + "-" + resources.ExtstoreVolumeName
		i := slices.IndexFunc(claims.Items, func(c corev1.PersistentVolumeClaim) bool { return c.Name == name })
		if i < 0 {
			t.Errorf("Pod %s has no claim %s", pod.Name, name)
			continue
		}
		claim := claims.Items[i]
		if ref := metav1.GetControllerOf(&claim); ref == nil || ref.UID != pod.UID {
			t.Errorf("claim %s is not controlled by its Pod %s: %+v", name, pod.Name, ref)
		}
		if claim.Status.Phase != corev1.ClaimBound || !slices.Contains([]string{class + "-0", class + "-1"}, claim.Spec.VolumeName) {
			t.Errorf("claim %s is %s on volume %q, want Bound to one of the test's volumes", name, claim.Status.Phase, claim.Spec.VolumeName)
		}
		if got := claim.Spec.Resources.Requests[corev1.ResourceStorage]; got.Cmp(resource.MustParse("1Gi")) != 0 {
			t.Errorf("claim %s asks for %s, want 1Gi", name, got.String())
		}
	}

	if err := framework.Memcacheds().CacheV1beta1().Memcacheds(ns).Delete(ctx, "cache", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, framework.WaitLong, "the claims are deleted with the Pods", func(ctx context.Context) (bool, string) {
		left, err := framework.Kube().CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		var names []string
		for _, c := range left.Items {
			names = append(names, c.Name)
		}
		return len(names) == 0, fmt.Sprintf("claims left: %v", names)
	})
}

// createVolume creates a PersistentVolume of the size and class for the
// test, and deletes it when the test ends. kwok's Pods mount nothing, so
// its hostPath is never used.
func createVolume(t *testing.T, name, class, size string) {
	t.Helper()
	ctx := context.Background()
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName:              class,
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			PersistentVolumeSource: corev1.PersistentVolumeSource{
				HostPath: &corev1.HostPathVolumeSource{Path: "/var/lib/extstore/" + name},
			},
		},
	}
	if _, err := framework.Kube().CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating PersistentVolume %s: %v", name, err)
	}
	t.Cleanup(func() {
		err := framework.Kube().CoreV1().PersistentVolumes().Delete(context.Background(), name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting PersistentVolume %s: %v", name, err)
		}
	})
}

// TestIntegrationExtstoreClaimPending runs a Memcached whose extstore
// claim cannot bind: its StorageClass has no provisioner and no volume.
// Expected: once the claim has been Pending for the operator's grace
// (--extstore-claim-grace, cut to 5 seconds here), the Memcached is
// Degraded with reason ExtstoreClaimPending, naming the claim; once a
// volume for it exists, the claim binds, the Pod runs, and the condition
// clears by itself.
func TestIntegrationExtstoreClaimPending(t *testing.T) {
	t.Parallel()
	ns := framework.NewNamespace(t)
	framework.StartOperator(t, ns, "--extstore-claim-grace=5s")
	class := ns + "-none"
	framework.CreateMemcached(t, ns, "cache", func(s *cachev1beta1.MemcachedSpec) {
		s.Extstore = &cachev1beta1.Extstore{Size: resource.MustParse("1Gi"), StorageClassName: ptr.To(class)}
	})
	framework.Eventually(t, framework.WaitLong, "Degraded says the claim is not bound", func(ctx context.Context) (bool, string) {
		mc, err := framework.GetMemcached(ctx, ns, "cache")
		if err != nil {
			return false, err.Error()
		}
		d := framework.Condition(mc, cachev1beta1.ConditionDegraded)
		return d.Status == metav1.ConditionTrue && d.Reason == cachev1beta1.ReasonExtstoreClaimPending &&
				strings.Contains(d.Message, "-extstore (StorageClass "+class+")"),
			fmt.Sprintf("Degraded %s/%s: %s", d.Status, d.Reason, d.Message)
	})

	createVolume(t, class+"-0", class, "1Gi")
	mc := framework.WaitConverged(t, ns, "cache", metav1.ConditionTrue)
	if d := framework.Condition(mc, cachev1beta1.ConditionDegraded); d.Status != metav1.ConditionFalse {
		t.Errorf("once the claim is bound, Degraded is %s/%s: %s", d.Status, d.Reason, d.Message)
	}
}
