package resources

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
)

// crdFile is the CRD the operator ships.
const crdFile = "../../artifacts/crd/cache.kubelite.io_memcacheds.yaml"

// crdRuleCasesFile holds a case for each CEL rule of the CRD's v1beta1
// schema; its header says what a case is.
const crdRuleCasesFile = "testdata/crd-rule-cases.yaml"

// crdRule is an x-kubernetes-validations rule of the v1beta1 schema.
type crdRule struct {
	// Path is where the rule sits in the schema: .spec.pod,
	// .spec.zones[*], or "" for the object.
	Path string `json:"path"`
	// Message is the rule's message, or its messageExpression.
	Message string `json:"message"`
	// Rule is the CEL expression, for the messages of this test.
	Rule string `json:"-"`
}

func (r crdRule) String() string { return r.Path + ": " + r.Message }

// v1beta1Rules returns every x-kubernetes-validations rule of the CRD's
// v1beta1 schema, object-level and field-level, in schema order.
func v1beta1Rules(t *testing.T) []crdRule {
	t.Helper()
	data, err := os.ReadFile(crdFile)
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(data, &crd); err != nil {
		t.Fatalf("reading %s: %v", crdFile, err)
	}
	var rules []crdRule
	var walk func(s *apiextensionsv1.JSONSchemaProps, path string)
	walk = func(s *apiextensionsv1.JSONSchemaProps, path string) {
		for _, r := range s.XValidations {
			msg := r.Message
			if r.MessageExpression != "" {
				msg = r.MessageExpression
			}
			rules = append(rules, crdRule{Path: path, Message: msg, Rule: r.Rule})
		}
		names := make([]string, 0, len(s.Properties))
		for name := range s.Properties {
			names = append(names, name)
		}
		slices.Sort(names)
		for _, name := range names {
			p := s.Properties[name]
			walk(&p, path+"."+name)
		}
		if s.Items != nil && s.Items.Schema != nil {
			walk(s.Items.Schema, path+"[*]")
		}
		if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
			walk(s.AdditionalProperties.Schema, path+"{*}")
		}
	}
	for _, v := range crd.Spec.Versions {
		if v.Name == cachev1beta1.GroupVersion.Version {
			walk(v.Schema.OpenAPIV3Schema, "")
			return rules
		}
	}
	t.Fatalf("%s has no version %s", crdFile, cachev1beta1.GroupVersion.Version)
	return nil
}

// crdRuleCase is a case of crdRuleCasesFile, whose header documents the
// fields.
type crdRuleCase struct {
	Name         string          `json:"name"`
	Rule         crdRule         `json:"rule"`
	MetadataName string          `json:"metadataName,omitempty"`
	Spec         json.RawMessage `json:"spec"`
	Field        string          `json:"field"`
	Detail       string          `json:"detail,omitempty"`
	AlsoViolates []string        `json:"alsoViolates,omitempty"`
}

// detail is what Validate's error says.
func (c crdRuleCase) detail() string {
	if c.Detail != "" {
		return c.Detail
	}
	return c.Rule.Message
}

// memcached is the case's Memcached as the operator reads it.
func (c crdRuleCase) memcached(t *testing.T) *cachev1beta1.Memcached {
	t.Helper()
	mc := &cachev1beta1.Memcached{ObjectMeta: metav1.ObjectMeta{Name: c.MetadataName, Namespace: "prod", UID: "uid-1"}}
	if mc.Name == "" {
		mc.Name = "cel-case"
	}
	if err := json.Unmarshal(c.Spec, &mc.Spec); err != nil {
		t.Fatalf("case %q: spec: %v", c.Name, err)
	}
	return mc
}

// readCRDRuleCases reads crdRuleCasesFile, with each "${repeat N S}"
// written out.
func readCRDRuleCases(t *testing.T) []crdRuleCase {
	t.Helper()
	data, err := os.ReadFile(crdRuleCasesFile)
	if err != nil {
		t.Fatal(err)
	}
	var cases []crdRuleCase
	if err := yaml.UnmarshalStrict(data, &cases); err != nil {
		t.Fatalf("reading %s: %v", crdRuleCasesFile, err)
	}
	for i := range cases {
		spec, err := expandRepeats(cases[i].Spec)
		if err != nil {
			t.Fatalf("case %q: %v", cases[i].Name, err)
		}
		cases[i].Spec = spec
	}
	return cases
}

var repeatPattern = regexp.MustCompile(`^\$\{repeat (\d+) (.+)\}$`)

// expandRepeats writes out every "${repeat N S}" of a JSON document, in
// keys and in values.
func expandRepeats(doc json.RawMessage) (json.RawMessage, error) {
	var v any
	if err := json.Unmarshal(doc, &v); err != nil {
		return nil, err
	}
	expand := func(s string) string {
		m := repeatPattern.FindStringSubmatch(s)
		if m == nil {
			return s
		}
		n, _ := strconv.Atoi(m[1])
		return strings.Repeat(m[2], n)
	}
	var walk func(v any) any
	walk = func(v any) any {
		switch v := v.(type) {
		case string:
			return expand(v)
		case []any:
			for i := range v {
				v[i] = walk(v[i])
			}
		case map[string]any:
			out := make(map[string]any, len(v))
			for k, e := range v {
				out[expand(k)] = walk(e)
			}
			return out
		}
		return v
	}
	return json.Marshal(walk(v))
}

// TestValidateRefusesWhatTheCRDRefuses holds Validate to the CRD's CEL
// rules, rule for rule. A v1alpha1 write runs none of the v1beta1 rules,
// and carries the fields they guard in an annotation; an object stored
// before a rule existed never met it. Validate is what keeps either from
// being rendered, so it must refuse what each rule refuses.
//
// The list of rules is read from the CRD, and each must have exactly one
// case in crdRuleCasesFile: a rule added to types.go without a case fails
// here. TestIntegrationV1alpha1SmugglingRuleCases shows the apiserver each
// case, to prove that it breaks its rule.
func TestValidateRefusesWhatTheCRDRefuses(t *testing.T) {
	rules := v1beta1Rules(t)
	cases := readCRDRuleCases(t)
	if len(rules) == 0 || len(cases) == 0 {
		t.Fatalf("%d rules in %s, %d cases in %s: the test would hold vacuously", len(rules), crdFile, len(cases), crdRuleCasesFile)
	}

	known := map[string]crdRule{}
	for _, r := range rules {
		if _, dup := known[r.String()]; dup {
			t.Errorf("two rules at %q have the message %q: give one a message of its own, so that a case in %s can name it", r.Path, r.Message, crdRuleCasesFile)
		}
		known[r.String()] = r
	}
	byRule := map[string][]string{}
	for _, c := range cases {
		byRule[c.Rule.String()] = append(byRule[c.Rule.String()], c.Name)
		if _, ok := known[c.Rule.String()]; !ok {
			t.Errorf("case %q names a rule the CRD's v1beta1 schema does not have (%s): fix its rule, or remove the case with the rule", c.Name, c.Rule)
		}
		for _, other := range c.AlsoViolates {
			if _, ok := known[other]; !ok {
				t.Errorf("case %q: alsoViolates names a rule the CRD does not have: %q", c.Name, other)
			}
		}
	}
	for _, r := range rules {
		switch names := byRule[r.String()]; len(names) {
		case 0:
			t.Errorf("the CRD's v1beta1 rule at %q has no case in %s. Add one: name, rule {path: %q, message: %q}, "+
				"a spec that breaks this rule and no other, and the field Validate's error must name; then make resources.Validate "+
				"refuse it with a check of its own (validation.go), since a v1alpha1 write never runs the rule. The rule: %s",
				r.Path, crdRuleCasesFile, r.Path, r.Message, r.Rule)
		case 1:
		default:
			t.Errorf("the CRD's rule %s has %d cases (%v); keep one", r, len(names), names)
		}
	}

	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			errs := Validate(Default(c.memcached(t)))
			found := false
			for _, e := range errs {
				if e.Field != c.Field {
					t.Errorf("Validate also refuses %s (%v): the case must break its rule alone", e.Field, e)
				}
				found = found || (e.Field == c.Field && strings.Contains(e.Detail, c.detail()))
			}
			if !found {
				t.Errorf("Validate = %v, want an error naming %s that says %q", errs.ToAggregate(), c.Field, c.detail())
			}
		})
	}
}

// TestValidateAcceptsWhatTheCRDAdmits is the other half: a spec that sets
// every field Validate checks, each within the CRD's rules and at their
// edges, passes. A check stricter than the CRD would hold a v1beta1 object
// the apiserver admitted as InvalidSpec.
func TestValidateAcceptsWhatTheCRDAdmits(t *testing.T) {
	memory, maxItemSize := resource.MustParse("64Gi"), resource.MustParse("1Gi")
	mc := memcached(func(s *cachev1beta1.MemcachedSpec) {
		s.Memory, s.MaxItemSize = &memory, &maxItemSize
		s.ExtraArgs = []string{"-o", "lru_crawler,ssl_ciphers=HIGH", "--disable-cas", "-vv", "--max-reqs-per-event=20", "-R", "40", "--enable-largepages"}
		s.TLS = &cachev1beta1.TLS{SecretName: "cache-tls", ClientCA: &cachev1beta1.ClientCA{ConfigMapName: "clients.example"}}
		s.Auth = &cachev1beta1.Auth{SecretName: "cache-auth"}
		s.Resources = &cachev1beta1.ResourceOverrides{Limits: &cachev1beta1.ResourceAmounts{Memory: "65Gi"}}
		s.PodDisruptionBudget = &cachev1beta1.DisruptionBudget{MinAvailable: ptr.To(intstr.FromString("100%"))}
		// With the name cache, a pool name of 62 characters.
		s.Zones = []string{"zone-a", strings.Repeat("z", 62-len("cache"))}
		s.Pod = &cachev1beta1.PodOverrides{
			Labels:                        map[string]string{"example.com/team": "cache"},
			Annotations:                   map[string]string{"example.com/a": strings.Repeat("x", 8192-len("example.com/a"))},
			ImagePullSecrets:              []corev1.LocalObjectReference{{Name: "registry"}},
			TerminationGracePeriodSeconds: ptr.To[int64](3600),
			PreStopDelaySeconds:           ptr.To[int32](300),
			TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{
				MaxSkew: 1, TopologyKey: corev1.LabelTopologyZone, WhenUnsatisfiable: corev1.ScheduleAnyway,
				LabelSelector:  &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}},
				MatchLabelKeys: []string{"pod-template-hash"},
			}},
			Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{TopologyKey: corev1.LabelHostname, Namespaces: make([]string, 15)}},
			}},
		}
		s.NetworkPolicy = &cachev1beta1.NetworkPolicy{Clients: []cachev1beta1.NetworkPolicyPeer{
			{PodSelector: &cachev1beta1.LabelSelector{MatchExpressions: []cachev1beta1.LabelSelectorRequirement{{Key: "app", Operator: "In", Values: make([]string, 20)}}}},
			{NamespaceSelector: &cachev1beta1.LabelSelector{MatchExpressions: []cachev1beta1.LabelSelectorRequirement{{Key: "team", Operator: "Exists"}}}},
		}}
	})
	if errs := Validate(Default(mc)); len(errs) > 0 {
		t.Errorf("Validate = %v, want no error for a spec the CRD admits", errs.ToAggregate())
	}
}

// TestValidateExtraArgsFlags checks how an argument is read as a flag,
// beyond the one case per rule of TestValidateRefusesWhatTheCRDRefuses.
func TestValidateExtraArgsFlags(t *testing.T) {
	tests := []struct {
		name string
		args []string
		// auth and clientCA turn spec.auth and spec.tls.clientCA on.
		auth, clientCA bool
		wantRefused    []int
	}{
		{name: "flags the operator does not own", args: []string{"-vv", "-o", "lru_crawler", "--disable-cas", "-R", "40", "--enable-largepages", "--max-reqs-per-event=5"}},
		{name: "an owned flag at the end of a cluster", args: []string{"-vvm", "10"}, wantRefused: []int{0}},
		{name: "an owned flag with its value", args: []string{"-m10", "-c1", "-p11212"}, wantRefused: []int{0, 1, 2}},
		{name: "long forms and their abbreviations", args: []string{"--memory-limit=10", "--thr", "2", "--listen=notls:0.0.0.0:1", "--udp", "--auth"}, wantRefused: []int{0, 1, 3, 4, 5}},
		{name: "a value after a newline", args: []string{"--memory-limit=10\nx"}, wantRefused: []int{0}},
		{name: "-d after a cluster", args: []string{"-vd"}, wantRefused: []int{0}},
		{name: "-Z after a cluster", args: []string{"-vZ"}, wantRefused: []int{0}},
		{name: "-B without auth", args: []string{"-B", "binary", "--protocol=auto"}},
		{name: "-B with auth", args: []string{"-B", "binary", "--protocol=auto", "--pr", "--p=1"}, auth: true, wantRefused: []int{0, 2, 3, 4}},
		{name: "ssl_verify_mode without a client CA", args: []string{"-o", "ssl_verify_mode=1"}},
		{name: "ssl_ca_cert with a client CA", args: []string{"-o", "ssl_ca_cert=/x", "-o", "lru_crawler,ssl_verify_mode=0"}, clientCA: true, wantRefused: []int{1, 3}},
		{name: "ssl_chain_cert anywhere", args: []string{"-o", "lru_crawler,ssl_chain_cert=/x"}, wantRefused: []int{1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mc := memcached(func(s *cachev1beta1.MemcachedSpec) {
				s.ExtraArgs = tt.args
				if tt.auth {
					s.Auth = &cachev1beta1.Auth{SecretName: "cache-auth"}
				}
				if tt.clientCA {
					s.TLS = &cachev1beta1.TLS{SecretName: "cache-tls", ClientCA: &cachev1beta1.ClientCA{SecretName: "ca"}}
				}
			})
			var want []string
			for _, i := range tt.wantRefused {
				want = append(want, fmt.Sprintf("spec.extraArgs[%d]", i))
			}
			if got := errorFields(Validate(Default(mc))); !slices.Equal(got, want) {
				t.Errorf("Validate refuses %v, want %v", got, want)
			}
		})
	}
}

// TestValidateAnnotationBounds checks the OpenAPI bounds of the fields
// v1alpha1 carries only in its annotation, which a v1alpha1 write does
// not apply either.
func TestValidateAnnotationBounds(t *testing.T) {
	tests := []struct {
		name      string
		mutate    func(*cachev1beta1.MemcachedSpec)
		wantField string
	}{
		{name: "65 extraArgs", mutate: func(s *cachev1beta1.MemcachedSpec) { s.ExtraArgs = make([]string, 65) }, wantField: "spec.extraArgs"},
		{name: "an extraArg over 1024 characters", mutate: func(s *cachev1beta1.MemcachedSpec) { s.ExtraArgs = []string{strings.Repeat("x", 1025)} }, wantField: "spec.extraArgs[0]"},
		{name: "9 zones", mutate: func(s *cachev1beta1.MemcachedSpec) {
			s.Zones = []string{"a", "b", "c", "d", "e", "f", "g", "h", "i"}
		}, wantField: "spec.zones"},
		{name: "a zone twice", mutate: func(s *cachev1beta1.MemcachedSpec) { s.Zones = []string{"a", "a"} }, wantField: "spec.zones[1]"},
		{name: "an empty zone", mutate: func(s *cachev1beta1.MemcachedSpec) { s.Zones = []string{""} }, wantField: "spec.zones[0]"},
		{name: "a TLS Secret name over 253 characters", mutate: func(s *cachev1beta1.MemcachedSpec) {
			s.TLS = &cachev1beta1.TLS{SecretName: strings.Repeat("a", 254)}
		}, wantField: "spec.tls.secretName"},
		{name: "no auth Secret name", mutate: func(s *cachev1beta1.MemcachedSpec) { s.Auth = &cachev1beta1.Auth{} }, wantField: "spec.auth.secretName"},
		{name: "a client CA with no source", mutate: func(s *cachev1beta1.MemcachedSpec) {
			s.TLS = &cachev1beta1.TLS{SecretName: "cache-tls", ClientCA: &cachev1beta1.ClientCA{}}
		}, wantField: "spec.tls.clientCA"},
		{name: "a budget percentage of 5 characters", mutate: func(s *cachev1beta1.MemcachedSpec) {
			s.PodDisruptionBudget = &cachev1beta1.DisruptionBudget{MaxUnavailable: ptr.To(intstr.FromString("050%"))}
		}, wantField: "spec.podDisruptionBudget.maxUnavailable"},
		{name: "65 Pod labels", mutate: func(s *cachev1beta1.MemcachedSpec) { podOf(s).Labels = manyEntries(65) }, wantField: "spec.pod.labels"},
		{name: "65 Pod annotations", mutate: func(s *cachev1beta1.MemcachedSpec) { podOf(s).Annotations = manyEntries(65) }, wantField: "spec.pod.annotations"},
		{name: "17 imagePullSecrets", mutate: func(s *cachev1beta1.MemcachedSpec) {
			podOf(s).ImagePullSecrets = make([]corev1.LocalObjectReference, 17)
		}, wantField: "spec.pod.imagePullSecrets"},
		{name: "a grace period over an hour", mutate: func(s *cachev1beta1.MemcachedSpec) {
			podOf(s).TerminationGracePeriodSeconds = ptr.To[int64](3601)
			podOf(s).PreStopDelaySeconds = ptr.To[int32](0)
		}, wantField: "spec.pod.terminationGracePeriodSeconds"},
		{name: "a negative preStop delay", mutate: func(s *cachev1beta1.MemcachedSpec) { podOf(s).PreStopDelaySeconds = ptr.To[int32](-1) }, wantField: "spec.pod.preStopDelaySeconds"},
		{name: "9 topologySpreadConstraints", mutate: func(s *cachev1beta1.MemcachedSpec) {
			podOf(s).TopologySpreadConstraints = make([]corev1.TopologySpreadConstraint, 9)
		}, wantField: "spec.pod.topologySpreadConstraints"},
		{name: "17 matchLabelKeys", mutate: func(s *cachev1beta1.MemcachedSpec) {
			podOf(s).TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MatchLabelKeys: make([]string, 17)}}
		}, wantField: "spec.pod.topologySpreadConstraints[0].matchLabelKeys"},
		{name: "17 clients", mutate: func(s *cachev1beta1.MemcachedSpec) {
			s.NetworkPolicy = &cachev1beta1.NetworkPolicy{Clients: make([]cachev1beta1.NetworkPolicyPeer, 17)}
			for i := range s.NetworkPolicy.Clients {
				s.NetworkPolicy.Clients[i].PodSelector = &cachev1beta1.LabelSelector{}
			}
		}, wantField: "spec.networkPolicy.clients"},
		{name: "an unknown operator", mutate: func(s *cachev1beta1.MemcachedSpec) {
			s.NetworkPolicy = &cachev1beta1.NetworkPolicy{Metrics: []cachev1beta1.NetworkPolicyPeer{{PodSelector: &cachev1beta1.LabelSelector{
				MatchExpressions: []cachev1beta1.LabelSelectorRequirement{{Key: "a", Operator: "Gt"}},
			}}}}
		}, wantField: "spec.networkPolicy.metrics[0].podSelector.matchExpressions[0].operator"},
		{name: "a selector value over 63 characters", mutate: func(s *cachev1beta1.MemcachedSpec) {
			s.NetworkPolicy = &cachev1beta1.NetworkPolicy{Clients: []cachev1beta1.NetworkPolicyPeer{{NamespaceSelector: &cachev1beta1.LabelSelector{
				MatchLabels: map[string]string{"a": strings.Repeat("v", 64)},
			}}}}
		}, wantField: "spec.networkPolicy.clients[0].namespaceSelector.matchLabels[a]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := errorFields(Validate(Default(memcached(tt.mutate))))
			if !slices.Contains(got, tt.wantField) {
				t.Errorf("Validate refuses %v, want %s among them", got, tt.wantField)
			}
		})
	}
}

// manyEntries returns a map of n valid labels.
func manyEntries(n int) map[string]string {
	m := make(map[string]string, n)
	for i := range n {
		m["example.com/k"+strconv.Itoa(i)] = "v"
	}
	return m
}

// errorFields are the distinct fields errs name, in order.
func errorFields(errs field.ErrorList) []string {
	var fields []string
	for _, e := range errs {
		if len(fields) == 0 || fields[len(fields)-1] != e.Field {
			fields = append(fields, e.Field)
		}
	}
	return fields
}
