//go:build !renderingnext

// The renderingnext build renders a deliberately different Pod template
// under another RenderingVersion, for the integration suite only; the
// golden files hold what the released build renders.

package resources

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/pmezard/go-difflib/difflib"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
)

// updateGolden makes TestGoldenChildren rewrite the golden files instead of
// comparing with them (make update-golden).
var updateGolden = flag.Bool("update", false, "rewrite testdata/golden from what the builders render (make update-golden)")

const (
	goldenDir = "testdata/golden"
	// renderingFileName is the file of goldenDir that ties the golden Pod
	// templates to RenderingVersion: one line per version, the version and
	// the digest of the Pod templates of every golden spec it renders
	// (templatesDigest).
	renderingFileName = "RENDERING"
	goldenHeader      = "# TestGoldenChildren (golden_test.go) renders the children below from the\n" +
		"# Memcached of the first document. make update-golden rewrites this file.\n"
	renderingHeader = "# RenderingVersion, then the SHA-256 of the Pod templates of every golden\n" +
		"# spec that version renders (TestGoldenChildren). make update-golden appends\n" +
		"# the line of a new RenderingVersion, and refuses to change the Pod template\n" +
		"# of an unchanged spec under a version already recorded here.\n"
)

// goldenCase is one spec whose children are pinned in goldenDir/<name>.yaml.
type goldenCase struct {
	name string
	spec func(*cachev1beta1.MemcachedSpec)
}

// goldenCases are representative specs: the defaults, each feature alone
// and in the combinations that render differently together, and every Pod
// override.
var goldenCases = []goldenCase{
	{name: "defaults"},
	{name: "explicit", spec: func(s *cachev1beta1.MemcachedSpec) {
		s.Replicas = ptr.To[int32](3)
		s.Image = "registry.example/memcached:1.6.40"
		s.Memory = ptr.To(resource.MustParse("1Gi"))
		s.MaxConnections = 4096
		s.Threads = 8
		s.Port = 12345
		s.MaxItemSize = ptr.To(resource.MustParse("2Mi"))
	}},
	{name: "replicas-zero", spec: func(s *cachev1beta1.MemcachedSpec) { s.Replicas = ptr.To[int32](0) }},
	{name: "paused-orphan", spec: func(s *cachev1beta1.MemcachedSpec) {
		s.Paused = true
		s.DeletionPolicy = cachev1beta1.DeletionPolicyOrphan
	}},
	{name: "tls", spec: goldenTLS},
	{name: "tls-port-11212", spec: func(s *cachev1beta1.MemcachedSpec) {
		goldenTLS(s)
		s.Port = 11212
	}},
	{name: "tls-clientca-secret", spec: func(s *cachev1beta1.MemcachedSpec) {
		goldenTLS(s)
		s.TLS.ClientCA = &cachev1beta1.ClientCA{SecretName: "cache-client-ca"}
	}},
	{name: "tls-clientca-configmap", spec: func(s *cachev1beta1.MemcachedSpec) {
		goldenTLS(s)
		s.TLS.ClientCA = &cachev1beta1.ClientCA{ConfigMapName: "cache-client-ca"}
	}},
	{name: "tls-plaintext-port", spec: func(s *cachev1beta1.MemcachedSpec) {
		goldenTLS(s)
		s.Port, s.TLS.PlaintextPort = 11212, 11211
		s.NetworkPolicy = &cachev1beta1.NetworkPolicy{}
	}},
	{name: "tls-plaintext-port-11212-auth", spec: func(s *cachev1beta1.MemcachedSpec) {
		goldenAuth(s)
		goldenTLS(s)
		s.TLS.PlaintextPort = 11212
	}},
	{name: "extstore", spec: func(s *cachev1beta1.MemcachedSpec) {
		s.Memory = ptr.To(resource.MustParse("1Gi"))
		s.Extstore = &cachev1beta1.Extstore{Size: resource.MustParse("100Gi")}
	}},
	{name: "extstore-zones-class", spec: func(s *cachev1beta1.MemcachedSpec) {
		s.Zones = []string{"zone-a"}
		s.MaxItemSize = ptr.To(resource.MustParse("4Mi"))
		s.Extstore = &cachev1beta1.Extstore{Size: resource.MustParse("1Gi"), StorageClassName: ptr.To("zonal-ssd")}
	}},
	{name: "min-ready-seconds-zero", spec: func(s *cachev1beta1.MemcachedSpec) { s.MinReadySeconds = ptr.To[int32](0) }},
	{name: "auth", spec: goldenAuth},
	{name: "auth-tls", spec: func(s *cachev1beta1.MemcachedSpec) {
		goldenAuth(s)
		goldenTLS(s)
	}},
	{name: "exporter", spec: goldenExporter},
	{name: "exporter-image", spec: func(s *cachev1beta1.MemcachedSpec) {
		goldenExporter(s)
		s.Monitoring.Exporter.Image = "registry.example/memcached-exporter:v0.15.4"
	}},
	{name: "exporter-tls", spec: func(s *cachev1beta1.MemcachedSpec) {
		goldenExporter(s)
		goldenTLS(s)
	}},
	{name: "extra-args", spec: func(s *cachev1beta1.MemcachedSpec) {
		s.ExtraArgs = []string{"-o", "lru_crawler,lru_maintainer", "--disable-cas"}
	}},
	{name: "resources", spec: func(s *cachev1beta1.MemcachedSpec) {
		s.Resources = &cachev1beta1.ResourceOverrides{
			Requests: &cachev1beta1.ResourceAmounts{CPU: "250m"},
			Limits:   &cachev1beta1.ResourceAmounts{CPU: "2", Memory: "100Mi"},
		}
	}},
	{name: "pod-scheduling", spec: func(s *cachev1beta1.MemcachedSpec) {
		p := podOf(s)
		p.NodeSelector = map[string]string{"node.example/pool": "cache"}
		p.Tolerations = []corev1.Toleration{
			{Key: "node.example/dedicated", Operator: corev1.TolerationOpEqual, Value: "cache", Effect: corev1.TaintEffectNoSchedule},
			{Key: "node.example/spot", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](30)},
		}
		p.Affinity = &corev1.Affinity{
			NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
					{Key: "kubernetes.io/arch", Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64", "arm64"}},
				}}},
			}},
			PodAntiAffinity: &corev1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
				Weight: 50,
				PodAffinityTerm: corev1.PodAffinityTerm{
					TopologyKey:   corev1.LabelHostname,
					LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "database"}},
				},
			}}},
		}
		p.PriorityClassName = "cache-high"
	}},
	{name: "pod-spread", spec: func(s *cachev1beta1.MemcachedSpec) {
		podOf(s).TopologySpreadConstraints = []corev1.TopologySpreadConstraint{
			{MaxSkew: 1, TopologyKey: corev1.LabelTopologyZone, WhenUnsatisfiable: corev1.DoNotSchedule},
			{
				MaxSkew:           2,
				TopologyKey:       corev1.LabelHostname,
				WhenUnsatisfiable: corev1.ScheduleAnyway,
				LabelSelector:     &metav1.LabelSelector{MatchLabels: map[string]string{LabelInstance: "cache"}},
			},
		}
	}},
	{name: "pod-metadata", spec: func(s *cachev1beta1.MemcachedSpec) {
		p := podOf(s)
		p.Labels = map[string]string{"team": "web", "sidecar.istio.io/inject": "false"}
		p.Annotations = map[string]string{"example.com/cost-center": "1234"}
	}},
	{name: "pod-stop", spec: func(s *cachev1beta1.MemcachedSpec) {
		p := podOf(s)
		p.PreStopDelaySeconds = ptr.To[int32](20)
		p.TerminationGracePeriodSeconds = ptr.To[int64](60)
	}},
	{name: "pod-prestop-zero", spec: func(s *cachev1beta1.MemcachedSpec) {
		podOf(s).PreStopDelaySeconds = ptr.To[int32](0)
	}},
	{name: "pod-image-pull-secrets", spec: func(s *cachev1beta1.MemcachedSpec) {
		s.Image = "registry.example/memcached:1.6.39"
		podOf(s).ImagePullSecrets = []corev1.LocalObjectReference{{Name: "registry-a"}, {Name: "registry-b"}}
	}},
	{name: "pdb-max-unavailable", spec: func(s *cachev1beta1.MemcachedSpec) {
		s.Replicas = ptr.To[int32](4)
		s.PodDisruptionBudget = &cachev1beta1.DisruptionBudget{MaxUnavailable: ptr.To(intstr.FromString("25%"))}
	}},
	{name: "pdb-max-unavailable-zero", spec: func(s *cachev1beta1.MemcachedSpec) {
		s.PodDisruptionBudget = &cachev1beta1.DisruptionBudget{MaxUnavailable: ptr.To(intstr.FromInt32(0))}
	}},
	{name: "pdb-min-available", spec: func(s *cachev1beta1.MemcachedSpec) {
		s.Replicas = ptr.To[int32](3)
		s.PodDisruptionBudget = &cachev1beta1.DisruptionBudget{MinAvailable: ptr.To(intstr.FromInt32(2))}
	}},
	{name: "zones", spec: func(s *cachev1beta1.MemcachedSpec) {
		s.Replicas, s.Zones = ptr.To[int32](2), []string{"zone-a", "zone-b"}
		podOf(s).NodeSelector = map[string]string{"pool": "cache", "topology.kubernetes.io/zone": "elsewhere"}
	}},
	{name: "networkpolicy-empty", spec: func(s *cachev1beta1.MemcachedSpec) {
		s.NetworkPolicy = &cachev1beta1.NetworkPolicy{}
	}},
	{name: "networkpolicy-peers", spec: func(s *cachev1beta1.MemcachedSpec) {
		goldenExporter(s)
		s.NetworkPolicy = &cachev1beta1.NetworkPolicy{
			Clients: []cachev1beta1.NetworkPolicyPeer{
				{NamespaceSelector: &cachev1beta1.LabelSelector{MatchLabels: map[string]string{"team": "web"}}},
				{PodSelector: &cachev1beta1.LabelSelector{MatchExpressions: []cachev1beta1.LabelSelectorRequirement{
					{Key: "role", Operator: "In", Values: []string{"api", "worker"}},
				}}},
			},
			Metrics: []cachev1beta1.NetworkPolicyPeer{
				{NamespaceSelector: &cachev1beta1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: "monitoring"}}},
			},
		}
	}},
}

func goldenTLS(s *cachev1beta1.MemcachedSpec) { s.TLS = &cachev1beta1.TLS{SecretName: "cache-tls"} }

func goldenAuth(s *cachev1beta1.MemcachedSpec) { s.Auth = &cachev1beta1.Auth{SecretName: "cache-auth"} }

func goldenExporter(s *cachev1beta1.MemcachedSpec) {
	s.Monitoring = &cachev1beta1.Monitoring{Exporter: &cachev1beta1.Exporter{Enabled: true}}
}

// goldenMemcached is the Memcached of every golden case: fixed name,
// namespace, UID and generation, which the children carry.
func goldenMemcached(spec func(*cachev1beta1.MemcachedSpec)) *cachev1beta1.Memcached {
	mc := &cachev1beta1.Memcached{
		TypeMeta: metav1.TypeMeta{APIVersion: cachev1beta1.GroupVersion.String(), Kind: "Memcached"},
		ObjectMeta: metav1.ObjectMeta{
			Name:       "cache",
			Namespace:  "prod",
			UID:        "6f1d3c2a-9b8e-4c7d-a5f4-3e2b1a0c9d8e",
			Generation: 7,
		},
	}
	if spec != nil {
		spec(&mc.Spec)
	}
	return mc
}

// renderGolden returns the golden file of mc: the Memcached as given, then
// its Deployment, Service, PodDisruptionBudget and NetworkPolicy (when it
// has one), as YAML documents with sorted keys. With zones, each zone's
// Deployment, Service and PodDisruptionBudget come first, then the
// Memcached's Service.
func renderGolden(mc *cachev1beta1.Memcached) ([]byte, error) {
	children, err := Build(Default(mc))
	if err != nil {
		return nil, err
	}
	input := map[string]any{
		"apiVersion": mc.APIVersion,
		"kind":       mc.Kind,
		"metadata": map[string]any{
			"name":       mc.Name,
			"namespace":  mc.Namespace,
			"uid":        mc.UID,
			"generation": mc.Generation,
		},
		"spec": mc.Spec,
	}
	var docs []any
	if p := children.Pools[0]; p.Zone == "" {
		docs = []any{input, p.Deployment, children.Service, p.PodDisruptionBudget}
	} else {
		docs = []any{input}
		for _, p := range children.Pools {
			docs = append(docs, p.Deployment, p.Service, p.PodDisruptionBudget)
		}
		docs = append(docs, children.Service)
	}
	if children.NetworkPolicy != nil {
		docs = append(docs, children.NetworkPolicy)
	}
	out := []byte(goldenHeader)
	for i, doc := range docs {
		b, err := yaml.Marshal(doc)
		if err != nil {
			return nil, err
		}
		if i > 0 {
			out = append(out, "---\n"...)
		}
		out = append(out, b...)
	}
	return out, nil
}

// golden is what a golden file holds that the rendering checks compare:
// the input Memcached and the Deployment's Pod template, as JSON with
// sorted keys, and the Deployment's TemplateInputsAnnotation.
type golden struct {
	input, template []byte
	inputs          string
}

// parseGolden reads the Memcached and the Pod template out of a golden
// file. The files on disk and the ones rendered now go through it alike,
// so that their JSON compares byte for byte.
func parseGolden(file []byte) (golden, error) {
	var g golden
	for doc := range bytes.SplitSeq(file, []byte("\n---\n")) {
		j, err := yaml.YAMLToJSON(doc)
		if err != nil {
			return golden{}, err
		}
		var obj struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Annotations map[string]string `json:"annotations"`
			} `json:"metadata"`
			Spec struct {
				Template json.RawMessage `json:"template"`
			} `json:"spec"`
		}
		if err := json.Unmarshal(j, &obj); err != nil {
			return golden{}, err
		}
		switch obj.Kind {
		case "Memcached":
			g.input = j
		case "Deployment":
			g.template = obj.Spec.Template
			g.inputs = obj.Metadata.Annotations[TemplateInputsAnnotation]
		}
	}
	if g.input == nil || g.template == nil {
		return golden{}, errors.New("no Memcached or no Deployment Pod template")
	}
	return g, nil
}

// templatesDigest is the SHA-256 of the Pod templates of goldens, by case
// name.
func templatesDigest(goldens map[string]golden) string {
	h := sha256.New()
	for _, name := range slices.Sorted(maps.Keys(goldens)) {
		fmt.Fprintf(h, "%s\n%s\n", name, goldens[name].template)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// readRendering reads goldenDir/RENDERING: version to digest.
func readRendering() (map[int]string, error) {
	b, err := os.ReadFile(filepath.Join(goldenDir, renderingFileName))
	if errors.Is(err, fs.ErrNotExist) {
		return map[int]string{}, nil
	}
	if err != nil {
		return nil, err
	}
	recorded := map[int]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		v, err := strconv.Atoi(fields[0])
		if len(fields) != 2 || err != nil {
			return nil, fmt.Errorf("%s line %d: want <version> <digest>, got %q", renderingFileName, n, line)
		}
		if _, dup := recorded[v]; dup {
			return nil, fmt.Errorf("%s line %d: version %d recorded twice", renderingFileName, n, v)
		}
		recorded[v] = fields[1]
	}
	return recorded, sc.Err()
}

// writeRendering writes goldenDir/RENDERING, oldest version first.
func writeRendering(recorded map[int]string) error {
	var b strings.Builder
	b.WriteString(renderingHeader)
	for _, v := range slices.Sorted(maps.Keys(recorded)) {
		fmt.Fprintf(&b, "%d %s\n", v, recorded[v])
	}
	return os.WriteFile(filepath.Join(goldenDir, renderingFileName), []byte(b.String()), 0o644)
}

// renderingProblem says why the Pod templates rendered now may not be
// recorded under RenderingVersion, or returns "" if they may.
//
// They may if RENDERING records nothing for RenderingVersion yet and it is
// newer than every version recorded, or if it records their digest. It
// may also record a different digest when the golden files on disk are the
// ones it describes and every spec among them that is still here, with the
// same input, renders the same Pod template: the digest then changed only
// because specs were added, removed or edited, which rolls no cache.
// Otherwise a spec that did not change renders another Pod template under
// the same RenderingVersion, which would roll every matching cache on an
// operator upgrade without the operator pacing it.
func renderingProblem(onDisk, rendered map[string]golden, recorded map[int]string) string {
	digest := templatesDigest(rendered)
	want, ok := recorded[RenderingVersion]
	var inputsChanged []string
	for name, now := range rendered {
		if was, found := onDisk[name]; found && bytes.Equal(was.input, now.input) && was.inputs != "" && was.inputs != now.inputs {
			inputsChanged = append(inputsChanged, name)
		}
	}
	slices.Sort(inputsChanged)
	if len(inputsChanged) > 0 && (!ok || want != digest) {
		return fmt.Sprintf("the template inputs of %s changed, although their specs did not, in the same change as their Pod templates: "+
			"every Deployment would record other inputs than the Memcached's, and the new templates would roll every cache at once, unpaced; "+
			"keep TemplateInputs' hash of a stored spec (omitempty on a new field, the same fields left out), or change it in a release that changes no Pod template",
			strings.Join(inputsChanged, ", "))
	}
	if !ok {
		if newest := slices.Max(append(slices.Collect(maps.Keys(recorded)), 0)); RenderingVersion < newest {
			return fmt.Sprintf("RenderingVersion %d is older than version %d, the newest %s records", RenderingVersion, newest, renderingFileName)
		}
		return ""
	}
	if want == digest {
		return ""
	}
	if got := templatesDigest(onDisk); got != want {
		return fmt.Sprintf("the golden files' Pod templates (digest %s) are not those %s records for RenderingVersion %d (%s): restore testdata/golden from git",
			got, renderingFileName, RenderingVersion, want)
	}
	var rolled []string
	for name, now := range rendered {
		if was, ok := onDisk[name]; ok && bytes.Equal(was.input, now.input) && !bytes.Equal(was.template, now.template) {
			rolled = append(rolled, name)
		}
	}
	slices.Sort(rolled)
	if len(rolled) > 0 {
		return fmt.Sprintf("the Pod templates of %s changed, although their specs did not: bump RenderingVersion in rendering_version.go, "+
			"because these Pod templates roll every matching cache when the operator is upgraded, and then run make update-golden",
			strings.Join(rolled, ", "))
	}
	return ""
}

// readGoldens reads every golden file of goldenDir, by case name.
func readGoldens(t *testing.T) (files map[string][]byte, parsed map[string]golden) {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(goldenDir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	files, parsed = map[string][]byte{}, map[string]golden{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimSuffix(filepath.Base(p), ".yaml")
		files[name] = b
		// A file that does not parse counts as absent: the comparison
		// reports it, and an update replaces it.
		if g, err := parseGolden(b); err == nil {
			parsed[name] = g
		}
	}
	return files, parsed
}

// TestGoldenChildren pins the children the builders render for
// representative specs to the files of testdata/golden, and ties their Pod
// templates to RenderingVersion through testdata/golden/RENDERING: a Pod
// template that changes for an unchanged spec rolls every such cache when
// the operator is upgraded, and RenderingVersion is how the operator
// tells such a rendering from the one before. With -update (make
// update-golden) it rewrites the files instead, unless RenderingVersion
// should have been bumped.
func TestGoldenChildren(t *testing.T) {
	rendered, renderedParsed := map[string][]byte{}, map[string]golden{}
	for _, c := range goldenCases {
		b, err := renderGolden(goldenMemcached(c.spec))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		g, err := parseGolden(b)
		if err != nil {
			t.Fatalf("%s: reading back what was rendered: %v", c.name, err)
		}
		rendered[c.name], renderedParsed[c.name] = b, g
	}
	onDisk, onDiskParsed := readGoldens(t)
	recorded, err := readRendering()
	if err != nil {
		t.Fatal(err)
	}
	problem := renderingProblem(onDiskParsed, renderedParsed, recorded)

	if *updateGolden {
		if problem != "" {
			t.Fatalf("Refusing to update %s: %s", goldenDir, problem)
		}
		if err := os.MkdirAll(goldenDir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, b := range rendered {
			if err := os.WriteFile(filepath.Join(goldenDir, name+".yaml"), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		for name := range onDisk {
			if _, ok := rendered[name]; !ok {
				if err := os.Remove(filepath.Join(goldenDir, name+".yaml")); err != nil {
					t.Fatal(err)
				}
			}
		}
		recorded[RenderingVersion] = templatesDigest(renderedParsed)
		if err := writeRendering(recorded); err != nil {
			t.Fatal(err)
		}
		return
	}

	for _, c := range goldenCases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(goldenDir, c.name+".yaml")
			want, ok := onDisk[c.name]
			if !ok {
				t.Fatalf("%s is missing: run make update-golden", path)
			}
			if got := rendered[c.name]; !bytes.Equal(got, want) {
				t.Errorf("the children rendered for %s differ from %s; if that is meant, run make update-golden and commit the result:\n%s",
					c.name, path, unifiedDiff(path, want, got))
			}
		})
	}
	for name := range onDisk {
		if _, ok := rendered[name]; !ok {
			t.Errorf("%s belongs to no golden case: run make update-golden, which removes it", filepath.Join(goldenDir, name+".yaml"))
		}
	}
	renderingPath := filepath.Join(goldenDir, renderingFileName)
	got := templatesDigest(renderedParsed)
	switch want, ok := recorded[RenderingVersion]; {
	case problem != "":
		t.Error(problem)
	case !ok:
		t.Errorf("%s records no digest for RenderingVersion %d: run make update-golden", renderingPath, RenderingVersion)
	case got != want:
		t.Errorf("%s records digest %s for RenderingVersion %d, and the Pod templates rendered now have %s: run make update-golden",
			renderingPath, want, RenderingVersion, got)
	}
}

// unifiedDiff is a diff -u of a golden file and what was rendered.
func unifiedDiff(path string, want, got []byte) string {
	d, err := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
		A:        difflib.SplitLines(string(want)),
		B:        difflib.SplitLines(string(got)),
		FromFile: path,
		ToFile:   "rendered",
		Context:  3,
	})
	if err != nil {
		return err.Error()
	}
	return d
}

// TestRenderingProblem checks the rules of renderingProblem, which decide
// whether make update-golden may record a rendering.
func TestRenderingProblem(t *testing.T) {
	g := func(input, template string) golden { return golden{input: []byte(input), template: []byte(template)} }
	base := map[string]golden{"a": g("in-a", "tmpl-a"), "b": g("in-b", "tmpl-b")}
	baseDigest := templatesDigest(base)
	with := func(name string, v golden) map[string]golden {
		m := maps.Clone(base)
		m[name] = v
		return m
	}
	without := func(name string) map[string]golden {
		m := maps.Clone(base)
		delete(m, name)
		return m
	}
	current := func(digest string) map[int]string { return map[int]string{RenderingVersion: digest} }
	withInputs := func(v golden, inputs string) golden {
		v.inputs = inputs
		return v
	}
	tests := []struct {
		name     string
		onDisk   map[string]golden
		rendered map[string]golden
		recorded map[int]string
		want     string // a substring of the problem; "" for none
	}{
		{name: "unchanged", onDisk: base, rendered: base, recorded: current(baseDigest)},
		{name: "first recording", rendered: base, recorded: map[int]string{}},
		{name: "new version", onDisk: base, rendered: with("a", g("in-a", "tmpl-a2")), recorded: map[int]string{RenderingVersion - 1: baseDigest}},
		{name: "version older than the newest", onDisk: base, rendered: base, recorded: map[int]string{RenderingVersion + 1: baseDigest}, want: "older than"},
		{name: "template of an unchanged spec changed", onDisk: base, rendered: with("a", g("in-a", "tmpl-a2")), recorded: current(baseDigest), want: "bump RenderingVersion"},
		{name: "spec added", onDisk: base, rendered: with("c", g("in-c", "tmpl-c")), recorded: current(baseDigest)},
		{name: "spec removed", onDisk: base, rendered: without("b"), recorded: current(baseDigest)},
		{name: "spec edited", onDisk: base, rendered: with("a", g("in-a2", "tmpl-a2")), recorded: current(baseDigest)},
		{name: "files on disk edited by hand", onDisk: with("a", g("in-a", "tmpl-x")), rendered: with("c", g("in-c", "tmpl-c")), recorded: current(baseDigest), want: "restore"},
		{name: "template inputs of an unchanged spec changed, templates unchanged", onDisk: with("a", withInputs(g("in-a", "tmpl-a"), "h1")),
			rendered: with("a", withInputs(g("in-a", "tmpl-a"), "h2")), recorded: current(baseDigest)},
		{name: "template inputs and templates changed together", onDisk: with("a", withInputs(g("in-a", "tmpl-a"), "h1")),
			rendered: with("a", withInputs(g("in-a", "tmpl-a2"), "h2")), recorded: map[int]string{RenderingVersion - 1: baseDigest}, want: "unpaced"},
		{name: "template inputs recorded for the first time", onDisk: base,
			rendered: with("a", withInputs(g("in-a", "tmpl-a2"), "h2")), recorded: map[int]string{RenderingVersion - 1: baseDigest}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := renderingProblem(tt.onDisk, tt.rendered, tt.recorded)
			if tt.want == "" && got != "" || !strings.Contains(got, tt.want) {
				t.Errorf("renderingProblem = %q, want one containing %q", got, tt.want)
			}
		})
	}
}
