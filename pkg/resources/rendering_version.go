//go:build !renderingnext

package resources

// RenderingVersion numbers what the builders render for a given spec. Bump
// it with every change that renders a different Pod template for a spec
// that did not change (a default, a sidecar, a script, a probe), so that
// the operator paces the rollouts it causes and an older replica never
// undoes them; and with a new field of a child that a default fills in
// (version 4: the Deployment's minReadySeconds), which an older replica
// would otherwise remove each time it leads. TestGoldenChildren holds the rendered children of
// representative specs, and fails on any change until they are rewritten
// (make update-golden).
const RenderingVersion = 4

// defaultPreStopDelaySeconds is spec.pod.preStopDelaySeconds when it is
// left out: long enough for the endpoints controller and kube-proxy, or a
// client watching the Service, to drop a stopping Pod before memcached
// closes its listener.
const defaultPreStopDelaySeconds = 5
