//go:build integration

package api

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/kubelite/memcached-operator/test/integration/framework"
)

// TestIntegrationAPIDocumentsItself reads the OpenAPI v3 document the
// apiserver publishes for each served version, which is what kubectl
// explain prints, and requires a description on every field of spec and
// status.
func TestIntegrationAPIDocumentsItself(t *testing.T) {
	t.Parallel()
	paths, err := framework.Kube().Discovery().OpenAPIV3().Paths()
	if err != nil {
		t.Fatal(err)
	}
	for _, version := range []string{"v1beta1", "v1alpha1"} {
		t.Run(version, func(t *testing.T) {
			gv, ok := paths["apis/cache.kubelite.io/"+version]
			if !ok {
				t.Fatalf("no OpenAPI v3 document for cache.kubelite.io/%s", version)
			}
			body, err := gv.Schema("application/json")
			if err != nil {
				t.Fatal(err)
			}
			var doc struct {
				Components struct {
					Schemas map[string]schemaNode `json:"schemas"`
				} `json:"components"`
			}
			if err := json.Unmarshal(body, &doc); err != nil {
				t.Fatal(err)
			}
			root, ok := doc.Components.Schemas["io.kubelite.cache."+version+".Memcached"]
			if !ok {
				t.Fatalf("no Memcached schema in %s", slices.Sorted(maps.Keys(doc.Components.Schemas)))
			}
			var fields int
			for _, top := range []string{"spec", "status"} {
				node, ok := root.Properties[top]
				if !ok {
					t.Fatalf("Memcached has no %s", top)
				}
				node.walk(top, func(path string, n schemaNode) {
					fields++
					if strings.TrimSpace(n.Description) == "" {
						t.Errorf("%s has no description", path)
					}
				})
			}
			if fields < 20 {
				t.Errorf("only %d fields documented; the schema looks truncated", fields)
			}
		})
	}
}

// schemaNode is the part of an OpenAPI v3 schema the test reads.
type schemaNode struct {
	Description string                `json:"description"`
	Properties  map[string]schemaNode `json:"properties"`
	Items       *schemaNode           `json:"items"`
}

// walk calls visit for n and each property below it, list items included.
func (n schemaNode) walk(path string, visit func(string, schemaNode)) {
	visit(path, n)
	for name, p := range n.Properties {
		p.walk(path+"."+name, visit)
	}
	if n.Items != nil {
		for name, p := range n.Items.Properties {
			p.walk(path+"[]."+name, visit)
		}
	}
}
