package childcache

import (
	"bytes"
	"maps"
	"regexp"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubelite/memcached-operator/pkg/drift"
	"github.com/kubelite/memcached-operator/pkg/intern"
	"github.com/kubelite/memcached-operator/pkg/resources"
)

// The informer transforms below decide what the operator holds in memory
// for every object it watches. Each runs on an object the reflector
// decoded, before it reaches the cache or a handler, while no one else
// holds it, so it may change it in place. A watch-list runs it twice on
// the same object, in the reflector's temporary store and again in the
// informer's queue, so each must leave what it returns as it is.

// stripManagedFields drops managedFields, typically the largest part of a
// cached object, which nothing here reads.
func stripManagedFields(obj any) {
	if accessor, ok := obj.(metav1.ObjectMetaAccessor); ok {
		accessor.GetObjectMeta().SetManagedFields(nil)
	}
}

// lastApplied is the annotation kubectl apply keeps a whole copy of the
// object in.
const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

// Memcached is the Memcached informer's transform: managedFields and
// kubectl's last-applied copy of the object dropped, since the sync reads
// neither, and equal values shared through table.
func Memcached(table *intern.Table) func(any) (any, error) {
	return func(obj any) (any, error) {
		stripManagedFields(obj)
		if accessor, ok := obj.(metav1.ObjectMetaAccessor); ok {
			meta := accessor.GetObjectMeta()
			if _, ok := meta.GetAnnotations()[lastApplied]; ok {
				annotations := maps.Clone(meta.GetAnnotations())
				delete(annotations, lastApplied)
				meta.SetAnnotations(annotations)
			}
		}
		table.Object(obj)
		return obj, nil
	}
}

// Child is the child informers' transform: it turns each object into
// a cachedChild. The informers list every object with the operator's
// managed-by label in their scope, and anyone who may create a Deployment,
// Service, PodDisruptionBudget or NetworkPolicy there can add that label, so what a
// labelled object costs must not be up to its author:
//
//   - managedFields, and every annotation but the operator's own
//     (resources.AnnotationPrefix), are dropped: the sync reads no other.
//   - An object that is not a child (resources.IsChild) keeps only its
//     metadata. The sync only reads such an object's owner references,
//     labels, finalizers and deletion state to classify it, and reads an
//     orphan from the apiserver before it adopts it. One that names a
//     Memcached that does not exist as its controller is deleted by the
//     garbage collector.
//   - A child keeps its metadata but its labels, and a Deployment the
//     replicas, strategy and status that the status reads, of the
//     conditions only Progressing and ReplicaFailure (statusConditions),
//     and spec.paused
//     with whether resources.PauseManager's apply owns it: the rollout
//     pause resumes only a rollout the operator paused. In place of the
//     rest of its spec and of its managedFields it keeps the digest of the
//     fields the operator's apply, field manager resources.ManagedBy,
//     owns (drift.Owned): the drift check
//     compares that digest, not the values. The sync reads labels only of
//     objects without a controller.
//   - Equal values are shared through table; the spec hash, different in
//     every child, is not.
func Child(table *intern.Table) func(any) (any, error) {
	return func(obj any) (any, error) {
		if _, done := obj.(*cachedChild); done {
			return obj, nil
		}
		var meta metav1.ObjectMeta
		var deployment *cachedDeploymentState
		switch o := obj.(type) {
		case *appsv1.Deployment:
			meta = o.ObjectMeta
			deployment = &cachedDeploymentState{
				replicas: o.Spec.Replicas, strategy: o.Spec.Strategy, status: o.Status, paused: o.Spec.Paused,
				pausedByOperator: o.Spec.Paused && drift.OwnsField(o.ManagedFields, resources.PauseManager, "spec", "paused"),
			}
			deployment.status.Conditions = statusConditions(o.Status.Conditions)
		case *corev1.Service:
			meta = o.ObjectMeta
		case *policyv1.PodDisruptionBudget:
			meta = o.ObjectMeta
		case *networkingv1.NetworkPolicy:
			meta = o.ObjectMeta
		default:
			return obj, nil
		}
		cached := &cachedChild{ObjectMeta: meta}
		cached.ManagedFields = nil
		cached.SetAnnotations(operatorAnnotations(meta.Annotations))
		if resources.IsChild(&meta) {
			cached.ownedFields = intern.String(drift.Owned(meta.ManagedFields, resources.ManagedBy))
			cached.deployment = deployment
			cached.Labels = poolLabels(meta.Labels)
		}
		table.Object(&cached.ObjectMeta)
		if cached.deployment != nil {
			table.Object(&cached.deployment.strategy)
			table.Object(&cached.deployment.status)
		}
		return cached, nil
	}
}

// poolLabels returns the one label a child keeps in the cache: a zone
// pool's resources.ZoneLabel, by which it is known as its Memcached's
// child (resources.IsChild); nil for every other child.
func poolLabels(labels map[string]string) map[string]string {
	zone, ok := labels[resources.ZoneLabel]
	if !ok {
		return nil
	}
	return map[string]string{resources.ZoneLabel: intern.String(zone)}
}

// statusConditions returns the two conditions the status reads:
// Progressing without its message, of which the status reads the status
// and reason (progressDeadlineExceeded), and whose message names the
// ReplicaSet, so that no two Deployments share one; and ReplicaFailure
// while it is True, with its message cut to maxReplicaFailureBytes, which
// says why no Pod can be created (a quota, an admission rule) and which the
// status quotes.
func statusConditions(conditions []appsv1.DeploymentCondition) []appsv1.DeploymentCondition {
	var kept []appsv1.DeploymentCondition
	for _, c := range conditions {
		switch {
		case c.Type == appsv1.DeploymentProgressing:
			c.Message = ""
		case c.Type == appsv1.DeploymentReplicaFailure && c.Status == corev1.ConditionTrue:
			msg := podName.ReplaceAllString(c.Message, "a Pod")
			c.Message = intern.String(strings.ToValidUTF8(msg[:min(len(msg), maxReplicaFailureBytes)], ""))
		default:
			continue
		}
		kept = append(kept, c)
	}
	return kept
}

// podName matches the name of the Pod a ReplicaFailure message quotes
// (pods "cache-7d9f-x2x4l" is forbidden: ...), which the ReplicaSet
// generates anew on every attempt: kept, each attempt would be a new
// message, and a status write of the Memcached that quotes it.
var podName = regexp.MustCompile(`pods "[^"]*"`)

// maxReplicaFailureBytes bounds what the cache keeps of a Deployment's
// ReplicaFailure message: a quota refusal ("pods \"x\" is forbidden:
// exceeded quota: ...") fits, and a Deployment whose Pods an admission
// webhook refuses with a long message costs no more.
const maxReplicaFailureBytes = 512

// OwnedFields returns the digest of the fields the operator's apply owns in
// a child as the informer caches it, the object its event handlers get;
// "" for any other object.
func OwnedFields(obj any) string {
	if c, ok := obj.(*cachedChild); ok {
		return c.ownedFields
	}
	return ""
}

// operatorAnnotations returns the annotations with the operator's prefix,
// nil if there are none.
func operatorAnnotations(annotations map[string]string) map[string]string {
	var kept map[string]string
	for key, value := range annotations {
		if strings.HasPrefix(key, resources.AnnotationPrefix) {
			if kept == nil {
				kept = map[string]string{}
			}
			kept[key] = value
		}
	}
	return kept
}

// Secret returns the Secret informer's transform, which keeps of each
// Secret its name, which of keys and of the keys of checks it has, for a
// key of checks what its check says of the value, and of caBundle, unless
// it is "", whether the Secret has it and which CA certificates it holds,
// and nothing else: not the data, so that the operator holds no
// certificate, key or credential of anyone's in memory, and not the other
// key names. Secrets carry no label of the operator's, so the cache holds
// every Secret in scope, and anyone who may create a Secret there decides
// what it holds: 3,500 key names of 246 bytes fit in one Secret's 1 MiB,
// and about 200 such Secrets, their key names kept, would fill the
// operator's 256Mi. Trimmed, a Secret costs the same whatever it holds.
//
// A check returns "" for a value it finds usable, or a short problem that
// does not quote the value (the operator shows it on the status); the
// transform keeps at most maxProblemBytes of it. Read it with
// SecretProblem. The cached value of every other key is nil. What it keeps
// of caBundle's certificates, the fingerprints of at most 64 of them, is
// in data under caFingerprintsKey; read it with CAFingerprints.
//
// The Secret it returns carries trimmedMarker in stringData, by which a
// second run (a watch-list's) knows it and leaves it as it is: checking
// the kept verdict as if it were the value would turn every usable value
// into a problem. stringData is write-only: the apiserver merges it into
// data and never returns it, so no Secret that anyone stored can pass for
// a trimmed one. A mark anyone can write, such as a Secret type, would
// let them have their Secrets cached whole and their values taken for
// verdicts.
func Secret(checks map[string]func([]byte) string, caBundle string, keys ...string) func(any) (any, error) {
	return func(obj any) (any, error) {
		s, ok := obj.(*corev1.Secret)
		if !ok || isTrimmed(s) {
			return obj, nil
		}
		var present map[string][]byte
		keep := func(k string, v []byte) {
			if present == nil {
				present = make(map[string][]byte, len(keys)+len(checks)+2)
			}
			present[k] = v
		}
		for _, k := range keys {
			if _, ok := s.Data[k]; ok {
				keep(k, nil)
			}
		}
		for k, check := range checks {
			if v, ok := s.Data[k]; ok {
				var problem []byte
				if p := check(v); p != "" {
					problem = []byte(p[:min(len(p), maxProblemBytes)])
				}
				keep(k, problem)
			}
		}
		if bundle, ok := s.Data[caBundle]; ok && caBundle != "" {
			if _, kept := present[caBundle]; !kept {
				keep(caBundle, nil)
			}
			keep(caFingerprintsKey, []byte(caFingerprints(bundle)))
		}
		return &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{
				Name:            s.Name,
				Namespace:       s.Namespace,
				UID:             s.UID,
				ResourceVersion: s.ResourceVersion,
			},
			Data:       present,
			StringData: trimmedMarker,
		}, nil
	}
}

// trimmedMarker is the stringData of every Secret the Secret transform
// returned. It is shared and never written to.
var trimmedMarker = map[string]string{resources.AnnotationPrefix + "trimmed": ""}

// isTrimmed reports whether the Secret transform returned s.
func isTrimmed(s *corev1.Secret) bool {
	_, ok := s.StringData[resources.AnnotationPrefix+"trimmed"]
	return ok
}

// caFingerprintsKey is the data key under which the Secret and ConfigMap
// transforms keep the fingerprints of a CA bundle (caFingerprints). The
// apiserver refuses it in a stored Secret or ConfigMap, whose keys may
// hold only letters, digits, '-', '_' and '.', so no one can write
// fingerprints the transform did not compute. In the map of the keys kept
// it costs the fingerprints alone; a map of its own, such as stringData or
// binaryData, would cost 300 to 600 bytes more for every Secret or
// ConfigMap with a bundle (the cost tests show it), and every namespace
// has one: kube-root-ca.crt.
const caFingerprintsKey = resources.AnnotationPrefix + "ca-fingerprints"

// ConfigMap returns the ConfigMap informer's transform, which keeps of each
// ConfigMap its name, which of keys and caBundle it has, in data or
// binaryData, and of caBundle, unless it is "", which CA certificates it
// holds, and nothing else, for the reasons Secret gives: ConfigMaps carry
// no label of the operator's, so the cache holds every ConfigMap in scope,
// and a trimmed one costs the same whatever it holds. The keys found are
// kept in data, with empty values, wherever the ConfigMap had them, and
// the fingerprints of at most 64 of caBundle's certificates in data under
// caFingerprintsKey; read them with CAFingerprints.
//
// A ConfigMap with caFingerprintsKey, which no stored one has, is one the
// transform returned: a second run (a watch-list's) leaves it as it is
// instead of fingerprinting the fingerprints. Without a bundle a second
// run keeps what the first kept.
func ConfigMap(caBundle string, keys ...string) func(any) (any, error) {
	return func(obj any) (any, error) {
		cm, ok := obj.(*corev1.ConfigMap)
		if !ok {
			return obj, nil
		}
		if _, trimmed := cm.Data[caFingerprintsKey]; trimmed {
			return obj, nil
		}
		var present map[string]string
		keep := func(k, v string) {
			if present == nil {
				present = make(map[string]string, len(keys)+2)
			}
			present[k] = v
		}
		for _, k := range keys {
			_, inData := cm.Data[k]
			_, inBinary := cm.BinaryData[k]
			if inData || inBinary {
				keep(k, "")
			}
		}
		v, inData := cm.Data[caBundle]
		bundle, inBinary := cm.BinaryData[caBundle]
		if caBundle != "" && (inData || inBinary) {
			if inData {
				bundle = []byte(v)
			}
			keep(caBundle, "")
			keep(caFingerprintsKey, caFingerprints(bundle))
		}
		return &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{
				Name:            cm.Name,
				Namespace:       cm.Namespace,
				UID:             cm.UID,
				ResourceVersion: cm.ResourceVersion,
			},
			Data: present,
		}, nil
	}
}

// ConfigMapKeysChanged reports whether an update of a cached ConfigMap
// added or removed one of the keys its transform keeps. A change of the
// CAs of its bundle is not one: the sync does not read them (RemovedCAs
// does).
func ConfigMapKeysChanged(oldObj, newObj any) bool {
	o, ok1 := oldObj.(*corev1.ConfigMap)
	n, ok2 := newObj.(*corev1.ConfigMap)
	return !ok1 || !ok2 || !slices.Equal(slices.Sorted(maps.Keys(o.Data)), slices.Sorted(maps.Keys(n.Data)))
}

// maxProblemBytes bounds what the Secret cache keeps of a check's problem.
const maxProblemBytes = 128

// SecretProblem returns what the check of the Secret transform found wrong
// with key's value in a cached Secret: "" when the value is usable, or
// when the Secret has no such key (check that with the key's presence).
func SecretProblem(secret *corev1.Secret, key string) string {
	return string(secret.Data[key])
}

// SecretKeysChanged reports whether an update of a cached Secret changed
// what its transform keeps of its keys: a key added or removed, or what a
// check says of a value. A change of the CAs of its bundle is not one: the
// sync does not read them (RemovedCAs does).
func SecretKeysChanged(oldObj, newObj any) bool {
	o, ok1 := oldObj.(*corev1.Secret)
	n, ok2 := newObj.(*corev1.Secret)
	if !ok1 || !ok2 || len(o.Data) != len(n.Data) {
		return true
	}
	for k, v := range o.Data {
		if w, ok := n.Data[k]; !ok || k != caFingerprintsKey && !bytes.Equal(v, w) {
			return true
		}
	}
	return false
}
