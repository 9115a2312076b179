package seqstore

import "context"

// Lister is an optional capability of a Store, found by a type assertion
// (database/sql style): it reads what the store holds for the streams of a
// queue, for operators and their tools (examples/inorderctl). It only
// reads: it writes nothing, not even the bookkeeping other reads may tidy
// (Pending and ParkedStreams may drop what they find obsolete).
//
// memstore, filestore, redisstore and sqlstore implement it. Unlike
// Parker it is not part of Store: a receiver and a sender never need it,
// and a Store wrapped for metrics or logging hides it unless the wrapper
// implements it too.
//
// A listing is read in several steps (SQL queries, Redis round trips), not
// as one snapshot: a stream written meanwhile may show some of its state
// from before the write and some from after. What it costs is the store's
// to say; a Redis store scans the key space.
type Lister interface {
	// Streams returns the state of every stream of queue that has any: a
	// sender counter, a cursor other than the zero Cursor, journal entries
	// not marked sent or parked entries its cursor has not passed. They
	// are ordered by stream key.
	Streams(ctx context.Context, queue string) ([]StreamState, error)

	// State returns the state of one stream: the zero StreamState, with
	// Stream set, for a stream that has none.
	State(ctx context.Context, s Stream) (StreamState, error)
}

// StreamState is what a store holds for one stream, without the bodies
// (Pending and Unpark read those).
type StreamState struct {
	Stream Stream
	// SendEpoch and LastSeq are the sender counter: the stream's epoch and
	// the last seq Reserve allocated, both 0 before the first Reserve.
	SendEpoch, LastSeq uint64
	// Cursor is the receiver's stored cursor, the zero Cursor if none.
	Cursor Cursor
	// Journal lists the journal entries not marked sent, by seq; their
	// epoch is SendEpoch.
	Journal []EntryInfo
	// Parked lists the parked entries that Cursor has not passed, by epoch
	// and then seq. Entries it passed that the store has not dropped yet
	// (see Parker) are left out, as Unpark leaves them out.
	Parked []EntryInfo
}

// Empty reports whether st holds nothing: the state of a stream the store
// does not know.
func (st StreamState) Empty() bool {
	return st.SendEpoch == 0 && st.LastSeq == 0 && st.Cursor.Epoch == 0 && st.Cursor.Next == 0 &&
		st.Cursor.Owner == 0 && len(st.Cursor.Skipped) == 0 && len(st.Journal) == 0 && len(st.Parked) == 0
}

// EntryInfo describes a journal or parked entry without its body.
type EntryInfo struct {
	Epoch, Seq uint64
	// Size is the length of the body, in bytes.
	Size int
}
