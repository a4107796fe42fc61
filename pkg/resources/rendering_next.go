//go:build renderingnext

package resources

// The renderingnext build tag makes a rendering one version newer than the
// default build, with a different default preStop delay, so that the
// integration suite can upgrade an operator to a build whose Pod templates
// differ (TestIntegrationPacedOperatorUpgrade). It is never released.

// RenderingVersion: see rendering_version.go.
const RenderingVersion = 5

// defaultPreStopDelaySeconds: see rendering_version.go.
const defaultPreStopDelaySeconds = 6
