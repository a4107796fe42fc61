package resources

import (
	"k8s.io/apimachinery/pkg/util/validation/field"

	cachev1alpha1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1alpha1"
)

// Validate reports what is wrong with a spec that the CRD schema lets
// through but that would yield children the apiserver rejects. The schema
// catches everything it can (ranges, patterns, the memory limit against
// memoryMB); what is left needs the same arithmetic the builders do, such as
// comparing quantities in arbitrary resource maps.
func Validate(mc *cachev1alpha1.Memcached) field.ErrorList {
	var errs field.ErrorList
	if r := mc.Spec.Resources; r != nil {
		path := field.NewPath("spec", "resources", "requests")
		for name, request := range r.Requests {
			if limit, ok := r.Limits[name]; ok && request.Cmp(limit) > 0 {
				errs = append(errs, field.Invalid(path.Key(string(name)), request.String(),
					"must be less than or equal to resources.limits."+string(name)+" ("+limit.String()+")"))
			}
		}
	}
	return errs
}
