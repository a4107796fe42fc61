// Package serving runs the operator's HTTP listeners: /healthz and /readyz,
// backed by the informer sync state, an apiserver probe and the
// leader-election watchdog; /metrics with optional pprof, over HTTPS
// behind delegated authentication and authorization (DelegatedAuth); and
// the TLS listener with a reloadable certificate that the conversion
// webhook also uses (ListenTLS), with bounds on the connections, the HTTP/2
// streams on each and what each may hold (Limits). It knows nothing of the controller; the
// operator tells it when the caches have synced.
package serving
