// Package reorder holds the items of one ordered stream that arrive before
// their turn and releases them strictly in sequence order.
//
// A [Buffer] is a pure data structure: it never blocks, starts no goroutine and
// knows nothing about queues, timers or stores. The receive side of package
// ordered keeps one Buffer per stream, inserts every tagged message it
// receives, and pops while [Buffer.Ready] reports that the next sequence number
// is held. Deciding what to do about a gap (wait, or [Buffer.SkipTo] past it)
// and about an epoch switch ([Buffer.Reset]) is the caller's job.
//
// # Bounds
//
// A Buffer holds only sequence numbers in [Next(), Next()+window) and at most
// maxBytes of item sizes; anything else is refused with [TooFarAhead] so that a
// fast or hostile sender cannot grow memory without limit. The item at Next()
// is the exception to the byte bound: it can leave at once, and refusing it
// would stall the stream for good.
//
// # Memory
//
// Items live in a ring indexed by sequence number modulo its capacity. The ring
// is allocated on the first insert, doubles as the distance between Next() and
// the highest held sequence number grows, and never exceeds the window
// (rounded up to a power of two). A Buffer that has never held an item is a
// 64-byte struct on 64-bit platforms, with no heap storage behind it;
// [Buffer.Trim] returns an empty Buffer to that state. Removed slots are
// zeroed, so the Buffer keeps no reference to an item it no longer holds. Once
// the ring has grown, Insert and Pop do not allocate.
//
// # Sequence numbers
//
// Sequence numbers start at 1 and are compared without overflow, so streams
// whose numbers approach 2^64 work like any other. The largest uint64 is never
// held (Insert refuses it with TooFarAhead), which keeps Next() from wrapping to
// zero; SkipTo may still move Next() there.
//
// A Buffer is not safe for concurrent use.
package reorder
