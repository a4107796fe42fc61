// Command crdbounds bounds the parts of the Memcached CRD's spec schema that
// kubebuilder markers cannot reach, and fails on any it has no bound for.
//
// Markers on our own fields bound those fields: a list with maxItems, a map
// with maxProperties, a string with maxLength. But controller-gen expands
// the Kubernetes types the spec embeds (Toleration, Affinity,
// TopologySpreadConstraint, LocalObjectReference) without a single bound,
// and no marker sets the length of a map's values or keys. Left unbounded,
// one string deep in an affinity term may hold most of the 1.5 MiB etcd
// takes, and a CEL rule that walks an unbounded list is refused by the
// apiserver as too costly. hack/update-codegen.sh runs this after
// controller-gen: every array, map and string under spec that is still
// unbounded gets the bound that limits names for its field, and a map also
// gets a CEL rule bounding its keys. A field limits has no entry for, such
// as one a Kubernetes upgrade adds to an embedded type, fails the
// generation, so nothing under spec can stay unbounded unnoticed.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// Kubernetes' own limits, which the bounds below follow: a label or
// annotation key is a qualified name (a 253-character DNS subdomain prefix,
// "/" and a 63-character name), a label value and a namespace name have at
// most 63 characters, an object name at most 253.
const (
	qualifiedNameLength = 253 + 1 + 63
	labelValueLength    = 63
	objectNameLength    = 253
	// enumLength bounds the strings Kubernetes restricts to a few short
	// words (operators, effects, policies); the longest today is
	// "PreferNoSchedule", 16 characters.
	enumLength = 32
)

// limits maps a field to its bound: maxLength for a string, maxItems for a
// list, maxProperties for a map. A field is named by its path below spec,
// "[]" standing for a list's items and "{}" for a map's values; the longest
// suffix of the path that limits names wins, so that "matchFields[].values[]"
// can differ from "values[]". The counts are far above what a Pod spec
// uses; the CEL rules on pod.affinity and pod.topologySpreadConstraints
// (types.go) bound their totals, which is what bounds the object.
var limits = map[string]int64{
	// Strings.
	"key":                    qualifiedNameLength,
	"topologyKey":            qualifiedNameLength,
	"matchLabelKeys[]":       qualifiedNameLength,
	"mismatchLabelKeys[]":    qualifiedNameLength,
	"value":                  labelValueLength,
	"values[]":               labelValueLength,
	"matchFields[].values[]": objectNameLength, // node names, for metadata.name
	"matchLabels{}":          labelValueLength,
	"nodeSelector{}":         labelValueLength,
	"labels{}":               labelValueLength,
	// A rule on pod.annotations bounds their total to 8 KiB.
	"annotations{}":           8192,
	"namespaces[]":            labelValueLength,
	"imagePullSecrets[].name": objectNameLength,
	"operator":                enumLength,
	"effect":                  enumLength,
	"whenUnsatisfiable":       enumLength,
	"nodeAffinityPolicy":      enumLength,
	"nodeTaintsPolicy":        enumLength,
	// Lists.
	"nodeSelectorTerms": 8,
	"requiredDuringSchedulingIgnoredDuringExecution":  8,
	"preferredDuringSchedulingIgnoredDuringExecution": 8,
	"matchExpressions":  16,
	"matchFields":       16,
	"values":            64,
	"namespaces":        64,
	"matchLabelKeys":    16,
	"mismatchLabelKeys": 16,
	// Maps.
	"matchLabels": 32,
}

// mapKeyRule bounds a map's keys, which a structural schema cannot give a
// maxLength: every map in the spec is keyed by label or annotation keys.
var mapKeyRule = apiextensionsv1.ValidationRule{
	Rule:    fmt.Sprintf("self.all(k, k.size() <= %d)", qualifiedNameLength),
	Message: fmt.Sprintf("keys must have at most %d characters", qualifiedNameLength),
}

func main() {
	path := flag.String("crd", "", "CRD manifest to bound, rewritten in place")
	flag.Parse()
	if err := run(*path); err != nil {
		fmt.Fprintln(os.Stderr, "crdbounds:", err)
		os.Exit(1)
	}
}

func run(path string) error {
	in, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	out, err := bound(in)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return os.WriteFile(path, out, 0o644)
}

// bound returns the manifest with every version's spec bounded, written as
// controller-gen writes it.
func bound(manifest []byte) ([]byte, error) {
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(manifest, &crd); err != nil {
		return nil, err
	}
	var missing []string
	for i := range crd.Spec.Versions {
		v := &crd.Spec.Versions[i]
		if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
			continue
		}
		spec, ok := v.Schema.OpenAPIV3Schema.Properties["spec"]
		if !ok {
			continue
		}
		for _, p := range walk(&spec, []string{"spec"}) {
			missing = append(missing, v.Name+": "+p)
		}
		v.Schema.OpenAPIV3Schema.Properties["spec"] = spec
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("no bound for:\n  %s\nadd a marker to types.go or an entry to limits", strings.Join(missing, "\n  "))
	}
	out, err := yaml.Marshal(&crd)
	if err != nil {
		return nil, err
	}
	// controller-gen leaves out the status stanza that the API type adds.
	out = bytes.Replace(out, []byte("status:\n  acceptedNames:\n    kind: \"\"\n    plural: \"\"\n  conditions: null\n  storedVersions: null\n"), nil, 1)
	out = bytes.Replace(out, []byte("  creationTimestamp: null\n"), nil, 1)
	if err := fitsClientSideApply(out); err != nil {
		return nil, err
	}
	return append([]byte("---\n"), out...), nil
}

// lastAppliedAnnotation is where `kubectl apply` without --server-side
// keeps the whole object it applied, as compact JSON.
const lastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"

// totalAnnotationBytes is the apiserver's cap on an object's annotations,
// keys and values together (apimachinery's TotalAnnotationSizeLimitB).
const totalAnnotationBytes = 256 * 1024

// fitsClientSideApply fails when the README's `kubectl apply -f
// artifacts/crd/` would be refused: the annotation kubectl adds holds the
// manifest itself, so a CRD whose JSON, with the annotations it already
// has, exceeds the cap cannot be applied that way at all.
func fitsClientSideApply(manifest []byte) error {
	asJSON, err := yaml.YAMLToJSON(manifest)
	if err != nil {
		return err
	}
	var meta struct {
		Metadata struct {
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
	}
	if err := yaml.Unmarshal(manifest, &meta); err != nil {
		return err
	}
	size := len(lastAppliedAnnotation) + len(asJSON)
	for k, v := range meta.Metadata.Annotations {
		size += len(k) + len(v)
	}
	if size > totalAnnotationBytes {
		return fmt.Errorf("the CRD would need %d bytes of annotations under `kubectl apply`, over the apiserver's %d: shrink the schema (descriptions are most of it) or move the README and docs to `kubectl apply --server-side`", size, totalAnnotationBytes)
	}
	return nil
}

// walk bounds s and everything below it, and returns the paths it found no
// bound for. path is s's path below the version's schema root.
func walk(s *apiextensionsv1.JSONSchemaProps, path []string) []string {
	var missing []string
	need := func(set func(int64)) {
		if n, ok := lookup(path); ok {
			set(n)
			return
		}
		missing = append(missing, strings.Join(path, "."))
	}
	switch {
	case s.XPreserveUnknownFields != nil && *s.XPreserveUnknownFields:
		// Anything may be stored there, so nothing here can bound it.
		missing = append(missing, strings.Join(path, ".")+" (x-kubernetes-preserve-unknown-fields)")
	case s.XIntOrString && s.Type == "":
		// An int-or-string has no type for the cases below; its string
		// form is bounded by maxLength, or by a CEL rule of its own field
		// (a quantity, on which controller-gen refuses maxLength).
		if s.MaxLength == nil && len(s.XValidations) == 0 {
			need(func(n int64) { s.MaxLength = &n })
		}
	case s.Type == "string" && s.MaxLength == nil && len(s.Enum) == 0:
		need(func(n int64) { s.MaxLength = &n })
	case s.Type == "array":
		if s.MaxItems == nil {
			need(func(n int64) { s.MaxItems = &n })
		}
		if s.Items != nil && s.Items.Schema != nil {
			missing = append(missing, walk(s.Items.Schema, appendLast(path, "[]"))...)
		}
	case s.Type == "object" && s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil:
		if s.MaxProperties == nil {
			need(func(n int64) { s.MaxProperties = &n })
		}
		if !slices.ContainsFunc(s.XValidations, func(r apiextensionsv1.ValidationRule) bool { return r.Rule == mapKeyRule.Rule }) {
			s.XValidations = append(s.XValidations, mapKeyRule)
		}
		missing = append(missing, walk(s.AdditionalProperties.Schema, appendLast(path, "{}"))...)
	case s.Type == "object":
		names := make([]string, 0, len(s.Properties))
		for name := range s.Properties {
			names = append(names, name)
		}
		slices.Sort(names)
		for _, name := range names {
			p := s.Properties[name]
			missing = append(missing, walk(&p, append(slices.Clone(path), name))...)
			s.Properties[name] = p
		}
	}
	return missing
}

// appendLast returns path with suffix added to its last element: a list's
// items are "values[]", not a field of their own.
func appendLast(path []string, suffix string) []string {
	out := slices.Clone(path)
	out[len(out)-1] += suffix
	return out
}

// lookup finds the bound of the longest suffix of path that limits names.
func lookup(path []string) (int64, bool) {
	for i := 1; i < len(path); i++ {
		if n, ok := limits[strings.Join(path[i:], ".")]; ok {
			return n, true
		}
	}
	return 0, false
}
