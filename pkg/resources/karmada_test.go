package resources

import (
	"bytes"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
)

// karmadaTestdata holds the cases on which hack/karmada runs the Lua rules
// of artifacts/karmada/resource_interpreter.yaml with Karmada's own
// interpreter.
const karmadaTestdata = "../../artifacts/karmada/testdata"

// karmadaFixture is what TestKarmadaReplicaRequirements reads of a fixture
// file (hack/karmada/interpreter_test.go describes the whole format): the
// Memcached, and the cases of GetReplicas, each with the replicas and
// the requirements of one replica that the Lua rule must return.
type karmadaFixture struct {
	Object json.RawMessage `json:"object"`
	Cases  []struct {
		Name      string          `json:"name"`
		Operation string          `json:"operation"`
		Object    json.RawMessage `json:"object"`
		Want      struct {
			Replicas     *int32               `json:"replicas"`
			Requirements *karmadaRequirements `json:"requirements"`
		} `json:"want"`
	} `json:"cases"`
}

// karmadaRequirements are the fields of Karmada's ReplicaRequirements
// (work.karmada.io/v1alpha2) that the rule fills in. Karmada's types stay
// out of this module; the JSON is the contract.
type karmadaRequirements struct {
	NodeClaim         *karmadaNodeClaim   `json:"nodeClaim,omitempty"`
	ResourceRequest   corev1.ResourceList `json:"resourceRequest,omitempty"`
	PriorityClassName string              `json:"priorityClassName,omitempty"`
}

// karmadaNodeClaim is Karmada's NodeClaim: where each replica may run.
type karmadaNodeClaim struct {
	HardNodeAffinity *corev1.NodeSelector `json:"hardNodeAffinity,omitempty"`
	NodeSelector     map[string]string    `json:"nodeSelector,omitempty"`
	Tolerations      []corev1.Toleration  `json:"tolerations,omitempty"`
}

// TestKarmadaReplicaRequirements proves the expected replicas and
// requirements of the Karmada fixtures with the operator's own renderer,
// so that they are not guesses: hack/karmada holds the Lua rule to them,
// and this test holds them to the Pods the operator would run. A change of
// a container's requests, a new sidecar or a new scheduling field of the
// Pods fails here until the fixtures, and so the Lua rule, follow.
//
// The replicas are the Pods of every pool. The requirements are those of
// one Pod, as Karmada reads a Pod template (helper.GenerateReplicaRequirements):
// the requests summed over its containers, its node selector, tolerations
// and required node affinity, and its priority class. With zones the pools'
// Pods differ in one thing, the zone their node selector asks for, and one
// requirement must stand for all of them: it is the zone pools' own, with
// that zone taken out of the node selector and, instead, the zone being one
// of spec.zones added to each term of the required node affinity. That
// rewriting is the only step this test adds to what the renderer gives.
func TestKarmadaReplicaRequirements(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join(karmadaTestdata, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) == 0 {
		t.Fatalf("no fixtures in %s", karmadaTestdata)
	}
	cases := 0
	for _, path := range paths {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var f karmadaFixture
		if err := yaml.Unmarshal(data, &f); err != nil {
			t.Fatalf("decoding %s: %v", path, err)
		}
		for _, c := range f.Cases {
			if c.Operation != "InterpretReplica" {
				continue
			}
			cases++
			t.Run(strings.TrimSuffix(filepath.Base(path), ".yaml")+"/"+c.Name, func(t *testing.T) {
				if c.Want.Replicas == nil || c.Want.Requirements == nil {
					t.Fatal("want.replicas and want.requirements are required")
				}
				object := f.Object
				if len(c.Object) > 0 {
					object = c.Object
				}
				d := Default(decodeKarmadaMemcached(t, object))
				if errs := Validate(d); len(errs) > 0 {
					t.Fatalf("the operator refuses the fixture's spec: %v", errs.ToAggregate())
				}
				replicas, requirements := renderedRequirements(t, d)
				if replicas != *c.Want.Replicas {
					t.Errorf("the pools run %d Pods, the fixture says %d", replicas, *c.Want.Replicas)
				}
				compareRequirements(t, c.Want.Requirements, requirements)
			})
		}
	}
	if cases == 0 {
		t.Fatalf("no InterpretReplica case in %s", karmadaTestdata)
	}
}

// decodeKarmadaMemcached decodes a fixture's Memcached, refusing a field
// the API does not have: a misspelt one would make the fixture, and the Lua
// rule tested on it, describe a spec the operator never sees.
func decodeKarmadaMemcached(t *testing.T, raw json.RawMessage) *cachev1beta1.Memcached {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	mc := &cachev1beta1.Memcached{}
	if err := dec.Decode(mc); err != nil {
		t.Fatalf("decoding the fixture's Memcached: %v", err)
	}
	return mc
}

// renderedRequirements are the Pods d's pools run and, as Karmada would
// read the pools' Pod templates, the requirements of one of them (see
// TestKarmadaReplicaRequirements for how the zone pools' are made one).
func renderedRequirements(t *testing.T, d Defaulted) (int32, karmadaRequirements) {
	t.Helper()
	var replicas int32
	var first *karmadaRequirements
	for _, zone := range Zones(d) {
		dep, err := PoolDeployment(d, zone)
		if err != nil {
			t.Fatalf("rendering the pool of zone %q: %v", zone, err)
		}
		replicas += ptr.Deref(dep.Spec.Replicas, 0)
		spec, err := convert[corev1.PodSpec](dep.Spec.Template.Spec)
		if err != nil {
			t.Fatal(err)
		}
		if len(spec.InitContainers) > 0 || spec.Overhead != nil {
			// The Lua rule sums regular containers only.
			t.Fatalf("the pool of zone %q has init containers or an overhead, which the Lua rule does not count", zone)
		}
		r := karmadaRequirements{ResourceRequest: corev1.ResourceList{}, PriorityClassName: spec.PriorityClassName}
		for _, c := range spec.Containers {
			for name, q := range c.Resources.Requests {
				sum := r.ResourceRequest[name]
				sum.Add(q)
				r.ResourceRequest[name] = sum
			}
		}
		claim := karmadaNodeClaim{NodeSelector: maps.Clone(spec.NodeSelector), Tolerations: spec.Tolerations}
		if a := spec.Affinity; a != nil && a.NodeAffinity != nil {
			claim.HardNodeAffinity = a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution
		}
		if zone != "" {
			if got := claim.NodeSelector[corev1.LabelTopologyZone]; got != zone {
				t.Fatalf("the pool of zone %q selects nodes of zone %q", zone, got)
			}
			delete(claim.NodeSelector, corev1.LabelTopologyZone)
			claim.HardNodeAffinity = inZones(claim.HardNodeAffinity, d.Spec.Zones)
		}
		if len(claim.NodeSelector) == 0 {
			claim.NodeSelector = nil
		}
		if claim.NodeSelector != nil || claim.HardNodeAffinity != nil || len(claim.Tolerations) > 0 {
			r.NodeClaim = &claim
		}
		if first == nil {
			first = &r
			continue
		}
		if a, b := canonicalRequirements(t, *first), canonicalRequirements(t, r); a != b {
			t.Fatalf("the pools' Pods differ in more than their zone, which one requirement cannot say:\n%s\n%s", a, b)
		}
	}
	return replicas, *first
}

// inZones is a required node affinity that admits the nodes of any of
// zones beside what required admits: each term ANDed with the zone being
// one of them, or that alone when there is no term.
func inZones(required *corev1.NodeSelector, zones []string) *corev1.NodeSelector {
	in := corev1.NodeSelectorRequirement{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: slices.Clone(zones)}
	if required == nil {
		return &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{in}}}}
	}
	out := required.DeepCopy()
	for i := range out.NodeSelectorTerms {
		out.NodeSelectorTerms[i].MatchExpressions = append(out.NodeSelectorTerms[i].MatchExpressions, in)
	}
	return out
}

// compareRequirements compares the fixture's requirements with the
// rendered ones: quantities by value (1252Mi is 1312817152), the rest as
// JSON.
func compareRequirements(t *testing.T, want *karmadaRequirements, got karmadaRequirements) {
	t.Helper()
	names := slices.Sorted(maps.Keys(want.ResourceRequest))
	if gotNames := slices.Sorted(maps.Keys(got.ResourceRequest)); !slices.Equal(names, gotNames) {
		t.Errorf("the Pods request %v, the fixture %v", gotNames, names)
	}
	for _, name := range names {
		w, g := want.ResourceRequest[name], got.ResourceRequest[name]
		if w.Cmp(g) != 0 {
			t.Errorf("the Pods request %s of %s, the fixture %s", g.String(), name, w.String())
		}
	}
	w, g := *want, got
	w.ResourceRequest, g.ResourceRequest = nil, nil
	if cw, cg := canonicalRequirements(t, w), canonicalRequirements(t, g); cw != cg {
		t.Errorf("scheduling requirements differ:\nfixture:\n%s\nrendered:\n%s", cw, cg)
	}
}

// canonicalRequirements is r as YAML, with map keys sorted and empty
// fields left out, for comparing and for reading.
func canonicalRequirements(t *testing.T, r karmadaRequirements) string {
	t.Helper()
	b, err := yaml.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestKarmadaFixtureConditions holds the member statuses of the Karmada
// fixtures to what the operator reports: each condition type and reason a
// member carries is one of the operator's, so the Lua rules are tested on
// statuses a member can have. The rules themselves name Available and
// ScaledToZero; a renamed constant fails here too.
func TestKarmadaFixtureConditions(t *testing.T) {
	types := map[string]bool{}
	for _, c := range []string{cachev1beta1.ConditionAvailable, cachev1beta1.ConditionProgressing, cachev1beta1.ConditionDegraded, cachev1beta1.ConditionImageVulnerable} {
		types[c] = true
	}
	reasons := map[string]bool{}
	for _, r := range []string{
		cachev1beta1.ReasonMinimumReplicasAvailable, cachev1beta1.ReasonMinimumReplicasUnavailable, cachev1beta1.ReasonScaledToZero,
		cachev1beta1.ReasonDeploymentMissing, cachev1beta1.ReasonRollingOut, cachev1beta1.ReasonComplete, cachev1beta1.ReasonPaused,
		cachev1beta1.ReasonProgressDeadlineExceeded, cachev1beta1.ReasonAsExpected, cachev1beta1.ReasonKnownVulnerability,
		cachev1beta1.ReasonNoKnownVulnerability, cachev1beta1.ReasonImageVersionUnknown,
	} {
		reasons[r] = true
	}

	paths, err := filepath.Glob(filepath.Join(karmadaTestdata, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range paths {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".yaml"), func(t *testing.T) {
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			var f struct {
				Members map[string]cachev1beta1.Memcached `json:"members"`
			}
			if err := yaml.Unmarshal(raw, &f); err != nil {
				t.Fatal(err)
			}
			for name, member := range f.Members {
				for _, c := range member.Status.Conditions {
					if !types[c.Type] {
						t.Errorf("member %s: condition type %q is not one the operator sets", name, c.Type)
					}
					if !reasons[c.Reason] {
						t.Errorf("member %s: condition %s has reason %q, not one the operator sets", name, c.Type, c.Reason)
					}
				}
			}
		})
	}

	rules, err := os.ReadFile("../../artifacts/karmada/resource_interpreter.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, literal := range []string{cachev1beta1.ConditionAvailable, cachev1beta1.ReasonScaledToZero} {
		if !bytes.Contains(rules, []byte(`"`+literal+`"`)) {
			t.Errorf("the Lua rules do not name %q", literal)
		}
	}
}
