//go:build integration

package access

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
	"github.com/kubelite/memcached-operator/pkg/resources"
	"github.com/kubelite/memcached-operator/test/integration/framework"
)

// waitBlocked waits until Degraded and Progressing both carry reason, with
// the Secret cache-tls named in the message.
func waitBlocked(t *testing.T, ns, name, reason string) {
	t.Helper()
	framework.Eventually(t, framework.WaitLong, "Degraded="+reason, func(ctx context.Context) (bool, string) {
		mc, err := framework.GetMemcached(ctx, ns, name)
		if err != nil {
			return false, err.Error()
		}
		d, p := framework.Condition(mc, cachev1beta1.ConditionDegraded), framework.Condition(mc, cachev1beta1.ConditionProgressing)
		return d.Status == metav1.ConditionTrue && d.Reason == reason && strings.Contains(d.Message, "cache-tls") &&
				p.Status == metav1.ConditionFalse && p.Reason == reason && mc.Status.ObservedGeneration == mc.Generation,
			fmt.Sprintf("Degraded %+v, Progressing %+v", d, p)
	})
}

// TestIntegrationTLS follows a Memcached whose certificate Secret comes
// late, the way a cert-manager Certificate's does: the Deployment waits
// for it with a condition that says why, a Secret lacking the key keeps it
// waiting, the complete Secret releases it without an edit to the
// Memcached, a renewal costs the operator nothing and rolls no Pod, and a
// deleted Secret holds the running Deployment instead of removing it.
func TestIntegrationTLS(t *testing.T) {
	t.Parallel()
	ns := framework.NewNamespace(t)
	op := framework.StartOperator(t, ns)
	ctx := context.Background()
	created := framework.CreateMemcached(t, ns, "cache", func(s *cachev1beta1.MemcachedSpec) {
		s.Replicas = ptr.To[int32](2)
		s.TLS = &cachev1beta1.TLS{SecretName: "cache-tls"}
		s.Monitoring = &cachev1beta1.Monitoring{Exporter: &cachev1beta1.Exporter{Enabled: true}}
	})

	waitBlocked(t, ns, "cache", cachev1beta1.ReasonTLSSecretNotFound)
	if _, err := framework.GetDeployment(ctx, ns, "cache"); !apierrors.IsNotFound(err) {
		t.Errorf("Deployment while the Secret is missing: %v, want none", err)
	}
	if _, err := framework.Kube().CoreV1().Services(ns).Get(ctx, "cache", metav1.GetOptions{}); err != nil {
		t.Errorf("the Service is not held back by the Secret: %v", err)
	}
	if _, err := framework.Kube().PolicyV1().PodDisruptionBudgets(ns).Get(ctx, "cache", metav1.GetOptions{}); err != nil {
		t.Errorf("the PodDisruptionBudget is not held back by the Secret: %v", err)
	}

	// An Opaque Secret with the certificate only, then the key added.
	secrets := framework.Kube().CoreV1().Secrets(ns)
	partial, err := secrets.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "cache-tls"},
		Data:       map[string][]byte{corev1.TLSCertKey: []byte("certificate")},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitBlocked(t, ns, "cache", cachev1beta1.ReasonTLSSecretInvalid)
	partial.Data[corev1.TLSPrivateKeyKey] = []byte("key")
	if _, err := secrets.Update(ctx, partial, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	mc := framework.WaitConverged(t, ns, "cache", metav1.ConditionTrue)
	if mc.Generation != created.Generation {
		t.Errorf("generation %d -> %d: the Secret alone must release the Deployment", created.Generation, mc.Generation)
	}

	// What the apiserver accepted and the Pods carry.
	pods, err := cachePods(ctx, ns, "cache")
	if err != nil {
		t.Fatal(err)
	}
	if len(pods) != 2 {
		t.Fatalf("%d Pods, want 2", len(pods))
	}
	for _, pod := range pods {
		var names []string
		for _, c := range pod.Spec.Containers {
			names = append(names, c.Name)
		}
		if !slices.Equal(names, []string{resources.MemcachedContainerName, resources.ExporterContainerName, resources.TLSReloaderContainerName}) {
			t.Errorf("Pod %s containers %v", pod.Name, names)
		}
		if len(pod.Spec.Volumes) != 1 || pod.Spec.Volumes[0].Secret == nil || pod.Spec.Volumes[0].Secret.SecretName != "cache-tls" {
			t.Errorf("Pod %s volumes %+v, want the Secret cache-tls", pod.Name, pod.Spec.Volumes)
		}
		env := pod.Spec.Containers[0].Env
		if len(env) != 1 || env[0].ValueFrom == nil || env[0].ValueFrom.FieldRef == nil || env[0].ValueFrom.FieldRef.FieldPath != "status.podIPs" {
			t.Errorf("Pod %s memcached env %+v, want POD_IPS from status.podIPs", pod.Name, env)
		}
		if !slices.Contains(pod.Spec.Containers[0].Args, "-Z") {
			t.Errorf("Pod %s memcached args %v lack -Z", pod.Name, pod.Spec.Containers[0].Args)
		}
	}

	// A renewal: new data under the same keys. memcached reloads it in the
	// Pods; the operator has nothing to do.
	op.WaitQuiet(t)
	dep, err := framework.GetDeployment(ctx, ns, "cache")
	if err != nil {
		t.Fatal(err)
	}
	mark := len(op.Writes(t))
	renewed, err := secrets.Get(ctx, "cache-tls", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	renewed.Data[corev1.TLSCertKey] = []byte("renewed certificate")
	if _, err := secrets.Update(ctx, renewed, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The renewal keeps the Secret's keys, so no event syncs the Memcached
	// (secretKeysChanged); its resyncs do, reading the renewed Secret
	// from the cache.
	op.WaitTwoResyncs(t, 1)
	if writes := op.Writes(t)[mark:]; len(writes) > 0 {
		t.Errorf("a renewed certificate cost %d writes: %v", len(writes), writes)
	}
	if after, err := framework.GetDeployment(ctx, ns, "cache"); err != nil || after.Generation != dep.Generation {
		t.Errorf("the renewal changed the Deployment (generation %d -> %v, %v): it would roll the Pods and empty the cache", dep.Generation, after.Generation, err)
	}

	// The Secret deleted: the running Deployment stays as it is.
	if err := secrets.Delete(ctx, "cache-tls", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitBlocked(t, ns, "cache", cachev1beta1.ReasonTLSSecretNotFound)
	if after, err := framework.GetDeployment(ctx, ns, "cache"); err != nil || after.Generation != dep.Generation {
		t.Errorf("with the Secret gone the Deployment is %v (error %v), want it kept at generation %d", after, err, dep.Generation)
	}
	framework.CreateTLSSecret(t, ns, "cache-tls", "again")
	framework.WaitConverged(t, ns, "cache", metav1.ConditionTrue)
}
