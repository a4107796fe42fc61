// Package deployutil holds what the operator reads from a Deployment's
// status, in one place, as Kubernetes' deployment/util does for its
// controller: whether a rollout is complete, goes on, replaces Pods, or
// missed its progress deadline, and whether a cache is available.
package deployutil
