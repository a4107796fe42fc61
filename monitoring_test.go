package main

import (
	"os"
	"strings"
	"testing"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
)

// exporterMetricList holds the metric names of the exporter release the
// sidecar runs; make verify-monitoring checks the alerts and the
// dashboard against it. Its first line names that release.
const exporterMetricList = "hack/monitoring/memcached-exporter.txt"

// TestExporterMetricListMatchesImage fails when the default exporter image
// moves to another release than the one the list was taken from: the
// alerts would be checked against names the sidecar may no longer serve.
func TestExporterMetricListMatchesImage(t *testing.T) {
	data, err := os.ReadFile(exporterMetricList)
	if err != nil {
		t.Fatal(err)
	}
	first, _, _ := strings.Cut(string(data), "\n")
	listed, ok := strings.CutPrefix(first, "# memcached_exporter ")
	if !ok {
		t.Fatalf("%s: first line %q does not name a memcached_exporter release", exporterMetricList, first)
	}
	if tag := imageTag(cachev1beta1.DefaultExporterImage); tag != listed {
		t.Errorf("the default exporter image %s is release %q, but %s lists the metrics of %q; take the list from the new release (its header says how)",
			cachev1beta1.DefaultExporterImage, tag, exporterMetricList, listed)
	}
}

// imageTag returns the tag of an image reference, ignoring a digest:
// "quay.io/a/b:v1@sha256:..." is "v1". A reference without a tag (or a
// registry port mistaken for one) gives "".
func imageTag(ref string) string {
	ref, _, _ = strings.Cut(ref, "@")
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		return ref[i+1:]
	}
	return ""
}

func TestImageTag(t *testing.T) {
	cases := []struct{ name, ref, want string }{
		{name: "tag", ref: "quay.io/prometheus/memcached-exporter:v0.15.3", want: "v0.15.3"},
		{name: "tag and digest", ref: "quay.io/prometheus/memcached-exporter:v0.15.3@sha256:0123", want: "v0.15.3"},
		{name: "registry port, no tag", ref: "registry:5000/memcached-exporter", want: ""},
		{name: "digest only", ref: "quay.io/prometheus/memcached-exporter@sha256:0123", want: ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := imageTag(c.ref); got != c.want {
				t.Errorf("imageTag(%q) = %q, want %q", c.ref, got, c.want)
			}
		})
	}
}
