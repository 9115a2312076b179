// Package batcher is group commit as a library: many goroutines submit
// items, and a handler function receives them in batches, everything waiting
// at that moment up to the item and size bounds, with at most MaxHandlers
// batches in flight. Each item gets its own error back. It is modelled on
// go-cloud's pubsub/batcher, with per-item errors and withdrawal of items
// whose caller gave up before their batch was taken.
//
// The stores (redisstore, sqlstore) submit each call and wait for its
// error; the send side of package ordered posts groups ready for a
// reservation, and messages ready to send, and learns the outcome through
// the items themselves. Its sends use MaxPartial and PartialHold: a request
// that is not full goes at once while no other such request is in flight,
// and under load waits to fill up, unless the one in flight is stuck (in
// flight four times longer than batches usually take).
//
// # Goroutines
//
// A Batcher starts handler goroutines when items wait and stops them when
// none do, so an idle Batcher owns no goroutine. Shutdown refuses new items,
// lets the handlers take and handle every item already submitted, and waits
// for them.
package batcher
