package tools

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// root is the repository, from this module's directory.
const root = "../.."

var chartDir = filepath.Join(root, "charts", "memcached-operator")

// object is one rendered manifest, decoded the same way whichever tool
// rendered it, so that numbers and strings compare alike.
type object map[string]any

func (o object) id() string {
	md, _ := o["metadata"].(map[string]any)
	name, _ := md["name"].(string)
	if ns, _ := md["namespace"].(string); ns != "" {
		name = ns + "/" + name
	}
	return fmt.Sprintf("%v %s", o["kind"], name)
}

// decode splits a multi-document YAML stream into objects, keyed by id.
func decode(t *testing.T, what string, stream []byte) map[string]object {
	t.Helper()
	out := map[string]object{}
	for _, doc := range bytes.Split(stream, []byte("\n---")) {
		var o object
		if err := yaml.Unmarshal(doc, &o); err != nil {
			t.Fatalf("%s: decoding %q: %v", what, firstLine(doc), err)
		}
		if len(o) == 0 {
			continue
		}
		if _, dup := out[o.id()]; dup {
			t.Fatalf("%s renders %s twice", what, o.id())
		}
		out[o.id()] = o
	}
	return out
}

func firstLine(b []byte) string {
	line, _, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
	return line
}

// loadChart loads charts/memcached-operator as helm install would.
func loadChart(t *testing.T) *chartv2.Chart {
	t.Helper()
	chrt, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	return chrt
}

// clusterVersion is the Kubernetes release the chart is rendered for, the
// one make test runs. Test builds of Helm would otherwise assume 1.20.
const clusterVersion = "v1.37.2"

// renderChart renders the chart as `helm template RELEASE -n NAMESPACE`
// does with the given values: the client-only install, without a cluster.
func renderChart(chrt *chartv2.Chart, release, namespace string, values map[string]any) ([]byte, error) {
	return renderChartFor(chrt, clusterVersion, release, namespace, values)
}

// renderChartFor renders the chart as `helm template --kube-version`
// does, for a cluster of the given Kubernetes version.
func renderChartFor(chrt *chartv2.Chart, kubeVersion, release, namespace string, values map[string]any) ([]byte, error) {
	kv, err := common.ParseKubeVersion(kubeVersion)
	if err != nil {
		return nil, err
	}
	install := action.NewInstall(action.NewConfiguration())
	install.KubeVersion = kv
	install.DryRunStrategy = action.DryRunClient
	install.ReleaseName = release
	install.Namespace = namespace
	install.Replace = true
	install.IncludeCRDs = true
	r, err := install.Run(chrt, values)
	if err != nil {
		return nil, err
	}
	rel, ok := r.(*releasev1.Release)
	if !ok {
		return nil, fmt.Errorf("helm returned a %T, want a v1 release", r)
	}
	return []byte(rel.Manifest), nil
}

// build runs `kustomize build` on dir.
func build(t *testing.T, dir string) []byte {
	t.Helper()
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	out, err := m.AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// kustomization writes a kustomization of resources and components,
// directories relative to the repository, and returns its directory: what
// a user gets by uncommenting components in artifacts/kustomization.yaml,
// or by applying kustomizations one after the other.
func kustomization(t *testing.T, resources, components []string) string {
	t.Helper()
	dir := t.TempDir()
	// kustomize takes no absolute path to a kustomization.
	rel := func(d string) string {
		abs, err := filepath.Abs(filepath.Join(root, d))
		if err != nil {
			t.Fatal(err)
		}
		r, err := filepath.Rel(dir, abs)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	k := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n"
	for _, d := range resources {
		k += "- " + rel(d) + "\n"
	}
	if len(components) > 0 {
		k += "components:\n"
		for _, d := range components {
			k += "- " + rel(d) + "\n"
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// normalize removes from a chart's object what Helm's conventions add and
// artifacts/ cannot have, after checking that it is there with the value
// it must have: the labels of templates/_helpers.tpl
// (memcached-operator.helmLabels) on every object, the instance label on
// the Deployment's Pods, and the CRD's resource policy. Everything else
// must equal artifacts/ as it is.
func normalize(o object, release string, chrt *chartv2.Chart) error {
	md := o["metadata"].(map[string]any)
	want := map[string]string{
		"app.kubernetes.io/instance":   release,
		"app.kubernetes.io/managed-by": "Helm",
		"app.kubernetes.io/version":    chrt.Metadata.AppVersion,
		"helm.sh/chart":                chrt.Metadata.Name + "-" + chrt.Metadata.Version,
	}
	if err := cut(md, "labels", want); err != nil {
		return fmt.Errorf("metadata.labels: %w", err)
	}
	switch o["kind"] {
	case "Deployment":
		tmd := dig(o, "spec", "template", "metadata")
		if err := cut(tmd, "labels", map[string]string{"app.kubernetes.io/instance": release}); err != nil {
			return fmt.Errorf("spec.template.metadata.labels: %w", err)
		}
	case "CustomResourceDefinition":
		if err := cut(md, "annotations", map[string]string{"helm.sh/resource-policy": "keep"}); err != nil {
			return fmt.Errorf("metadata.annotations: %w", err)
		}
	}
	return nil
}

// foldExpressions joins the lines of every CEL expression of a
// ValidatingAdmissionPolicy with single spaces. The pod policy's folded
// scalars (>-) have more-indented lines, whose line breaks kustomize's
// YAML parser and Helm's keep differently (one adds a blank line); CEL
// reads both alike, and none of its string literals spans a line. Spaces
// within a line are compared as they are.
func foldExpressions(o object) {
	if o["kind"] != "ValidatingAdmissionPolicy" {
		return
	}
	var fold func(v any)
	fold = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, e := range v {
				if s, ok := e.(string); ok && (k == "expression" || k == "messageExpression") {
					v[k] = lineBreaks.ReplaceAllString(s, " ")
					continue
				}
				fold(e)
			}
		case []any:
			for _, e := range v {
				fold(e)
			}
		}
	}
	fold(map[string]any(o))
}

// lineBreaks matches a line break with the blanks around it.
var lineBreaks = regexp.MustCompile(`[ \t]*\n[ \t\n]*`)

// cut deletes the keys of want from m[field] after checking their values,
// and m[field] itself once it is empty.
func cut(m map[string]any, field string, want map[string]string) error {
	got, _ := m[field].(map[string]any)
	var errs []error
	for k, v := range want {
		if got[k] != v {
			errs = append(errs, fmt.Errorf("%s is %v, want %q", k, got[k], v))
		}
		delete(got, k)
	}
	if len(got) == 0 {
		delete(m, field)
	}
	return errors.Join(errs...)
}

func dig(o object, path ...string) map[string]any {
	m := map[string]any(o)
	for _, p := range path {
		m, _ = m[p].(map[string]any)
	}
	return m
}

// diff lists the fields where got and want differ, as paths.
func diff(path string, got, want any) []string {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			break
		}
		keys := map[string]bool{}
		for k := range w {
			keys[k] = true
		}
		for k := range g {
			keys[k] = true
		}
		var out []string
		for _, k := range sortedKeys(keys) {
			gv, gok := g[k]
			wv, wok := w[k]
			switch {
			case !gok:
				out = append(out, fmt.Sprintf("%s.%s: chart lacks it; artifacts: %s", path, k, short(wv)))
			case !wok:
				out = append(out, fmt.Sprintf("%s.%s: chart has %s; artifacts lack it", path, k, short(gv)))
			default:
				out = append(out, diff(path+"."+k, gv, wv)...)
			}
		}
		return out
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			break
		}
		var out []string
		for i := range w {
			out = append(out, diff(fmt.Sprintf("%s[%d]", path, i), g[i], w[i])...)
		}
		return out
	}
	if reflect.DeepEqual(got, want) {
		return nil
	}
	return []string{fmt.Sprintf("%s: chart %s; artifacts %s", path, short(got), short(want))}
}

func sortedKeys(m map[string]bool) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// short prints a value on one line, cut at 200 characters.
func short(v any) string {
	b, err := yaml.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	s := strings.ReplaceAll(strings.TrimSpace(string(b)), "\n", " ⏎ ")
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// TestChartMatchesArtifacts renders the chart with values that select what
// a kustomization of artifacts/ installs, and compares the two object by
// object, field by field. The chart may differ from artifacts/ only as
// normalize allows and as each case lists: objects artifacts/ has that the
// chart leaves out (missing), objects the chart adds (extra), and objects
// it names differently (renamed). So a change to either that the other
// does not follow fails here, naming the object and the field.
func TestChartMatchesArtifacts(t *testing.T) {
	chrt := loadChart(t)
	// The Namespace of artifacts/: a Helm release cannot create the
	// namespace it is installed into, since Helm stores the release there
	// before it creates anything; helm install --create-namespace makes
	// it, without the Pod Security label (docs/operations.md, "Installing
	// with Helm").
	const namespace = "Namespace memcached-operator"
	// The operator itself, which artifacts/namespaced leaves to the user:
	// a namespaced release runs it, with the same objects as a
	// cluster-wide one but for the webhook, under names of the release's
	// namespace where they are cluster-scoped.
	namespacedOperator := []string{
		"Deployment memcached/memcached-operator",
		"PodDisruptionBudget memcached/memcached-operator",
		"Service memcached/memcached-operator-metrics",
		"ClusterRole memcached-operator-memcached-metrics-reader",
		"FlowSchema memcached-operator-memcached-leader-election",
	}
	for _, tc := range []struct {
		name          string
		kustomization string
		namespace     string
		values        map[string]any
		missing       []string
		extra         []string
		// renamed maps a chart object's id to the id it has in artifacts/.
		renamed map[string]string
	}{
		{
			name:          "defaults: artifacts/",
			kustomization: filepath.Join(root, "artifacts"),
			namespace:     "memcached-operator",
			missing:       []string{namespace},
		},
		{
			name:          "networkPolicy: artifacts/ with the network-policy component",
			kustomization: kustomization(t, []string{"artifacts"}, []string{"artifacts/network-policy"}),
			namespace:     "memcached-operator",
			values: map[string]any{"networkPolicy": map[string]any{
				"enabled": true,
				// The documentation range artifacts/network-policy ships.
				"apiserverCIDRs": []any{"192.0.2.0/24"},
			}},
			missing: []string{namespace},
		},
		{
			name:          "podPolicy: artifacts/ and artifacts/policy",
			kustomization: kustomization(t, []string{"artifacts", "artifacts/policy"}, nil),
			namespace:     "memcached-operator",
			values:        map[string]any{"podPolicy": map[string]any{"enabled": true}},
			missing:       []string{namespace},
		},
		{
			name:          "platformDefaults: artifacts/ and artifacts/policy/defaults",
			kustomization: kustomization(t, []string{"artifacts", "artifacts/policy/defaults"}, nil),
			namespace:     "memcached-operator",
			values:        map[string]any{"platformDefaults": map[string]any{"enabled": true}},
			missing:       []string{namespace},
		},
		{
			name:          "karmada.resourceInterpreter: artifacts/ and artifacts/karmada",
			kustomization: kustomization(t, []string{"artifacts", "artifacts/karmada"}, nil),
			namespace:     "memcached-operator",
			values:        map[string]any{"karmada": map[string]any{"resourceInterpreter": true}},
			missing:       []string{namespace},
		},
		{
			name:          "watchNamespaces: artifacts/namespaced",
			kustomization: filepath.Join(root, "artifacts", "namespaced"),
			namespace:     "memcached",
			values: map[string]any{
				"watchNamespaces": []any{"memcached"},
				"crds":            map[string]any{"enabled": false},
			},
			extra: namespacedOperator,
			renamed: map[string]string{
				"ClusterRoleBinding memcached-operator-memcached-auth-delegator": "ClusterRoleBinding memcached-operator-auth-delegator",
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const release = "memcached-operator"
			manifest, err := renderChart(chrt, release, tc.namespace, tc.values)
			if err != nil {
				t.Fatalf("rendering the chart: %v", err)
			}
			chart := decode(t, "the chart", manifest)
			artifacts := decode(t, "kustomize build", build(t, tc.kustomization))

			// Over a snapshot of the IDs: a renamed object is put back under
			// its new ID, which ranging over the map itself could visit
			// again, and normalize a second time.
			for _, id := range sortedIDs(chart) {
				o := chart[id]
				if err := normalize(o, release, chrt); err != nil {
					t.Errorf("%s: %v", id, err)
				}
				if to, ok := tc.renamed[id]; ok {
					delete(chart, id)
					dig(o, "metadata")["name"] = strings.TrimPrefix(to, fmt.Sprint(o["kind"])+" ")
					chart[to] = o
				}
			}
			for _, id := range tc.missing {
				if _, ok := artifacts[id]; !ok {
					t.Errorf("%s is listed as missing from the chart, but artifacts/ has no such object", id)
				}
				delete(artifacts, id)
			}
			for _, id := range tc.extra {
				if _, ok := chart[id]; !ok {
					t.Errorf("%s is listed as extra in the chart, but the chart renders no such object", id)
				}
				delete(chart, id)
			}
			ids := map[string]bool{}
			for id := range chart {
				ids[id] = true
			}
			for id := range artifacts {
				ids[id] = true
			}
			for _, id := range sortedKeys(ids) {
				c, inChart := chart[id]
				a, inArtifacts := artifacts[id]
				switch {
				case !inChart:
					t.Errorf("%s: in artifacts/, not in the chart", id)
				case !inArtifacts:
					t.Errorf("%s: in the chart, not in artifacts/", id)
				default:
					foldExpressions(c)
					foldExpressions(a)
					for _, d := range diff("", map[string]any(c), map[string]any(a)) {
						t.Errorf("%s: %s", id, strings.TrimPrefix(d, "."))
					}
				}
			}
		})
	}
}

// TestChartFinalizerPolicyNeedsKubernetes136 renders the chart for
// clusters on both sides of Kubernetes 1.36, which made
// MutatingAdmissionPolicy v1 GA: on an older one the release leaves the
// policy out, and the operator adds its finalizer itself, rather than fail
// to install a kind the apiserver does not serve.
func TestChartFinalizerPolicyNeedsKubernetes136(t *testing.T) {
	chrt := loadChart(t)
	const (
		policy  = "MutatingAdmissionPolicy memcached-operator-children-finalizer"
		binding = "MutatingAdmissionPolicyBinding memcached-operator-children-finalizer"
	)
	for _, tc := range []struct {
		kubeVersion string
		want        bool
	}{
		{kubeVersion: "v1.35.4", want: false},
		{kubeVersion: "v1.36.0", want: true},
		// Providers' builds carry a pre-release or build suffix.
		{kubeVersion: "v1.36.0-gke.1", want: true},
		{kubeVersion: "v1.36.1+k3s1", want: true},
		{kubeVersion: "v1.35.9-eks-3", want: false},
		{kubeVersion: clusterVersion, want: true},
	} {
		t.Run(tc.kubeVersion, func(t *testing.T) {
			manifest, err := renderChartFor(chrt, tc.kubeVersion, "memcached-operator", "memcached-operator", nil)
			if err != nil {
				t.Fatalf("rendering the chart: %v", err)
			}
			objects := decode(t, "the chart", manifest)
			for _, id := range []string{policy, binding} {
				if _, got := objects[id]; got != tc.want {
					t.Errorf("rendered for Kubernetes %s: %s present = %t, want %t", tc.kubeVersion, id, got, tc.want)
				}
			}
		})
	}
}

// TestChartRelease renders the chart under another release name and in
// namespaced forms, and checks that the pieces that must name one another
// do: the CRD's conversion names the webhook Service the release creates
// and the operator is told about; the webhook Role names the Secret the
// operator is told to keep; every Role and binding names the release's
// ServiceAccount; the operator watches what its Roles grant.
func TestChartRelease(t *testing.T) {
	chrt := loadChart(t)
	for _, tc := range []struct {
		name, release, namespace string
		values                   map[string]any
		// wantArgs are flags the Deployment must pass; absentArgs prefixes
		// of flags it must not.
		wantArgs, absentArgs []string
		// roleNamespaces are where the controller's Roles go; none means a
		// ClusterRole.
		roleNamespaces []string
		// webhook is whether the release serves the conversion webhook.
		webhook bool
	}{
		{
			name: "another release name", release: "cache", namespace: "ops",
			wantArgs: []string{"--webhook-bind-address=:9443", "--webhook-service=cache-memcached-operator-webhook", "--webhook-secret=cache-memcached-operator-webhook-cert"},
			webhook:  true,
		},
		{
			name: "no webhook", release: "memcached-operator", namespace: "memcached-operator",
			values:   map[string]any{"webhook": map[string]any{"enabled": false}},
			wantArgs: []string{"--webhook-bind-address=0"},
		},
		{
			name: "its own namespace", release: "memcached-operator", namespace: "team-a",
			values:         map[string]any{"watchNamespaces": []any{"team-a"}},
			wantArgs:       []string{"--namespace=team-a"},
			absentArgs:     []string{"--webhook-"},
			roleNamespaces: []string{"team-a"},
		},
		{
			name: "other namespaces", release: "memcached-operator", namespace: "memcached-operator",
			values:         map[string]any{"watchNamespaces": []any{"team-a", "team-b"}, "maxConcurrentRollouts": 3, "logging": map[string]any{"verbosity": 2}},
			wantArgs:       []string{"--namespace=team-a,team-b", "--max-concurrent-rollouts=3", "-v=2"},
			absentArgs:     []string{"--webhook-"},
			roleNamespaces: []string{"team-a", "team-b"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			manifest, err := renderChart(chrt, tc.release, tc.namespace, tc.values)
			if err != nil {
				t.Fatalf("rendering the chart: %v", err)
			}
			objs := decode(t, "the chart", manifest)
			fullname := tc.release
			if !strings.Contains(tc.release, "memcached-operator") {
				fullname = tc.release + "-memcached-operator"
			}
			dep, ok := objs["Deployment "+tc.namespace+"/"+fullname]
			if !ok {
				t.Fatalf("no Deployment %s/%s among %v", tc.namespace, fullname, sortedIDs(objs))
			}
			args := containerArgs(dep)
			for _, a := range tc.wantArgs {
				if !slices.Contains(args, a) {
					t.Errorf("the operator's args %v lack %s", args, a)
				}
			}
			for _, prefix := range tc.absentArgs {
				for _, a := range args {
					if strings.HasPrefix(a, prefix) {
						t.Errorf("the operator's args pass %s", a)
					}
				}
			}

			crd, hasCRD := objs["CustomResourceDefinition memcacheds.cache.kubelite.io"]
			_, service := objs["Service "+tc.namespace+"/"+fullname+"-webhook"]
			_, role := objs["Role "+tc.namespace+"/"+fullname+"-webhook"]
			_, crdRole := objs["ClusterRole "+fullname+"-crd-conversion"]
			if service != tc.webhook || role != tc.webhook || crdRole != tc.webhook {
				t.Errorf("webhook Service, Role and CRD ClusterRole rendered: %v, %v, %v; want %v", service, role, crdRole, tc.webhook)
			}
			if hasCRD {
				svc := dig(crd, "spec", "conversion", "webhook", "clientConfig", "service")
				if svc["namespace"] != tc.namespace || svc["name"] != fullname+"-webhook" {
					t.Errorf("the CRD's conversion names Service %v/%v, want %s/%s-webhook", svc["namespace"], svc["name"], tc.namespace, fullname)
				}
			}
			if role, ok := objs["Role "+tc.namespace+"/"+fullname+"-webhook"]; ok {
				rules, _ := role["rules"].([]any)
				names := dig(object(rules[0].(map[string]any)))["resourceNames"]
				if !reflect.DeepEqual(names, []any{fullname + "-webhook-cert"}) {
					t.Errorf("the webhook Role grants Secrets %v, want [%s-webhook-cert]", names, fullname)
				}
			}

			for id, o := range objs {
				if o["kind"] != "RoleBinding" && o["kind"] != "ClusterRoleBinding" {
					continue
				}
				for _, s := range o["subjects"].([]any) {
					s := s.(map[string]any)
					if s["kind"] != "ServiceAccount" || s["name"] != fullname || s["namespace"] != tc.namespace {
						t.Errorf("%s binds %v, want the ServiceAccount %s/%s", id, s, tc.namespace, fullname)
					}
				}
			}
			_, clusterRole := objs["ClusterRole "+fullname]
			if clusterRole != (len(tc.roleNamespaces) == 0) {
				t.Errorf("controller ClusterRole rendered: %v, want it only without watchNamespaces", clusterRole)
			}
			for _, ns := range tc.roleNamespaces {
				if _, ok := objs["Role "+ns+"/"+fullname]; !ok {
					t.Errorf("no controller Role in watched namespace %s", ns)
				}
			}
			if !slices.Contains(tc.roleNamespaces, tc.namespace) {
				if _, ok := objs["Role "+tc.namespace+"/"+fullname+"-leader-election"]; !ok {
					t.Errorf("no leader-election Role in the release's namespace %s, which the operator does not watch", tc.namespace)
				}
			}
		})
	}
}

// TestChartPlatformDefaults renders the platform defaults with values of
// every kind under another release name, and checks that the ConfigMap
// carries them as the policy reads them, and that the binding names the
// policy and the ConfigMap the release creates; then namespaced, where the
// binding must be limited to the namespaces the release watches.
func TestChartPlatformDefaults(t *testing.T) {
	manifest, err := renderChart(loadChart(t), "cache", "ops", map[string]any{"platformDefaults": map[string]any{
		"enabled":           true,
		"networkPolicy":     false,
		"priorityClassName": "platform-standard",
		"image":             "registry.example.com/library/memcached:1.6.45",
		"enforced":          []any{"image", "priorityClassName"},
	}})
	if err != nil {
		t.Fatalf("rendering the chart: %v", err)
	}
	objs := decode(t, "the chart", manifest)
	const name = "cache-memcached-operator-defaults"
	binding := checkParameterizedPolicy(t, objs, "MutatingAdmissionPolicy", "ops", name, map[string]any{
		"networkPolicy":     "",
		"priorityClassName": "platform-standard",
		"image":             "registry.example.com/library/memcached:1.6.45",
		"enforced":          "image,priorityClassName",
	})
	if got := dig(binding, "spec")["policyName"]; got != name {
		t.Errorf("the binding names policy %v, want %s", got, name)
	}
	if got := dig(binding, "spec", "matchResources", "namespaceSelector")["matchExpressions"]; got != nil {
		t.Errorf("a cluster-wide release binds the defaults to the labelled namespaces it names: %v", got)
	}

	// A namespaced release gives the defaults in the namespaces it
	// watches only: its cluster-wide binding must not reach the others.
	manifest, err = renderChart(loadChart(t), "memcached-operator", "team-a", map[string]any{
		"watchNamespaces":  []any{"team-a", "team-b"},
		"crds":             map[string]any{"enabled": false},
		"platformDefaults": map[string]any{"enabled": true},
	})
	if err != nil {
		t.Fatalf("rendering the chart namespaced: %v", err)
	}
	objs = decode(t, "the namespaced chart", manifest)
	const namespacedName = "memcached-operator-team-a-defaults"
	binding, ok := objs["MutatingAdmissionPolicyBinding "+namespacedName]
	if !ok {
		t.Fatalf("no MutatingAdmissionPolicyBinding %s among %v", namespacedName, sortedIDs(objs))
	}
	want := []any{map[string]any{"key": "kubernetes.io/metadata.name", "operator": "In", "values": []any{"team-a", "team-b"}}}
	if got := dig(binding, "spec", "matchResources", "namespaceSelector")["matchExpressions"]; !reflect.DeepEqual(got, want) {
		t.Errorf("the namespaced release's binding selects namespaces by %v, want %v", got, want)
	}
}

// TestChartPodPolicy renders the pod policy in another namespace with
// values of every kind: the ConfigMap carries the lists as the policy
// reads them, an empty one as "", and the binding names the ConfigMap of
// the release's namespace and the actions given.
func TestChartPodPolicy(t *testing.T) {
	manifest, err := renderChart(loadChart(t), "cache", "ops", map[string]any{"podPolicy": map[string]any{
		"enabled":                  true,
		"allowedImagePrefixes":     []any{"registry.example.com"},
		"forbiddenTolerationKeys":  []any{},
		"forbiddenPriorityClasses": []any{"a", "b"},
		"validationActions":        []any{"Warn", "Audit"},
	}})
	if err != nil {
		t.Fatalf("rendering the chart: %v", err)
	}
	objs := decode(t, "the chart", manifest)
	binding := checkParameterizedPolicy(t, objs, "ValidatingAdmissionPolicy", "ops", "memcached-pod-policy", map[string]any{
		"allowedImagePrefixes":     "registry.example.com\n",
		"forbiddenTolerationKeys":  "",
		"forbiddenPriorityClasses": "a\nb\n",
	})
	if got, want := dig(binding, "spec")["validationActions"], []any{"Warn", "Audit"}; !reflect.DeepEqual(got, want) {
		t.Errorf("the binding's validationActions are %v, want %v", got, want)
	}
}

// checkParameterizedPolicy checks the three objects of an admission
// policy of kind that the chart renders with a ConfigMap of parameters,
// all named name: the ConfigMap in namespace ns holds wantData, the policy
// is there, and its binding's paramRef names that ConfigMap. It returns
// the binding.
func checkParameterizedPolicy(t *testing.T, objs map[string]object, kind, ns, name string, wantData map[string]any) object {
	t.Helper()
	cm, ok := objs["ConfigMap "+ns+"/"+name]
	if !ok {
		t.Fatalf("no ConfigMap %s/%s among %v", ns, name, sortedIDs(objs))
	}
	if !reflect.DeepEqual(map[string]any(cm["data"].(map[string]any)), wantData) {
		t.Errorf("the ConfigMap's data is %q, want %q", cm["data"], wantData)
	}
	if _, ok := objs[kind+" "+name]; !ok {
		t.Errorf("no %s %s among %v", kind, name, sortedIDs(objs))
	}
	binding, ok := objs[kind+"Binding "+name]
	if !ok {
		t.Fatalf("no %sBinding %s among %v", kind, name, sortedIDs(objs))
	}
	if ref := dig(binding, "spec", "paramRef"); ref["name"] != name || ref["namespace"] != ns {
		t.Errorf("the binding's paramRef names ConfigMap %v/%v, want %s/%s", ref["namespace"], ref["name"], ns, name)
	}
	return binding
}

// TestChartRefuses checks that values which cannot work fail the render
// with a message that says why, instead of installing an operator that
// misbehaves.
func TestChartRefuses(t *testing.T) {
	chrt := loadChart(t)
	for _, tc := range []struct {
		name   string
		values map[string]any
		// kubeVersion is the cluster's; empty means clusterVersion.
		kubeVersion string
		want        string
	}{
		{
			name:   "two replicas without leader election",
			values: map[string]any{"leaderElection": map[string]any{"enabled": false}},
			want:   "replicas above 1 need leaderElection.enabled",
		},
		{
			name:   "a NetworkPolicy that shuts out the apiserver",
			values: map[string]any{"networkPolicy": map[string]any{"enabled": true}},
			want:   "networkPolicy.enabled needs networkPolicy.apiserverCIDRs",
		},
		{
			name:   "no rollout at all",
			values: map[string]any{"maxConcurrentRollouts": 0},
			want:   "maxConcurrentRollouts",
		},
		{
			name:   "the pod policy with both Deny and Warn",
			values: map[string]any{"podPolicy": map[string]any{"enabled": true, "validationActions": []any{"Deny", "Warn"}}},
			want:   "/podPolicy/validationActions",
		},
		{
			name:   "the pod policy from a namespaced release",
			values: map[string]any{"watchNamespaces": []any{"team-a"}, "podPolicy": map[string]any{"enabled": true}},
			want:   "podPolicy judges Memcacheds in every namespace",
		},
		{
			name:        "the pod policy on a cluster without ValidatingAdmissionPolicy v1",
			kubeVersion: "v1.29.9",
			values:      map[string]any{"podPolicy": map[string]any{"enabled": true}},
			want:        "podPolicy needs ValidatingAdmissionPolicy v1",
		},
		{
			name:        "platform defaults on a cluster without MutatingAdmissionPolicy v1",
			kubeVersion: "v1.35.4",
			values:      map[string]any{"platformDefaults": map[string]any{"enabled": true}},
			want:        "platformDefaults needs MutatingAdmissionPolicy v1",
		},
		{
			name:   "a default the policy does not know enforced",
			values: map[string]any{"platformDefaults": map[string]any{"enabled": true, "enforced": []any{"replicas"}}},
			want:   "/platformDefaults/enforced/0",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kubeVersion := clusterVersion
			if tc.kubeVersion != "" {
				kubeVersion = tc.kubeVersion
			}
			_, err := renderChartFor(chrt, kubeVersion, "memcached-operator", "memcached-operator", tc.values)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("render error %v, want one that says %q", err, tc.want)
			}
		})
	}
}

func containerArgs(dep object) []string {
	containers, _ := dig(dep, "spec", "template", "spec")["containers"].([]any)
	if len(containers) == 0 {
		return nil
	}
	var args []string
	for _, a := range containers[0].(map[string]any)["args"].([]any) {
		args = append(args, fmt.Sprint(a))
	}
	return args
}

func sortedIDs(objs map[string]object) []string {
	ids := map[string]bool{}
	for id := range objs {
		ids[id] = true
	}
	return sortedKeys(ids)
}
