package main

import (
	"bytes"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// releaseTag is a release version: no "latest", no commit.
var releaseTag = regexp.MustCompile(`^v\d+\.\d+\.\d+$`)

// TestShippedImageIsARelease checks that the shipped Deployment runs a
// release tag with IfNotPresent, so that every replica of an install runs
// the same build even after a drain, and that make image tags the image it
// builds with that same release.
func TestShippedImageIsARelease(t *testing.T) {
	var d appsv1.Deployment
	readManifest(t, "artifacts/deploy/deployment.yaml", &d)
	if len(d.Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("%d containers, want the operator's alone", len(d.Spec.Template.Spec.Containers))
	}
	c := d.Spec.Template.Spec.Containers[0]
	repo, tag, _ := strings.Cut(c.Image, ":")
	if repo != "ghcr.io/kubelite/memcached-operator" || !releaseTag.MatchString(tag) {
		t.Errorf("image %q, want ghcr.io/kubelite/memcached-operator at a release tag vX.Y.Z", c.Image)
	}
	if c.ImagePullPolicy != corev1.PullIfNotPresent {
		t.Errorf("imagePullPolicy %q, want IfNotPresent", c.ImagePullPolicy)
	}

	// Without a VERSION of the caller's, which would override the default.
	cmd := exec.Command("make", "-s", "print-version")
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "VERSION=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("make print-version: %v", err)
	}
	if got := strings.TrimSpace(string(out)); got != tag {
		t.Errorf("make image tags %q, the manifest installs %q", got, tag)
	}
}

// readManifest decodes the one object of a shipped YAML file into obj.
func readManifest(t *testing.T, path string, obj any) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), len(raw)).Decode(obj); err != nil {
		t.Fatalf("decoding %s: %v", path, err)
	}
}
