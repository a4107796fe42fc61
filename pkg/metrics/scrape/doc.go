// Package scrape reads a Prometheus /metrics endpoint, for the integration
// tests and the bench: both judge the operator by what it exports, and
// share this one parser rather than each keeping its own. The operator
// itself only exports metrics and never imports this package.
package scrape
