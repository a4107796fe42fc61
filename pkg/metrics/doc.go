// Package metrics defines the operator's own Prometheus metrics. They are
// registered into a registry the caller owns, never into a global one, so
// that two controllers in one process (as in the integration tests) keep
// separate counts.
package metrics
