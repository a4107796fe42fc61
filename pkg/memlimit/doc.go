// Package memlimit sets the Go runtime's soft memory limit from the
// container's, which the shipped Deployment passes in through the downward
// API, so that the garbage collector works harder near the limit instead of
// the kernel killing the process.
package memlimit
