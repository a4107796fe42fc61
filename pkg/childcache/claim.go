package childcache

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubelite/memcached-operator/pkg/resources"
)

// Claim returns the transform of the informer of the Pods' extstore
// claims (spec.extstore), which lists only claims with the operator's
// labels. A claim is cached with what the status reads and nothing else:
// its name, the Memcached's instance label, when it was made, its
// StorageClass and its phase.
func Claim() func(any) (any, error) {
	return func(obj any) (any, error) {
		claim, ok := obj.(*corev1.PersistentVolumeClaim)
		if !ok {
			return obj, nil
		}
		trimmed := &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{
				Name:              claim.Name,
				Namespace:         claim.Namespace,
				UID:               claim.UID,
				ResourceVersion:   claim.ResourceVersion,
				CreationTimestamp: claim.CreationTimestamp,
			},
			Spec:   corev1.PersistentVolumeClaimSpec{StorageClassName: claim.Spec.StorageClassName},
			Status: corev1.PersistentVolumeClaimStatus{Phase: claim.Status.Phase},
		}
		if instance, ok := claim.Labels[resources.LabelInstance]; ok {
			trimmed.Labels = map[string]string{resources.LabelInstance: instance}
		}
		return trimmed, nil
	}
}
