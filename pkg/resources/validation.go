package resources

import (
	"k8s.io/apimachinery/pkg/api/resource"
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
		base := field.NewPath("spec", "resources")
		for kind, amounts := range map[string]*cachev1alpha1.ResourceAmounts{"requests": r.Requests, "limits": r.Limits} {
			if amounts == nil {
				continue
			}
			for name, value := range map[string]string{"cpu": amounts.CPU, "memory": amounts.Memory} {
				if _, err := resource.ParseQuantity(value); value != "" && err != nil {
					errs = append(errs, field.Invalid(base.Child(kind, name), value, err.Error()))
				}
			}
		}
		path := base.Child("requests")
		limits := resourceList(r.Limits)
		for name, request := range resourceList(r.Requests) {
			if limit, ok := limits[name]; ok && request.Cmp(limit) > 0 {
				errs = append(errs, field.Invalid(path.Child(string(name)), request.String(),
					"must be less than or equal to resources.limits."+string(name)+" ("+limit.String()+")"))
			}
		}
	}
	return errs
}
