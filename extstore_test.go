package main

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
	"github.com/kubelite/memcached-operator/pkg/childcache"
	"github.com/kubelite/memcached-operator/pkg/resources"
)

// TestStuckClaims holds the rule for ExtstoreClaimPending: only a
// Memcached with extstore, only its own claims, only Pending ones, and
// only once they have been Pending for the grace; a claim within it is
// looked at again when the grace ends. The claims go through the
// informer's transform, as the operator caches them.
func TestStuckClaims(t *testing.T) {
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	claim := func(name, instance string, phase corev1.PersistentVolumeClaimPhase, age time.Duration, class *string) *corev1.PersistentVolumeClaim {
		return &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{
				Name: name, Namespace: metav1.NamespaceDefault,
				Labels:            map[string]string{resources.LabelInstance: instance, resources.LabelManagedBy: resources.ManagedBy},
				CreationTimestamp: metav1.NewTime(now.Add(-age)),
			},
			Spec:   corev1.PersistentVolumeClaimSpec{StorageClassName: class},
			Status: corev1.PersistentVolumeClaimStatus{Phase: phase},
		}
	}
	tests := []struct {
		name        string
		noExtstore  bool
		claims      []*corev1.PersistentVolumeClaim
		want        []string // substrings of the message; none: ""
		wantRecheck time.Duration
	}{
		{name: "no claims"},
		{name: "bound", claims: []*corev1.PersistentVolumeClaim{claim("a-extstore", "cache", corev1.ClaimBound, time.Hour, nil)}},
		{name: "pending within the grace", claims: []*corev1.PersistentVolumeClaim{
			claim("a-extstore", "cache", corev1.ClaimPending, 30*time.Second, nil),
			claim("b-extstore", "cache", corev1.ClaimPending, 90*time.Second, nil),
		}, wantRecheck: 30 * time.Second},
		{name: "pending past the grace", claims: []*corev1.PersistentVolumeClaim{
			claim("a-extstore", "cache", corev1.ClaimPending, 3*time.Minute, ptr.To("fast")),
			claim("b-extstore", "cache", corev1.ClaimBound, 3*time.Minute, ptr.To("fast")),
		}, want: []string{"of 1 Pods", "a-extstore (StorageClass fast)", "more than 2m0s"}},
		{name: "default and no class", claims: []*corev1.PersistentVolumeClaim{
			claim("a-extstore", "cache", corev1.ClaimPending, 3*time.Minute, nil),
			claim("b-extstore", "cache", corev1.ClaimPending, 3*time.Minute, ptr.To("")),
		}, want: []string{"a-extstore (the default StorageClass)", "b-extstore (no StorageClass)"}},
		{name: "past the grace and within it", claims: []*corev1.PersistentVolumeClaim{
			claim("a-extstore", "cache", corev1.ClaimPending, 3*time.Minute, nil),
			claim("b-extstore", "cache", corev1.ClaimPending, 100*time.Second, nil),
		}, want: []string{"of 1 Pods", "a-extstore"}, wantRecheck: 20 * time.Second},
		{name: "another Memcached's claim", claims: []*corev1.PersistentVolumeClaim{
			claim("a-extstore", "other", corev1.ClaimPending, time.Hour, nil),
		}},
		{name: "without extstore", noExtstore: true, claims: []*corev1.PersistentVolumeClaim{
			claim("a-extstore", "cache", corev1.ClaimPending, time.Hour, nil),
		}},
		{name: "at most three named", claims: []*corev1.PersistentVolumeClaim{
			claim("a-extstore", "cache", corev1.ClaimPending, time.Hour, nil),
			claim("b-extstore", "cache", corev1.ClaimPending, time.Hour, nil),
			claim("c-extstore", "cache", corev1.ClaimPending, time.Hour, nil),
			claim("d-extstore", "cache", corev1.ClaimPending, time.Hour, nil),
			claim("e-extstore", "cache", corev1.ClaimPending, time.Hour, nil),
		}, want: []string{"of 5 Pods", "a-extstore", "c-extstore (the default StorageClass) and 2 more"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			mc := newMemcached("cache")
			if !tt.noExtstore {
				mc.Spec.Extstore = &cachev1beta1.Extstore{Size: resource.MustParse("1Gi")}
			}
			f.addMemcached(mc)
			c := f.newController(context.Background())
			trim := childcache.Claim()
			for _, claim := range tt.claims {
				trimmed, err := trim(claim)
				if err != nil {
					t.Fatal(err)
				}
				if err := f.kubeInformers.Core().V1().PersistentVolumeClaims().Informer().GetIndexer().Add(trimmed); err != nil {
					t.Fatal(err)
				}
			}
			got, recheck := c.stuckClaims(&memcachedSync{mc: mc, defaulted: resources.Default(mc)}, now)
			if recheck != tt.wantRecheck {
				t.Errorf("recheck after %s, want %s", recheck, tt.wantRecheck)
			}
			if len(tt.want) == 0 && got != "" {
				t.Errorf("message %q, want none", got)
			}
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("message %q does not say %q", got, w)
				}
			}
		})
	}
}
