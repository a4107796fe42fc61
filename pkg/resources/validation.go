package resources

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
)

// Validate reports what is wrong with a spec that the CRD schema lets
// through but that would yield children the apiserver rejects. The schema
// catches everything it can (ranges, patterns, the memory limit against
// memoryMB); what is left needs the builders' own arithmetic (a request
// against a limit the operator computes), or rules of Kubernetes types the
// CRD embeds without them (label syntax in nodeSelector and tolerations),
// or checks the apiserver applies only to Pods, so that a Deployment would
// be accepted and never get one (an image with Unicode whitespace).
// TestIntegrationValidateAgreesWithAPIServer holds it to the apiserver's
// verdicts.
func Validate(d Defaulted) field.ErrorList {
	s := d.Spec
	spec := field.NewPath("spec")
	var errs field.ErrorList
	errs = append(errs, validateImage(s.Image, spec.Child("image"))...)
	if e := exporter(s); e != nil {
		errs = append(errs, validateImage(e.Image, spec.Child("monitoring", "exporter", "image"))...)
	}
	errs = append(errs, validateResources(s, spec.Child("resources"))...)
	if authEnabled(s) && exporterEnabled(s) {
		// The CRD refuses this in v1beta1; v1alpha1 can still turn the
		// exporter on.
		errs = append(errs, field.Forbidden(spec.Child("auth"), "cannot be combined with monitoring.exporter.enabled: the memcached exporter cannot authenticate; turn the exporter off or leave auth out"))
	}
	overrides, podPath := pod(s), spec.Child("pod")
	errs = append(errs, metav1validation.ValidateLabels(overrides.NodeSelector, podPath.Child("nodeSelector"))...)
	for i, t := range overrides.Tolerations {
		errs = append(errs, validateToleration(t, podPath.Child("tolerations").Index(i))...)
	}
	errs = append(errs, metav1validation.ValidateLabels(overrides.Labels, podPath.Child("labels"))...)
	errs = append(errs, apimachineryvalidation.ValidateAnnotations(overrides.Annotations, podPath.Child("annotations"))...)
	if overrides.PriorityClassName != "" {
		for _, msg := range validation.IsDNS1123Subdomain(overrides.PriorityClassName) {
			errs = append(errs, field.Invalid(podPath.Child("priorityClassName"), overrides.PriorityClassName, msg))
		}
	}
	// Some checks range over maps: a stable order keeps the status message,
	// and so the status, the same from one sync to the next.
	slices.SortStableFunc(errs, func(a, b *field.Error) int {
		return strings.Compare(a.Field+"\x00"+a.Detail, b.Field+"\x00"+b.Detail)
	})
	return errs
}

// validateImage applies the Pod's image rule. The CRD's pattern (^\S+$)
// only knows ASCII whitespace.
func validateImage(image string, path *field.Path) field.ErrorList {
	if strings.TrimSpace(image) != image {
		return field.ErrorList{field.Invalid(path, image, "must not have leading or trailing whitespace")}
	}
	return nil
}

// validateResources checks the amounts the user gave and the requirements
// the builder makes of them, so that a request above the memory limit the
// operator computes is caught as well as one above a limit the user set.
func validateResources(s cachev1beta1.MemcachedSpec, path *field.Path) field.ErrorList {
	r := s.Resources
	if r == nil {
		return nil
	}
	var errs field.ErrorList
	for kind, amounts := range map[string]*cachev1beta1.ResourceAmounts{"requests": r.Requests, "limits": r.Limits} {
		if amounts == nil {
			continue
		}
		for name, value := range map[string]string{"cpu": amounts.CPU, "memory": amounts.Memory} {
			if value == "" {
				continue
			}
			q, err := resource.ParseQuantity(value)
			switch {
			case err != nil:
				errs = append(errs, field.Invalid(path.Child(kind, name), value, err.Error()))
			case q.Sign() < 0:
				errs = append(errs, field.Invalid(path.Child(kind, name), value, "must be greater than or equal to 0"))
			}
		}
	}
	if len(errs) > 0 {
		return errs
	}
	built := memcachedResources(s)
	userLimits := resourceList(r.Limits)
	names := make([]corev1.ResourceName, 0, len(*built.Requests))
	for name := range *built.Requests {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		request := (*built.Requests)[name]
		limit, ok := (*built.Limits)[name]
		if !ok || request.Cmp(limit) <= 0 {
			continue
		}
		msg := "must be less than or equal to resources.limits." + string(name) + " (" + limit.String() + ")"
		if _, set := userLimits[name]; !set {
			msg = "must be less than or equal to the " + string(name) + " limit the operator computes from memory and maxConnections (" +
				limit.String() + "); set resources.limits." + string(name) + " to raise it"
		}
		errs = append(errs, field.Invalid(path.Child("requests", string(name)), request.String(), msg))
	}
	return errs
}

// validateToleration applies the apiserver's rules for a Pod's toleration.
func validateToleration(t corev1.Toleration, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if t.Key != "" {
		errs = append(errs, metav1validation.ValidateLabelName(t.Key, path.Child("key"))...)
	} else if t.Operator != corev1.TolerationOpExists {
		errs = append(errs, field.Invalid(path.Child("operator"), t.Operator, "must be Exists when key is empty, which matches all keys and values"))
	}
	if t.TolerationSeconds != nil && t.Effect != corev1.TaintEffectNoExecute {
		errs = append(errs, field.Invalid(path.Child("effect"), t.Effect, "must be NoExecute when tolerationSeconds is set"))
	}
	switch t.Operator {
	case corev1.TolerationOpEqual, "":
		for _, msg := range validation.IsValidLabelValue(t.Value) {
			errs = append(errs, field.Invalid(path.Child("value"), t.Value, msg))
		}
	case corev1.TolerationOpExists:
		if t.Value != "" {
			errs = append(errs, field.Invalid(path.Child("value"), t.Value, "must be empty when operator is Exists"))
		}
	default:
		errs = append(errs, field.NotSupported(path.Child("operator"), t.Operator, []corev1.TolerationOperator{corev1.TolerationOpEqual, corev1.TolerationOpExists}))
	}
	switch t.Effect {
	case "", corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
	default:
		errs = append(errs, field.NotSupported(path.Child("effect"), t.Effect,
			[]corev1.TaintEffect{corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute}))
	}
	return errs
}
