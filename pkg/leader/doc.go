// Package leader runs a function while this replica holds a Lease. On a
// graceful stop it releases the Lease only after the function has
// returned, so the next leader does not overlap with it. A leader that
// loses its Lease stops at once instead: it watches the Lease, so a
// takeover is seen within a watch event rather than at the next renewal,
// tells the function to stop without draining, and trips a Fence that
// refuses every further write of the process.
package leader
