//go:build integration

package status

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
	"github.com/kubelite/memcached-operator/pkg/resources"
	"github.com/kubelite/memcached-operator/test/integration/framework"
)

// TestIntegrationImageVulnerable runs a Memcached on memcached 1.6.39 with
// auth: ImageVulnerable is True, and it and a Warning Event name 1.6.44,
// the first release without the holes that apply. Moving to the default
// image clears the condition; an image pinned by digest reports Unknown.
func TestIntegrationImageVulnerable(t *testing.T) {
	t.Parallel()
	ns := framework.NewNamespace(t)
	framework.StartOperator(t, ns)
	if _, err := framework.Kube().CoreV1().Secrets(ns).Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "cache-auth"},
		Data:       map[string][]byte{resources.AuthSecretKey: []byte("alice:Pa55word\n")},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.CreateMemcached(t, ns, "cache", func(s *cachev1beta1.MemcachedSpec) {
		s.Image = "memcached:1.6.39"
		s.Auth = &cachev1beta1.Auth{SecretName: "cache-auth"}
	})
	waitImageCondition(t, ns, metav1.ConditionTrue, "memcached 1.6.44 or later")
	framework.Eventually(t, framework.WaitLong, "a Warning Event KnownVulnerability naming 1.6.44", func(ctx context.Context) (bool, string) {
		events, err := framework.Kube().CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=" + cachev1beta1.ReasonKnownVulnerability})
		if err != nil {
			return false, err.Error()
		}
		for _, e := range events.Items {
			if e.Type == corev1.EventTypeWarning && e.InvolvedObject.Name == "cache" && strings.Contains(e.Message, "1.6.44") {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d such Events", len(events.Items))
	})

	framework.PatchSpec(t, ns, "cache", `{"spec":{"image":"`+cachev1beta1.DefaultImage+`"}}`)
	waitImageCondition(t, ns, metav1.ConditionFalse, "no security hole known")
	framework.PatchSpec(t, ns, "cache", `{"spec":{"image":"memcached:1.6.39@sha256:`+strings.Repeat("0", 64)+`"}}`)
	waitImageCondition(t, ns, metav1.ConditionUnknown, "pinned by digest")
}

// waitImageCondition waits until the Memcached "cache" of ns reports
// ImageVulnerable with status for its current generation, with a message
// that contains part.
func waitImageCondition(t *testing.T, ns string, status metav1.ConditionStatus, part string) {
	t.Helper()
	framework.Eventually(t, framework.WaitLong, fmt.Sprintf("ImageVulnerable=%s mentioning %q", status, part), func(ctx context.Context) (bool, string) {
		mc, err := framework.GetMemcached(ctx, ns, "cache")
		if err != nil {
			return false, err.Error()
		}
		c := framework.Condition(mc, cachev1beta1.ConditionImageVulnerable)
		return c.ObservedGeneration == mc.Generation && c.Status == status && strings.Contains(c.Message, part), fmt.Sprintf("%+v", c)
	})
}
