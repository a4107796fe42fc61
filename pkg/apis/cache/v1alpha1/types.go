package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
)

// The defaults, the finalizer and the condition types and reasons are
// v1beta1's (see there for what each means); they keep their names here for
// clients of v1alpha1.
const (
	DefaultImage                     = v1beta1.DefaultImage
	DefaultExporterImage             = v1beta1.DefaultExporterImage
	ChildrenFinalizer                = v1beta1.ChildrenFinalizer
	ConditionAvailable               = v1beta1.ConditionAvailable
	ConditionProgressing             = v1beta1.ConditionProgressing
	ConditionDegraded                = v1beta1.ConditionDegraded
	ReasonMinimumReplicasAvailable   = v1beta1.ReasonMinimumReplicasAvailable
	ReasonMinimumReplicasUnavailable = v1beta1.ReasonMinimumReplicasUnavailable
	ReasonScaledToZero               = v1beta1.ReasonScaledToZero
	ReasonDeploymentMissing          = v1beta1.ReasonDeploymentMissing
	ReasonRollingOut                 = v1beta1.ReasonRollingOut
	ReasonComplete                   = v1beta1.ReasonComplete
	ReasonPaused                     = v1beta1.ReasonPaused
	ReasonProgressDeadlineExceeded   = v1beta1.ReasonProgressDeadlineExceeded
	ReasonAsExpected                 = v1beta1.ReasonAsExpected
	ReasonWaitingForPredecessor      = v1beta1.ReasonWaitingForPredecessor
	ReasonInvalidSpec                = v1beta1.ReasonInvalidSpec
	ReasonAdmissionDenied            = v1beta1.ReasonAdmissionDenied
	ReasonQuotaExceeded              = v1beta1.ReasonQuotaExceeded
	ReasonAPIServerError             = v1beta1.ReasonAPIServerError
	ReasonWriteRejected              = v1beta1.ReasonWriteRejected
	ReasonResourceExists             = v1beta1.ReasonResourceExists
	ReasonForbidden                  = v1beta1.ReasonForbidden
	DefaultPort                      = v1beta1.DefaultPort
	ExporterPort                     = v1beta1.ExporterPort
)

// DeletionPolicy says what happens to a Memcached's children when the
// Memcached is deleted.
// +kubebuilder:validation:Enum=Delete;Orphan
type DeletionPolicy string

const (
	// DeletionPolicyDelete lets the garbage collector delete the children
	// together with the Memcached.
	DeletionPolicyDelete DeletionPolicy = "Delete"
	// DeletionPolicyOrphan keeps the children serving after the Memcached is
	// deleted. The controller removes its ownerReferences from them before it
	// lets the Memcached go.
	DeletionPolicyOrphan DeletionPolicy = "Orphan"
)

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:deprecatedversion:warning="cache.kubelite.io/v1alpha1 Memcached is deprecated; use cache.kubelite.io/v1beta1 (docs/api.md has the field mapping)"
// +kubebuilder:resource:path=memcacheds,scope=Namespaced,shortName=mc,categories=all
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.replicas,selectorpath=.status.selector
// +kubebuilder:printcolumn:name="Replicas",type=integer,JSONPath=".spec.replicas"
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=".status.readyReplicas"
// +kubebuilder:printcolumn:name="Available",type=string,JSONPath=".status.conditions[?(@.type==\"Available\")].status"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=".metadata.creationTimestamp"
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 63 && self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",message="metadata.name must be a DNS-1035 label (at most 63 lowercase letters, digits and '-', starting with a letter and ending with a letter or digit), because the Memcached's headless Service takes its name"

// Memcached runs a memcached cache as a Deployment behind a headless Service.
type Memcached struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +optional
	Spec MemcachedSpec `json:"spec,omitempty"`
	// +optional
	Status MemcachedStatus `json:"status,omitempty"`
}

// MemcachedSpec is the desired state of a Memcached.
//
// The memory rule compares the container memory limit, when the user sets
// one, with the item memory memcached is told to use: a limit at or below
// -m would let the kernel OOM-kill the cache as soon as it fills. It compares
// bytes as numbers because building a quantity string from memoryMB inside
// CEL has an unbounded estimated cost that the apiserver refuses.
// +kubebuilder:validation:XValidation:rule="!has(self.resources) || !has(self.resources.limits) || !has(self.resources.limits.memory) || !isQuantity(self.resources.limits.memory) || quantity(self.resources.limits.memory).asApproximateFloat() > double(self.memoryMB) * 1048576.0",message="resources.limits.memory must be greater than memoryMB",fieldPath=".resources.limits.memory",reason=FieldValueInvalid
// +kubebuilder:validation:XValidation:rule="!has(self.exporter) || !self.exporter.enabled || self.port != 9150",message="port 9150 is taken by the exporter sidecar when exporter.enabled is true",fieldPath=".port",reason=FieldValueInvalid
type MemcachedSpec struct {
	// Replicas is the number of memcached Pods.
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`

	// Image is the memcached container image.
	// +kubebuilder:default="memcached:1.6.45"
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:Pattern=`^\S+$`
	// +optional
	Image string `json:"image,omitempty"`

	// MemoryMB is the memory for items in megabytes, passed to memcached as -m.
	// The container memory limit adds connection and slab overhead on top;
	// see docs/api.md for the formula.
	// +kubebuilder:default=64
	// +kubebuilder:validation:Minimum=16
	// +kubebuilder:validation:Maximum=65536
	// +optional
	MemoryMB int32 `json:"memoryMB,omitempty"`

	// MaxConnections is the maximum number of simultaneous connections, -c.
	// +kubebuilder:default=1024
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65536
	// +optional
	MaxConnections int32 `json:"maxConnections,omitempty"`

	// Threads is the number of worker threads, -t.
	// +kubebuilder:default=4
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=64
	// +optional
	Threads int32 `json:"threads,omitempty"`

	// Port is the TCP port memcached listens on, in the container and on the
	// Service.
	// +kubebuilder:default=11211
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +optional
	Port int32 `json:"port,omitempty"`

	// Resources overrides the computed CPU and memory requests and limits of
	// the memcached container, value by value.
	// +optional
	Resources *ResourceOverrides `json:"resources,omitempty"`

	// NodeSelector constrains the Pods to nodes with these labels. At most
	// 16; v1beta1's spec.pod.nodeSelector has the same bounds.
	// +kubebuilder:validation:MaxProperties=16
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`

	// Tolerations let the Pods schedule onto tainted nodes. At most 16.
	// +kubebuilder:validation:MaxItems=16
	// +optional
	// +listType=atomic
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`

	// Affinity replaces the default scheduling affinity. When it sets no
	// podAntiAffinity, the operator adds a preferred anti-affinity that
	// spreads replicas across nodes. Its entries are bounded in all as
	// v1beta1's spec.pod.affinity explains.
	// +kubebuilder:validation:XValidation:rule="!has(self.nodeAffinity) || (has(self.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution) ? self.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms.map(t, (has(t.matchExpressions) ? t.matchExpressions.map(r, has(r.values) ? 1 + r.values.size() : 1).sum() : 0) + (has(t.matchFields) ? t.matchFields.map(r, has(r.values) ? 1 + r.values.size() : 1).sum() : 0)).sum() : 0) + (has(self.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution) ? self.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution.map(p, (has(p.preference.matchExpressions) ? p.preference.matchExpressions.map(r, has(r.values) ? 1 + r.values.size() : 1).sum() : 0) + (has(p.preference.matchFields) ? p.preference.matchFields.map(r, has(r.values) ? 1 + r.values.size() : 1).sum() : 0)).sum() : 0) <= 32",message="nodeAffinity must have at most 32 entries in all, counting each match expression or field and each of their values"
	// +kubebuilder:validation:XValidation:rule="!has(self.podAffinity) || (has(self.podAffinity.requiredDuringSchedulingIgnoredDuringExecution) ? self.podAffinity.requiredDuringSchedulingIgnoredDuringExecution.map(a, 1 + (has(a.labelSelector) ? (has(a.labelSelector.matchLabels) ? a.labelSelector.matchLabels.size() : 0) + (has(a.labelSelector.matchExpressions) ? a.labelSelector.matchExpressions.map(r, has(r.values) ? 1 + r.values.size() : 1).sum() : 0) : 0) + (has(a.namespaceSelector) ? (has(a.namespaceSelector.matchLabels) ? a.namespaceSelector.matchLabels.size() : 0) + (has(a.namespaceSelector.matchExpressions) ? a.namespaceSelector.matchExpressions.map(r, has(r.values) ? 1 + r.values.size() : 1).sum() : 0) : 0) + (has(a.namespaces) ? a.namespaces.size() : 0) + (has(a.matchLabelKeys) ? a.matchLabelKeys.size() : 0) + (has(a.mismatchLabelKeys) ? a.mismatchLabelKeys.size() : 0)).sum() : 0) + (has(self.podAffinity.preferredDuringSchedulingIgnoredDuringExecution) ? self.podAffinity.preferredDuringSchedulingIgnoredDuringExecution.map(w, 1 + (has(w.podAffinityTerm.labelSelector) ? (has(w.podAffinityTerm.labelSelector.matchLabels) ? w.podAffinityTerm.labelSelector.matchLabels.size() : 0) + (has(w.podAffinityTerm.labelSelector.matchExpressions) ? w.podAffinityTerm.labelSelector.matchExpressions.map(r, has(r.values) ? 1 + r.values.size() : 1).sum() : 0) : 0) + (has(w.podAffinityTerm.namespaceSelector) ? (has(w.podAffinityTerm.namespaceSelector.matchLabels) ? w.podAffinityTerm.namespaceSelector.matchLabels.size() : 0) + (has(w.podAffinityTerm.namespaceSelector.matchExpressions) ? w.podAffinityTerm.namespaceSelector.matchExpressions.map(r, has(r.values) ? 1 + r.values.size() : 1).sum() : 0) : 0) + (has(w.podAffinityTerm.namespaces) ? w.podAffinityTerm.namespaces.size() : 0) + (has(w.podAffinityTerm.matchLabelKeys) ? w.podAffinityTerm.matchLabelKeys.size() : 0) + (has(w.podAffinityTerm.mismatchLabelKeys) ? w.podAffinityTerm.mismatchLabelKeys.size() : 0)).sum() : 0) <= 16",message="podAffinity must have at most 16 entries in all, counting each term, match label, match expression and value, namespace and label key"
	// +kubebuilder:validation:XValidation:rule="!has(self.podAntiAffinity) || (has(self.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution) ? self.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution.map(a, 1 + (has(a.labelSelector) ? (has(a.labelSelector.matchLabels) ? a.labelSelector.matchLabels.size() : 0) + (has(a.labelSelector.matchExpressions) ? a.labelSelector.matchExpressions.map(r, has(r.values) ? 1 + r.values.size() : 1).sum() : 0) : 0) + (has(a.namespaceSelector) ? (has(a.namespaceSelector.matchLabels) ? a.namespaceSelector.matchLabels.size() : 0) + (has(a.namespaceSelector.matchExpressions) ? a.namespaceSelector.matchExpressions.map(r, has(r.values) ? 1 + r.values.size() : 1).sum() : 0) : 0) + (has(a.namespaces) ? a.namespaces.size() : 0) + (has(a.matchLabelKeys) ? a.matchLabelKeys.size() : 0) + (has(a.mismatchLabelKeys) ? a.mismatchLabelKeys.size() : 0)).sum() : 0) + (has(self.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution) ? self.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution.map(w, 1 + (has(w.podAffinityTerm.labelSelector) ? (has(w.podAffinityTerm.labelSelector.matchLabels) ? w.podAffinityTerm.labelSelector.matchLabels.size() : 0) + (has(w.podAffinityTerm.labelSelector.matchExpressions) ? w.podAffinityTerm.labelSelector.matchExpressions.map(r, has(r.values) ? 1 + r.values.size() : 1).sum() : 0) : 0) + (has(w.podAffinityTerm.namespaceSelector) ? (has(w.podAffinityTerm.namespaceSelector.matchLabels) ? w.podAffinityTerm.namespaceSelector.matchLabels.size() : 0) + (has(w.podAffinityTerm.namespaceSelector.matchExpressions) ? w.podAffinityTerm.namespaceSelector.matchExpressions.map(r, has(r.values) ? 1 + r.values.size() : 1).sum() : 0) : 0) + (has(w.podAffinityTerm.namespaces) ? w.podAffinityTerm.namespaces.size() : 0) + (has(w.podAffinityTerm.matchLabelKeys) ? w.podAffinityTerm.matchLabelKeys.size() : 0) + (has(w.podAffinityTerm.mismatchLabelKeys) ? w.podAffinityTerm.mismatchLabelKeys.size() : 0)).sum() : 0) <= 16",message="podAntiAffinity must have at most 16 entries in all, counting each term, match label, match expression and value, namespace and label key"
	// +optional
	Affinity *corev1.Affinity `json:"affinity,omitempty"`

	// PriorityClassName is the Pods' priority class.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	PriorityClassName string `json:"priorityClassName,omitempty"`

	// Exporter configures the Prometheus memcached exporter sidecar.
	// +optional
	Exporter *ExporterSpec `json:"exporter,omitempty"`

	// Paused stops the operator from changing the children, and pauses a
	// rollout of the Deployment's Pods (its spec.paused) until it is
	// unpaused. Status is still reported.
	// +kubebuilder:default=false
	// +optional
	Paused bool `json:"paused,omitempty"`

	// DeletionPolicy says whether the children are deleted with the
	// Memcached (Delete) or left serving without an owner (Orphan).
	// +kubebuilder:default=Delete
	// +optional
	DeletionPolicy DeletionPolicy `json:"deletionPolicy,omitempty"`
}

// ResourceOverrides are CPU and memory requests and limits for the memcached
// container. Any value left out keeps its computed default.
type ResourceOverrides struct {
	// Requests are the minimum resources the Pod is scheduled with.
	// +optional
	Requests *ResourceAmounts `json:"requests,omitempty"`
	// Limits are the most the container may use.
	// +optional
	Limits *ResourceAmounts `json:"limits,omitempty"`
}

// ResourceAmounts is a CPU and a memory quantity, written as Kubernetes
// quantity strings. They are bounded strings rather than int-or-string
// Quantities so that the CEL rules that parse and compare them stay within
// the apiserver's cost budget.
type ResourceAmounts struct {
	// CPU, for example "500m" or "2".
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="isQuantity(self)",message="must be a quantity such as 500m or 2"
	// +optional
	CPU string `json:"cpu,omitempty"`
	// Memory, for example "256Mi" or "1Gi".
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="isQuantity(self)",message="must be a quantity such as 256Mi or 1Gi"
	// +optional
	Memory string `json:"memory,omitempty"`
}

// ExporterSpec configures the Prometheus memcached exporter sidecar.
type ExporterSpec struct {
	// Enabled adds the exporter sidecar on port 9150 and a "metrics" port to
	// the Service.
	// +kubebuilder:default=false
	// +optional
	Enabled bool `json:"enabled,omitempty"`

	// Image is the exporter container image.
	// +kubebuilder:default="quay.io/prometheus/memcached-exporter:v0.15.3"
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:Pattern=`^\S+$`
	// +optional
	Image string `json:"image,omitempty"`
}

// MemcachedStatus is the observed state of a Memcached.
type MemcachedStatus struct {
	// ObservedGeneration is the metadata.generation the controller last acted
	// on. Status describes that generation.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Replicas is the number of Pods of the Deployment, for the scale
	// subresource.
	// +optional
	Replicas int32 `json:"replicas,omitempty"`

	// ReadyReplicas is the number of Pods that pass their readiness probe.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`

	// AvailableReplicas is the number of Pods ready for at least
	// minReadySeconds.
	// +optional
	AvailableReplicas int32 `json:"availableReplicas,omitempty"`

	// UpdatedReplicas is the number of Pods that run the current template.
	// +optional
	UpdatedReplicas int32 `json:"updatedReplicas,omitempty"`

	// Selector is the Pods' label selector as a string, for the scale
	// subresource and HorizontalPodAutoscalers.
	// +optional
	Selector string `json:"selector,omitempty"`

	// Endpoint is the address clients use: <name>.<namespace>.svc:<port>.
	// +optional
	Endpoint string `json:"endpoint,omitempty"`

	// Zones is the state of each zone pool, which only v1beta1's
	// spec.zones asks for.
	// +optional
	// +listType=map
	// +listMapKey=name
	Zones []ZoneStatus `json:"zones,omitempty"`

	// Conditions are Available, Progressing, Degraded and ImageVulnerable.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// ZoneStatus is the state of one zone pool; see v1beta1.
type ZoneStatus struct {
	// Name is the zone.
	Name string `json:"name"`
	// Replicas is the number of the pool's Pods.
	// +optional
	Replicas int32 `json:"replicas,omitempty"`
	// ReadyReplicas is the number of the pool's Pods that pass their
	// readiness probe.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`
	// AvailableReplicas is the number of the pool's Pods ready for at
	// least minReadySeconds.
	// +optional
	AvailableReplicas int32 `json:"availableReplicas,omitempty"`
	// UpdatedReplicas is the number of the pool's Pods that run the
	// current template.
	// +optional
	UpdatedReplicas int32 `json:"updatedReplicas,omitempty"`
	// Endpoint is the address of the pool's own headless Service.
	// +optional
	Endpoint string `json:"endpoint,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// MemcachedList is a list of Memcached.
type MemcachedList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []Memcached `json:"items"`
}
