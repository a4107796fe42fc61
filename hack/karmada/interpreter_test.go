package karmada

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	configv1alpha1 "github.com/karmada-io/karmada/pkg/apis/config/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	"github.com/karmada-io/karmada/pkg/resourceinterpreter/customized/declarative"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"
)

// root is the repository, from this module's directory.
const root = "../.."

var (
	customizationFile = filepath.Join(root, "artifacts", "karmada", "resource_interpreter.yaml")
	testdataDir       = filepath.Join(root, "artifacts", "karmada", "testdata")
)

// memcachedGVK is what the customization targets.
var memcachedGVK = schema.GroupVersionKind{Group: "cache.kubelite.io", Version: "v1beta1", Kind: "Memcached"}

// operations are the six rules the customization has, one per operation
// Karmada calls.
var operations = []configv1alpha1.InterpreterOperation{
	configv1alpha1.InterpreterOperationInterpretReplica,
	configv1alpha1.InterpreterOperationReviseReplica,
	configv1alpha1.InterpreterOperationInterpretStatus,
	configv1alpha1.InterpreterOperationAggregateStatus,
	configv1alpha1.InterpreterOperationInterpretHealth,
	configv1alpha1.InterpreterOperationInterpretDependency,
}

// fixture is one file of artifacts/karmada/testdata: a Memcached, the
// Memcacheds of its member clusters if the cases need them, and cases that
// run one operation each. Adding a case, or a file, needs no Go:
//
//	object:     the Memcached the cases read, as on the Karmada control
//	            plane (a template)
//	members:    optional; the Memcached as each member cluster runs it,
//	            by cluster name
//	cases:
//	- name:       what the case shows, the subtest's name
//	  operation:  InterpretReplica, ReviseReplica, InterpretStatus,
//	              AggregateStatus, InterpretHealth or InterpretDependency
//	  object:     optional; replaces the file's object for this case
//	  member:     InterpretStatus, InterpretHealth: the member whose object
//	              is read, instead of the object
//	  members:    AggregateStatus: the members whose statuses are
//	              aggregated, each reflected with ReflectStatus first, as
//	              Karmada does
//	  unreported: AggregateStatus: cluster names whose status Karmada has
//	              not collected yet (a status item without a status)
//	  desiredReplicas: ReviseReplica: the member's share
//	  want:
//	    replicas:     InterpretReplica: the replicas; ReviseReplica: the
//	                  revised spec.replicas, the object otherwise unchanged
//	    requirements: InterpretReplica: the requirements of each replica
//	                  (pkg/resources/karmada_test.go checks them against
//	                  what the operator renders)
//	    status:       InterpretStatus: the reflected status;
//	                  AggregateStatus: the template's status, the object
//	                  otherwise unchanged
//	    healthy:      InterpretHealth
//	    dependencies: InterpretDependency, in the order Karmada sorts them
type fixture struct {
	Object  map[string]any            `json:"object"`
	Members map[string]map[string]any `json:"members,omitempty"`
	Cases   []interpreterCase         `json:"cases"`
}

// interpreterCase is one case of a fixture.
type interpreterCase struct {
	Name            string                              `json:"name"`
	Operation       configv1alpha1.InterpreterOperation `json:"operation"`
	Object          map[string]any                      `json:"object,omitempty"`
	Member          string                              `json:"member,omitempty"`
	Members         []string                            `json:"members,omitempty"`
	Unreported      []string                            `json:"unreported,omitempty"`
	DesiredReplicas int64                               `json:"desiredReplicas,omitempty"`
	Want            expectation                         `json:"want"`
}

// expectation is what a case expects; each operation reads its own fields.
type expectation struct {
	Replicas     *int32                                    `json:"replicas,omitempty"`
	Requirements *workv1alpha2.ReplicaRequirements         `json:"requirements,omitempty"`
	Status       map[string]any                            `json:"status,omitempty"`
	Healthy      *bool                                     `json:"healthy,omitempty"`
	Dependencies []configv1alpha1.DependentObjectReference `json:"dependencies,omitempty"`
}

// quantities compares resource quantities by value: 1252Mi and 1312817152
// are the same request.
var quantities = cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })

// TestInterpreter runs every case of artifacts/karmada/testdata through
// Karmada's configurable interpreter loaded with the customization, the
// way karmadactl interpret does, and so through the same Lua VM and kube
// library as the Karmada controllers.
func TestInterpreter(t *testing.T) {
	interpreter := loadInterpreter(t)

	for _, op := range operations {
		if !interpreter.HookEnabled(memcachedGVK, op) {
			t.Errorf("HookEnabled(%s) = false: the customization has no rule for it", op)
		}
	}

	paths, err := filepath.Glob(filepath.Join(testdataDir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) == 0 {
		t.Fatalf("no fixtures in %s", testdataDir)
	}
	covered := map[configv1alpha1.InterpreterOperation]int{}
	for _, path := range paths {
		f := readFixture(t, path)
		t.Run(strings.TrimSuffix(filepath.Base(path), ".yaml"), func(t *testing.T) {
			for _, c := range f.Cases {
				covered[c.Operation]++
				t.Run(c.Name, func(t *testing.T) {
					runCase(t, interpreter, f, c)
				})
			}
		})
	}
	for _, op := range operations {
		if covered[op] == 0 {
			t.Errorf("no case runs %s", op)
		}
	}
}

// loadInterpreter decodes the customization strictly, so that a misspelt
// field fails here rather than being dropped by the API server, and loads
// it into an interpreter of its own.
func loadInterpreter(t *testing.T) *declarative.ConfigurableInterpreter {
	t.Helper()
	data, err := os.ReadFile(customizationFile)
	if err != nil {
		t.Fatal(err)
	}
	var customization configv1alpha1.ResourceInterpreterCustomization
	if err := yaml.UnmarshalStrict(data, &customization); err != nil {
		t.Fatalf("decoding %s: %v", customizationFile, err)
	}
	target := schema.FromAPIVersionAndKind(customization.Spec.Target.APIVersion, customization.Spec.Target.Kind)
	if target != memcachedGVK {
		t.Fatalf("%s targets %s, want %s", customizationFile, target, memcachedGVK)
	}
	interpreter := declarative.NewConfigurableInterpreter(nil)
	interpreter.LoadConfig([]*configv1alpha1.ResourceInterpreterCustomization{&customization})
	return interpreter
}

// readFixture decodes a fixture strictly: a misspelt key of a case or of
// its want would otherwise leave it checking nothing.
func readFixture(t *testing.T, path string) fixture {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var f fixture
	if err := yaml.UnmarshalStrict(data, &f); err != nil {
		t.Fatalf("decoding %s: %v", path, err)
	}
	if len(f.Cases) == 0 {
		t.Fatalf("%s has no cases", path)
	}
	return f
}

// runCase runs one case's operation and compares what it gives with the
// case's want. A want that the operation needs and the case lacks fails
// the case, so that none passes by checking nothing.
func runCase(t *testing.T, interpreter *declarative.ConfigurableInterpreter, f fixture, c interpreterCase) {
	t.Helper()
	obj := f.Object
	if c.Object != nil {
		obj = c.Object
	}

	switch c.Operation {
	case configv1alpha1.InterpreterOperationInterpretReplica:
		if c.Want.Replicas == nil || c.Want.Requirements == nil {
			t.Fatal("want.replicas and want.requirements are required")
		}
		replicas, requirements, enabled, err := interpreter.GetReplicas(toUnstructured(t, obj))
		mustRun(t, enabled, err)
		if replicas != *c.Want.Replicas {
			t.Errorf("replicas = %d, want %d", replicas, *c.Want.Replicas)
		}
		if diff := cmp.Diff(c.Want.Requirements, requirements, quantities); diff != "" {
			t.Errorf("requirements (-want +got):\n%s", diff)
		}

	case configv1alpha1.InterpreterOperationReviseReplica:
		if c.Want.Replicas == nil {
			t.Fatal("want.replicas is required")
		}
		revised, enabled, err := interpreter.ReviseReplica(toUnstructured(t, obj), c.DesiredReplicas)
		mustRun(t, enabled, err)
		want := normalize(t, obj)
		want["spec"].(map[string]any)["replicas"] = float64(*c.Want.Replicas)
		if diff := cmp.Diff(want, normalize(t, revised.Object)); diff != "" {
			t.Errorf("revised object (-want +got):\n%s", diff)
		}

	case configv1alpha1.InterpreterOperationInterpretStatus:
		if c.Want.Status == nil {
			t.Fatal("want.status is required")
		}
		raw, enabled, err := interpreter.ReflectStatus(toUnstructured(t, memberOr(t, f, c.Member, obj)))
		mustRun(t, enabled, err)
		var got map[string]any
		if err := json.Unmarshal(raw.Raw, &got); err != nil {
			t.Fatalf("decoding the reflected status %s: %v", raw.Raw, err)
		}
		if diff := cmp.Diff(normalize(t, c.Want.Status), got); diff != "" {
			t.Errorf("reflected status (-want +got):\n%s", diff)
		}

	case configv1alpha1.InterpreterOperationAggregateStatus:
		if c.Want.Status == nil {
			t.Fatal("want.status is required")
		}
		items := statusItems(t, interpreter, f, c)
		aggregated, enabled, err := interpreter.AggregateStatus(toUnstructured(t, obj), items)
		mustRun(t, enabled, err)
		got := normalize(t, aggregated.Object)
		if diff := cmp.Diff(normalize(t, c.Want.Status), got["status"]); diff != "" {
			t.Errorf("aggregated status (-want +got):\n%s", diff)
		}
		want := normalize(t, obj)
		delete(want, "status")
		delete(got, "status")
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("AggregateStatus changed more than the status (-want +got):\n%s", diff)
		}

	case configv1alpha1.InterpreterOperationInterpretHealth:
		if c.Want.Healthy == nil {
			t.Fatal("want.healthy is required")
		}
		healthy, enabled, err := interpreter.InterpretHealth(toUnstructured(t, memberOr(t, f, c.Member, obj)))
		mustRun(t, enabled, err)
		if healthy != *c.Want.Healthy {
			t.Errorf("healthy = %t, want %t", healthy, *c.Want.Healthy)
		}

	case configv1alpha1.InterpreterOperationInterpretDependency:
		if c.Want.Dependencies == nil {
			t.Fatal("want.dependencies is required ([] for none)")
		}
		deps, enabled, err := interpreter.GetDependencies(toUnstructured(t, obj))
		mustRun(t, enabled, err)
		if diff := cmp.Diff(c.Want.Dependencies, deps, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("dependencies (-want +got):\n%s", diff)
		}

	default:
		t.Fatalf("unknown operation %q", c.Operation)
	}
}

// mustRun fails the case when the interpreter did not run the rule or the
// rule failed.
func mustRun(t *testing.T, enabled bool, err error) {
	t.Helper()
	if !enabled {
		t.Fatal("the interpreter has no rule for this operation")
	}
	if err != nil {
		t.Fatalf("running the rule: %v", err)
	}
}

// memberOr is the named member's object, or obj when name is empty.
func memberOr(t *testing.T, f fixture, name string, obj map[string]any) map[string]any {
	t.Helper()
	if name == "" {
		return obj
	}
	m, ok := f.Members[name]
	if !ok {
		t.Fatalf("no member %q in the fixture", name)
	}
	return m
}

// statusItems are the status items Karmada would hand AggregateStatus: one
// per member, with the status ReflectStatus gives for its object, then one
// without a status for each cluster not yet reported.
func statusItems(t *testing.T, interpreter *declarative.ConfigurableInterpreter, f fixture, c interpreterCase) []workv1alpha2.AggregatedStatusItem {
	t.Helper()
	var items []workv1alpha2.AggregatedStatusItem
	for _, name := range c.Members {
		raw, enabled, err := interpreter.ReflectStatus(toUnstructured(t, memberOr(t, f, name, nil)))
		mustRun(t, enabled, err)
		items = append(items, workv1alpha2.AggregatedStatusItem{ClusterName: name, Status: raw, Applied: true})
	}
	for _, name := range c.Unreported {
		items = append(items, workv1alpha2.AggregatedStatusItem{ClusterName: name})
	}
	return items
}

// toUnstructured makes obj an Unstructured as a client decodes one, with
// integers as int64, which is what the interpreter is handed in Karmada.
func toUnstructured(t *testing.T, obj map[string]any) *unstructured.Unstructured {
	t.Helper()
	data, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(data); err != nil {
		t.Fatalf("decoding %s: %v", data, err)
	}
	return u
}

// normalize returns v as JSON decodes it, every number a float64, so that
// values decoded from the fixtures and those the interpreter returns
// compare alike.
func normalize(t *testing.T, v any) map[string]any {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	return out
}
