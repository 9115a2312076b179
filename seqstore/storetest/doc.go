// Package storetest is the conformance suite that every seqstore.Store
// implementation runs, from a one-line test:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, storetest.Harness{Open: openFresh, Persistent: true})
//	}
//
// The suite checks the contract documented on seqstore.Store: reservation
// semantics and epochs, the send journal, cursor compare-and-set with
// all-or-nothing batches, concurrency across many goroutines and streams,
// reopening persistent storage, cancelled contexts, closed stores, hostile
// stream names and counters near seqstore.MaxSeq.
//
// Each subtest opens its own fresh storage through Harness.Open, so
// subtests run in parallel and never see each other's streams.
package storetest
