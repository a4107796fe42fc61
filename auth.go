package main

import (
	"fmt"

	cachev1beta1 "github.com/kubelite/memcached-operator/pkg/apis/cache/v1beta1"
	"github.com/kubelite/memcached-operator/pkg/childcache"
	"github.com/kubelite/memcached-operator/pkg/resources"
)

// authSecretIndex indexes Memcacheds by the namespace/name of the Secret
// their spec.auth names, as tlsSecretIndex does for spec.tls.
const authSecretIndex = "authSecret"

func indexByAuthSecret(obj any) ([]string, error) {
	mc, ok := obj.(*cachev1beta1.Memcached)
	if !ok || mc.Spec.Auth == nil {
		return nil, nil
	}
	return []string{mc.Namespace + "/" + mc.Spec.Auth.SecretName}, nil
}

// secretChecks are the Secret cache's checks (childcache.Secret): of the
// auth file it keeps only whether the Pods would hand it to memcached, and
// if not why, so that the operator can say what is wrong with a Secret
// without holding anyone's credentials.
var secretChecks = map[string]func([]byte) string{resources.AuthSecretKey: resources.AuthFileProblem}

// authSecretOutcome reports why the Secret of spec.auth cannot serve, or
// done when auth is off or the Secret holds an auth file the Pods would
// use. Like tlsSecretOutcome it is not retried, since the Secret's events
// sync the Memcached, and the sync holds the Deployment back while there
// is a problem: a new Pod could not mount the Secret, or would stop at its
// start on a file memcached would refuse or misread, while the running
// Pods keep serving with the credentials they have loaded.
func (c *Controller) authSecretOutcome(mc *cachev1beta1.Memcached) outcome {
	if mc.Spec.Auth == nil {
		return done
	}
	name := mc.Spec.Auth.SecretName
	// The lister reads the cache: its only error is NotFound.
	secret, err := c.secretLister.Get(mc.Namespace, name)
	if err != nil {
		return waitsForEvent(cachev1beta1.ReasonAuthSecretNotFound,
			fmt.Sprintf("Secret %q named by spec.auth.secretName does not exist; the Deployment is held until it does", name))
	}
	if _, ok := secret.Data[resources.AuthSecretKey]; !ok {
		return waitsForEvent(cachev1beta1.ReasonAuthSecretInvalid,
			fmt.Sprintf("Secret %q named by spec.auth.secretName has no key %s; the Deployment is held until it has memcached's auth file there, one user:password per line",
				name, resources.AuthSecretKey))
	}
	if problem := childcache.SecretProblem(secret, resources.AuthSecretKey); problem != "" {
		return waitsForEvent(cachev1beta1.ReasonAuthSecretInvalid,
			fmt.Sprintf("Secret %q named by spec.auth.secretName holds an auth file memcached cannot use: %s; the Deployment is held until it is fixed "+
				"(1 to %d lines user:password, each at most %d bytes, without whitespace; blank lines and lines starting with '#' are ignored)",
				name, problem, resources.MaxAuthEntries, resources.MaxAuthLineBytes))
	}
	return done
}
