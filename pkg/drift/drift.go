package drift

import (
	"reflect"
	"strconv"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
)

// keyedLists names the lists that server-side apply merges by key instead of
// replacing whole, with their key fields. An entry in desired matches the
// live entry whose key fields equal every key field desired sets; live
// entries that desired does not mention belong to someone else and are
// ignored. Every other list is atomic and must match element by element.
var keyedLists = map[string][]string{
	"ownerReferences":           {"uid"},
	"containers":                {"name"},
	"initContainers":            {"name"},
	"env":                       {"name"},
	"volumes":                   {"name"},
	"volumeMounts":              {"mountPath"},
	"ports":                     {"containerPort", "port", "protocol"},
	"imagePullSecrets":          {"name"},
	"topologySpreadConstraints": {"topologyKey", "whenUnsatisfiable"},
}

var typeMetaApplyType = reflect.TypeFor[metav1ac.TypeMetaApplyConfiguration]()

// Diff returns the path of the first value that desired sets and live does
// not carry, or "" when live already matches desired. desired is an apply
// configuration (unset fields are nil pointers); live is the typed object as
// read from the API. Fields are matched by their JSON names, so the two may
// be different Go types.
//
// Kind and apiVersion of the top-level object are skipped: objects from an
// informer cache carry no TypeMeta.
//
// A match allocates nothing; the path is only built for a mismatch.
func Diff(desired, live any) string {
	m := diff(reflect.ValueOf(desired), reflect.ValueOf(live), "")
	if m == nil {
		return ""
	}
	var b strings.Builder
	for i := len(m.segments) - 1; i >= 0; i-- {
		b.WriteString(m.segments[i])
	}
	path := strings.TrimPrefix(b.String(), ".")
	if path == "" {
		return "."
	}
	return path
}

// mismatch collects the path of a difference, innermost segment first, as
// the recursion unwinds.
type mismatch struct {
	segments []string
}

func (m *mismatch) at(segment string) *mismatch {
	m.segments = append(m.segments, segment)
	return m
}

func differ() *mismatch { return &mismatch{} }

func diff(d, l reflect.Value, field string) *mismatch {
	for d.Kind() == reflect.Pointer || d.Kind() == reflect.Interface {
		if d.IsNil() {
			return nil
		}
		d = d.Elem()
	}
	if !d.IsValid() {
		return nil
	}
	for l.Kind() == reflect.Pointer || l.Kind() == reflect.Interface {
		if l.IsNil() {
			return differ()
		}
		l = l.Elem()
	}
	if !l.IsValid() {
		return differ()
	}

	if d.Type() == l.Type() {
		return diffSameType(d, l)
	}

	switch d.Kind() {
	case reflect.Struct:
		return diffStruct(d, l)
	case reflect.Map:
		return diffMap(d, l)
	case reflect.Slice:
		return diffSlice(d, l, field)
	case reflect.String:
		if l.Kind() != reflect.String || d.String() != l.String() {
			return differ()
		}
	case reflect.Bool:
		if l.Kind() != reflect.Bool || d.Bool() != l.Bool() {
			return differ()
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if !l.CanInt() || d.Int() != l.Int() {
			return differ()
		}
	default:
		if !l.Type().ConvertibleTo(d.Type()) || !equality.Semantic.DeepEqual(d.Interface(), l.Convert(d.Type()).Interface()) {
			return differ()
		}
	}
	return nil
}

var (
	quantityType     = reflect.TypeFor[resource.Quantity]()
	stringMapType    = reflect.TypeFor[map[string]string]()
	resourceListType = reflect.TypeFor[corev1.ResourceList]()
	intOrStringType  = reflect.TypeFor[intstr.IntOrString]()
)

// diffSameType compares values of one Go type. Such values are API types
// shared by apply configurations and typed objects (resource lists, label
// maps, quantities, IntOrString); maps compare key by key so that keys added
// by others are kept, quantities compare by value (a Quantity of "1000m"
// equals one of "1"), and everything else uses the API's semantic equality.
func diffSameType(d, l reflect.Value) *mismatch {
	switch d.Kind() {
	case reflect.String:
		if d.String() != l.String() {
			return differ()
		}
		return nil
	case reflect.Bool:
		if d.Bool() != l.Bool() {
			return differ()
		}
		return nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if d.Int() != l.Int() {
			return differ()
		}
		return nil
	case reflect.Map:
		return diffMap(d, l)
	}
	if d.Type() == quantityType && d.CanAddr() && l.CanAddr() {
		if d.Addr().Interface().(*resource.Quantity).Cmp(*l.Addr().Interface().(*resource.Quantity)) != 0 {
			return differ()
		}
		return nil
	}
	if d.Type() == intOrStringType && d.CanAddr() && l.CanAddr() {
		if *d.Addr().Interface().(*intstr.IntOrString) != *l.Addr().Interface().(*intstr.IntOrString) {
			return differ()
		}
		return nil
	}
	if d.CanAddr() && l.CanAddr() {
		// Pointers box without copying the values.
		if !equality.Semantic.DeepEqual(d.Addr().Interface(), l.Addr().Interface()) {
			return differ()
		}
		return nil
	}
	if !equality.Semantic.DeepEqual(d.Interface(), l.Interface()) {
		return differ()
	}
	return nil
}

func diffStruct(d, l reflect.Value) *mismatch {
	if l.Kind() != reflect.Struct {
		return differ()
	}
	liveFields := fieldsOf(l.Type())
	for _, f := range fieldsOf(d.Type()).list {
		if f.skip {
			continue
		}
		dv := d.FieldByIndex(f.index)
		if isUnset(dv) {
			continue
		}
		lf, ok := liveFields.byName[f.name]
		if !ok {
			return differ().at("." + f.name)
		}
		lv, ok := fieldByIndex(l, lf.index)
		if !ok {
			return differ().at("." + f.name)
		}
		if m := diff(dv, lv, f.name); m != nil {
			return m.at("." + f.name)
		}
	}
	return nil
}

func diffMap(d, l reflect.Value) *mismatch {
	if l.Kind() != reflect.Map {
		return differ()
	}
	// The common maps, compared without reflection so that a match does
	// not allocate.
	if d.Type() == stringMapType && l.Type() == stringMapType {
		lm := l.Interface().(map[string]string)
		for k, v := range d.Interface().(map[string]string) {
			if lv, ok := lm[k]; !ok || lv != v {
				return differ().at("[" + k + "]")
			}
		}
		return nil
	}
	if d.Type() == resourceListType && l.Type() == resourceListType {
		lm := l.Interface().(corev1.ResourceList)
		for k, v := range d.Interface().(corev1.ResourceList) {
			if lv, ok := lm[k]; !ok || lv.Cmp(v) != 0 {
				return differ().at("[" + string(k) + "]")
			}
		}
		return nil
	}
	iter := d.MapRange()
	for iter.Next() {
		k := iter.Key()
		if !k.Type().ConvertibleTo(l.Type().Key()) {
			return differ()
		}
		lv := l.MapIndex(k.Convert(l.Type().Key()))
		if !lv.IsValid() {
			return differ().at("[" + keyString(k) + "]")
		}
		if m := diff(iter.Value(), lv, ""); m != nil {
			return m.at("[" + keyString(k) + "]")
		}
	}
	return nil
}

func diffSlice(d, l reflect.Value, field string) *mismatch {
	if l.Kind() != reflect.Slice {
		return differ()
	}
	if keys, ok := keyedLists[field]; ok && isStructElem(d.Type().Elem()) {
		for i := 0; i < d.Len(); i++ {
			de := d.Index(i)
			j := findByKeys(de, l, keys)
			if j < 0 {
				return differ().at("[" + strconv.Itoa(i) + "]")
			}
			if m := diff(de, l.Index(j), ""); m != nil {
				return m.at("[" + strconv.Itoa(i) + "]")
			}
		}
		return nil
	}
	if d.Len() != l.Len() {
		return differ()
	}
	for i := 0; i < d.Len(); i++ {
		if m := diff(d.Index(i), l.Index(i), ""); m != nil {
			return m.at("[" + strconv.Itoa(i) + "]")
		}
	}
	return nil
}

// findByKeys returns the index of the live entry whose key fields equal the
// ones de sets, or -1.
func findByKeys(de, l reflect.Value, keys []string) int {
	de = indirect(de)
	df := fieldsOf(de.Type())
	for j := 0; j < l.Len(); j++ {
		le := indirect(l.Index(j))
		lf := fieldsOf(le.Type())
		match, any := true, false
		for _, k := range keys {
			f, ok := df.byName[k]
			if !ok {
				continue
			}
			dv := de.FieldByIndex(f.index)
			if isUnset(dv) {
				continue
			}
			g, ok := lf.byName[k]
			if !ok {
				match = false
				break
			}
			lv, ok := fieldByIndex(le, g.index)
			if !ok || diff(dv, lv, "") != nil {
				match = false
				break
			}
			any = true
		}
		if match && any {
			return j
		}
	}
	return -1
}

type field struct {
	name  string
	index []int
	// skip marks the embedded TypeMeta of an apply configuration.
	skip bool
}

type fields struct {
	list   []field
	byName map[string]field
}

var fieldCache sync.Map // reflect.Type -> *fields

// fieldsOf lists a struct's fields by JSON name, flattening inline and
// anonymous embedded structs the way encoding/json does.
func fieldsOf(t reflect.Type) *fields {
	if f, ok := fieldCache.Load(t); ok {
		return f.(*fields)
	}
	fs := &fields{byName: map[string]field{}}
	collectFields(t, nil, fs)
	actual, _ := fieldCache.LoadOrStore(t, fs)
	return actual.(*fields)
}

func collectFields(t reflect.Type, prefix []int, fs *fields) {
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		if !sf.IsExported() && !sf.Anonymous {
			continue
		}
		index := append(append([]int(nil), prefix...), i)
		tag := sf.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		ft := sf.Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if name == "" && (sf.Anonymous || strings.Contains(opts, "inline")) && ft.Kind() == reflect.Struct {
			if ft == typeMetaApplyType {
				fs.list = append(fs.list, field{index: index, skip: true})
				continue
			}
			collectFields(ft, index, fs)
			continue
		}
		if name == "" {
			name = sf.Name
		}
		f := field{name: name, index: index}
		fs.list = append(fs.list, f)
		fs.byName[name] = f
	}
}

// fieldByIndex is reflect.Value.FieldByIndex that reports a nil embedded
// pointer instead of panicking on it.
func fieldByIndex(v reflect.Value, index []int) (reflect.Value, bool) {
	for i, x := range index {
		if i > 0 {
			v = indirect(v)
			if !v.IsValid() {
				return reflect.Value{}, false
			}
		}
		v = v.Field(x)
	}
	return v, true
}

func indirect(v reflect.Value) reflect.Value {
	for v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface {
		if v.IsNil() {
			return reflect.Value{}
		}
		v = v.Elem()
	}
	return v
}

func isStructElem(t reflect.Type) bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t.Kind() == reflect.Struct
}

// isUnset reports whether an apply configuration leaves the value unset.
func isUnset(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface, reflect.Map, reflect.Slice:
		return v.IsNil()
	}
	return false
}

func keyString(k reflect.Value) string {
	if k.Kind() == reflect.String {
		return k.String()
	}
	return strconv.Quote(k.String())
}
