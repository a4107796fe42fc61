package resources

import (
	"errors"
	"fmt"
	"maps"

	appsv1 "k8s.io/api/apps/v1"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
)

// A pool whose new Pod template is the operator's change, not the spec's,
// waits for a rollout slot before it takes that template. It waits for
// nothing else: the rest of its Deployment (replicas, strategy, labels,
// owner) is applied as the spec and the operator's repair of drift ask,
// together with the template the Deployment runs. That apply changes no
// field of the template, so it restarts no Pod.

// ErrNoTemplate is returned for a Deployment whose template the operator's
// apply owns no field of, so that no held apply can name its template.
var ErrNoTemplate = errors.New("the operator's apply owns no field of its Pod template")

// HeldSpecHash returns the spec hash of desired held at the template of a
// Deployment with the annotations running (HoldTemplate): the hash of
// desired but for its template, and of the template by running's
// TemplateHashAnnotation. Every Deployment's spec hash is computed so
// (deploymentSpecHash), so a Deployment held at its own template carries
// that hash already unless something outside the template changed: the
// sync learns without reading the Deployment whether a held apply would
// change it.
func HeldSpecHash(desired *appsv1ac.DeploymentApplyConfiguration, running map[string]string) (string, error) {
	frame := heldFrame(desired, running)
	h, err := specHash(&frame)
	if err != nil {
		return "", fmt.Errorf("hashing Deployment: %w", err)
	}
	return h, nil
}

// deploymentSpecHash returns the spec hash of a desired Deployment, whose
// TemplateHashAnnotation stands for its template (HeldSpecHash).
func deploymentSpecHash(desired *appsv1ac.DeploymentApplyConfiguration) (string, error) {
	return HeldSpecHash(desired, desired.Annotations)
}

// HoldTemplate returns desired with the Pod template of running, the
// pool's Deployment as the apiserver returns it, in place of its own: the
// fields of the template that the operator's apply (field manager
// ManagedBy) owns, with their values as they are. The template hash and
// rendering annotations are running's, which describe that template, and
// the spec hash is HeldSpecHash's.
func HoldTemplate(desired *appsv1ac.DeploymentApplyConfiguration, running *appsv1.Deployment) (*appsv1ac.DeploymentApplyConfiguration, error) {
	extracted, err := appsv1ac.ExtractDeployment(running, ManagedBy)
	if err != nil {
		return nil, fmt.Errorf("extracting the Pod template of Deployment %s/%s: %w", running.Namespace, running.Name, err)
	}
	if extracted.Spec == nil || extracted.Spec.Template == nil {
		return nil, fmt.Errorf("holding the Pod template of Deployment %s/%s: %w", running.Namespace, running.Name, ErrNoTemplate)
	}
	hash, err := HeldSpecHash(desired, running.Annotations)
	if err != nil {
		return nil, err
	}
	held := heldFrame(desired, running.Annotations)
	held.Spec.Template = extracted.Spec.Template
	held.Annotations[SpecHashAnnotation] = hash
	return &held, nil
}

// heldFrame returns a copy of desired without a Pod template, whose
// template hash and rendering annotations are those of running, and
// without a spec hash; desired itself stays untouched.
func heldFrame(desired *appsv1ac.DeploymentApplyConfiguration, running map[string]string) appsv1ac.DeploymentApplyConfiguration {
	frame := *desired
	meta := *desired.ObjectMetaApplyConfiguration
	meta.Annotations = maps.Clone(desired.Annotations)
	delete(meta.Annotations, SpecHashAnnotation)
	for _, key := range []string{TemplateHashAnnotation, RenderingAnnotation} {
		if v, ok := running[key]; ok {
			meta.Annotations[key] = v
		} else {
			delete(meta.Annotations, key)
		}
	}
	frame.ObjectMetaApplyConfiguration = &meta
	spec := *desired.Spec
	spec.Template = nil
	frame.Spec = &spec
	return frame
}
