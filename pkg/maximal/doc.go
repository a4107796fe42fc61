// Package maximal builds the largest Memcached the CRD's schema admits, the
// object docs/api.md sizes: a unit test caches a thousand of them to bound
// the operator's heap (TestMaximalMemcachedHeap), and an integration test
// has the apiserver admit one (TestIntegrationCRDBounds). One builder serves
// both, so that the object whose heap is measured is the one the apiserver
// is shown.
package maximal
