//go:build integration

package conversion

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	cachev1alpha1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1alpha1"
	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
	"github.com/kubelite/memcached-operator/test/integration/framework"
)

// TestIntegrationConversionBothWays writes through one version and reads
// through the other, on the real apiserver calling the package's webhook,
// and has the operator converge an object created as v1beta1.
func TestIntegrationConversionBothWays(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := framework.NewNamespace(t)
	framework.StartOperator(t, ns)
	mcs := framework.Memcacheds()

	t.Run("v1alpha1 read as v1beta1", func(t *testing.T) {
		alpha, err := mcs.CacheV1alpha1().Memcacheds(ns).Create(ctx, &cachev1alpha1.Memcached{
			ObjectMeta: metav1.ObjectMeta{Name: "from-alpha"},
			Spec: cachev1alpha1.MemcachedSpec{
				MemoryMB:     100,
				NodeSelector: map[string]string{"type": "kwok"}, // Every node of the local cluster.
				Tolerations:  []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists}},
				Exporter:     &cachev1alpha1.ExporterSpec{Enabled: true},
			},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		beta, err := mcs.CacheV1beta1().Memcacheds(ns).Get(ctx, alpha.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if beta.Spec.Memory == nil || beta.Spec.Memory.String() != "100Mi" ||
			beta.Spec.Pod == nil || beta.Spec.Pod.NodeSelector["type"] != "kwok" || len(beta.Spec.Pod.Tolerations) != 1 ||
			beta.Spec.Monitoring == nil || beta.Spec.Monitoring.Exporter == nil || !beta.Spec.Monitoring.Exporter.Enabled {
			t.Errorf("v1beta1 spec = %+v", beta.Spec)
		}
		if _, ok := beta.Annotations[cachev1alpha1.V1beta1SpecAnnotation]; ok {
			t.Errorf("a v1beta1 object carries %s", cachev1alpha1.V1beta1SpecAnnotation)
		}
		// The status, once the operator has written it, reads the same in
		// both versions.
		converged := framework.WaitConverged(t, ns, alpha.Name, metav1.ConditionTrue)
		alpha, err = mcs.CacheV1alpha1().Memcacheds(ns).Get(ctx, alpha.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if alpha.Status.ObservedGeneration != converged.Status.ObservedGeneration ||
			!equality.Semantic.DeepEqual(alpha.Status.Conditions, converged.Status.Conditions) ||
			alpha.Status.Endpoint != converged.Status.Endpoint || alpha.Status.ReadyReplicas != converged.Status.ReadyReplicas {
			t.Errorf("status differs:\n v1alpha1 %+v\n v1beta1  %+v", alpha.Status, converged.Status)
		}
	})

	t.Run("v1beta1 read and edited as v1alpha1", func(t *testing.T) {
		memory := resource.MustParse("1Gi")
		created, err := mcs.CacheV1beta1().Memcacheds(ns).Create(ctx, &cachev1beta1.Memcached{
			ObjectMeta: metav1.ObjectMeta{Name: "from-beta"},
			Spec: cachev1beta1.MemcachedSpec{
				Memory: &memory,
				Pod:    &cachev1beta1.PodOverrides{}, // Present and empty: v1alpha1 cannot say it.
			},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if ptr.Deref(created.Spec.Replicas, 0) != 1 || created.Spec.Image == "" {
			t.Errorf("v1beta1 defaults not applied: %+v", created.Spec)
		}
		alpha, err := mcs.CacheV1alpha1().Memcacheds(ns).Get(ctx, "from-beta", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if alpha.Spec.MemoryMB != 1024 {
			t.Errorf("memoryMB = %d, want 1024", alpha.Spec.MemoryMB)
		}
		if _, ok := alpha.Annotations[cachev1alpha1.V1beta1SpecAnnotation]; !ok {
			t.Errorf("the empty pod block is not kept in %s", cachev1alpha1.V1beta1SpecAnnotation)
		}
		// The operator writes status meanwhile: read and update again on
		// a conflict, as any client of an object a controller owns must.
		err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
			alpha, err := mcs.CacheV1alpha1().Memcacheds(ns).Get(ctx, "from-beta", metav1.GetOptions{})
			if err != nil {
				return err
			}
			alpha.Spec.Replicas = ptr.To[int32](2)
			_, err = mcs.CacheV1alpha1().Memcacheds(ns).Update(ctx, alpha, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		beta, err := mcs.CacheV1beta1().Memcacheds(ns).Get(ctx, "from-beta", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if ptr.Deref(beta.Spec.Replicas, 0) != 2 || beta.Spec.Pod == nil || beta.Spec.Memory.String() != "1Gi" {
			t.Errorf("after an edit through v1alpha1, v1beta1 spec = %+v", beta.Spec)
		}
		framework.WaitConverged(t, ns, "from-beta", metav1.ConditionTrue)
	})

	t.Run("v1beta1 validation", func(t *testing.T) {
		for _, memory := range []string{"1000M", "8Mi", "100Gi"} {
			q := resource.MustParse(memory)
			_, err := mcs.CacheV1beta1().Memcacheds(ns).Create(ctx, &cachev1beta1.Memcached{
				ObjectMeta: metav1.ObjectMeta{Name: "bad-memory"},
				Spec:       cachev1beta1.MemcachedSpec{Memory: &q},
			}, metav1.CreateOptions{})
			if err == nil || !strings.Contains(err.Error(), "spec.memory") {
				t.Errorf("memory %s: %v, want a refusal naming spec.memory", memory, err)
			}
		}
	})
}

// TestIntegrationConversionWebhookDown stops the package's webhook: reading
// v1beta1, the storage version, still works; reading v1alpha1 fails with
// the apiserver's error naming the webhook; and nothing is lost once it is
// back.
//
// It does not run in parallel: while the webhook is down, any other test's
// v1alpha1 request would fail.
func TestIntegrationConversionWebhookDown(t *testing.T) {
	ctx := context.Background()
	ns := framework.NewNamespace(t)
	created := framework.CreateMemcached(t, ns, "cache", nil)
	mcs := framework.Memcacheds()

	hook := framework.PackageWebhook()
	hook.Stop()
	restarted := false
	t.Cleanup(func() {
		if restarted {
			return
		}
		if err := hook.Start(); err != nil {
			t.Errorf("restarting the package's webhook: %v", err)
		}
	})
	_, err := mcs.CacheV1alpha1().Memcacheds(ns).Get(ctx, "cache", metav1.GetOptions{})
	if err == nil || !strings.Contains(err.Error(), "conversion webhook") {
		t.Fatalf("v1alpha1 read with the webhook down: %v, want the apiserver's conversion webhook error", err)
	}
	t.Logf("what a user sees: %v", err)
	if _, err := framework.GetMemcached(ctx, ns, "cache"); err != nil {
		t.Errorf("v1beta1, the storage version, with the webhook down: %v", err)
	}

	if err := hook.Start(); err != nil {
		t.Fatal(err)
	}
	restarted = true
	framework.Eventually(t, framework.WaitLong, "v1alpha1 reads work again", func(ctx context.Context) (bool, string) {
		alpha, err := mcs.CacheV1alpha1().Memcacheds(ns).Get(ctx, "cache", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return alpha.UID == created.UID, string(alpha.UID)
	})
}

// TestIntegrationConversionSurvivesRotation writes and reads through
// v1alpha1, which needs the webhook now that v1beta1 is stored, without
// pause until the package's webhook, with the short certificate lifetimes
// TestMain gives it, has renewed its serving certificate twice and its CA
// once, and at least 100 requests are sent, and requires that not one
// request fails.
func TestIntegrationConversionSurvivesRotation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := framework.NewNamespace(t)
	mcs := framework.Memcacheds()
	secret := func() *corev1.Secret {
		s, err := framework.Kube().CoreV1().Secrets(framework.OperatorNamespace).Get(ctx, webhookSecret, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	first := secret()
	var requests, failures atomic.Int64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			name := fmt.Sprintf("rotation-%d", i%20)
			_, err := mcs.CacheV1alpha1().Memcacheds(ns).Create(ctx, &cachev1alpha1.Memcached{
				ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec:       cachev1alpha1.MemcachedSpec{MemoryMB: 64, Paused: true},
			}, metav1.CreateOptions{})
			if i >= 20 {
				err = mcs.CacheV1alpha1().Memcacheds(ns).Delete(ctx, name, metav1.DeleteOptions{})
			}
			requests.Add(1)
			if err != nil {
				failures.Add(1)
				t.Errorf("request %d: %v", i, err)
			}
			if _, err := mcs.CacheV1alpha1().Memcacheds(ns).List(ctx, metav1.ListOptions{}); err != nil {
				failures.Add(1)
				t.Errorf("list %d: %v", i, err)
			}
			requests.Add(1)
			time.Sleep(50 * time.Millisecond)
		}
	}()
	certs, cas := 0, 0
	lastCert, lastCA := first.Data[corev1.TLSCertKey], first.Data["ca.crt"]
	framework.Eventually(t, 4*time.Minute, "two serving certificates and one CA renewed", func(context.Context) (bool, string) {
		s := secret()
		if !bytes.Equal(s.Data[corev1.TLSCertKey], lastCert) {
			certs++
			lastCert = s.Data[corev1.TLSCertKey]
		}
		if !bytes.Equal(s.Data["ca.crt"], lastCA) {
			cas++
			lastCA = s.Data["ca.crt"]
		}
		return certs >= 2 && cas >= 1, fmt.Sprintf("%d certificates, %d CAs", certs, cas)
	})
	// How many requests fit in the renewals depends on the machine's
	// load, so the load goes on, if need be, until it has sent at least
	// 100: a count to wait for, not to assert.
	framework.Eventually(t, 4*time.Minute, "at least 100 requests", func(context.Context) (bool, string) {
		n := requests.Load()
		return n >= 100, fmt.Sprintf("%d requests", n)
	})
	close(stop)
	<-done
	t.Logf("%d requests through v1alpha1 across %d serving certificates and %d CA renewals, %d failed", requests.Load(), certs, cas, failures.Load())
}

// TestIntegrationEveryReplicaConverts runs two replicas with leader
// election and a certificate from files (the cert-manager variant), each
// with its own webhook listener, and sends a ConversionReview to each
// directly: the follower answers too. With the certificate from files the
// replicas leave the CRD to the package's webhook.
func TestIntegrationEveryReplicaConverts(t *testing.T) {
	t.Parallel()
	ns := framework.NewNamespace(t)
	dir := t.TempDir()
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey("127.0.0.1", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.crt"), certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.key"), keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"--leader-elect=true", "--leader-election-namespace=" + framework.OperatorNamespace, "--webhook-cert-dir=" + dir}
	leaderAddr, followerAddr := framework.FreeAddr(t), framework.FreeAddr(t)
	leader := framework.StartOperator(t, ns, slices.Concat(args, []string{"--webhook-bind-address=" + leaderAddr})...)
	waitLeader(t, leader)
	follower := framework.StartOperator(t, ns, slices.Concat(args, []string{"--webhook-bind-address=" + followerAddr})...)
	follower.WaitReady(t)

	alpha := cachev1alpha1.Memcached{
		TypeMeta:   metav1.TypeMeta{APIVersion: cachev1alpha1.GroupVersion.String(), Kind: "Memcached"},
		ObjectMeta: metav1.ObjectMeta{Name: "cache", Namespace: "default"},
		Spec:       cachev1alpha1.MemcachedSpec{MemoryMB: 256},
	}
	raw, err := json.Marshal(&alpha)
	if err != nil {
		t.Fatal(err)
	}
	review, err := json.Marshal(&apiextensionsv1.ConversionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "ConversionReview"},
		Request: &apiextensionsv1.ConversionRequest{
			UID: "test", DesiredAPIVersion: cachev1beta1.GroupVersion.String(),
			Objects: []runtime.RawExtension{{Raw: raw}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	for name, addr := range map[string]string{"leader": leaderAddr, "follower": followerAddr} {
		var out apiextensionsv1.ConversionReview
		framework.Eventually(t, framework.WaitLong, name+" converts", func(context.Context) (bool, string) {
			// The certificate is the test's own, self-signed.
			resp, err := framework.InsecureClient.Post("https://"+addr+"/convert", "application/json", bytes.NewReader(review))
			if err != nil {
				return false, err.Error()
			}
			defer resp.Body.Close()
			if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
				return false, err.Error()
			}
			return out.Response != nil && out.Response.Result.Status == metav1.StatusSuccess, fmt.Sprintf("%+v", out.Response)
		})
		var beta cachev1beta1.Memcached
		if err := json.Unmarshal(out.Response.ConvertedObjects[0].Raw, &beta); err != nil {
			t.Fatal(err)
		}
		if out.Response.UID != "test" || beta.APIVersion != "cache.kubelite.io/v1beta1" || beta.Spec.Memory.String() != "256Mi" {
			t.Errorf("%s converted to %+v (uid %q)", name, beta, out.Response.UID)
		}
	}
}

// waitLeader waits until the operator's /metrics says it holds the
// memcached-operator Lease.
func waitLeader(t *testing.T, op *framework.Operator) {
	t.Helper()
	framework.Eventually(t, framework.WaitLong, "the operator leads", func(context.Context) (bool, string) {
		m, err := op.Metrics()
		if err != nil {
			return false, err.Error()
		}
		status, ok := m.SumBy("leader_election_master_status", "name", nil)["memcached-operator"]
		return ok && status == 1, fmt.Sprintf("leader_election_master_status=%v (reported %v)", status, ok)
	})
}
