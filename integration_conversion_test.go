//go:build integration

package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
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
)

// TestIntegrationConversionBothWays writes through one version and reads
// through the other, on the real apiserver calling the suite's webhook,
// and has the operator converge an object created as v1beta1.
func TestIntegrationConversionBothWays(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	startOperator(t)

	t.Run("v1alpha1 read as v1beta1", func(t *testing.T) {
		alpha, err := suite.mc.CacheV1alpha1().Memcacheds(ns).Create(ctx, &cachev1alpha1.Memcached{
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
		beta, err := suite.mc.CacheV1beta1().Memcacheds(ns).Get(ctx, alpha.Name, metav1.GetOptions{})
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
		converged := waitConverged(t, ns, alpha.Name, metav1.ConditionTrue)
		alpha, err = suite.mc.CacheV1alpha1().Memcacheds(ns).Get(ctx, alpha.Name, metav1.GetOptions{})
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
		created, err := suite.mc.CacheV1beta1().Memcacheds(ns).Create(ctx, &cachev1beta1.Memcached{
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
		alpha, err := suite.mc.CacheV1alpha1().Memcacheds(ns).Get(ctx, "from-beta", metav1.GetOptions{})
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
			alpha, err := suite.mc.CacheV1alpha1().Memcacheds(ns).Get(ctx, "from-beta", metav1.GetOptions{})
			if err != nil {
				return err
			}
			alpha.Spec.Replicas = ptr.To[int32](2)
			_, err = suite.mc.CacheV1alpha1().Memcacheds(ns).Update(ctx, alpha, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		beta, err := suite.mc.CacheV1beta1().Memcacheds(ns).Get(ctx, "from-beta", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if ptr.Deref(beta.Spec.Replicas, 0) != 2 || beta.Spec.Pod == nil || beta.Spec.Memory.String() != "1Gi" {
			t.Errorf("after an edit through v1alpha1, v1beta1 spec = %+v", beta.Spec)
		}
		waitConverged(t, ns, "from-beta", metav1.ConditionTrue)
	})

	t.Run("v1beta1 validation", func(t *testing.T) {
		for _, memory := range []string{"1000M", "8Mi", "100Gi"} {
			q := resource.MustParse(memory)
			_, err := suite.mc.CacheV1beta1().Memcacheds(ns).Create(ctx, &cachev1beta1.Memcached{
				ObjectMeta: metav1.ObjectMeta{Name: "bad-memory"},
				Spec:       cachev1beta1.MemcachedSpec{Memory: &q},
			}, metav1.CreateOptions{})
			if err == nil || !strings.Contains(err.Error(), "spec.memory") {
				t.Errorf("memory %s: %v, want a refusal naming spec.memory", memory, err)
			}
		}
	})
}

// TestIntegrationConversionWebhookDown stops the suite's webhook: reading
// v1beta1, the storage version, still works, and so does the operator;
// reading v1alpha1 fails with the apiserver's error naming the webhook;
// and nothing is lost once it is back.
func TestIntegrationConversionWebhookDown(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	created := createMemcached(t, ns, "cache", nil)

	suite.webhook.stop()
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			_ = suite.webhook.start()
		}
	})
	_, err := suite.mc.CacheV1alpha1().Memcacheds(ns).Get(ctx, "cache", metav1.GetOptions{})
	if err == nil || !strings.Contains(err.Error(), "conversion webhook") {
		t.Fatalf("v1alpha1 read with the webhook down: %v, want the apiserver's conversion webhook error", err)
	}
	t.Logf("what a user sees: %v", err)
	if _, err := fetchMemcached(ctx, ns, "cache"); err != nil {
		t.Errorf("v1beta1, the storage version, with the webhook down: %v", err)
	}

	if err := suite.webhook.start(); err != nil {
		t.Fatal(err)
	}
	restarted = true
	eventually(t, 30*time.Second, "v1alpha1 reads work again", func(ctx context.Context) (bool, string) {
		alpha, err := suite.mc.CacheV1alpha1().Memcacheds(ns).Get(ctx, "cache", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return alpha.UID == created.UID, string(alpha.UID)
	})
}

// TestIntegrationConversionSurvivesRotation writes and reads through
// v1alpha1, which needs the webhook now that v1beta1 is stored, without
// pause until the suite's webhook has renewed its serving
// certificate twice and its CA once, and at least 100 requests are sent,
// and requires that not one request fails.
func TestIntegrationConversionSurvivesRotation(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	secret := func() *corev1.Secret {
		s, err := suite.kube.CoreV1().Secrets("memcached-operator").Get(ctx, "memcached-operator-webhook-cert", metav1.GetOptions{})
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
			_, err := suite.mc.CacheV1alpha1().Memcacheds(ns).Create(ctx, &cachev1alpha1.Memcached{
				ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec:       cachev1alpha1.MemcachedSpec{MemoryMB: 64, Paused: true},
			}, metav1.CreateOptions{})
			if i >= 20 {
				err = suite.mc.CacheV1alpha1().Memcacheds(ns).Delete(ctx, name, metav1.DeleteOptions{})
			}
			requests.Add(1)
			if err != nil {
				failures.Add(1)
				t.Errorf("request %d: %v", i, err)
			}
			if _, err := suite.mc.CacheV1alpha1().Memcacheds(ns).List(ctx, metav1.ListOptions{}); err != nil {
				failures.Add(1)
				t.Errorf("list %d: %v", i, err)
			}
			requests.Add(1)
			time.Sleep(50 * time.Millisecond)
		}
	}()
	certs, cas := 0, 0
	lastCert, lastCA := first.Data[corev1.TLSCertKey], first.Data["ca.crt"]
	eventually(t, 4*time.Minute, "two serving certificates and one CA renewed", func(context.Context) (bool, string) {
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
	eventually(t, 4*time.Minute, "at least 100 requests", func(context.Context) (bool, string) {
		n := requests.Load()
		return n >= 100, fmt.Sprintf("%d requests", n)
	})
	close(stop)
	<-done
	t.Logf("%d requests through v1alpha1 across %d serving certificates and %d CA renewals, %d failed", requests.Load(), certs, cas, failures.Load())
}

// TestIntegrationEveryReplicaConverts runs two replicas with leader
// election and a certificate from files (the cert-manager variant), and
// sends a ConversionReview to each directly: the follower answers too.
func TestIntegrationEveryReplicaConverts(t *testing.T) {
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
	args := []string{"--leader-elect=true", "--leader-election-namespace=memcached-operator", "--webhook-cert-dir=" + dir}
	leaderAddr, followerAddr := freeAddr(t), freeAddr(t)
	leader := startBinary(t, append(args, "--webhook-bind-address="+leaderAddr)...)
	waitLeader(t, leader, "first replica leads")
	follower := startBinary(t, append(args, "--webhook-bind-address="+followerAddr)...)
	waitReady(t, follower)

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
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // Self-signed test certificate.
	for name, addr := range map[string]string{"leader": leaderAddr, "follower": followerAddr} {
		var out apiextensionsv1.ConversionReview
		eventually(t, 30*time.Second, name+" converts", func(context.Context) (bool, string) {
			resp, err := client.Post("https://"+addr+"/convert", "application/json", bytes.NewReader(review))
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
