// Package storetest is the conformance suite that every seqstore.Store
// implementation runs, from a one-line test:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, storetest.Harness{Open: openFresh, Persistent: true})
//	}
//
// The suite checks the contract documented on seqstore.Store: reservation
// semantics and epochs, the send journal, cursor compare-and-set, calls of
// many streams (the same stream twice in one Reserve; a request at fault
// fails an atomic call with a *seqstore.BatchError naming it, the others
// aborted, nothing applied; an invalid stream fails alone in Cursors),
// concurrency across many goroutines and streams, races between several
// Store instances on one storage (Harness.Shared), reopening persistent
// storage, cancelled contexts, closed stores, hostile stream names and
// counters near seqstore.MaxSeq.
//
// The Park/* tests check the seqstore.Parker contract for a store whose
// opened Store implements it, and skip otherwise: park and unpark (order,
// From, Max, the epoch filter, copies), re-parking, validation, the body
// limit, refusal of entries a cursor passed, Advance dropping exactly the
// passed entries in its own write (and nothing when it fails),
// ParkedStreams, reopening, concurrency, cancelled contexts, closed stores
// and hostile names. BenchPark measures parking and the Advance that drops
// the parks, for stores that set Harness.OpenBench.
//
// The Lister/* tests check the optional seqstore.Lister capability for a
// store that implements it, and skip otherwise: Streams and State show the
// sender counter, the cursor (owner and skipped ranges included), the
// unsent journal and the live parks with their sizes, of exactly the
// queue's streams with state, ordered by key; parks a cursor passed are
// left out (with Harness.PlantParked); the same after reopening; hostile
// names; invalid names, cancelled contexts and closed stores.
//
// RunLeaser is the lease section, for stores that implement
// seqstore.Leaser, with its own LeaseHarness: besides the opener it takes
// the storage's clock (a fake clock, miniredis's FastForward; real servers
// sleep, with TTLs of a few hundred ms). It checks validation (nothing
// written), the topology record (set once, from racing instances too),
// heartbeats and view versions (a join, leave, update or sweep grows it, a
// renewal does not), Acquire under 64 goroutines over several instances
// (one lease per shard, distinct tokens), expiry and takeover, tokens that
// only grow across shards and takeovers, Renew and Release of live, expired,
// taken-over and forged leases (never reviving one), Leave, Leases, the
// fence through seqstore.Claim (a fenced advance fails with ErrConflict and
// Fenced tells it; a lower claim fails with ErrFenced; a claim holds every
// earlier advance, also when it races the old owner's advances from several
// instances), reopening, cancelled contexts and closed stores. Lost leases
// are expected in the order they were given. Its Watch/* tests check the
// optional seqstore.LeaseWatcher for stores whose LeaseHarness sets
// Watches (and ErrNotSupported for the others): a Release, a Leave, a join,
// a new Weight and a sweep by another instance wake the watcher within 1 s,
// after the change is readable; renewals, Acquire, Renew, Topology and
// calls that change nothing stay quiet for 300 ms; namespaces are apart;
// 50 unread changes leave at most two wake-ups; an unread watcher never
// slows the writers; the end of the context and Close close the channel.
//
// Each subtest opens its own fresh storage through Harness.Open, so
// subtests run in parallel and never see each other's streams.
//
// # Choices the suite makes where the contract leaves room
//
//   - Sent may be lazy: Pending is polled for up to 5 s until the marks show.
//     After a reopen, entries marked sent may be listed again (a lost mark
//     costs only a duplicate), but unsent ones must be.
//   - Epochs must come from seqstore.NewEpoch with a clock within a minute
//     of the test's.
//   - Errors are tested with errors.Is and errors.As only, so stores may wrap
//     them with their own prefix.
//   - A call that fails (overflow, conflict) must not fail other callers'
//     calls that the store coalesces with it into one write.
//   - A call that fails validation need name only the first request at
//     fault it found; every request it names must be at fault.
//   - Cancelled contexts and closed stores fail a call with a plain error
//     (errors.Is finds context.Canceled or seqstore.ErrClosed), not a
//     *seqstore.BatchError.
package storetest
