// Package memstore is an in-memory seqstore.Store, for tests, examples and
// programs that need ordering but not durability.
//
// Nothing survives the process, so a sender restarted on a new Store starts
// a new epoch at seq 1, and a receiver restarted on one starts with the zero
// cursor. Every method takes one mutex and returns (Advance may take it
// again to drop a large park in chunks); there are no background
// goroutines. Slices passed in (journal bodies, seqs, skipped ranges) are
// copied, and slices returned are fresh copies, so callers may reuse or
// modify them.
//
// # Parking
//
// Store implements seqstore.Parker. Each stream's parked entries are one
// slice ordered by epoch and seq, kept in a map by stream (a stream
// without parks has no key, so ParkedStreams sorts only the streams of
// the queue that have parks). Each entry holds a copy of its body and the
// CRC-32C of its stream key, epoch, seq and body, which Unpark checks: a
// mismatch fails that query with seqstore.ErrCorrupt instead of returning
// a wrong body.
//
// Park checks every entry, and that no cursor passed it, before it
// changes anything, then inserts or replaces each entry by binary search:
// O(log n) per entry plus the copy of its body (and a shift when it lands
// in the middle of a long park). Unpark is a binary search and a copy of
// what it returns. Advance drops the passed entries of each stream under
// the same mutex hold that moves its cursor when they are the whole park
// (the stream's list goes at once) or at most 1,000; beyond that it drops
// the rest before it returns, 1,000 per mutex hold, so that other callers
// wait for one chunk at most. Unpark and ParkedStreams never show an entry
// the cursor passed, so no caller sees a cursor without its drops. Memory is the bodies
// plus 48 bytes per entry and one map entry per stream with parks.
// storetest.BenchPark (BenchmarkPark) parks and drops about 400,000
// entries of 1 KiB per second on one idle core, most of it allocating,
// copying and checksumming bodies; the one mutex keeps more cores from
// adding much.
//
// # Listing
//
// Store implements seqstore.Lister: Streams and State copy what the store
// holds for a queue's streams under its mutex, bodies left out.
//
// # Leases
//
// Store implements seqstore.Leaser for the receivers of one process (and
// for tests of the lease keeper): namespaces, leases and members live in
// memory under the store's mutex, and expire by the monotonic reading of
// time.Now.
//
// # Errors
//
// Errors wrap the seqstore sentinels (seqstore.ErrClosed,
// seqstore.ErrInvalidStream, ...) and are tested with errors.Is. A call that
// fails for some of its requests returns a *seqstore.BatchError naming
// them; Reserve and Advance then apply nothing.
package memstore
