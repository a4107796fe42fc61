package framework

import (
	"bytes"
	"os"
	"testing"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// ReadManifest decodes the first object of a YAML or JSON file of the
// repository, given relative to its root, into obj.
func ReadManifest(t *testing.T, rel string, obj any) {
	t.Helper()
	raw, err := os.ReadFile(Path(rel))
	if err != nil {
		t.Fatal(err)
	}
	if err := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), len(raw)).Decode(obj); err != nil {
		t.Fatalf("decoding %s: %v", rel, err)
	}
}
