package v1beta1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Defaults that the CRD schema applies. They live here as constants so that
// the controller, the docs and the schema markers cannot disagree; the
// markers below repeat the literal values because controller-gen cannot read
// Go constants.
const (
	// DefaultImage is the memcached image used when spec.image is empty. It is
	// pinned to a patch release so that an operator upgrade never rolls every
	// cache by surprise.
	DefaultImage = "memcached:1.6.45"
	// DefaultMemory is spec.memory when it is left out.
	DefaultMemory = "64Mi"
	// DefaultExporterImage is the Prometheus memcached exporter sidecar image.
	DefaultExporterImage = "quay.io/prometheus/memcached-exporter:v0.15.3"
	// DefaultPort is memcached's well-known port.
	DefaultPort = 11211
	// ExporterPort is the port the exporter sidecar serves /metrics on.
	ExporterPort = 9150
	// DefaultMinReadySeconds is spec.minReadySeconds when it is left out.
	DefaultMinReadySeconds = 10
)

// ChildrenFinalizer holds every Memcached the controller has synced until
// the controller has applied its deletionPolicy to the children: with
// Orphan it removes their ownerReferences first, with Delete it only lifts
// the finalizer and the garbage collector deletes them. The controller adds
// it before it creates any child, so the policy in force at deletion is
// the one applied, whether or not the controller runs when the Memcached is
// deleted.
const ChildrenFinalizer = "cache.kubelite.io/children"

// Condition types reported in status.conditions.
const (
	// ConditionAvailable is True when the Deployment has at least its minimum
	// number of Pods ready and the cache can serve.
	ConditionAvailable = "Available"
	// ConditionProgressing is True while the children are being created,
	// scaled or rolled to match the spec.
	ConditionProgressing = "Progressing"
	// ConditionDegraded is True when the controller cannot make the children
	// match the spec without a change from the user.
	ConditionDegraded = "Degraded"
	// ConditionImageVulnerable is True when spec.image names a memcached
	// release with a security hole known to the operator, for the way this
	// Memcached runs it; the message names the holes and the release that
	// fixes them. It is Unknown when the image is pinned by digest or its
	// tag is not a memcached release (a floating or custom tag): the
	// operator cannot tell what it runs.
	ConditionImageVulnerable = "ImageVulnerable"
)

// Reasons of the conditions, in status.conditions[].reason. They are API:
// clients may match on them, so a reason is never renamed.
const (
	// ReasonMinimumReplicasAvailable (Available=True): the Deployment has at
	// least its minimum number of Pods available.
	ReasonMinimumReplicasAvailable = "MinimumReplicasAvailable"
	// ReasonMinimumReplicasUnavailable (Available=False): fewer Pods are
	// available than the Deployment's minimum.
	ReasonMinimumReplicasUnavailable = "MinimumReplicasUnavailable"
	// ReasonScaledToZero (Available=False): spec.replicas is 0.
	ReasonScaledToZero = "ScaledToZero"
	// ReasonDeploymentMissing (Available=False): the Deployment does not
	// exist yet, or something keeps the controller from creating it.
	ReasonDeploymentMissing = "DeploymentMissing"
	// ReasonRollingOut (Progressing=True): the children are being created or
	// the Pods rolled to the current spec.
	ReasonRollingOut = "RollingOut"
	// ReasonComplete (Progressing=False): every wanted replica runs the
	// current spec and is available.
	ReasonComplete = "Complete"
	// ReasonPaused (Progressing=False): spec.paused stops changes to the
	// children and the Deployment's rollout.
	ReasonPaused = "Paused"
	// ReasonDeploymentPaused (Progressing=False): someone other than the
	// operator paused the Deployment's rollout (its spec.paused), which
	// the operator leaves to them.
	ReasonDeploymentPaused = "DeploymentPaused"
	// ReasonProgressDeadlineExceeded (Progressing=False, Degraded=True): the
	// Deployment reports that its rollout has stalled.
	ReasonProgressDeadlineExceeded = "ProgressDeadlineExceeded"
	// ReasonAsExpected (Degraded=False): the children match the spec.
	ReasonAsExpected = "AsExpected"

	// ReasonWaitingForPredecessor (Progressing=False, Degraded=False): a
	// child of a deleted Memcached of the same name still holds the name,
	// for instance because someone else's finalizer keeps it. The child's
	// deletion syncs the Memcached again at once.
	ReasonWaitingForPredecessor = "WaitingForPredecessor"
	// ReasonOperatorRolloutQueued (Progressing=False, Degraded=False): the
	// operator renders a new Pod template for an unchanged spec, after an
	// operator upgrade, and the Deployment waits for one of the
	// --max-concurrent-rollouts slots; the message names the Memcacheds
	// holding them. It rolls, and the reason clears, when its turn comes.
	ReasonOperatorRolloutQueued = "OperatorRolloutQueued"
	// ReasonOperatorRolloutDeferred (Progressing=False, Degraded=False): as
	// for OperatorRolloutQueued, but the Memcached opted out of
	// operator-caused rollouts (annotation
	// cache.kubelite.io/defer-operator-rollouts: "true"), so the new
	// template waits for the next change of the spec that reaches the Pod
	// template (not a scale).
	ReasonOperatorRolloutDeferred = "OperatorRolloutDeferred"

	// The reasons below block the children (Progressing=False and
	// Degraded=True with the same reason and message). Each clears itself
	// once its cause is gone, without an edit to the Memcached, except
	// InvalidSpec, whose cause is the spec.

	// ReasonInvalidSpec: the spec passed the schema but cannot be turned into
	// valid children: the controller's own validation, or the apiserver's
	// validation of a field of a child, refused it. Only a change to the
	// spec clears it.
	ReasonInvalidSpec = "InvalidSpec"
	// ReasonAdmissionDenied: a ValidatingAdmissionPolicy or an admission
	// webhook denied a write to a child; the message is the policy's.
	// Rechecked with backoff.
	ReasonAdmissionDenied = "AdmissionDenied"
	// ReasonQuotaExceeded: a ResourceQuota refused to admit a child
	// (rechecked with backoff), or the Deployment's Pods (its
	// ReplicaFailure condition, quoted; clears when a Pod can be created).
	ReasonQuotaExceeded = "QuotaExceeded"
	// ReasonAPIServerError: the apiserver, or an admission webhook it
	// called, failed the request (a 5xx, a timeout, throttling or a broken
	// connection); the message names the webhook, if any. Retried with
	// backoff.
	ReasonAPIServerError = "APIServerError"
	// ReasonWriteRejected: the apiserver refused a write to a child for a
	// reason none of the others covers; the message has its words.
	// Retried with backoff.
	ReasonWriteRejected = "WriteRejected"
	// ReasonResourceExists: a Deployment, Service, PodDisruptionBudget or
	// NetworkPolicy with the child's name exists and is not controlled by
	// this Memcached. The controller never touches it, and looks again once
	// a minute, since the removal of an object it does not watch raises no
	// event.
	ReasonResourceExists = "ResourceExists"
	// ReasonTLSSecretNotFound: spec.tls.secretName names a Secret that does
	// not exist. The operator holds the Deployment as it is, neither
	// creating it nor rolling it to a template whose Pods could not mount
	// the certificate; the Service and PodDisruptionBudget are still kept.
	// Clears when the Secret is created.
	ReasonTLSSecretNotFound = "TLSSecretNotFound"
	// ReasonTLSSecretInvalid: the Secret named by spec.tls.secretName lacks
	// tls.crt or tls.key. The Deployment is held as for
	// TLSSecretNotFound; clears when the Secret is fixed.
	ReasonTLSSecretInvalid = "TLSSecretInvalid"
	// ReasonAuthSecretNotFound: spec.auth.secretName names a Secret that
	// does not exist. The Deployment is held as for TLSSecretNotFound, so
	// running Pods keep serving with the credentials they have; clears when
	// the Secret is created.
	ReasonAuthSecretNotFound = "AuthSecretNotFound"
	// ReasonAuthSecretInvalid: the Secret named by spec.auth.secretName has
	// no key auth, or its auth file is one memcached would refuse or read
	// differently from what it says; the message says which line and why.
	// The Deployment is held as for AuthSecretNotFound; clears when the
	// Secret is fixed.
	ReasonAuthSecretInvalid = "AuthSecretInvalid"
	// ReasonClientCANotFound: spec.tls.clientCA names a Secret or ConfigMap
	// that does not exist. The Deployment is held as for
	// TLSSecretNotFound; clears when it is created.
	ReasonClientCANotFound = "ClientCANotFound"
	// ReasonClientCAInvalid: the Secret or ConfigMap named by
	// spec.tls.clientCA has no ca.crt. The Deployment is held as for
	// TLSSecretNotFound; clears when it is fixed.
	ReasonClientCAInvalid = "ClientCAInvalid"
	// ReasonForbidden: RBAC refused the operator access to a child, which
	// is how revoked or incomplete RBAC shows. Retried with backoff, since a
	// grant raises no event either.
	ReasonForbidden = "Forbidden"
	// ReasonRenderedByNewerOperator: a child was applied by an operator
	// with a newer rendering than this one, which never re-applies it, so
	// that two operator versions during a rolling upgrade do not roll the
	// caches back and forth. Clears when the newer operator leads again,
	// or when the child's cache.kubelite.io/rendering annotation is
	// removed after a deliberate downgrade.
	ReasonRenderedByNewerOperator = "RenderedByNewerOperator"
	// ReasonOperatorRolloutHalted (Degraded=True): the operator's new Pod
	// template (an operator upgrade) did not roll out on the Deployment
	// within its progress deadline while it held a rollout slot, so the
	// operator's rollouts of other caches wait. A change of the
	// Memcached's Pod template in its spec (not a scale) takes the
	// rollout over and frees the slot, and so does the annotation
	// cache.kubelite.io/defer-operator-rollouts=true.
	ReasonOperatorRolloutHalted = "OperatorRolloutHalted"
	// ReasonPodsNotCreated (Degraded=True): the Deployment reports
	// ReplicaFailure, its ReplicaSet cannot create Pods, for a reason other
	// than a quota (QuotaExceeded then); the message quotes it. Clears
	// when Pods can be created again.
	ReasonPodsNotCreated = "PodsNotCreated"
	// ReasonExtstoreClaimPending (Degraded=True): the claims of some Pods'
	// extstore volumes (spec.extstore) have been Pending for longer than
	// the operator's --extstore-claim-grace (2 minutes by default), and
	// those Pods cannot start until they are bound; the message names
	// them and their StorageClass. The claims' Events say why: no
	// provisioner, a StorageClass that does not exist, or with a class
	// that binds on first use, the Pod's own scheduling. Clears when they
	// are bound. (A claim that a ResourceQuota refuses is never made: its
	// Pod waits, and the Deployment reports ProgressDeadlineExceeded.)
	ReasonExtstoreClaimPending = "ExtstoreClaimPending"
	// ReasonKnownVulnerability (ImageVulnerable=True): the image's tag is a
	// memcached release with a known security hole. A Warning Event of the
	// same reason is emitted when the condition turns True.
	ReasonKnownVulnerability = "KnownVulnerability"
	// ReasonNoKnownVulnerability (ImageVulnerable=False): the image's tag
	// is a memcached release with no hole known to the operator.
	ReasonNoKnownVulnerability = "NoKnownVulnerability"
	// ReasonImageVersionUnknown (ImageVulnerable=Unknown): the image is
	// pinned by digest, or its tag is not a memcached release.
	ReasonImageVersionUnknown = "ImageVersionUnknown"
)

// DeletionPolicy says what happens to a Memcached's children when the
// Memcached is deleted.
// +kubebuilder:validation:Enum=Delete;Orphan
type DeletionPolicy string

const (
	// DeletionPolicyDelete deletes the children with the Memcached, through
	// the garbage collector.
	DeletionPolicyDelete DeletionPolicy = "Delete"
	// DeletionPolicyOrphan leaves the children serving without an owner.
	DeletionPolicyOrphan DeletionPolicy = "Orphan"
)

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:resource:path=memcacheds,scope=Namespaced,shortName=mc,categories=all
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.replicas,selectorpath=.status.selector
// +kubebuilder:printcolumn:name="Replicas",type=integer,JSONPath=".spec.replicas"
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=".status.readyReplicas"
// +kubebuilder:printcolumn:name="Available",type=string,JSONPath=".status.conditions[?(@.type==\"Available\")].status"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=".metadata.creationTimestamp"
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 63 && self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",message="metadata.name must be a DNS-1035 label (at most 63 lowercase letters, digits and '-', starting with a letter and ending with a letter or digit), because the Memcached's headless Service takes its name"
// +kubebuilder:validation:XValidation:rule="!has(self.spec) || !has(self.spec.zones) || self.spec.zones.all(z, self.metadata.name.size() + z.size() <= 62)",messageExpression="'spec.zones: the pool of each zone is named <name>-<zone>, a Service name of at most 63 characters, and zone ' + self.spec.zones.filter(z, self.metadata.name.size() + z.size() > 62)[0] + ' makes it longer: shorten the zone or the name, which together may have at most 62 characters'",reason=FieldValueInvalid

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
// -m would let the kernel OOM-kill the cache as soon as it fills.
// +kubebuilder:validation:XValidation:rule="!has(self.resources) || !has(self.resources.limits) || !has(self.resources.limits.memory) || !isQuantity(self.resources.limits.memory) || !has(self.memory) || quantity(self.resources.limits.memory).compareTo(quantity(string(self.memory))) > 0",message="resources.limits.memory must be greater than memory",fieldPath=".resources.limits.memory",reason=FieldValueInvalid
// +kubebuilder:validation:XValidation:rule="!has(self.monitoring) || !has(self.monitoring.exporter) || !self.monitoring.exporter.enabled || self.port != 9150",message="port 9150 is taken by the exporter sidecar when monitoring.exporter.enabled is true",fieldPath=".port",reason=FieldValueInvalid
// +kubebuilder:validation:XValidation:rule="!has(self.tls) || !has(self.tls.plaintextPort) || self.tls.plaintextPort != self.port",message="tls.plaintextPort must differ from port, which serves TLS",fieldPath=".tls.plaintextPort",reason=FieldValueInvalid
// +kubebuilder:validation:XValidation:rule="!has(self.tls) || !has(self.tls.plaintextPort) || !has(self.monitoring) || !has(self.monitoring.exporter) || !self.monitoring.exporter.enabled || self.tls.plaintextPort != 9150",message="tls.plaintextPort 9150 is taken by the exporter sidecar when monitoring.exporter.enabled is true",fieldPath=".tls.plaintextPort",reason=FieldValueInvalid
// +kubebuilder:validation:XValidation:rule="!has(self.auth) || !has(self.monitoring) || !has(self.monitoring.exporter) || !self.monitoring.exporter.enabled",message="auth cannot be combined with monitoring.exporter.enabled: the memcached exporter cannot authenticate (prometheus/memcached_exporter#240) and memcached has no listener without authentication, so it could not scrape; turn the exporter off or leave auth out",fieldPath=".auth",reason=FieldValueForbidden
// +kubebuilder:validation:XValidation:rule="!has(self.tls) || !has(self.tls.clientCA) || !has(self.extraArgs) || !self.extraArgs.exists(a, a.matches('ssl_(ca_cert|verify_mode)='))",message="extraArgs must not set ssl_ca_cert or ssl_verify_mode with tls.clientCA: the operator sets them from it, and memcached would take the last one given",fieldPath=".extraArgs",reason=FieldValueForbidden
// +kubebuilder:validation:XValidation:rule="!has(self.auth) || !has(self.extraArgs) || !self.extraArgs.exists(a, a.matches('^-[AMkhiVrvdLCSFXWTZ]*B') || a.matches('^--(pr|pro|prot|proto|protoc|protoco|protocol)(=.*)?$'))",message="extraArgs must not set -B or --protocol with auth: memcached authenticates only the ASCII protocol, which it then speaks by itself, and refuses to start with -B binary or auto",fieldPath=".extraArgs",reason=FieldValueForbidden
// +kubebuilder:validation:XValidation:rule="!has(self.extstore) || !has(self.maxItemSize) || !isQuantity(string(self.maxItemSize)) || quantity(string(self.maxItemSize)).compareTo(quantity('4Mi')) <= 0",message="maxItemSize must be at most 4Mi with extstore: memcached refuses items larger than extstore's write buffer (ext_wbuf_size, 4 MiB)",fieldPath=".maxItemSize",reason=FieldValueInvalid
// +kubebuilder:validation:XValidation:rule="!has(self.maxItemSize) || !has(self.memory) || !isQuantity(string(self.maxItemSize)) || !isQuantity(string(self.memory)) || quantity(string(self.maxItemSize)).add(quantity(string(self.maxItemSize))).compareTo(quantity(string(self.memory))) <= 0",message="maxItemSize must be at most half of memory, or memcached refuses to start",fieldPath=".maxItemSize",reason=FieldValueInvalid
type MemcachedSpec struct {
	// Replicas is the number of memcached Pods, each an independent shard
	// that clients hash keys across. Default 1; at most 1000.
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`

	// Image is the memcached container image. Default memcached:1.6.45,
	// pinned so that an operator upgrade does not roll every cache.
	// +kubebuilder:default="memcached:1.6.45"
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:Pattern=`^\S+$`
	// +optional
	Image string `json:"image,omitempty"`

	// Memory is the memory for items, passed to memcached as -m in whole
	// mebibytes, for example 64Mi or 1Gi. The container memory limit adds
	// connection and slab overhead on top; see docs/api.md for the formula.
	// +kubebuilder:default="64Mi"
	// +kubebuilder:validation:XValidation:rule="string(self).size() <= 32",message="must have at most 32 characters"
	// +kubebuilder:validation:XValidation:rule="isQuantity(string(self)) && quantity(string(self)).isInteger() && quantity(string(self)).asInteger() % 1048576 == 0",message="must be a whole number of mebibytes, such as 64Mi or 1Gi"
	// +kubebuilder:validation:XValidation:rule="!isQuantity(string(self)) || (quantity(string(self)).compareTo(quantity('16Mi')) >= 0 && quantity(string(self)).compareTo(quantity('64Gi')) <= 0)",message="must be between 16Mi and 64Gi"
	// +optional
	Memory *resource.Quantity `json:"memory,omitempty"`

	// MaxConnections is the maximum number of simultaneous client
	// connections per Pod, memcached's -c. Default 1024. Each connection
	// adds to the container memory limit the operator computes.
	// +kubebuilder:default=1024
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65536
	// +optional
	MaxConnections int32 `json:"maxConnections,omitempty"`

	// Threads is the number of memcached worker threads per Pod, -t.
	// Default 4.
	// +kubebuilder:default=4
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=64
	// +optional
	Threads int32 `json:"threads,omitempty"`

	// Port is the TCP port memcached listens on, in the container and on the
	// Service. Default 11211.
	// +kubebuilder:default=11211
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +optional
	Port int32 `json:"port,omitempty"`

	// MaxItemSize is the largest item memcached stores, -I, in whole
	// kibibytes, for example 512Ki or 4Mi. It must be between 1Ki and 1Gi
	// and at most half of memory. Left out, memcached's own default applies:
	// 1Mi.
	// +kubebuilder:validation:XValidation:rule="string(self).size() <= 32",message="must have at most 32 characters"
	// +kubebuilder:validation:XValidation:rule="isQuantity(string(self)) && quantity(string(self)).isInteger() && quantity(string(self)).asInteger() % 1024 == 0",message="must be a whole number of kibibytes, such as 512Ki or 2Mi"
	// +kubebuilder:validation:XValidation:rule="!isQuantity(string(self)) || (quantity(string(self)).compareTo(quantity('1Ki')) >= 0 && quantity(string(self)).compareTo(quantity('1Gi')) <= 0)",message="must be between 1Ki and 1Gi"
	// +optional
	MaxItemSize *resource.Quantity `json:"maxItemSize,omitempty"`

	// Extstore gives each Pod a flash tier: a volume of its own, on which
	// memcached keeps the values that no longer fit in memory, with only
	// their keys and headers left in memory (memcached's extstore). Each
	// Pod's volume is a generic ephemeral volume, a claim created with the
	// Pod and deleted with it, so a Pod that restarts or is replaced
	// starts with an empty tier as well as an empty memory: it makes a
	// cache bigger, not lasting. Left out, memcached keeps everything in
	// memory. Changing it restarts the Pods.
	// +optional
	Extstore *Extstore `json:"extstore,omitempty"`

	// ExtraArgs are more memcached command-line arguments, appended after
	// the ones the operator sets, for example ["-o", "lru_crawler"] or
	// ["--disable-cas"]. The flags the operator owns are refused here; set
	// their fields instead. Changing them rolls the Pods. At most 64
	// arguments of at most 1024 characters, and 4096 characters in all: a
	// long -o option list or cipher list fits, and the total keeps 64
	// arguments of the largest size out of every cached copy.
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule="self.map(a, a.size()).sum() <= 4096",message="must have at most 4096 characters in all"
	// +kubebuilder:validation:XValidation:rule="self.all(a, !a.matches('^-[AMkhiVrvdLCSFXWTZ]*m') && !a.matches('^--(m|me|mem|memo|memor|memory|memory-|memory-l|memory-li|memory-lim|memory-limi|memory-limit)(=.*)?$'))",message="must not set -m or --memory-limit; use spec.memory"
	// +kubebuilder:validation:XValidation:rule="self.all(a, !a.matches('^-[AMkhiVrvdLCSFXWTZ]*c') && !a.matches('^--(c|co|con|conn|conn-|conn-l|conn-li|conn-lim|conn-limi|conn-limit)(=.*)?$'))",message="must not set -c or --conn-limit; use spec.maxConnections"
	// +kubebuilder:validation:XValidation:rule="self.all(a, !a.matches('^-[AMkhiVrvdLCSFXWTZ]*t') && !a.matches('^--(t|th|thr|thre|threa|thread|threads)(=.*)?$'))",message="must not set -t or --threads; use spec.threads"
	// +kubebuilder:validation:XValidation:rule="self.all(a, !a.matches('^-[AMkhiVrvdLCSFXWTZ]*p') && !a.matches('^--(p|po|por|port)(=.*)?$'))",message="must not set -p or --port; use spec.port"
	// +kubebuilder:validation:XValidation:rule="self.all(a, !a.matches('^-[AMkhiVrvdLCSFXWTZ]*U') && !a.matches('^--(u|ud|udp|udp-|udp-p|udp-po|udp-por|udp-port)(=.*)?$'))",message="must not set -U or --udp-port; the operator keeps UDP off (memcached's UDP protocol amplifies reflection attacks)"
	// +kubebuilder:validation:XValidation:rule="self.all(a, !a.matches('^-[AMkhiVrvdLCSFXWTZ]*l') && !a.matches('^--(l|li|lis|list|liste|listen)(=.*)?$'))",message="must not set -l or --listen; the operator sets the listeners from spec.port and spec.tls"
	// +kubebuilder:validation:XValidation:rule="self.all(a, !a.matches('^-[AMkhiVrvdLCSFXWTZ]*u') && !a.matches('^--(u|us|use|user)(=.*)?$'))",message="must not set -u or --user; the Pod's securityContext sets the user"
	// +kubebuilder:validation:XValidation:rule="self.all(a, !a.matches('^-[AMkhiVrvdLCSFXWT]*Z') && !a.matches('^--(e|en|ena|enab|enabl|enable|enable-|enable-s|enable-ss|enable-ssl)(=.*)?$'))",message="must not set -Z or --enable-ssl; use spec.tls"
	// +kubebuilder:validation:XValidation:rule="self.all(a, !a.matches('^-[AMkhiVrvdLCSFXWTZ]*I') && !a.matches('^--(m|ma|max|max-|max-i|max-it|max-ite|max-item|max-item-|max-item-s|max-item-si|max-item-siz|max-item-size)(=.*)?$'))",message="must not set -I or --max-item-size; use spec.maxItemSize"
	// +kubebuilder:validation:XValidation:rule="self.all(a, !a.matches('^-[AMkhiVrvLCSFXWTZ]*d') && !a.matches('^--(d|da|dae|daem|daemo|daemon)(=.*)?$'))",message="must not set -d or --daemon; memcached must stay in the foreground as the container's process"
	// +kubebuilder:validation:XValidation:rule="self.all(a, !a.matches('^-[AMkhiVrvdLCSFXWTZ]*s') && !a.matches('^--(u|un|uni|unix|unix-|unix-s|unix-so|unix-soc|unix-sock|unix-socke|unix-socket)(=.*)?$'))",message="must not set -s or --unix-socket; it turns off the TCP listener clients and probes use"
	// +kubebuilder:validation:XValidation:rule="self.all(a, !a.matches('ssl_(chain_cert|key)='))",message="must not set ssl_chain_cert or ssl_key; use spec.tls"
	// +kubebuilder:validation:XValidation:rule="self.all(a, !a.matches('^-[AMkhiVrvdLCSFXWTZ]*Y') && !a.matches('^--(a|au|aut|auth|auth-|auth-f|auth-fi|auth-fil|auth-file)(=.*)?$'))",message="must not set -Y or --auth-file; use spec.auth"
	// +kubebuilder:validation:XValidation:rule="self.all(a, !a.matches('ext_path='))",message="must not set ext_path; use spec.extstore, which gives each Pod a volume for it"
	// +optional
	ExtraArgs []string `json:"extraArgs,omitempty"`

	// Resources overrides the computed CPU and memory requests and limits of
	// the memcached container, value by value.
	// +optional
	Resources *ResourceOverrides `json:"resources,omitempty"`

	// TLS turns on TLS for client connections, with the certificate and key
	// of a kubernetes.io/tls Secret. Left out, memcached speaks plain TCP.
	// +optional
	TLS *TLS `json:"tls,omitempty"`

	// Auth turns on memcached's authentication (-Y) with the credentials
	// of a Secret: every connection must then authenticate before any
	// other command. Left out, any client that reaches the port may use
	// the cache. It cannot be combined with monitoring.exporter, which
	// cannot authenticate.
	// +optional
	Auth *Auth `json:"auth,omitempty"`

	// PodDisruptionBudget limits how many of the cache's Pods a voluntary
	// disruption, such as a node drain, may take down at once. Every
	// Memcached has one; left out, it allows one Pod down at a time
	// (maxUnavailable 1), so a drain never empties several shards at once.
	// +optional
	PodDisruptionBudget *DisruptionBudget `json:"podDisruptionBudget,omitempty"`

	// MinReadySeconds is how long a new Pod must have been ready before it
	// counts as available: the Deployment's minReadySeconds. A rollout
	// stops the next old Pod only then, so that the clients that hash keys
	// across the Pods see one server change at a time, and the caches that
	// a rollout empties fill one after the other. Available, the counts in
	// status and the operator's pacing of its own rollouts all count a Pod
	// only once it is available. Default 10: the endpoints of the headless
	// Service change within about a second of a Pod's readiness, and
	// cluster DNS serves its records with a 5-second TTL, so a client that
	// resolves the Service again when they expire has seen the new Pod
	// before the next old one stops. Clients that refresh their server
	// list less often need it raised to their interval. It is not part of
	// the Pod template: changing it restarts no Pod. At most 300.
	// +kubebuilder:default=10
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=300
	// +optional
	MinReadySeconds *int32 `json:"minReadySeconds,omitempty"`

	// Pod holds the settings of the cache's Pods that are not memcached's
	// own: where they schedule, at what priority, their labels and
	// annotations, registry credentials and how they stop.
	// +optional
	Pod *PodOverrides `json:"pod,omitempty"`

	// Monitoring configures how the cache is observed.
	// +optional
	Monitoring *Monitoring `json:"monitoring,omitempty"`

	// NetworkPolicy turns on a NetworkPolicy that admits connections to the
	// cache's Pods only from the peers it lists. Left out, the operator
	// keeps no policy (and removes the one it made); set but empty ({}),
	// only Pods of the Memcached's own namespace may connect. Enforcing it
	// takes a network plugin that implements NetworkPolicy.
	// +optional
	NetworkPolicy *NetworkPolicy `json:"networkPolicy,omitempty"`

	// Zones runs one pool of replicas Pods in each zone listed, so that a
	// client reads from the pool of its own zone and no cache traffic
	// crosses zones. Each pool is a Deployment whose Pods run only on nodes
	// labelled topology.kubernetes.io/zone with the zone, behind a headless
	// Service and with a PodDisruptionBudget of its own, all named
	// <name>-<zone>; the Service <name> keeps selecting every Pod. Each
	// pool holds a copy of the whole keyspace, so replicas counts per zone
	// and the cache takes replicas times the number of zones Pods and their
	// memory. Left out, the default, the Memcached runs one pool that
	// ignores zones, as before. Moving between one pool and zone pools
	// keeps the old pool serving until the new ones are available. At most
	// 8 zones.
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=61
	// +kubebuilder:validation:items:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",messageExpression="'zone ' + self + ' cannot name a pool: the pool takes the name <name>-' + self + ', a Service name, so the zone must be lowercase letters, digits and hyphens, starting and ending with a letter or digit'"
	// +listType=set
	// +optional
	Zones []string `json:"zones,omitempty"`

	// Paused stops the operator from changing the children, and pauses a
	// rollout of the Deployment's Pods (its spec.paused) until it is
	// unpaused. Status is still reported, and deletion still honoured.
	// Default false.
	// +kubebuilder:default=false
	// +optional
	Paused bool `json:"paused,omitempty"`

	// DeletionPolicy says whether the children are deleted with the
	// Memcached (Delete) or left serving without an owner (Orphan).
	// Default Delete.
	// +kubebuilder:default=Delete
	// +optional
	DeletionPolicy DeletionPolicy `json:"deletionPolicy,omitempty"`
}

// Extstore is the flash tier of each Pod (spec.extstore).
type Extstore struct {
	// Size is the size of each Pod's volume, for example 10Gi, a whole
	// number of mebibytes from 1Gi to 64Ti. memcached's extstore file takes
	// 90% of it, in whole 64 MiB pages: the filesystem keeps the rest for
	// itself, and ext4 reserves 5% for root, which memcached is not.
	// +kubebuilder:validation:XValidation:rule="string(self).size() <= 32",message="must have at most 32 characters"
	// +kubebuilder:validation:XValidation:rule="isQuantity(string(self)) && quantity(string(self)).isInteger() && quantity(string(self)).asInteger() % 1048576 == 0",message="must be a whole number of mebibytes, such as 10Gi"
	// +kubebuilder:validation:XValidation:rule="!isQuantity(string(self)) || (quantity(string(self)).compareTo(quantity('1Gi')) >= 0 && quantity(string(self)).compareTo(quantity('64Ti')) <= 0)",message="must be between 1Gi and 64Ti"
	// +required
	Size resource.Quantity `json:"size"`

	// StorageClassName is the StorageClass of each Pod's claim. Left out,
	// the cluster's default class; "" asks for a PersistentVolume without
	// a class. A class bound to zones works with spec.zones, since each
	// zone pool's Pods run only in their zone.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self == '' || self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="must be a StorageClass name: lower-case letters, digits, '-' and '.'"
	// +optional
	StorageClassName *string `json:"storageClassName,omitempty"`
}

// ResourceOverrides are CPU and memory requests and limits for the memcached
// container. Any value left out keeps its computed default.
type ResourceOverrides struct {
	// Requests are the minimum resources the Pod is scheduled with. Left
	// out: 100m CPU, and memory equal to the memory limit.
	// +optional
	Requests *ResourceAmounts `json:"requests,omitempty"`
	// Limits are the most the container may use. Left out: no CPU limit,
	// and the memory limit computed from memory and maxConnections
	// (docs/api.md has the formula).
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

// DisruptionBudget is the PodDisruptionBudget of a Memcached's Pods. Set at
// most one of maxUnavailable and minAvailable; with neither,
// maxUnavailable is 1.
// +kubebuilder:validation:XValidation:rule="!(has(self.maxUnavailable) && has(self.minAvailable))",message="set at most one of maxUnavailable and minAvailable"
type DisruptionBudget struct {
	// MaxUnavailable is how many Pods, as a number or a percentage such as
	// "25%", may be down at once through evictions.
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:MaxLength=4
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 : self.matches('^(100|[1-9]?[0-9])%$')",message="must be a non-negative number of Pods or a percentage from 0% to 100%"
	// +optional
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty"`

	// MinAvailable is how many Pods, as a number or a percentage, must stay
	// available through evictions.
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:MaxLength=4
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 : self.matches('^(100|[1-9]?[0-9])%$')",message="must be a non-negative number of Pods or a percentage from 0% to 100%"
	// +optional
	MinAvailable *intstr.IntOrString `json:"minAvailable,omitempty"`
}

// PodOverrides are the Pod-level settings of the cache's Pods.
// +kubebuilder:validation:XValidation:rule="!has(self.preStopDelaySeconds) || self.preStopDelaySeconds < (has(self.terminationGracePeriodSeconds) ? self.terminationGracePeriodSeconds : 30)",message="preStopDelaySeconds must be less than terminationGracePeriodSeconds (30 when left out), or the kubelet kills memcached before the delay ends",fieldPath=".preStopDelaySeconds",reason=FieldValueInvalid
type PodOverrides struct {
	// Labels are added to the Pods, for example for a service mesh or a
	// cost tool. The operator's own labels (app.kubernetes.io/name,
	// app.kubernetes.io/instance and app.kubernetes.io/managed-by) select the
	// Pods and cannot be set here. At most 64, with Kubernetes' limits on
	// each key (317 characters) and value (63).
	// +kubebuilder:validation:MaxProperties=64
	// +kubebuilder:validation:XValidation:rule="!self.exists(k, k in ['app.kubernetes.io/name', 'app.kubernetes.io/instance', 'app.kubernetes.io/managed-by'])",message="must not set app.kubernetes.io/name, app.kubernetes.io/instance or app.kubernetes.io/managed-by: the operator sets them to select the Pods"
	// +optional
	Labels map[string]string `json:"labels,omitempty"`

	// Annotations are added to the Pods. Keys under cache.kubelite.io/ are
	// the operator's. Changing them rolls the Pods. At most 64, and 8 KiB
	// of keys and values in all: Kubernetes allows a Pod 256 KiB, far more
	// than the meshes and agents that read a cache's Pods ask for, and a
	// Memcached's size is what every copy the operator caches costs.
	// +kubebuilder:validation:MaxProperties=64
	// +kubebuilder:validation:XValidation:rule="self.map(k, k.size() + self[k].size()).sum() <= 8192",message="must have at most 8192 characters of keys and values in all"
	// +kubebuilder:validation:XValidation:rule="!self.exists(k, k.startsWith('cache.kubelite.io/'))",message="must not use the prefix cache.kubelite.io/, which the operator owns"
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`

	// ImagePullSecrets name Secrets in the Memcached's namespace that hold
	// credentials for a private registry. At most 16.
	// +kubebuilder:validation:MaxItems=16
	// +listType=atomic
	// +optional
	ImagePullSecrets []corev1.LocalObjectReference `json:"imagePullSecrets,omitempty"`

	// TerminationGracePeriodSeconds is how long a Pod may take to stop,
	// counted from the start of its preStop delay, before it is killed.
	// Left out, Kubernetes' default applies: 30 seconds.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=3600
	// +optional
	TerminationGracePeriodSeconds *int64 `json:"terminationGracePeriodSeconds,omitempty"`

	// PreStopDelaySeconds keeps a stopping Pod's memcached serving for this
	// many seconds, so that the Service's endpoints, and the clients that
	// watch them, drop the Pod before memcached stops taking connections.
	// Left out, it is 5 seconds; 0 turns the delay off.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=300
	// +optional
	PreStopDelaySeconds *int32 `json:"preStopDelaySeconds,omitempty"`

	// TopologySpreadConstraints replace the default spreading, which asks
	// the scheduler to spread the Pods evenly across nodes
	// (kubernetes.io/hostname) and zones (topology.kubernetes.io/zone), as a
	// preference (whenUnsatisfiable ScheduleAnyway, maxSkew 1). A constraint
	// without a labelSelector gets the Pods' selector; matchLabelKeys
	// pod-template-hash, when left out of such a constraint, is added too,
	// so that a rollout spreads the new Pods by themselves. At most 8
	// constraints, and 32 entries in all, counting each constraint, match
	// label, match expression and value, and label key; each string has
	// Kubernetes' limit for what it holds (a key 317 characters, a value
	// 63).
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:XValidation:rule="self.map(c, 1 + (has(c.labelSelector) ? (has(c.labelSelector.matchLabels) ? c.labelSelector.matchLabels.size() : 0) + (has(c.labelSelector.matchExpressions) ? c.labelSelector.matchExpressions.map(r, has(r.values) ? 1 + r.values.size() : 1).sum() : 0) : 0) + (has(c.matchLabelKeys) ? c.matchLabelKeys.size() : 0)).sum() <= 32",message="topologySpreadConstraints must have at most 32 entries in all, counting each constraint, match label, match expression and value and label key"
	// +listType=atomic
	// +optional
	TopologySpreadConstraints []corev1.TopologySpreadConstraint `json:"topologySpreadConstraints,omitempty"`

	// NodeSelector constrains the Pods to nodes with these labels. At most
	// 16, with Kubernetes' limits on each key (317 characters) and value
	// (63).
	// +kubebuilder:validation:MaxProperties=16
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`

	// Tolerations let the Pods schedule onto tainted nodes. At most 16,
	// with Kubernetes' limits on each key (317 characters) and value (63).
	// +kubebuilder:validation:MaxItems=16
	// +optional
	// +listType=atomic
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`

	// Affinity is the Pods' scheduling affinity. The operator sets none of
	// its own: spreading is topologySpreadConstraints' job.
	//
	// Its lists nest three deep, so bounds on each list alone would still
	// admit hundreds of kilobytes; the rules bound the entries of each part
	// in all instead. nodeAffinity may have 32: each match expression or
	// field and each of their values counts one. podAffinity and
	// podAntiAffinity may have 16 each: each term, match label, match
	// expression, value, namespace and label key counts one. Each string
	// has Kubernetes' limit for what it holds (a key 317 characters, a
	// value 63), and every list a maxItems (hack/tools/cmd/crdbounds), which
	// also keeps these rules within the apiserver's CEL cost budget.
	// +kubebuilder:validation:XValidation:rule="!has(self.nodeAffinity) || (has(self.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution) ? self.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms.map(t, (has(t.matchExpressions) ? t.matchExpressions.map(r, has(r.values) ? 1 + r.values.size() : 1).sum() : 0) + (has(t.matchFields) ? t.matchFields.map(r, has(r.values) ? 1 + r.values.size() : 1).sum() : 0)).sum() : 0) + (has(self.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution) ? self.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution.map(p, (has(p.preference.matchExpressions) ? p.preference.matchExpressions.map(r, has(r.values) ? 1 + r.values.size() : 1).sum() : 0) + (has(p.preference.matchFields) ? p.preference.matchFields.map(r, has(r.values) ? 1 + r.values.size() : 1).sum() : 0)).sum() : 0) <= 32",message="nodeAffinity must have at most 32 entries in all, counting each match expression or field and each of their values"
	// +kubebuilder:validation:XValidation:rule="!has(self.podAffinity) || (has(self.podAffinity.requiredDuringSchedulingIgnoredDuringExecution) ? self.podAffinity.requiredDuringSchedulingIgnoredDuringExecution.map(a, 1 + (has(a.labelSelector) ? (has(a.labelSelector.matchLabels) ? a.labelSelector.matchLabels.size() : 0) + (has(a.labelSelector.matchExpressions) ? a.labelSelector.matchExpressions.map(r, has(r.values) ? 1 + r.values.size() : 1).sum() : 0) : 0) + (has(a.namespaceSelector) ? (has(a.namespaceSelector.matchLabels) ? a.namespaceSelector.matchLabels.size() : 0) + (has(a.namespaceSelector.matchExpressions) ? a.namespaceSelector.matchExpressions.map(r, has(r.values) ? 1 + r.values.size() : 1).sum() : 0) : 0) + (has(a.namespaces) ? a.namespaces.size() : 0) + (has(a.matchLabelKeys) ? a.matchLabelKeys.size() : 0) + (has(a.mismatchLabelKeys) ? a.mismatchLabelKeys.size() : 0)).sum() : 0) + (has(self.podAffinity.preferredDuringSchedulingIgnoredDuringExecution) ? self.podAffinity.preferredDuringSchedulingIgnoredDuringExecution.map(w, 1 + (has(w.podAffinityTerm.labelSelector) ? (has(w.podAffinityTerm.labelSelector.matchLabels) ? w.podAffinityTerm.labelSelector.matchLabels.size() : 0) + (has(w.podAffinityTerm.labelSelector.matchExpressions) ? w.podAffinityTerm.labelSelector.matchExpressions.map(r, has(r.values) ? 1 + r.values.size() : 1).sum() : 0) : 0) + (has(w.podAffinityTerm.namespaceSelector) ? (has(w.podAffinityTerm.namespaceSelector.matchLabels) ? w.podAffinityTerm.namespaceSelector.matchLabels.size() : 0) + (has(w.podAffinityTerm.namespaceSelector.matchExpressions) ? w.podAffinityTerm.namespaceSelector.matchExpressions.map(r, has(r.values) ? 1 + r.values.size() : 1).sum() : 0) : 0) + (has(w.podAffinityTerm.namespaces) ? w.podAffinityTerm.namespaces.size() : 0) + (has(w.podAffinityTerm.matchLabelKeys) ? w.podAffinityTerm.matchLabelKeys.size() : 0) + (has(w.podAffinityTerm.mismatchLabelKeys) ? w.podAffinityTerm.mismatchLabelKeys.size() : 0)).sum() : 0) <= 16",message="podAffinity must have at most 16 entries in all, counting each term, match label, match expression and value, namespace and label key"
	// +kubebuilder:validation:XValidation:rule="!has(self.podAntiAffinity) || (has(self.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution) ? self.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution.map(a, 1 + (has(a.labelSelector) ? (has(a.labelSelector.matchLabels) ? a.labelSelector.matchLabels.size() : 0) + (has(a.labelSelector.matchExpressions) ? a.labelSelector.matchExpressions.map(r, has(r.values) ? 1 + r.values.size() : 1).sum() : 0) : 0) + (has(a.namespaceSelector) ? (has(a.namespaceSelector.matchLabels) ? a.namespaceSelector.matchLabels.size() : 0) + (has(a.namespaceSelector.matchExpressions) ? a.namespaceSelector.matchExpressions.map(r, has(r.values) ? 1 + r.values.size() : 1).sum() : 0) : 0) + (has(a.namespaces) ? a.namespaces.size() : 0) + (has(a.matchLabelKeys) ? a.matchLabelKeys.size() : 0) + (has(a.mismatchLabelKeys) ? a.mismatchLabelKeys.size() : 0)).sum() : 0) + (has(self.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution) ? self.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution.map(w, 1 + (has(w.podAffinityTerm.labelSelector) ? (has(w.podAffinityTerm.labelSelector.matchLabels) ? w.podAffinityTerm.labelSelector.matchLabels.size() : 0) + (has(w.podAffinityTerm.labelSelector.matchExpressions) ? w.podAffinityTerm.labelSelector.matchExpressions.map(r, has(r.values) ? 1 + r.values.size() : 1).sum() : 0) : 0) + (has(w.podAffinityTerm.namespaceSelector) ? (has(w.podAffinityTerm.namespaceSelector.matchLabels) ? w.podAffinityTerm.namespaceSelector.matchLabels.size() : 0) + (has(w.podAffinityTerm.namespaceSelector.matchExpressions) ? w.podAffinityTerm.namespaceSelector.matchExpressions.map(r, has(r.values) ? 1 + r.values.size() : 1).sum() : 0) : 0) + (has(w.podAffinityTerm.namespaces) ? w.podAffinityTerm.namespaces.size() : 0) + (has(w.podAffinityTerm.matchLabelKeys) ? w.podAffinityTerm.matchLabelKeys.size() : 0) + (has(w.podAffinityTerm.mismatchLabelKeys) ? w.podAffinityTerm.mismatchLabelKeys.size() : 0)).sum() : 0) <= 16",message="podAntiAffinity must have at most 16 entries in all, counting each term, match label, match expression and value, namespace and label key"
	// +optional
	Affinity *corev1.Affinity `json:"affinity,omitempty"`

	// PriorityClassName is the Pods' priority class.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	PriorityClassName string `json:"priorityClassName,omitempty"`
}

// TLS is where memcached's certificate comes from.
type TLS struct {
	// SecretName names a Secret in the Memcached's namespace that holds
	// tls.crt (the certificate chain, PEM) and tls.key (its private key,
	// PEM), such as the Secret of a cert-manager Certificate. memcached
	// serves it on spec.port and picks up a renewed certificate without a
	// restart, so the cache keeps its items: a sidecar running bash from
	// spec.image (the official Debian-based images have it, -alpine ones
	// do not) tells memcached to reload the files when they change. Until
	// the Secret exists the operator holds the Deployment back and reports
	// TLSSecretNotFound.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="must be a Secret name: lower-case letters, digits, '-' and '.'"
	// +required
	SecretName string `json:"secretName"`

	// ClientCA turns on client certificates: memcached then requires every
	// TLS client to present a certificate signed by a CA of this bundle,
	// and refuses the others. A renewed bundle is loaded without a restart
	// (a CA added is trusted at once; one removed stays trusted until the
	// Pods restart: see docs/operations.md). Left out, clients need no
	// certificate.
	// +optional
	ClientCA *ClientCA `json:"clientCA,omitempty"`

	// PlaintextPort keeps a listener without TLS open on this port, on
	// every address of the Pods, beside the TLS one on spec.port, so that
	// clients can move to TLS one at a time: those that speak TLS use
	// spec.port, the others this port until they have moved. The
	// Service and the NetworkPolicy carry both. It is a migration aid, not
	// a setting to keep: what connects here is neither encrypted nor asked
	// for a client certificate, though with spec.auth it must still
	// authenticate. Removing it closes the port, which restarts the Pods
	// (docs/operations.md, "Moving clients to TLS"). It must differ from
	// spec.port, and from 9150 while the exporter is on.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +optional
	PlaintextPort int32 `json:"plaintextPort,omitempty"`
}

// ClientCAKey is the key of the CA bundle in the Secret or ConfigMap that
// spec.tls.clientCA names. It is fixed, not chosen, because the operator
// checks that the key is there without caching what Secrets and ConfigMaps
// hold: their informers keep only the presence of the keys the operator
// knows, and of this one the fingerprints of at most 64 certificates
// (pkg/childcache), so that the memory they take does not depend on what
// anyone writes into them. cert-manager's CA Secrets and
// trust-manager's bundles can both provide it.
const ClientCAKey = "ca.crt"

// ClientCA is where the bundle of CAs that sign client certificates comes
// from: the ca.crt key (PEM, one or more certificates) of a Secret or of a
// ConfigMap in the Memcached's namespace, exactly one of them. Until it
// exists and has ca.crt, the operator holds the Deployment back and
// reports ClientCANotFound or ClientCAInvalid.
// +kubebuilder:validation:XValidation:rule="has(self.secretName) != has(self.configMapName)",message="set exactly one of secretName and configMapName"
type ClientCA struct {
	// SecretName names a Secret whose ca.crt holds the bundle, such as the
	// Secret of a cert-manager CA Certificate.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="must be a Secret name: lower-case letters, digits, '-' and '.'"
	// +optional
	SecretName string `json:"secretName,omitempty"`
	// ConfigMapName names a ConfigMap whose ca.crt holds the bundle, such
	// as a trust-manager Bundle's target.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="must be a ConfigMap name: lower-case letters, digits, '-' and '.'"
	// +optional
	ConfigMapName string `json:"configMapName,omitempty"`
}

// Auth names the Secret with memcached's credentials.
type Auth struct {
	// SecretName names a Secret in the Memcached's namespace whose key
	// auth holds memcached's auth file: one user:password per line, at
	// most 8 entries of at most 254 bytes, no whitespace in either part (a
	// password may hold ':'); blank lines, lines starting with '#' and
	// carriage returns are dropped. A changed Secret reaches the running
	// memcached without a restart, so the cache keeps its items: a sidecar
	// running bash from spec.image writes the new file and signals
	// memcached. Until the Secret exists with a valid auth file the
	// operator holds the Deployment back and reports AuthSecretNotFound or
	// AuthSecretInvalid.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="must be a Secret name: lower-case letters, digits, '-' and '.'"
	// +required
	SecretName string `json:"secretName"`
}

// Monitoring configures how the cache is observed.
type Monitoring struct {
	// Exporter is the Prometheus memcached exporter sidecar.
	// +optional
	Exporter *Exporter `json:"exporter,omitempty"`
}

// Exporter configures the Prometheus memcached exporter sidecar.
type Exporter struct {
	// Enabled adds the exporter sidecar on port 9150 and a "metrics" port to
	// the Service. Default false.
	// +kubebuilder:default=false
	// +optional
	Enabled bool `json:"enabled,omitempty"`

	// Image is the exporter container image. Default
	// quay.io/prometheus/memcached-exporter:v0.15.3.
	// +kubebuilder:default="quay.io/prometheus/memcached-exporter:v0.15.3"
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:Pattern=`^\S+$`
	// +optional
	Image string `json:"image,omitempty"`
}

// NetworkPolicy says who may connect to a Memcached's Pods. The policy
// selects the Pods by the Memcached's selector labels, and restricts only
// ingress: connections to the memcached port from the clients, and to the
// exporter's port from metrics when the exporter is on. Every other port of
// the Pods is closed to every peer.
//
// The rule bounds the peers and their selectors in all: at most 24 entries,
// each peer, match label, match expression and value counting one. Each
// list also has a maxItems, and each string Kubernetes' limit for what it
// holds, which keeps the rule within the apiserver's CEL cost budget.
// +kubebuilder:validation:XValidation:rule="(has(self.clients) ? self.clients.map(p, 1 + (has(p.podSelector) ? (has(p.podSelector.matchLabels) ? p.podSelector.matchLabels.size() : 0) + (has(p.podSelector.matchExpressions) ? p.podSelector.matchExpressions.map(r, has(r.values) ? 1 + r.values.size() : 1).sum() : 0) : 0) + (has(p.namespaceSelector) ? (has(p.namespaceSelector.matchLabels) ? p.namespaceSelector.matchLabels.size() : 0) + (has(p.namespaceSelector.matchExpressions) ? p.namespaceSelector.matchExpressions.map(r, has(r.values) ? 1 + r.values.size() : 1).sum() : 0) : 0)).sum() : 0) + (has(self.metrics) ? self.metrics.map(p, 1 + (has(p.podSelector) ? (has(p.podSelector.matchLabels) ? p.podSelector.matchLabels.size() : 0) + (has(p.podSelector.matchExpressions) ? p.podSelector.matchExpressions.map(r, has(r.values) ? 1 + r.values.size() : 1).sum() : 0) : 0) + (has(p.namespaceSelector) ? (has(p.namespaceSelector.matchLabels) ? p.namespaceSelector.matchLabels.size() : 0) + (has(p.namespaceSelector.matchExpressions) ? p.namespaceSelector.matchExpressions.map(r, has(r.values) ? 1 + r.values.size() : 1).sum() : 0) : 0)).sum() : 0) <= 24",message="networkPolicy must have at most 24 entries in all, counting each peer, match label, match expression and value"
type NetworkPolicy struct {
	// Clients are the peers that may connect to the memcached port. Left
	// out or empty, the Pods of the Memcached's own namespace may. At most
	// 16.
	// +kubebuilder:validation:MaxItems=16
	// +listType=atomic
	// +optional
	Clients []NetworkPolicyPeer `json:"clients,omitempty"`

	// Metrics are the peers that may connect to the exporter's port, 9150,
	// such as the Prometheus of a monitoring namespace. Left out or empty,
	// or with the exporter off, no peer may. At most 16.
	// +kubebuilder:validation:MaxItems=16
	// +listType=atomic
	// +optional
	Metrics []NetworkPolicyPeer `json:"metrics,omitempty"`
}

// NetworkPolicyPeer selects Pods as a NetworkPolicy's peer does (see
// docs/api.md).
// +kubebuilder:validation:XValidation:rule="has(self.podSelector) || has(self.namespaceSelector)",message="set podSelector, namespaceSelector or both"
type NetworkPolicyPeer struct {
	// NamespaceSelector selects namespaces; alone, every Pod in them.
	// +optional
	NamespaceSelector *LabelSelector `json:"namespaceSelector,omitempty"`

	// PodSelector selects Pods: of the Memcached's namespace, or of the
	// namespaces namespaceSelector selects.
	// +optional
	PodSelector *LabelSelector `json:"podSelector,omitempty"`
}

// LabelSelector is a label query, as metav1.LabelSelector; {} selects
// everything. It is a type of its own so that the schema, repeated for
// each selector, stays short.
// +structType=atomic
type LabelSelector struct {
	// MatchLabels must all match.
	// +optional
	MatchLabels map[string]string `json:"matchLabels,omitempty"`

	// MatchExpressions must all hold.
	// +listType=atomic
	// +optional
	MatchExpressions []LabelSelectorRequirement `json:"matchExpressions,omitempty"`
}

// LabelSelectorRequirement is one of a selector's requirements.
// +kubebuilder:validation:XValidation:rule="(self.operator in ['In', 'NotIn']) == (has(self.values) && self.values.size() > 0)",message="values must be set for In and NotIn, and left out for Exists and DoesNotExist"
type LabelSelectorRequirement struct {
	// The rule above is the apiserver's own check of a NetworkPolicy's
	// requirements, made at admission so that the Memcached is refused
	// rather than its policy. These comments, repeated for each selector
	// in the CRD, stay short.

	// Key of the label.
	// +required
	Key string `json:"key"`
	// Operator on its value.
	// +kubebuilder:validation:Enum=In;NotIn;Exists;DoesNotExist
	// +required
	Operator string `json:"operator"`
	// Values for In and NotIn.
	// +listType=atomic
	// +optional
	Values []string `json:"values,omitempty"`
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

	// Zones is the state of each zone pool when spec.zones is set. The
	// counts above are then per zone, the lowest among the zones, so that
	// the scale subresource reads and sets the per-zone count.
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

// ZoneStatus is the state of one zone pool.
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
	// Endpoint is the address of the pool's own headless Service:
	// <name>-<zone>.<namespace>.svc:<port>.
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
