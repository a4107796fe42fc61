// Package leader runs a function while this replica holds a Lease. On a
// graceful stop it releases the Lease only after the function has
// returned, so the next leader does not overlap with it. A leader that
// loses its Lease (a partition, a stalled apiserver) is not fenced: it is
// told to stop, and may still be finishing a sync when another replica
// starts.
package leader
