package resources

import (
	"fmt"
	"strconv"

	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
)

// RenderingAnnotation records on every child the RenderingVersion of the
// operator that applied it. An operator never re-applies a child that a
// newer rendering wrote: during a rolling upgrade of the operator an old
// replica can lead again after a new one has re-applied children, and
// re-applying its own rendering would roll every cache a second time.
const RenderingAnnotation = AnnotationPrefix + "rendering"

// GenerationAnnotation records on the Deployment the Memcached generation
// it was applied from. A Deployment applied from the current generation
// whose Pod template differs from the one the operator renders now differs
// because the operator changed, not the spec: such a change is paced
// (--max-concurrent-rollouts) instead of applied at once.
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
