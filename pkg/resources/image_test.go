package resources

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
)

func TestImageAdvisory(t *testing.T) {
	tests := []struct {
		name   string
		image  string
		auth   bool
		status metav1.ConditionStatus
		// fixedIn is the release the message must name; mentions, the
		// holes it must name.
		fixedIn  string
		mentions []string
	}{
		{name: "the default", image: cachev1beta1.DefaultImage, status: metav1.ConditionFalse},
		{name: "the default with auth", image: cachev1beta1.DefaultImage, auth: true, status: metav1.ConditionFalse},
		{name: "1.6.39", image: "memcached:1.6.39", status: metav1.ConditionTrue, fixedIn: "1.6.43", mentions: []string{"binary-protocol"}},
		{name: "1.6.39 with auth names the release without the crash", image: "memcached:1.6.39", auth: true, status: metav1.ConditionTrue, fixedIn: "1.6.44",
			mentions: []string{"auth reload", "binary-protocol"}},
		{name: "1.6.42 with auth", image: "memcached:1.6.42", auth: true, status: metav1.ConditionTrue, fixedIn: "1.6.44", mentions: []string{"binary-protocol", "empty lines"}},
		{name: "1.6.43", image: "memcached:1.6.43", status: metav1.ConditionFalse},
		{name: "1.6.43 with auth", image: "memcached:1.6.43", auth: true, status: metav1.ConditionTrue, fixedIn: "1.6.44", mentions: []string{"empty lines"}},
		{name: "1.6.44 with auth", image: "memcached:1.6.44", auth: true, status: metav1.ConditionFalse},
		{name: "1.5.22", image: "memcached:1.5.22", status: metav1.ConditionTrue, fixedIn: "1.6.43"},
		{name: "a variant tag", image: "memcached:1.6.18-alpine", status: metav1.ConditionTrue, fixedIn: "1.6.43"},
		{name: "a registry with a port", image: "registry.example:5000/cache/memcached:1.6.41", status: metav1.ConditionTrue, fixedIn: "1.6.43"},
		{name: "a Docker Hub path", image: "docker.io/library/memcached:1.6.45-bookworm", status: metav1.ConditionFalse},
		{name: "pinned by digest", image: "memcached:1.6.39@sha256:" + strings.Repeat("a", 64), status: metav1.ConditionUnknown},
		{name: "a floating tag", image: "memcached:1.6", status: metav1.ConditionUnknown},
		{name: "no tag", image: "memcached", status: metav1.ConditionUnknown},
		{name: "a registry port without a tag", image: "registry.example:5000/memcached", status: metav1.ConditionUnknown},
		{name: "a custom repository", image: "registry.example/team/cache:1.6.39", status: metav1.ConditionUnknown},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mc := memcached(func(s *cachev1beta1.MemcachedSpec) {
				s.Image = tt.image
				if tt.auth {
					s.Auth = &cachev1beta1.Auth{SecretName: "auth"}
				}
			})
			status, reason, message := ImageAdvisory(Default(mc))
			if status != tt.status {
				t.Fatalf("status %s (%s: %s), want %s", status, reason, message, tt.status)
			}
			want := map[metav1.ConditionStatus]string{
				metav1.ConditionTrue:    cachev1beta1.ReasonKnownVulnerability,
				metav1.ConditionFalse:   cachev1beta1.ReasonNoKnownVulnerability,
				metav1.ConditionUnknown: cachev1beta1.ReasonImageVersionUnknown,
			}[tt.status]
			if reason != want {
				t.Errorf("reason %s, want %s", reason, want)
			}
			if tt.fixedIn != "" && !strings.Contains(message, "memcached "+tt.fixedIn+" or later") {
				t.Errorf("message %q does not name %s as the fix", message, tt.fixedIn)
			}
			for _, m := range tt.mentions {
				if !strings.Contains(message, m) {
					t.Errorf("message %q does not mention %q", message, m)
				}
			}
		})
	}
}
