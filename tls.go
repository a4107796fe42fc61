package main

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/cache"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
)

// tlsSecretIndex indexes Memcacheds by the namespace/name of the Secret
// their spec.tls names, so that a Secret's event finds its Memcacheds
// without a scan.
const tlsSecretIndex = "tlsSecret"

func indexByTLSSecret(obj any) ([]string, error) {
	mc, ok := obj.(*cachev1beta1.Memcached)
	if !ok || mc.Spec.TLS == nil {
		return nil, nil
	}
	return []string{mc.Namespace + "/" + mc.Spec.TLS.SecretName}, nil
}

// handleSecret queues the Memcacheds whose spec.tls or spec.auth names
// the Secret. An update is only of interest if it changes what the Secret
// cache keeps, a key or the auth file's verdict: a renewed certificate or
// a rotation changes the data, which memcached picks up in the Pods
// without the operator.
func (c *Controller) handleSecret(obj any) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	secret, ok := obj.(*corev1.Secret)
	if !ok {
		utilruntime.HandleError(fmt.Errorf("decoding Secret: unexpected type %T", obj))
		return
	}
	for _, indexer := range c.memcachedIndexers {
		for _, index := range []string{tlsSecretIndex, authSecretIndex} {
			mcs, err := indexer.ByIndex(index, secret.Namespace+"/"+secret.Name)
			if err != nil {
				utilruntime.HandleError(err)
				continue
			}
			for _, mc := range mcs {
				c.enqueueMemcached(mc)
			}
		}
	}
}

// tlsSecretKeys are the keys a Secret named by spec.tls must have. They are
// all the Secret cache keeps of a Secret's keys (childcache.Secret).
var tlsSecretKeys = []string{corev1.TLSCertKey, corev1.TLSPrivateKeyKey}

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
