//go:build integration

package api

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/yaml"

	cachev1alpha1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1alpha1"
	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
	"github.com/kubelite/memcached-operator/pkg/resources"
	"github.com/kubelite/memcached-operator/test/integration/framework"
)

// crdRuleCasesPath holds, relative to the repository's root, a case for
// each CEL rule of the CRD's v1beta1 schema;
// TestValidateRefusesWhatTheCRDRefuses (pkg/resources) requires one per
// rule, and its header says what a case is.
const crdRuleCasesPath = "pkg/resources/testdata/crd-rule-cases.yaml"

// crdRuleCase mirrors the case of pkg/resources/validation_test.go, which
// this package cannot import: the fields this test reads.
type crdRuleCase struct {
	Name string `json:"name"`
	Rule struct {
		Path    string `json:"path"`
		Message string `json:"message"`
	} `json:"rule"`
	MetadataName string          `json:"metadataName,omitempty"`
	Spec         json.RawMessage `json:"spec"`
	Field        string          `json:"field"`
	Detail       string          `json:"detail,omitempty"`
	AlsoViolates []string        `json:"alsoViolates,omitempty"`
}

// name is the Memcached's name.
func (c crdRuleCase) name() string {
	if c.MetadataName != "" {
		return c.MetadataName
	}
	return "cel-case"
}

// details are what the apiserver's refusal must say, one for each rule
// the case breaks.
func (c crdRuleCase) details() []string {
	first := c.Detail
	if first == "" {
		first = c.Rule.Message
	}
	out := []string{first}
	for _, other := range c.AlsoViolates {
		_, msg, _ := strings.Cut(other, ": ")
		out = append(out, msg)
	}
	return out
}

// readCRDRuleCases mirrors readCRDRuleCases of pkg/resources: the cases,
// with each "${repeat N S}" written out.
func readCRDRuleCases(t *testing.T) []crdRuleCase {
	t.Helper()
	data, err := os.ReadFile(framework.Path(crdRuleCasesPath))
	if err != nil {
		t.Fatal(err)
	}
	var cases []crdRuleCase
	if err := yaml.Unmarshal(data, &cases); err != nil {
		t.Fatalf("reading %s: %v", crdRuleCasesPath, err)
	}
	repeat := regexp.MustCompile(`^\$\{repeat (\d+) (.+)\}$`)
	expand := func(s string) string {
		m := repeat.FindStringSubmatch(s)
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
	for i := range cases {
		var spec any
		if err := json.Unmarshal(cases[i].Spec, &spec); err != nil {
			t.Fatalf("case %q: %v", cases[i].Name, err)
		}
		if cases[i].Spec, err = json.Marshal(walk(spec)); err != nil {
			t.Fatal(err)
		}
	}
	return cases
}

// refusedAt reports whether Validate refuses mc with an error naming
// field.
func refusedAt(mc *cachev1beta1.Memcached, field string) (bool, string) {
	errs := resources.Validate(resources.Default(mc))
	for _, e := range errs {
		if e.Field == field {
			return true, ""
		}
	}
	return false, fmt.Sprintf("Validate = %v, want an error naming %s", errs.ToAggregate(), field)
}

// TestIntegrationV1alpha1SmugglingRuleCases shows the real apiserver each
// case of crdRuleCasesPath, one for each CEL rule of the CRD's v1beta1
// schema:
//   - written through v1beta1, the apiserver refuses it, with the case's
//     rule and no other (the case's alsoViolates aside): this proves that
//     the case breaks its rule, which the unit test can only assume;
//   - Validate refuses it too;
//   - written through v1alpha1, with the v1beta1 spec in the
//     cache.kubelite.io/v1beta1-spec annotation as a v1alpha1 client round
//     trips it, either the apiserver refuses it, or Validate refuses the
//     v1beta1 object it would store: no rule can be passed by writing
//     through the other version.
//
// Every write is a dry run: nothing is stored.
func TestIntegrationV1alpha1SmugglingRuleCases(t *testing.T) {
	t.Parallel()
	ns := framework.NewNamespace(t)
	ctx := context.Background()
	cases := readCRDRuleCases(t)
	if len(cases) == 0 {
		t.Fatalf("no cases in %s", crdRuleCasesPath)
	}
	dryRun := []string{metav1.DryRunAll}
	var smuggled []string
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			body := fmt.Sprintf(`{"apiVersion":"cache.kubelite.io/v1beta1","kind":"Memcached","metadata":{"name":%q},"spec":%s}`, c.name(), c.Spec)
			err := framework.Memcacheds().CacheV1beta1().RESTClient().Post().Namespace(ns).Resource("memcacheds").Param("dryRun", metav1.DryRunAll).
				SetHeader("Content-Type", "application/json").Body([]byte(body)).Do(ctx).Error()
			if !apierrors.IsInvalid(err) {
				t.Fatalf("v1beta1 write: %v, want Invalid", err)
			}
			var causes []string
			if status, ok := err.(apierrors.APIStatus); ok && status.Status().Details != nil {
				for _, cause := range status.Status().Details.Causes {
					causes = append(causes, cause.Message)
				}
			}
			want := c.details()
			if len(causes) != len(want) {
				t.Errorf("the apiserver refuses the v1beta1 write for %d causes, want %d (its rule %q and alsoViolates %q): %v",
					len(causes), len(want), c.Rule.Message, c.AlsoViolates, err)
			}
			for _, detail := range want {
				if !strings.Contains(err.Error(), detail) {
					t.Errorf("the apiserver's refusal does not say %q: %v", detail, err)
				}
			}

			beta := &cachev1beta1.Memcached{ObjectMeta: metav1.ObjectMeta{Name: c.name(), Namespace: ns}}
			if err := json.Unmarshal(c.Spec, &beta.Spec); err != nil {
				t.Fatal(err)
			}
			if ok, why := refusedAt(beta, c.Field); !ok {
				t.Errorf("v1beta1 object: %s", why)
			}

			alpha := &cachev1alpha1.Memcached{}
			if err := alpha.ConvertFrom(beta); err != nil {
				t.Fatal(err)
			}
			admitted, err := framework.Memcacheds().CacheV1alpha1().Memcacheds(ns).Create(ctx, alpha, metav1.CreateOptions{DryRun: dryRun})
			if err != nil {
				// The v1alpha1 schema, or the conversion, refused it.
				t.Logf("v1alpha1 write refused: %v", err)
				return
			}
			smuggled = append(smuggled, c.Name)
			stored := &cachev1beta1.Memcached{}
			if err := admitted.ConvertTo(stored); err != nil {
				t.Fatal(err)
			}
			if ok, why := refusedAt(stored, c.Field); !ok {
				t.Errorf("the v1alpha1 write is admitted, and the operator would render what it stores: %s", why)
			}
		})
	}
	t.Logf("%d of %d cases pass a v1alpha1 write (the subtests require Validate to refuse each): %v", len(smuggled), len(cases), smuggled)
}

// smuggledSpecs are v1beta1 specs that a v1alpha1 write carries in its
// cache.kubelite.io/v1beta1-spec annotation, past every v1beta1 rule, each
// of which renders a memcached that does something else than the spec
// says: memory capped at 10 MiB in a container sized for 64, client
// certificates asked for and not checked, UDP on, a plaintext listener
// beside TLS, and two pools of one name. field is what InvalidSpec's
// message names.
var smuggledSpecs = []struct{ name, annotation, field string }{
	{"-m", `{"replicas":1,"extraArgs":["-m","10"]}`, "spec.extraArgs"},
	{"client CA with ssl_verify_mode=0", `{"replicas":1,"tls":{"secretName":"cache-tls","clientCA":{"configMapName":"clients-ca"}},"extraArgs":["-o","ssl_verify_mode=0"]}`, "spec.extraArgs"},
	{"-U", `{"replicas":1,"extraArgs":["-U","11211"]}`, "spec.extraArgs"},
	{"-l notls", `{"replicas":1,"tls":{"secretName":"cache-tls"},"extraArgs":["-l","notls:0.0.0.0:11299"]}`, "spec.extraArgs"},
	{"a zone twice", `{"replicas":1,"zones":["zone-a","zone-a"]}`, "spec.zones"},
}

// TestIntegrationV1alpha1Smuggling writes the smuggledSpecs through
// v1alpha1 with the operator running, as a new Memcached and as an update
// of a running one. Either the apiserver refuses the write, or the
// Memcached shows InvalidSpec once the operator has synced the
// generation, and the operator renders nothing of it: no Deployment for a
// new Memcached, and the running one's Deployment as it was, generation
// and Pod template.
func TestIntegrationV1alpha1Smuggling(t *testing.T) {
	t.Parallel()
	ns := framework.NewNamespace(t)
	ctx := context.Background()
	framework.StartOperator(t, ns)
	// The Secret and the bundle TLS and the client CA name, so that
	// nothing but the smuggled arguments holds the Deployment.
	framework.CreateTLSSecret(t, ns, "cache-tls", "v1")
	if _, err := framework.Kube().CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "clients-ca"},
		Data:       map[string]string{cachev1beta1.ClientCAKey: "a CA bundle"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	alphas := framework.Memcacheds().CacheV1alpha1().Memcacheds(ns)

	t.Run("new Memcached", func(t *testing.T) {
		for i, s := range smuggledSpecs {
			t.Run(s.name, func(t *testing.T) {
				name := fmt.Sprintf("new-%d", i)
				created, err := alphas.Create(ctx, &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{
					Name: name, Annotations: map[string]string{cachev1alpha1.V1beta1SpecAnnotation: s.annotation},
				}}, metav1.CreateOptions{})
				if err != nil {
					t.Logf("the v1alpha1 write is refused: %v", err)
					return
				}
				mc := waitSynced(t, ns, name, created.Generation)
				checkInvalidSpec(t, mc, s.field)
				if _, err := framework.GetDeployment(ctx, ns, name); !apierrors.IsNotFound(err) {
					t.Errorf("Deployment of a Memcached with an invalid spec: %v, want NotFound", err)
				}
			})
		}
	})

	t.Run("running Memcached", func(t *testing.T) {
		const name = "running"
		if _, err := alphas.Create(ctx, &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{
			Name: name, Annotations: map[string]string{
				cachev1alpha1.V1beta1SpecAnnotation: `{"replicas":1,"tls":{"secretName":"cache-tls","clientCA":{"configMapName":"clients-ca"}}}`,
			},
		}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		framework.WaitConverged(t, ns, name, metav1.ConditionTrue)
		before, err := framework.GetDeployment(ctx, ns, name)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range smuggledSpecs {
			t.Run(s.name, func(t *testing.T) {
				var generation int64
				err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
					alpha, err := alphas.Get(ctx, name, metav1.GetOptions{})
					if err != nil {
						return err
					}
					alpha.Annotations[cachev1alpha1.V1beta1SpecAnnotation] = s.annotation
					updated, err := alphas.Update(ctx, alpha, metav1.UpdateOptions{})
					if err == nil {
						generation = updated.Generation
					}
					return err
				})
				switch {
				case apierrors.IsConflict(err):
					t.Fatal(err)
				case err != nil:
					t.Logf("the v1alpha1 write is refused: %v", err)
				default:
					checkInvalidSpec(t, waitSynced(t, ns, name, generation), s.field)
				}
				after, err := framework.GetDeployment(ctx, ns, name)
				if err != nil {
					t.Fatal(err)
				}
				checkDeploymentKept(t, before, after)
			})
		}
	})
}

// waitSynced waits until the operator has written the status of the
// Memcached's generation, and returns it as v1beta1.
func waitSynced(t *testing.T, ns, name string, generation int64) *cachev1beta1.Memcached {
	t.Helper()
	var mc *cachev1beta1.Memcached
	framework.Eventually(t, framework.WaitLong, fmt.Sprintf("the status of generation %d", generation), func(ctx context.Context) (bool, string) {
		var err error
		if mc, err = framework.GetMemcached(ctx, ns, name); err != nil {
			return false, err.Error()
		}
		return mc.Status.ObservedGeneration >= generation, fmt.Sprintf("observed generation %d", mc.Status.ObservedGeneration)
	})
	return mc
}

// checkInvalidSpec checks that the Memcached shows InvalidSpec, naming
// field.
func checkInvalidSpec(t *testing.T, mc *cachev1beta1.Memcached, field string) {
	t.Helper()
	d, p := framework.Condition(mc, cachev1beta1.ConditionDegraded), framework.Condition(mc, cachev1beta1.ConditionProgressing)
	if d.Status != metav1.ConditionTrue || d.Reason != cachev1beta1.ReasonInvalidSpec || !strings.Contains(d.Message, field) ||
		p.Status != metav1.ConditionFalse || p.Reason != cachev1beta1.ReasonInvalidSpec {
		t.Errorf("Degraded %+v, Progressing %+v; want both InvalidSpec, naming %s", d, p, field)
	}
}

// checkDeploymentKept checks that the operator left the Deployment as it
// was: no new generation, the same Pod template.
func checkDeploymentKept(t *testing.T, before, after *appsv1.Deployment) {
	t.Helper()
	if after.Generation != before.Generation || !equality.Semantic.DeepEqual(after.Spec.Template, before.Spec.Template) {
		t.Errorf("the Deployment changed: generation %d, memcached args %v; before generation %d, args %v",
			after.Generation, after.Spec.Template.Spec.Containers[0].Args, before.Generation, before.Spec.Template.Spec.Containers[0].Args)
	}
}
