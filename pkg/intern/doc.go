// Package intern shares equal values among the objects an informer caches,
// so that the memory a cache needs grows with what differs between its
// objects rather than with everything they hold.
package intern
