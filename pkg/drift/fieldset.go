package drift

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/client-go/applyconfigurations"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// A field manager's server-side apply entry in managedFields lists the
// fields it applied and still owns. Whoever changes one of them with an
// update, or takes it with a forced apply, takes it out of that list. So an
// object whose operator entry lists exactly the fields the operator would
// apply, carrying a spec-hash annotation that says it was applied from the
// same configuration, still holds every value the operator set: a cache
// can keep a digest of that list in place of the values.

// strippedFields are the paths the apiserver leaves out of every entry
// (the StripMetaManager of k8s.io/apimachinery's managedfields).
var strippedFields = fieldpath.NewSet(
	fieldpath.MakePathOrDie("apiVersion"),
	fieldpath.MakePathOrDie("kind"),
	fieldpath.MakePathOrDie("metadata"),
	fieldpath.MakePathOrDie("metadata", "name"),
	fieldpath.MakePathOrDie("metadata", "namespace"),
	fieldpath.MakePathOrDie("metadata", "creationTimestamp"),
	fieldpath.MakePathOrDie("metadata", "selfLink"),
	fieldpath.MakePathOrDie("metadata", "uid"),
	fieldpath.MakePathOrDie("metadata", "clusterName"),
	fieldpath.MakePathOrDie("metadata", "generation"),
	fieldpath.MakePathOrDie("metadata", "managedFields"),
	fieldpath.MakePathOrDie("metadata", "resourceVersion"),
)

// FieldSets computes the field set an apply gives its manager, from the
// built-in types' schema that client-go ships.
type FieldSets struct {
	converter managedfields.TypeConverter
}

// NewFieldSets returns FieldSets for the types of client-go's scheme.
func NewFieldSets() *FieldSets {
	return &FieldSets{converter: applyconfigurations.NewTypeConverter(scheme.Scheme)}
}

// Applied returns the digest of the fields an apply of desired, an apply
// configuration with its kind and apiVersion set, makes its manager own.
func (f *FieldSets) Applied(desired any) (string, error) {
	b, err := json.Marshal(desired)
	if err != nil {
		return "", fmt.Errorf("encoding apply configuration: %w", err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(b); err != nil {
		return "", fmt.Errorf("decoding apply configuration: %w", err)
	}
	typed, err := f.converter.ObjectToTyped(u)
	if err != nil {
		return "", fmt.Errorf("typing %s: %w", u.GroupVersionKind(), err)
	}
	set, err := typed.ToFieldSet()
	if err != nil {
		return "", fmt.Errorf("listing the fields of %s: %w", u.GroupVersionKind(), err)
	}
	return digest(set.Difference(strippedFields))
}

// Owned returns the digest of the fields manager owns through server-side
// apply to the object itself (not a subresource), "" if it owns none or
// the entry cannot be read.
func Owned(entries []metav1.ManagedFieldsEntry, manager string) string {
	set, ok := appliedBy(entries, manager)
	if !ok {
		return ""
	}
	d, err := digest(set)
	if err != nil {
		return ""
	}
	return d
}

// OwnsField reports whether manager owns the field at path, given by its
// field names (such as "spec", "paused"), through server-side apply to the
// object itself; false if its entry cannot be read.
func OwnsField(entries []metav1.ManagedFieldsEntry, manager string, path ...string) bool {
	set, ok := appliedBy(entries, manager)
	if !ok {
		return false
	}
	elements := make([]any, len(path))
	for i, name := range path {
		elements[i] = name
	}
	p, err := fieldpath.MakePath(elements...)
	return err == nil && set.Has(p)
}

// appliedBy returns the fields of manager's server-side apply entry for the
// object itself, and false if it has none or the entry cannot be read.
func appliedBy(entries []metav1.ManagedFieldsEntry, manager string) (*fieldpath.Set, bool) {
	for _, e := range entries {
		if e.Manager != manager || e.Operation != metav1.ManagedFieldsOperationApply || e.Subresource != "" || e.FieldsV1 == nil {
			continue
		}
		set := &fieldpath.Set{}
		if err := set.FromJSON(e.FieldsV1.GetRawReader()); err != nil {
			return nil, false
		}
		return set, true
	}
	return nil, false
}

// digest hashes a set's canonical JSON form, the one managedFields use.
func digest(set *fieldpath.Set) (string, error) {
	b, err := set.ToJSON()
	if err != nil {
		return "", fmt.Errorf("encoding field set: %w", err)
	}
	h := fnv.New64a()
	_, _ = h.Write(b) // hash.Hash.Write never returns an error.
	return strconv.FormatUint(h.Sum64(), 36), nil
}
