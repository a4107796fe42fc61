package main

import (
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// crdWithSpec is a CRD manifest whose one version has spec as its spec
// schema.
func crdWithSpec(t *testing.T, spec apiextensionsv1.JSONSchemaProps) []byte {
	t.Helper()
	crd := apiextensionsv1.CustomResourceDefinition{
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"spec": spec},
				}},
			}},
		},
	}
	out, err := yaml.Marshal(&crd)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func object(props map[string]apiextensionsv1.JSONSchemaProps) apiextensionsv1.JSONSchemaProps {
	return apiextensionsv1.JSONSchemaProps{Type: "object", Properties: props}
}

func array(items apiextensionsv1.JSONSchemaProps) apiextensionsv1.JSONSchemaProps {
	return apiextensionsv1.JSONSchemaProps{Type: "array", Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &items}}
}

func stringMap() apiextensionsv1.JSONSchemaProps {
	return apiextensionsv1.JSONSchemaProps{Type: "object", AdditionalProperties: &apiextensionsv1.JSONSchemaPropsOrBool{
		Allows: true, Schema: &apiextensionsv1.JSONSchemaProps{Type: "string"},
	}}
}

var str = apiextensionsv1.JSONSchemaProps{Type: "string"}

func TestBound(t *testing.T) {
	tests := []struct {
		name string
		spec apiextensionsv1.JSONSchemaProps
		// want are lines the output must have; wantErr a text the error
		// must have.
		want    []string
		wantErr string
	}{
		{
			name: "a known list, its items' strings and an unknown-to-limits but bounded string",
			spec: object(map[string]apiextensionsv1.JSONSchemaProps{
				"tolerations": {Type: "array", MaxItems: ptr(16), Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"key": str, "value": str, "effect": str},
				}}},
				"matchExpressions": array(object(map[string]apiextensionsv1.JSONSchemaProps{"values": array(str)})),
				"image":            {Type: "string", MaxLength: ptr(512)},
			}),
			want: []string{"maxLength: 317", "maxLength: 63", "maxLength: 32", "maxItems: 16", "maxItems: 64", "maxLength: 512"},
		},
		{
			name: "the longest suffix wins",
			spec: object(map[string]apiextensionsv1.JSONSchemaProps{
				"matchFields": array(object(map[string]apiextensionsv1.JSONSchemaProps{"key": str, "operator": str, "values": array(str)})),
			}),
			want: []string{"maxLength: 253"},
		},
		{
			name: "a map gets a size and a rule on its keys",
			spec: object(map[string]apiextensionsv1.JSONSchemaProps{"matchLabels": stringMap()}),
			want: []string{"maxProperties: 32", "maxLength: 63", "rule: self.all(k, k.size() <= 317)"},
		},
		{
			name:    "a field limits does not name fails",
			spec:    object(map[string]apiextensionsv1.JSONSchemaProps{"newField": array(str), "tolerations": array(str)}),
			wantErr: "spec.newField\n",
		},
		{
			name:    "an int-or-string without a bound or a rule fails",
			spec:    object(map[string]apiextensionsv1.JSONSchemaProps{"newQuantity": {XIntOrString: true}}),
			wantErr: "spec.newQuantity\n",
		},
		{
			name: "an int-or-string with a rule of its own passes",
			spec: object(map[string]apiextensionsv1.JSONSchemaProps{"memory": {XIntOrString: true, XValidations: apiextensionsv1.ValidationRules{{Rule: "string(self).size() <= 32"}}}}),
			want: []string{"string(self).size() <= 32"},
		},
		{
			name:    "a field that keeps unknown fields fails",
			spec:    object(map[string]apiextensionsv1.JSONSchemaProps{"raw": {Type: "object", XPreserveUnknownFields: boolPtr(true)}}),
			wantErr: "spec.raw (x-kubernetes-preserve-unknown-fields)",
		},
		{
			name:    "a map's values need a bound too",
			spec:    object(map[string]apiextensionsv1.JSONSchemaProps{"selector": {Type: "object", MaxProperties: ptr(4), AdditionalProperties: stringMap().AdditionalProperties}}),
			wantErr: "spec.selector{}",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := bound(crdWithSpec(t, tt.spec))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error()+"\n", tt.wantErr) {
					t.Fatalf("bound() error = %v, want one naming %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, line := range tt.want {
				if !strings.Contains(string(out), line) {
					t.Errorf("output lacks %q:\n%s", line, out)
				}
			}
			again, err := bound(out)
			if err != nil {
				t.Fatal(err)
			}
			if string(again) != string(out) {
				t.Errorf("a second run changed the output:\n%s\nthen:\n%s", out, again)
			}
		})
	}
}

// TestBoundRefusesWhatClientSideApplyCannotTake checks the size check on
// either side of the cap: the same schema passes with a description that
// fits and fails with one that does not.
func TestBoundRefusesWhatClientSideApplyCannotTake(t *testing.T) {
	tests := []struct {
		name        string
		description int
		wantErr     bool
	}{
		{name: "fits", description: 200 * 1024},
		{name: "over the cap", description: totalAnnotationBytes, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := object(map[string]apiextensionsv1.JSONSchemaProps{"image": {Type: "string", MaxLength: ptr(512)}})
			spec.Description = strings.Repeat("d", tt.description)
			_, err := bound(crdWithSpec(t, spec))
			if tt.wantErr != (err != nil) {
				t.Fatalf("bound() error = %v, want an error: %v", err, tt.wantErr)
			}
			if err != nil && !strings.Contains(err.Error(), "--server-side") {
				t.Errorf("the error does not name the way out: %v", err)
			}
		})
	}
}

func ptr(n int64) *int64 { return &n }

func boolPtr(b bool) *bool { return &b }
