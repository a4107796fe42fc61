// Package rollout paces the rollouts the operator causes: a Pod template
// that changed because the operator renders it differently, not because
// the spec did. Every restart empties that part of a cache, and an
// operator upgrade would otherwise roll every cache in the cluster at
// once.
package rollout
