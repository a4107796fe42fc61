package intern

import (
	"reflect"
	"testing"
	"unsafe"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// deployment returns a Deployment as a decoder would: every string, map and
// list its own copy.
func deployment(name, uid, memory string) *appsv1.Deployment {
	labels := func() map[string]string {
		return map[string]string{"app.kubernetes.io/name": "memcached", "app.kubernetes.io/instance": name}
	}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: "ns", UID: types.UID(uid), ResourceVersion: uid + "1",
			Labels: labels(),
		},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels()},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels()},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name:  "memcached",
					Image: "memcached:1.6",
					Args:  []string{"-m", "64", "-p", "11211"},
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

	for _, unique := range []string{"uid-a", "uid-a1", "ReplicaSet a-abc has progressed"} {
		if _, ok := table.strs[unique]; ok {
			t.Errorf("%q is in the table; UIDs, resourceVersions and messages are unique and should be left alone", unique)
		}
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

// TestCapacity fills a small table past its capacity: values stay correct,
// and the table never holds more than its capacity of a kind.
func TestCapacity(t *testing.T) {
	table := New(4)
	for i := range 20 {
		d := deployment(string(rune('a'+i)), "uid", "64Mi")
		want := d.DeepCopy()
		table.Object(d)
		if !equality.Semantic.DeepEqual(d, want) {
			t.Fatalf("object %d changed its values", i)
		}
		if n := len(table.strs); n > 4 {
			t.Fatalf("string table holds %d, capacity 4", n)
		}
		if n := len(table.labels); n > 4 {
			t.Fatalf("label table holds %d, capacity 4", n)
		}
	}
}

func TestObjectIgnoresNonPointers(t *testing.T) {
	table := New(DefaultCapacity)
	var nilDeployment *appsv1.Deployment
	for _, obj := range []any{nil, nilDeployment, appsv1.Deployment{}} {
		table.Object(obj)
	}
}
