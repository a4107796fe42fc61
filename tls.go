package main

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/cache"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
	"github.com/kubelite/memcached-operator/pkg/childcache"
	"github.com/kubelite/memcached-operator/pkg/resources"
)

// tlsSecretIndex indexes Memcacheds by the namespace/name of the Secrets
// their spec.tls names (secretName and clientCA.secretName), so that a
// Secret's event finds its Memcacheds without a scan.
const tlsSecretIndex = "tlsSecret"

func indexByTLSSecret(obj any) ([]string, error) {
	mc, ok := obj.(*cachev1beta1.Memcached)
	if !ok || mc.Spec.TLS == nil {
		return nil, nil
	}
	keys := []string{mc.Namespace + "/" + mc.Spec.TLS.SecretName}
	if ca := mc.Spec.TLS.ClientCA; ca != nil && ca.SecretName != "" && ca.SecretName != mc.Spec.TLS.SecretName {
		keys = append(keys, mc.Namespace+"/"+ca.SecretName)
	}
	return keys, nil
}

// clientCAConfigMapIndex indexes Memcacheds by the namespace/name of the
// ConfigMap their spec.tls.clientCA names.
const clientCAConfigMapIndex = "clientCAConfigMap"

func indexByClientCAConfigMap(obj any) ([]string, error) {
	mc, ok := obj.(*cachev1beta1.Memcached)
	if !ok || mc.Spec.TLS == nil || mc.Spec.TLS.ClientCA == nil || mc.Spec.TLS.ClientCA.ConfigMapName == "" {
		return nil, nil
	}
	return []string{mc.Namespace + "/" + mc.Spec.TLS.ClientCA.ConfigMapName}, nil
}

// handleSecret queues the Memcacheds whose spec.tls, spec.tls.clientCA or
// spec.auth names the Secret. An update is only of interest if it changes
// what the Secret cache keeps, a key or the auth file's verdict: a renewed
// certificate or CA bundle, or a rotation, changes the data, which
// memcached picks up in the Pods without the operator. (A CA taken out of
// a client CA bundle is not picked up: warnClientCARemoved warns of it.)
func (c *Controller) handleSecret(obj any) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	secret, ok := obj.(*corev1.Secret)
	if !ok {
		utilruntime.HandleError(fmt.Errorf("decoding Secret: unexpected type %T", obj))
		return
	}
	for _, index := range []string{tlsSecretIndex, authSecretIndex} {
		c.enqueueIndexed(index, secret.Namespace+"/"+secret.Name)
	}
}

// handleConfigMap queues the Memcacheds whose spec.tls.clientCA names the
// ConfigMap. As for a Secret, only an update that adds or removes ca.crt
// is of interest.
func (c *Controller) handleConfigMap(obj any) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	cm, ok := obj.(*corev1.ConfigMap)
	if !ok {
		utilruntime.HandleError(fmt.Errorf("decoding ConfigMap: unexpected type %T", obj))
		return
	}
	c.enqueueIndexed(clientCAConfigMapIndex, cm.Namespace+"/"+cm.Name)
}

// reasonClientCARemoved is the reason of warnClientCARemoved's Event.
const reasonClientCARemoved = "ClientCARemoved"

// maxListedCAs bounds the fingerprints a ClientCARemoved Event lists, so
// that the message stays short when a bundle loses all of its 64 CAs.
const maxListedCAs = 8

// warnClientCARemoved records a Warning Event on each Memcached whose
// spec.tls.clientCA names the Secret or ConfigMap of an update that took a
// CA out of its ca.crt. memcached's refresh_certs adds the CAs of a
// reloaded bundle to those it trusts and drops none, so the running Pods
// accept clients of that CA until they restart; the Event says so, and
// how to restart them. It compares what the cache keeps of the old and
// the new object (childcache.RemovedCAs) and keeps nothing between
// events, so none is sent for a CA removed while the operator was not
// watching, from a bundle of more CAs than the cache counts, or together
// with ca.crt itself (ClientCAInvalid says that), nor for a created or
// deleted source (ClientCANotFound). It runs in the informers' update
// handlers: recording an Event does not block.
func (c *Controller) warnClientCARemoved(oldObj, newObj any) {
	removed := childcache.RemovedCAs(oldObj, newObj)
	if len(removed) == 0 {
		return
	}
	// RemovedCAs finds CAs only in a Secret or a ConfigMap.
	source := newObj.(metav1.Object)
	kind, index := "ConfigMap", clientCAConfigMapIndex
	if _, ok := newObj.(*corev1.Secret); ok {
		kind, index = "Secret", tlsSecretIndex
	}
	for _, indexer := range c.memcachedIndexers {
		objs, err := indexer.ByIndex(index, source.GetNamespace()+"/"+source.GetName())
		if err != nil {
			utilruntime.HandleError(err)
			continue
		}
		for _, obj := range objs {
			mc, ok := obj.(*cachev1beta1.Memcached)
			if !ok || mc.Spec.TLS == nil || mc.Spec.TLS.ClientCA == nil {
				continue
			}
			// The Secret index also holds the Memcacheds whose
			// spec.tls.secretName names the Secret.
			if k, _, name := clientCASource(mc.Spec.TLS.ClientCA); k == kind && name == source.GetName() {
				c.recorder.Event(mc, corev1.EventTypeWarning, reasonClientCARemoved, clientCARemovedMessage(mc, removed))
			}
		}
	}
}

// clientCARemovedMessage says which CAs left the bundle of mc's
// spec.tls.clientCA, by fingerprint, at most maxListedCAs of them, that
// the running Pods still trust them, and how to restart the Pods of each
// of its pools.
func clientCARemovedMessage(mc *cachev1beta1.Memcached, removed []string) string {
	kind, field, name := clientCASource(mc.Spec.TLS.ClientCA)
	listed := strings.Join(removed[:min(len(removed), maxListedCAs)], ", ")
	if len(removed) > maxListedCAs {
		listed += fmt.Sprintf(" and %d more", len(removed)-maxListedCAs)
	}
	what, signer := "the CA certificate whose SHA-256 fingerprint starts "+listed, "it"
	if len(removed) > 1 {
		what, signer = fmt.Sprintf("%d CA certificates, whose SHA-256 fingerprints start %s", len(removed), listed), "they"
	}
	zones := mc.Spec.Zones
	if len(zones) == 0 {
		zones = []string{""}
	}
	var deployments []string
	for _, zone := range zones {
		deployments = append(deployments, "deployment/"+resources.PoolName(mc, zone))
	}
	return fmt.Sprintf("%s %q named by %s no longer holds %s; memcached drops no CA when it reloads the bundle, so the running Pods accept clients %s signed until they restart: kubectl -n %s rollout restart %s",
		kind, name, field, what, signer, mc.Namespace, strings.Join(deployments, " "))
}

// clientCASource names the Secret or ConfigMap of a client CA: its kind,
// the field that names it and its name.
func clientCASource(ca *cachev1beta1.ClientCA) (kind, field, name string) {
	if ca.SecretName != "" {
		return "Secret", "spec.tls.clientCA.secretName", ca.SecretName
	}
	return "ConfigMap", "spec.tls.clientCA.configMapName", ca.ConfigMapName
}

// enqueueIndexed queues the Memcacheds of every scope that index holds
// under key.
func (c *Controller) enqueueIndexed(index, key string) {
	for _, indexer := range c.memcachedIndexers {
		mcs, err := indexer.ByIndex(index, key)
		if err != nil {
			utilruntime.HandleError(err)
			continue
		}
		for _, mc := range mcs {
			c.enqueueMemcached(mc)
		}
	}
}

// tlsSecretKeys are the keys a Secret named by spec.tls must have.
var tlsSecretKeys = []string{corev1.TLSCertKey, corev1.TLSPrivateKeyKey}

// cachedSecretKeys and cachedConfigMapKeys are all the Secret and
// ConfigMap caches keep of their objects' keys (childcache.Secret,
// childcache.ConfigMap): those of spec.tls and the client CA's ca.crt,
// the one key spec.tls.clientCA reads (cachev1beta1.ClientCAKey says why
// it is fixed).
var (
	cachedSecretKeys    = append(slices.Clone(tlsSecretKeys), cachev1beta1.ClientCAKey)
	cachedConfigMapKeys = []string{cachev1beta1.ClientCAKey}
)

// secretTransform and configMapTransform return the Secret and ConfigMap
// informers' transforms: the keys above, the auth file's verdict
// (secretChecks), and of the client CA bundle the fingerprints of its CAs,
// which warnClientCARemoved compares.
func secretTransform() func(any) (any, error) {
	return childcache.Secret(secretChecks, cachev1beta1.ClientCAKey, cachedSecretKeys...)
}

func configMapTransform() func(any) (any, error) {
	return childcache.ConfigMap(cachev1beta1.ClientCAKey, cachedConfigMapKeys...)
}

// tlsSecretOutcome reports why the Secret of spec.tls cannot serve, or done
// when TLS is off or the Secret has both files. It is not retried: the
// Secret's events sync the Memcached (handleSecret). A Pod whose Secret volume
// cannot be mounted never starts, so the sync holds the Deployment back
// while there is a problem: the running Pods keep serving and no rollout
// is started that would stall.
func (c *Controller) tlsSecretOutcome(mc *cachev1beta1.Memcached) outcome {
	if mc.Spec.TLS == nil {
		return done
	}
	name := mc.Spec.TLS.SecretName
	// The lister reads the cache: its only error is NotFound.
	secret, err := c.secretLister.Get(mc.Namespace, name)
	if err != nil {
		return waitsForEvent(cachev1beta1.ReasonTLSSecretNotFound,
			fmt.Sprintf("Secret %q named by spec.tls.secretName does not exist; the Deployment is held until it does", name))
	}
	var missing []string
	for _, key := range tlsSecretKeys {
		if _, ok := secret.Data[key]; !ok {
			missing = append(missing, key)
		}
	}
	if len(missing) > 0 {
		return waitsForEvent(cachev1beta1.ReasonTLSSecretInvalid,
			fmt.Sprintf("Secret %q named by spec.tls.secretName has no %s; the Deployment is held until it has tls.crt and tls.key", name, strings.Join(missing, " or ")))
	}
	return done
}

// clientCAOutcome reports why the Secret or ConfigMap of spec.tls.clientCA
// cannot give memcached its CA bundle, or done when there is no client CA
// or it has ca.crt. Like tlsSecretOutcome it holds the Deployment back and
// is not retried: handleSecret and handleConfigMap sync the Memcached when
// the source appears or gains the key.
func (c *Controller) clientCAOutcome(mc *cachev1beta1.Memcached) outcome {
	if mc.Spec.TLS == nil || mc.Spec.TLS.ClientCA == nil {
		return done
	}
	kind, field, name := clientCASource(mc.Spec.TLS.ClientCA)
	var has, found bool
	// The listers read the cache: their only error is NotFound.
	switch kind {
	case "Secret":
		if secret, err := c.secretLister.Get(mc.Namespace, name); err == nil {
			_, has = secret.Data[cachev1beta1.ClientCAKey]
			found = true
		}
	default:
		if cm, err := c.configMapLister.Get(mc.Namespace, name); err == nil {
			// The cache keeps the key in data wherever the ConfigMap has
			// it, binaryData included (childcache.ConfigMap).
			_, has = cm.Data[cachev1beta1.ClientCAKey]
			found = true
		}
	}
	switch {
	case !found:
		return waitsForEvent(cachev1beta1.ReasonClientCANotFound,
			fmt.Sprintf("%s %q named by %s does not exist; the Deployment is held until it does", kind, name, field))
	case !has:
		return waitsForEvent(cachev1beta1.ReasonClientCAInvalid,
			fmt.Sprintf("%s %q named by %s has no %s; the Deployment is held until it has the CA bundle (PEM) under that key", kind, name, field, cachev1beta1.ClientCAKey))
	}
	return done
}
