package intern

import (
	"encoding/binary"
	"maps"
	"reflect"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// DefaultCapacity bounds each table of a Table made by New. A Table that
// reaches it starts afresh (see Table), so the bound is on the table's own
// memory, not on what the cache holds.
const DefaultCapacity = 1 << 17

// Table shares equal values among the objects an informer caches. A
// decoded object holds its own copy of every string, label map, argument
// list and resource list, although across the children of many Memcacheds
// most of them are equal: label keys, the image, the flags, the requests.
// Object replaces each with the one copy the table holds.
//
// A table only ever grows by what the objects it saw contain. When one of
// its kinds reaches the capacity it is emptied rather than evicted entry by
// entry: values already shared stay shared in the objects that hold them,
// and only the next decodes of those values make a new copy. That bounds
// what labelled objects created to fill it can cost.
//
// Values handed out are shared by many cached objects. That is safe because
// nothing may change an object an informer has cached (callers DeepCopy
// first, as the client-go contract requires); it makes that contract
// stricter, not different.
type Table struct {
	capacity int

	mu        sync.Mutex
	strs      map[string]string
	labels    map[string]map[string]string
	lists     map[string][]string
	resources map[string]corev1.ResourceList
}

// New returns an empty Table whose kinds each hold at most capacity values.
func New(capacity int) *Table {
	return &Table{capacity: capacity}
}

var (
	uidType           = reflect.TypeFor[types.UID]()
	stringMapType     = reflect.TypeFor[map[string]string]()
	stringSliceType   = reflect.TypeFor[[]string]()
	resourceListType  = reflect.TypeFor[corev1.ResourceList]()
	uniqueStringNames = map[string]bool{
		// Unique per object or per write: sharing them saves nothing and
		// would fill the table.
		"ResourceVersion": true,
		"ClusterIP":       true,
		"ClusterIPs":      true,
		"Message":         true,
	}
)

// Object shares the strings, string maps, string lists and resource lists
// of obj, a pointer to a typed API object, with the other objects the
// table has seen. It changes obj in place and must only be called on an
// object no one else holds yet, such as in an informer transform.
func (t *Table) Object(obj any) {
	v := reflect.ValueOf(obj)
	if v.Kind() != reflect.Pointer || v.IsNil() {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.value(v.Elem())
}

// value walks v, which is settable.
func (t *Table) value(v reflect.Value) {
	switch v.Type() {
	case uidType:
		return
	case stringMapType:
		if !v.IsNil() {
			v.Set(reflect.ValueOf(t.stringMap(v.Interface().(map[string]string))))
		}
		return
	case stringSliceType:
		if !v.IsNil() {
			v.Set(reflect.ValueOf(t.stringList(v.Interface().([]string))))
		}
		return
	case resourceListType:
		if !v.IsNil() {
			v.Set(reflect.ValueOf(t.resourceList(v.Interface().(corev1.ResourceList))))
		}
		return
	}
	switch v.Kind() {
	case reflect.String:
		if s := v.String(); s != "" {
			v.SetString(t.str(s))
		}
	case reflect.Pointer:
		if !v.IsNil() {
			t.value(v.Elem())
		}
	case reflect.Slice:
		for i := range v.Len() {
			t.value(v.Index(i))
		}
	case reflect.Struct:
		typ := v.Type()
		for i := range v.NumField() {
			f := v.Field(i)
			if !f.CanSet() || uniqueStringNames[typ.Field(i).Name] {
				continue
			}
			t.value(f)
		}
	}
}

func (t *Table) str(s string) string {
	if shared, ok := t.strs[s]; ok {
		return shared
	}
	if t.strs == nil || len(t.strs) >= t.capacity {
		t.strs = make(map[string]string)
	}
	t.strs[s] = s
	return s
}

// stringMap returns the table's map equal to m, whose keys and values are
// the table's strings.
func (t *Table) stringMap(m map[string]string) map[string]string {
	var id key
	for _, k := range slices.Sorted(maps.Keys(m)) {
		id.add(k)
		id.add(m[k])
	}
	if shared, ok := t.labels[string(id)]; ok {
		return shared
	}
	shared := make(map[string]string, len(m))
	for k, v := range m {
		shared[t.str(k)] = t.str(v)
	}
	if t.labels == nil || len(t.labels) >= t.capacity {
		t.labels = make(map[string]map[string]string)
	}
	t.labels[string(id)] = shared
	return shared
}

// stringList returns the table's list equal to l.
func (t *Table) stringList(l []string) []string {
	var id key
	for _, s := range l {
		id.add(s)
	}
	if shared, ok := t.lists[string(id)]; ok {
		return shared
	}
	shared := make([]string, len(l))
	for i, s := range l {
		shared[i] = t.str(s)
	}
	if t.lists == nil || len(t.lists) >= t.capacity {
		t.lists = make(map[string][]string)
	}
	t.lists[string(id)] = shared
	return shared
}

// resourceList returns the table's resource list equal to l. Quantities
// are compared by their canonical form, which is what the drift check
// compares too.
func (t *Table) resourceList(l corev1.ResourceList) corev1.ResourceList {
	var id key
	for _, name := range slices.Sorted(maps.Keys(l)) {
		q := l[name]
		id.add(string(name))
		id.add(q.String())
	}
	if shared, ok := t.resources[string(id)]; ok {
		return shared
	}
	shared := make(corev1.ResourceList, len(l))
	for name, q := range l {
		shared[corev1.ResourceName(t.str(string(name)))] = q
	}
	if t.resources == nil || len(t.resources) >= t.capacity {
		t.resources = make(map[string]corev1.ResourceList)
	}
	t.resources[string(id)] = shared
	return shared
}

// key identifies a sequence of strings: each is written after its length,
// so no two different sequences share a key, whatever bytes they hold.
type key []byte

func (k *key) add(s string) {
	*k = binary.AppendUvarint(*k, uint64(len(s)))
	*k = append(*k, s...)
}
