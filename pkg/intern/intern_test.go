package intern

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"unique"
	"unsafe"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// fresh returns a copy of s in memory of its own, as a decoder returns it;
// string literals are stored once by the compiler and would look shared.
func fresh(s string) string { return strings.Clone(s) }

// deployment returns a Deployment as a decoder would: every string, map and
// list its own copy.
func deployment(name, uid, memory string) *appsv1.Deployment {
	labels := func() map[string]string {
		return map[string]string{fresh("app.kubernetes.io/name"): fresh("memcached"), fresh("app.kubernetes.io/instance"): fresh(name)}
	}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{
			Name: fresh(name), Namespace: fresh("ns"), UID: types.UID(fresh(uid)), ResourceVersion: uid + "1",
			Labels: labels(),
		},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels()},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels()},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name:  fresh("memcached"),
					Image: fresh("memcached:1.6"),
					Args:  []string{fresh("-m"), fresh("64"), fresh("-p"), fresh("11211")},
					Resources: corev1.ResourceRequirements{
						Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(memory)},
					},
				}}},
			},
		},
		Status: appsv1.DeploymentStatus{Conditions: []appsv1.DeploymentCondition{{
			Type: appsv1.DeploymentProgressing, Message: "ReplicaSet " + name + "-abc has progressed",
		}}},
	}
}

func sameString(a, b string) bool { return unsafe.StringData(a) == unsafe.StringData(b) }

func sameMap(a, b any) bool {
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

func TestObject(t *testing.T) {
	table := New(DefaultCapacity)
	a, b := deployment("a", "uid-a", "64Mi"), deployment("b", "uid-b", "64Mi")
	c := deployment("c", "uid-c", "128Mi")
	wantA, wantB, wantC := a.DeepCopy(), b.DeepCopy(), c.DeepCopy()
	for _, d := range []*appsv1.Deployment{a, b, c} {
		table.Object(d)
	}

	for name, pair := range map[string][2]*appsv1.Deployment{"a": {a, wantA}, "b": {b, wantB}, "c": {c, wantC}} {
		if !equality.Semantic.DeepEqual(pair[0], pair[1]) {
			t.Errorf("Deployment %s changed its values: %+v, want %+v", name, pair[0], pair[1])
		}
	}

	ca, cb := a.Spec.Template.Spec.Containers[0], b.Spec.Template.Spec.Containers[0]
	shared := []struct {
		name string
		same bool
	}{
		{"namespace", sameString(a.Namespace, b.Namespace)},
		{"image", sameString(ca.Image, cb.Image)},
		{"container name", sameString(ca.Name, cb.Name)},
		{"argument lists", sameMap(ca.Args, cb.Args)},
		{"equal resource lists", sameMap(ca.Resources.Requests, cb.Resources.Requests)},
		{"one object's equal label maps", sameMap(a.Labels, a.Spec.Selector.MatchLabels) && sameMap(a.Labels, a.Spec.Template.Labels)},
		{"label keys across objects", sameString(slicesKey(a.Labels, "app.kubernetes.io/name"), slicesKey(b.Labels, "app.kubernetes.io/name"))},
	}
	for _, s := range shared {
		if !s.same {
			t.Errorf("%s: not shared", s.name)
		}
	}

	distinct := []struct {
		name string
		same bool
	}{
		{"different label maps", sameMap(a.Labels, b.Labels)},
		{"different resource lists", sameMap(ca.Resources.Requests, c.Spec.Template.Spec.Containers[0].Resources.Requests)},
	}
	for _, d := range distinct {
		if d.same {
			t.Errorf("%s: shared", d.name)
		}
	}

	// Unique values stay the object's own.
	if sameString(string(a.UID), unique.Make(string(a.UID)).Value()) {
		t.Errorf("the UID was interned")
	}
	if sameString(a.ResourceVersion, unique.Make(a.ResourceVersion).Value()) {
		t.Errorf("the resourceVersion was interned")
	}
}

func TestLongValuesStayTheirOwn(t *testing.T) {
	table := New(DefaultCapacity)
	long := strings.Repeat("x", maxStringBytes+1)
	a := &corev1.Container{Image: fresh(long), Args: []string{fresh(strings.Repeat("y", maxListBytes))}}
	b := &corev1.Container{Image: fresh(long), Args: []string{fresh(strings.Repeat("y", maxListBytes))}}
	table.Object(a)
	table.Object(b)
	if sameString(a.Image, b.Image) {
		t.Errorf("a string of %d bytes was shared", len(long))
	}
	if sameMap(a.Args, b.Args) {
		t.Errorf("a list of %d bytes was shared", maxListBytes)
	}
	if a.Image != long || b.Args[0] != strings.Repeat("y", maxListBytes) {
		t.Errorf("long values changed")
	}
}

// slicesKey returns the key of m equal to k, the string m holds.
func slicesKey(m map[string]string, k string) string {
	for key := range m {
		if key == k {
			return key
		}
	}
	return ""
}

func TestListsDoNotCollide(t *testing.T) {
	table := New(DefaultCapacity)
	one := &corev1.Container{Args: []string{"a\x00b"}}
	two := &corev1.Container{Args: []string{"a", "b"}}
	table.Object(one)
	table.Object(two)
	if len(one.Args) != 1 || len(two.Args) != 2 {
		t.Errorf("args after interning = %q and %q, want one and two elements", one.Args, two.Args)
	}
}

// TestGenerations fills a table of capacity 2 with argument lists: a list
// used in every generation stays shared, one not seen for a whole
// generation is forgotten, and no generation holds more than the capacity.
func TestGenerations(t *testing.T) {
	table := New(2)
	containers := func(args ...string) *corev1.Container {
		c := &corev1.Container{Args: []string{fresh(args[0])}}
		table.Object(c)
		return c
	}
	keep := containers("keep")
	for i := range 10 {
		other := fmt.Sprint(i)
		if got := containers(other); got.Args[0] != other {
			t.Fatalf("args = %q, want [%s]", got.Args, other)
		}
		if again := containers("keep"); !sameMap(again.Args, keep.Args) {
			t.Fatalf("a list used in every generation is no longer shared after %d others", i+1)
		}
		if n := len(table.lists); n > 2 {
			t.Fatalf("a generation holds %d lists, capacity 2", n)
		}
	}
	forgotten := containers("0")
	containers("a")
	containers("b")
	containers("c")
	containers("d")
	if again := containers("0"); sameMap(again.Args, forgotten.Args) {
		t.Errorf("a list not seen for two generations is still in the table")
	}
}

func TestObjectIgnoresNonPointers(t *testing.T) {
	table := New(DefaultCapacity)
	var nilDeployment *appsv1.Deployment
	for _, obj := range []any{nil, nilDeployment, appsv1.Deployment{}} {
		table.Object(obj)
	}
}
