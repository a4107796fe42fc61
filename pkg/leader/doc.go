// Package leader runs a function while this replica holds a Lease, and
// releases the Lease only after the function has returned, so that two
// replicas never run it at once, even during a graceful hand-over.
package leader
