// Package drift decides whether a child object already carries every value
// that the operator would apply to it, so that a sync which finds nothing to
// change sends no write request.
//
// The comparison mirrors server-side apply ownership rather than whole-object
// equality: a field the desired apply configuration leaves unset is not the
// operator's business, map keys and keyed list entries that someone else added
// are theirs to keep, and only the values the operator sets must match. It
// works from the live object alone, so it does not depend on managedFields
// being present in the informer cache.
package drift
