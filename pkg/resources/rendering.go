package resources

import (
	"fmt"
	"strconv"

	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
)

// RenderingAnnotation records on every child the RenderingVersion of the
// operator that applied it. An operator never re-applies a child that a
// newer rendering wrote: during a rolling upgrade of the operator an old
// replica can lead again after a new one has re-applied children, and
// re-applying its own rendering would roll every cache a second time.
const RenderingAnnotation = AnnotationPrefix + "rendering"

// GenerationAnnotation records on the Deployment the Memcached generation
// it was last applied from. The pacing of operator-caused template changes
// reads it only for a Deployment applied before TemplateInputsAnnotation
// was recorded: applied from the current generation, its Pod template, if
// it differs from the one rendered now, differs because the operator
// changed, not the spec.
const GenerationAnnotation = AnnotationPrefix + "generation"

// TemplateHashAnnotation records on the Deployment the hash of the Pod
// template it was applied with. Only a template change restarts Pods, and
// the cache holds no copy of the template to compare with.
const TemplateHashAnnotation = AnnotationPrefix + "template-hash"

// renderingVersion is RenderingVersion as the annotation spells it.
var renderingVersion = strconv.Itoa(RenderingVersion)

// RenderingOf returns the RenderingVersion recorded on a child, and false
// if it has none or one that is not a number: a child applied before the
// annotation existed, or one whose annotation someone changed.
func RenderingOf(annotations map[string]string) (int, bool) {
	v, err := strconv.Atoi(annotations[RenderingAnnotation])
	if err != nil || v < 1 {
		return 0, false
	}
	return v, true
}

// TemplateHash hashes a Pod template the way the Deployment's
// TemplateHashAnnotation records it.
func TemplateHash(t *corev1ac.PodTemplateSpecApplyConfiguration) (string, error) {
	h, err := specHash(t)
	if err != nil {
		return "", fmt.Errorf("hashing Pod template: %w", err)
	}
	return h, nil
}

// TemplateInputsAnnotation records on the Deployment the hash of the spec
// fields its Pod template was rendered from (TemplateInputs). A Pod
// template that differs from the one rendered now while those fields are
// the same differs because the operator renders it differently, whatever
// else of the spec changed: such a change is paced
// (--max-concurrent-rollouts), so that a scale, by an HPA or anyone, takes
// no operator-caused rollout along with it.
const TemplateInputsAnnotation = AnnotationPrefix + "template-inputs"

// TemplateInputs hashes the Memcached's spec as stored, but for the fields
// that never reach a pool's Pod template: replicas, paused, deletionPolicy,
// podDisruptionBudget, networkPolicy, minReadySeconds, and the list of
// zones (a pool's own zone is in its name). TestTemplateInputs proves that each of them leaves
// the template alone.
//
// It hashes the spec as stored, not as the operator defaults it, so that a
// changed operator default counts as the operator's change. The hash of a
// stored spec must stay what it was: if it changed in the release that
// changes a Pod template, every Deployment would record other inputs than
// its Memcached's, and that template would roll every cache at once. So a
// new spec field is omitempty and has no CRD default (a CRD default is
// written into every stored spec once the CRD is upgraded), or is cleared
// here while unset; TestGoldenChildren refuses new inputs for an unchanged
// spec together with new Pod templates.
func TemplateInputs(mc *cachev1beta1.Memcached) (string, error) {
	s := mc.Spec
	s.Replicas, s.Paused, s.DeletionPolicy, s.PodDisruptionBudget, s.NetworkPolicy, s.Zones = nil, false, "", nil, nil, nil
	s.MinReadySeconds = nil
	h, err := specHash(s)
	if err != nil {
		return "", fmt.Errorf("hashing the Pod template's inputs: %w", err)
	}
	return h, nil
}
