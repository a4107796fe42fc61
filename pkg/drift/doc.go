// Package drift decides whether a child object still carries everything the
// operator would apply to it, so that a sync which finds nothing to change
// sends no write request, and names what differs when something does.
//
// The sync decides from server-side apply's own record (fieldset.go): the
// fields the operator's apply owns in the object's managedFields, against
// the fields an apply of the desired configuration would own. Whoever
// changes one of the operator's fields takes it out of that record, so a
// cache can keep a digest of the record in place of the values.
//
// Diff compares values instead, mirroring server-side apply ownership
// rather than whole-object equality: a field the desired apply
// configuration leaves unset is not the operator's business, map keys and
// keyed list entries that someone else added are theirs to keep, and only
// the values the operator sets must match. The sync uses it on an object
// read from the apiserver to name the field it repairs.
package drift
