package intern

import (
	"encoding/binary"
	"maps"
	"reflect"
	"slices"
	"sync"
	"unique"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// DefaultCapacity is the number of argument lists and of resource lists a
// Table made with it remembers per generation (see Table).
const DefaultCapacity = 4096

// maxStringBytes and maxListBytes bound the values worth sharing: a longer
// string, or a list whose strings add up to more, is left as decoded. Long
// values are the ones unique to an object (a certificate, a serialized
// spec), where sharing saves nothing, and a table that held them could
// hold a lot: with these bounds, a Table holds at most 2 × capacity × 2 KiB
// per kind of list, keys included.
const (
	maxStringBytes = 256
	maxListBytes   = 1024
)

// Table shares equal values among the objects an informer caches. A
// decoded object holds its own copy of every string, label map, argument
// list and resource list, although across many Memcacheds and their
// children most of them are equal: keys, namespaces, condition reasons,
// images, requests.
// Object replaces them with shared copies:
//
//   - strings through the unique package, which keeps no value alive
//     that no object holds;
//   - string maps (labels, selectors, annotations) within one object,
//     whose metadata, selector and Pod template carry the same labels;
//     across objects they differ by the Memcached's name;
//   - argument lists and resource lists through the table, which
//     remembers what it saw in two generations of at most its capacity
//     each: a value not seen again for a whole generation is forgotten,
//     so what values of deleted objects keep in memory is bounded.
//
// Values handed out are shared by many cached objects. That is safe because
// nothing may change an object an informer has cached (callers DeepCopy
// first, as the client-go contract requires); it makes that contract
// stricter, not different.
type Table struct {
	capacity int

	mu                       sync.Mutex
	lists, prevLists         map[string][]string
	resources, prevResources map[string]corev1.ResourceList
}

// New returns an empty Table that remembers up to capacity argument lists
// and capacity resource lists per generation.
func New(capacity int) *Table {
	return &Table{capacity: capacity}
}

var (
	uidType          = reflect.TypeFor[types.UID]()
	stringMapType    = reflect.TypeFor[map[string]string]()
	stringSliceType  = reflect.TypeFor[[]string]()
	resourceListType = reflect.TypeFor[corev1.ResourceList]()
	// uniqueFields hold a value unique to one object or one write:
	// sharing them saves nothing.
	uniqueFields = map[string]bool{
		"ResourceVersion": true,
		"ClusterIP":       true,
		"ClusterIPs":      true,
		"Message":         true,
	}
)

// Object replaces the strings, string maps, string lists and resource
// lists of obj, a pointer to a typed API object or to part of one (its
// metadata, its status), with shared copies, as Table describes. It
// changes obj in place and must only be called on an object no one else
// holds yet, such as in an informer transform.
func (t *Table) Object(obj any) {
	v := reflect.ValueOf(obj)
	if v.Kind() != reflect.Pointer || v.IsNil() {
		return
	}
	w := walk{table: t}
	w.value(v.Elem())
}

// walk is one call of Object.
type walk struct {
	table *Table
	// maps are the string maps of this object so far, by content.
	maps map[string]map[string]string
}

// value walks v, which is settable.
func (w *walk) value(v reflect.Value) {
	switch v.Type() {
	case uidType:
		return
	case stringMapType:
		if !v.IsNil() {
			v.Set(reflect.ValueOf(w.stringMap(v.Interface().(map[string]string))))
		}
		return
	case stringSliceType:
		if !v.IsNil() {
			v.Set(reflect.ValueOf(w.table.stringList(v.Interface().([]string))))
		}
		return
	case resourceListType:
		if !v.IsNil() {
			v.Set(reflect.ValueOf(w.table.resourceList(v.Interface().(corev1.ResourceList))))
		}
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(String(v.String()))
	case reflect.Pointer:
		if !v.IsNil() {
			w.value(v.Elem())
		}
	case reflect.Slice:
		for i := range v.Len() {
			w.value(v.Index(i))
		}
	case reflect.Struct:
		typ := v.Type()
		for i := range v.NumField() {
			f := v.Field(i)
			if !f.CanSet() || uniqueFields[typ.Field(i).Name] {
				continue
			}
			w.value(f)
		}
	}
}

// String returns the shared copy of s, or s if it is empty or long.
func String(s string) string {
	if s == "" || len(s) > maxStringBytes {
		return s
	}
	return unique.Make(s).Value()
}

// stringMap returns the map of this object equal to m, whose keys and
// values are shared.
func (w *walk) stringMap(m map[string]string) map[string]string {
	var id key
	for _, k := range slices.Sorted(maps.Keys(m)) {
		id.add(k)
		id.add(m[k])
	}
	if shared, ok := w.maps[string(id)]; ok {
		return shared
	}
	shared := make(map[string]string, len(m))
	for k, v := range m {
		shared[String(k)] = String(v)
	}
	if w.maps == nil {
		w.maps = map[string]map[string]string{}
	}
	w.maps[string(id)] = shared
	return shared
}

// stringList returns the table's list equal to l.
func (t *Table) stringList(l []string) []string {
	var id key
	for _, s := range l {
		id.add(s)
	}
	if len(id) > maxListBytes {
		return l
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	shared, ok := lookup(t.capacity, &t.lists, &t.prevLists, string(id))
	if ok {
		return shared
	}
	// Full capacity, so that an append to a cached list copies it.
	shared = make([]string, len(l))
	for i, s := range l {
		shared[i] = String(s)
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
	if len(id) > maxListBytes {
		return l
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	shared, ok := lookup(t.capacity, &t.resources, &t.prevResources, string(id))
	if ok {
		return shared
	}
	shared = make(corev1.ResourceList, len(l))
	for name, q := range l {
		shared[corev1.ResourceName(String(string(name)))] = q
	}
	t.resources[string(id)] = shared
	return shared
}

// lookup finds id in the current generation, or in the previous one, from
// which it moves it to the current. It starts a new generation when the
// current one is full, and makes sure *cur exists for the caller to add to.
func lookup[V any](capacity int, cur, prev *map[string]V, id string) (V, bool) {
	if v, ok := (*cur)[id]; ok {
		return v, true
	}
	if *cur == nil || len(*cur) >= capacity {
		*prev, *cur = *cur, make(map[string]V)
	}
	v, ok := (*prev)[id]
	if ok {
		(*cur)[id] = v
	}
	return v, ok
}

// key identifies a sequence of strings: each is written after its length,
// so no two different sequences share a key, whatever bytes they hold.
type key []byte

func (k *key) add(s string) {
	*k = binary.AppendUvarint(*k, uint64(len(s)))
	*k = append(*k, s...)
}
