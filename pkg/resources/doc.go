// Package resources builds the desired state of a Memcached's children, its
// Deployment and its headless Service, as server-side apply configurations.
//
// Everything here is a pure function of the Memcached: no client, no cache,
// no clock. That keeps the builders cheap to table-test and to fuzz, and lets
// the controller compare what it would apply with what is live before it
// sends anything.
package resources
