// Package serving runs the operator's HTTP listeners: /healthz and /readyz,
// backed by the informer sync state, an apiserver probe and the
// leader-election watchdog, and /metrics with optional pprof. It knows
// nothing of the controller; the operator tells it when the caches have
// synced.
package serving
