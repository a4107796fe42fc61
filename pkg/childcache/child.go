package childcache

import (
	"maps"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	"github.com/kubelite/memcached-operator/pkg/resources"
)

// cachedChild is what the child informers keep of a Deployment, Service,
// PodDisruptionBudget or NetworkPolicy (Child): the metadata the sync reads and, for a
// Deployment that is a child, the replicas, strategy and status the
// Memcached's status is made from, and its rollout pause. The API types
// would hold an empty spec (1 KiB of a Deployment's struct), and a map for
// the two annotations every child carries.
//
// The listers hand out typed objects built from it (ChildLister), so the
// sync reads children as the API types, as it reads what the apiserver
// answers, and the digest beside them.
type cachedChild struct {
	// ObjectMeta holds no managedFields, only the operator's annotations
	// other than the two below, and, for a child, no labels but a zone
	// pool's zone: classify reads labels only of objects without a
	// controller.
	metav1.ObjectMeta
	// specHash is the spec-hash annotation, kept out of a map.
	specHash string
	// ownedFields is the digest of the fields the operator's apply owns
	// (drift.Owned), for a child only; it stands in for managedFields and
	// most of the spec in the drift check.
	ownedFields string
	// deployment is set for a Deployment that is a child.
	deployment *cachedDeploymentState
}

// cachedDeploymentState is what the sync reads of a Deployment besides its
// metadata: the replicas, strategy and status the status reads, and
// whether its rollout is paused and by whom (the rollout pause of the
// Memcached's spec.paused).
type cachedDeploymentState struct {
	replicas *int32
	strategy appsv1.DeploymentStrategy
	status   appsv1.DeploymentStatus
	paused   bool
	// pausedByOperator is whether resources.PauseManager's apply owns
	// spec.paused, computed from managedFields, which the cache drops.
	pausedByOperator bool
}

// GetAnnotations returns the object's annotations as the apiserver has them,
// trimmed as Child describes. It builds a new map when the object has a
// spec hash, which a reader may keep but, as for any cached object, must
// not change.
func (c *cachedChild) GetAnnotations() map[string]string {
	if c.specHash == "" {
		return c.ObjectMeta.Annotations
	}
	annotations := make(map[string]string, len(c.ObjectMeta.Annotations)+1)
	maps.Copy(annotations, c.ObjectMeta.Annotations)
	annotations[resources.SpecHashAnnotation] = c.specHash
	return annotations
}

// SetAnnotations keeps GetAnnotations consistent with what it was given.
func (c *cachedChild) SetAnnotations(annotations map[string]string) {
	c.specHash = annotations[resources.SpecHashAnnotation]
	rest := maps.Clone(annotations)
	delete(rest, resources.SpecHashAnnotation)
	if len(rest) == 0 {
		rest = nil
	}
	c.ObjectMeta.Annotations = rest
}

// GetObjectMeta returns c itself, not the embedded ObjectMeta, whose
// annotations lack the spec hash kept outside it.
func (c *cachedChild) GetObjectMeta() metav1.Object { return c }

// GetObjectKind implements runtime.Object: a cached object carries no type
// information, like the typed objects an informer decodes.
func (c *cachedChild) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject implements runtime.Object.
func (c *cachedChild) DeepCopyObject() runtime.Object {
	out := &cachedChild{specHash: c.specHash, ownedFields: c.ownedFields}
	c.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	if d := c.deployment; d != nil {
		out.deployment = &cachedDeploymentState{strategy: *d.strategy.DeepCopy(), status: *d.status.DeepCopy(), paused: d.paused, pausedByOperator: d.pausedByOperator}
		if d.replicas != nil {
			replicas := *d.replicas
			out.deployment.replicas = &replicas
		}
	}
	return out
}

// objectMeta returns the metadata of the typed object built from c. It
// shares c's slices and maps; see GetAnnotations.
func (c *cachedChild) objectMeta() metav1.ObjectMeta {
	meta := c.ObjectMeta
	meta.Annotations = c.GetAnnotations()
	return meta
}

// DeploymentOf returns a Deployment as the cache holds it, from an object
// an event handler got (or the object in a tombstone), and false for any
// other object.
func DeploymentOf(obj any) (*appsv1.Deployment, bool) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	c, ok := obj.(*cachedChild)
	if !ok || c.deployment == nil {
		return nil, false
	}
	return deploymentOf(c), true
}

// deploymentOf builds a Deployment from the cache. Its managedFields hold
// at most one entry: resources.PauseManager's claim on spec.paused, when
// that manager's apply owns the field, as the apiserver records it; the
// cache keeps no other.
func deploymentOf(c *cachedChild) *appsv1.Deployment {
	d := &appsv1.Deployment{ObjectMeta: c.objectMeta()}
	if s := c.deployment; s != nil {
		d.Spec.Replicas, d.Spec.Strategy, d.Spec.Paused, d.Status = s.replicas, s.strategy, s.paused, s.status
		if s.pausedByOperator {
			d.ManagedFields = []metav1.ManagedFieldsEntry{{
				Manager:    resources.PauseManager,
				Operation:  metav1.ManagedFieldsOperationApply,
				APIVersion: "apps/v1",
				FieldsType: "FieldsV1",
				FieldsV1:   metav1.NewFieldsV1(`{"f:spec":{"f:paused":{}}}`),
			}}
		}
	}
	return d
}

func serviceOf(c *cachedChild) *corev1.Service {
	return &corev1.Service{ObjectMeta: c.objectMeta()}
}

func pdbOf(c *cachedChild) *policyv1.PodDisruptionBudget {
	return &policyv1.PodDisruptionBudget{ObjectMeta: c.objectMeta()}
}

func networkPolicyOf(c *cachedChild) *networkingv1.NetworkPolicy {
	return &networkingv1.NetworkPolicy{ObjectMeta: c.objectMeta()}
}
