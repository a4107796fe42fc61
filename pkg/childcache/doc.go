// Package childcache decides what the operator keeps in memory of the
// objects it watches, and serves it back to the controller.
//
// Its transforms run before an object reaches an informer's cache: a
// Memcached loses its managedFields and kubectl's copy of itself, a Secret
// its data (what it keeps of a value is a check's verdict, such as whether
// an auth file is one memcached can use, never the value), a ConfigMap its
// data, and a Deployment, Service, PodDisruptionBudget or NetworkPolicy
// becomes a cachedChild that holds only what the sync reads. Of a CA
// bundle in a Secret or ConfigMap the cache keeps the fingerprints of at
// most 64 certificates, so that an update that removes a CA shows. Its listers
// read the caches of every informer scope (one namespace, several, or all)
// as one, and hand the children out as their API types, each with the
// digest of the fields the operator's apply owns in it, which stands in
// for managedFields and most of the spec.
//
// It knows nothing of the controller: what makes an object a child, and
// the operator's field manager, are pkg/resources'.
package childcache
