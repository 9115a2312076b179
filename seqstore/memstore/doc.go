// Package memstore is an in-memory seqstore.Store, for tests, examples and
// programs that need ordering but not durability.
//
// Nothing survives the process, so a sender restarted on a new Store starts
// a new epoch at seq 1, and a receiver restarted on one starts with the zero
// cursor. Every method takes one mutex and returns; there are no background
// goroutines. Slices passed in (journal bodies, seqs, skipped ranges) are
// copied, and slices returned are fresh copies, so callers may reuse or
// modify them.
//
// # Errors
//
// Errors wrap the seqstore sentinels (seqstore.ErrClosed,
// seqstore.ErrInvalidStream, ...) and are tested with errors.Is. A call that
// fails for some of its requests returns a *seqstore.BatchError naming
// them; Reserve and Advance then apply nothing.
package memstore
