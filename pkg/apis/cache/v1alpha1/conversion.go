package v1alpha1

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
)

// V1beta1SpecAnnotation holds, on a v1alpha1 object converted from v1beta1,
// the v1beta1 spec whenever v1alpha1 cannot express all of it: a memory
// that is not a whole number of mebibytes, say, or an empty pod block.
// Converting back restores what the v1alpha1 fields did not change, so an
// object read and written through v1alpha1 loses nothing of its v1beta1
// form. It is absent when v1alpha1 says it all, and never appears on a
// v1beta1 object.
const V1beta1SpecAnnotation = "cache.kubelite.io/v1beta1-spec"

// mebibyte is the unit of memoryMB: memcached's -m counts 2^20 bytes.
const mebibyte = 1 << 20

// ConvertTo converts this v1alpha1 Memcached to v1beta1.
func (src *Memcached) ConvertTo(dst *v1beta1.Memcached) error {
	dst.TypeMeta = metaFor(v1beta1.GroupVersion.String())
	src.ObjectMeta.DeepCopyInto(&dst.ObjectMeta)
	saved, hasSaved := dst.Annotations[V1beta1SpecAnnotation]
	removeAnnotation(&dst.ObjectMeta.Annotations, V1beta1SpecAnnotation)

	specToV1beta1(&src.Spec, &dst.Spec)
	if hasSaved {
		var prev v1beta1.MemcachedSpec
		if err := json.Unmarshal([]byte(saved), &prev); err != nil {
			return fmt.Errorf("annotation %s of %s/%s: %w", V1beta1SpecAnnotation, src.Namespace, src.Name, err)
		}
		restoreV1beta1Only(&dst.Spec, &prev, &src.Spec)
	}
	statusToV1beta1(&src.Status, &dst.Status)
	return nil
}

// ConvertFrom converts a v1beta1 Memcached to this v1alpha1 Memcached.
func (dst *Memcached) ConvertFrom(src *v1beta1.Memcached) error {
	dst.TypeMeta = metaFor(GroupVersion.String())
	src.ObjectMeta.DeepCopyInto(&dst.ObjectMeta)
	removeAnnotation(&dst.ObjectMeta.Annotations, V1beta1SpecAnnotation)

	dst.Spec = MemcachedSpec{}
	specFromV1beta1(&src.Spec, &dst.Spec)
	// Keep the v1beta1 spec when the v1alpha1 one would not convert back to
	// it.
	var back v1beta1.MemcachedSpec
	specToV1beta1(&dst.Spec, &back)
	// v1alpha1 has no minReadySeconds. Its default, which the apiserver
	// writes into every stored spec, needs no annotation: converted back,
	// the field is left out and the apiserver fills the default in again.
	if m := src.Spec.MinReadySeconds; m == nil || *m == v1beta1.DefaultMinReadySeconds {
		back.MinReadySeconds = copyPtr(m)
	}
	if !equality.Semantic.DeepEqual(back, src.Spec) {
		data, err := json.Marshal(&src.Spec)
		if err != nil {
			return fmt.Errorf("saving the v1beta1 spec of %s/%s: %w", src.Namespace, src.Name, err)
		}
		if dst.Annotations == nil {
			dst.Annotations = map[string]string{}
		}
		dst.Annotations[V1beta1SpecAnnotation] = string(data)
	}
	dst.Status = MemcachedStatus{}
	statusFromV1beta1(&src.Status, &dst.Status)
	return nil
}

// specToV1beta1 is the field-by-field conversion, without the annotation.
func specToV1beta1(in *MemcachedSpec, out *v1beta1.MemcachedSpec) {
	*out = v1beta1.MemcachedSpec{
		Replicas:       copyPtr(in.Replicas),
		Image:          in.Image,
		MaxConnections: in.MaxConnections,
		Threads:        in.Threads,
		Port:           in.Port,
		Paused:         in.Paused,
		DeletionPolicy: v1beta1.DeletionPolicy(in.DeletionPolicy),
	}
	if in.MemoryMB != 0 {
		out.Memory = resource.NewQuantity(int64(in.MemoryMB)*mebibyte, resource.BinarySI)
	}
	if in.Resources != nil {
		out.Resources = &v1beta1.ResourceOverrides{
			Requests: (*v1beta1.ResourceAmounts)(copyPtr(in.Resources.Requests)),
			Limits:   (*v1beta1.ResourceAmounts)(copyPtr(in.Resources.Limits)),
		}
	}
	if len(in.NodeSelector) > 0 || len(in.Tolerations) > 0 || in.Affinity != nil || in.PriorityClassName != "" {
		out.Pod = &v1beta1.PodOverrides{PriorityClassName: in.PriorityClassName}
		if in.NodeSelector != nil {
			out.Pod.NodeSelector = make(map[string]string, len(in.NodeSelector))
			for k, v := range in.NodeSelector {
				out.Pod.NodeSelector[k] = v
			}
		}
		if in.Tolerations != nil {
			out.Pod.Tolerations = make([]corev1.Toleration, len(in.Tolerations))
			for i := range in.Tolerations {
				in.Tolerations[i].DeepCopyInto(&out.Pod.Tolerations[i])
			}
		}
		out.Pod.Affinity = in.Affinity.DeepCopy()
	}
	if in.Exporter != nil {
		out.Monitoring = &v1beta1.Monitoring{Exporter: &v1beta1.Exporter{Enabled: in.Exporter.Enabled, Image: in.Exporter.Image}}
	}
}

// specFromV1beta1 is the field-by-field conversion, without the
// annotation. A memory that is not a whole number of mebibytes rounds up.
func specFromV1beta1(in *v1beta1.MemcachedSpec, out *MemcachedSpec) {
	*out = MemcachedSpec{
		Replicas:       copyPtr(in.Replicas),
		Image:          in.Image,
		MemoryMB:       mebibytes(in.Memory),
		MaxConnections: in.MaxConnections,
		Threads:        in.Threads,
		Port:           in.Port,
		Paused:         in.Paused,
		DeletionPolicy: DeletionPolicy(in.DeletionPolicy),
	}
	if in.Resources != nil {
		out.Resources = &ResourceOverrides{
			Requests: (*ResourceAmounts)(copyPtr(in.Resources.Requests)),
			Limits:   (*ResourceAmounts)(copyPtr(in.Resources.Limits)),
		}
	}
	if in.Pod != nil {
		pod := in.Pod.DeepCopy()
		out.NodeSelector = pod.NodeSelector
		out.Tolerations = pod.Tolerations
		out.Affinity = pod.Affinity
		out.PriorityClassName = pod.PriorityClassName
	}
	if in.Monitoring != nil && in.Monitoring.Exporter != nil {
		out.Exporter = &ExporterSpec{Enabled: in.Monitoring.Exporter.Enabled, Image: in.Monitoring.Exporter.Image}
	}
}

// restoreV1beta1Only puts back into out what the saved v1beta1 spec said
// and the v1alpha1 spec cur could not, where cur has not changed it since.
func restoreV1beta1Only(out, saved *v1beta1.MemcachedSpec, cur *MemcachedSpec) {
	// The exact memory, unless memoryMB was changed through v1alpha1.
	if saved.Memory != nil && mebibytes(saved.Memory) == cur.MemoryMB {
		memory := saved.Memory.DeepCopy()
		out.Memory = &memory
	}
	// Blocks that were present but said nothing v1alpha1 keeps.
	if out.Pod == nil && saved.Pod != nil {
		out.Pod = &v1beta1.PodOverrides{}
	}
	if out.Monitoring == nil && saved.Monitoring != nil {
		out.Monitoring = &v1beta1.Monitoring{}
	}
	// Fields v1alpha1 has no words for, so no v1alpha1 edit can have
	// changed them.
	if saved.MaxItemSize != nil {
		size := saved.MaxItemSize.DeepCopy()
		out.MaxItemSize = &size
	}
	out.ExtraArgs = slices.Clone(saved.ExtraArgs)
	out.PodDisruptionBudget = saved.PodDisruptionBudget.DeepCopy()
	out.TLS = saved.TLS.DeepCopy()
	out.NetworkPolicy = saved.NetworkPolicy.DeepCopy()
	out.Auth = saved.Auth.DeepCopy()
	out.Zones = slices.Clone(saved.Zones)
	out.MinReadySeconds = copyPtr(saved.MinReadySeconds)
	out.Extstore = saved.Extstore.DeepCopy()
	if saved.Pod != nil {
		pod := saved.Pod.DeepCopy()
		out.Pod.Labels = pod.Labels
		out.Pod.Annotations = pod.Annotations
		out.Pod.ImagePullSecrets = pod.ImagePullSecrets
		out.Pod.TerminationGracePeriodSeconds = pod.TerminationGracePeriodSeconds
		out.Pod.PreStopDelaySeconds = pod.PreStopDelaySeconds
		out.Pod.TopologySpreadConstraints = pod.TopologySpreadConstraints
	}
}

// mebibytes is memory in whole mebibytes, rounded up and clamped to
// int32, with nil as 0.
func mebibytes(q *resource.Quantity) int32 {
	if q == nil {
		return 0
	}
	if v, exact := q.AsInt64(); exact {
		n := v / mebibyte
		if v%mebibyte > 0 {
			n++
		}
		return int32(max(math.MinInt32, min(math.MaxInt32, n)))
	}
	// A fraction of a byte, or beyond int64.
	n := math.Ceil(q.AsApproximateFloat64() / mebibyte)
	return int32(max(math.MinInt32, min(math.MaxInt32, n)))
}

func statusToV1beta1(in *MemcachedStatus, out *v1beta1.MemcachedStatus) {
	*out = v1beta1.MemcachedStatus{
		ObservedGeneration: in.ObservedGeneration,
		Replicas:           in.Replicas,
		ReadyReplicas:      in.ReadyReplicas,
		AvailableReplicas:  in.AvailableReplicas,
		UpdatedReplicas:    in.UpdatedReplicas,
		Selector:           in.Selector,
		Endpoint:           in.Endpoint,
	}
	for _, z := range in.Zones {
		out.Zones = append(out.Zones, v1beta1.ZoneStatus(z))
	}
	if in.Conditions != nil {
		out.Conditions = make([]metav1.Condition, len(in.Conditions))
		for i := range in.Conditions {
			in.Conditions[i].DeepCopyInto(&out.Conditions[i])
		}
	}
}

func statusFromV1beta1(in *v1beta1.MemcachedStatus, out *MemcachedStatus) {
	*out = MemcachedStatus{
		ObservedGeneration: in.ObservedGeneration,
		Replicas:           in.Replicas,
		ReadyReplicas:      in.ReadyReplicas,
		AvailableReplicas:  in.AvailableReplicas,
		UpdatedReplicas:    in.UpdatedReplicas,
		Selector:           in.Selector,
		Endpoint:           in.Endpoint,
	}
	for _, z := range in.Zones {
		out.Zones = append(out.Zones, ZoneStatus(z))
	}
	if in.Conditions != nil {
		out.Conditions = make([]metav1.Condition, len(in.Conditions))
		for i := range in.Conditions {
			in.Conditions[i].DeepCopyInto(&out.Conditions[i])
		}
	}
}

func metaFor(apiVersion string) metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: apiVersion, Kind: "Memcached"}
}

func removeAnnotation(annotations *map[string]string, key string) {
	delete(*annotations, key)
	if len(*annotations) == 0 {
		*annotations = nil
	}
}

func copyPtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}
