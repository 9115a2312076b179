package ordered

import "time"

// Hooks are called on notable events, one at a time (never concurrently),
// in the order of the events, on a goroutine of the receive side's own,
// outside the Queue's locks: no receiving, acking or store call waits for
// a hook, and a hook may call Queue.Stats, Receive or Close. Close waits
// for the hooks of the events before it (once Close returned nil, no hook
// runs), except that Close called from a hook does not wait for hooks: that
// one and those of the events queued behind it run after it returned. A
// hook must not wait for a Close it did not call itself (on a goroutine of
// its own): that Close waits for the hook, until its ctx ends.
// A slow hook delays only the hooks after it; beyond 65,536 events waiting
// for it, later ones are dropped, hooks and log lines alike (counted in
// ReceiveStats.HooksDropped, logged once). A nil hook is skipped. Use them
// for metrics and alerts; every event is also logged with stable keys
// (group, epoch, seq, err).
//
// OnSettle and OnCommit are measurements, not events: they come once per
// message and once per cursor write, so they do not queue behind the
// others (where they would crowd out the events above). They are called
// directly on the goroutine that did the work, outside the Queue's locks,
// concurrently with each other and with the hooks above, and are not
// logged. They must be fast and safe for concurrent use, like recording
// into a metric: a slow OnSettle slows Ack and Nack.
type Hooks struct {
	// OnGap: a group's next seq (Event.Seq) has been missing for
	// GapTimeout while later seqs wait (GapWait). Reported once per hole;
	// Event.Last is the last missing seq known, Event.Age the hole's age.
	OnGap func(Event)
	// OnSkip: the gap policy skipped the seqs Event.Seq..Event.Last.
	OnSkip func(Event)
	// OnDuplicate: a copy of an already delivered message arrived; it is
	// deleted once the cursor past it is durable.
	OnDuplicate func(Event)
	// OnRedeliver: the queue delivered a message again (Event.DequeueCount
	// > 1, or a second copy of a message held); the newest receipt is kept.
	OnRedeliver func(Event)
	// OnLate: a late arrival: a seq of an epoch older than the group's, or
	// of a range the gap policy skipped. It is dead-lettered if
	// ReceiveOptions.DeadLetter is set, else handed out flagged Unordered.
	OnLate func(Event)
	// OnStale is the former name of OnLate; both are called.
	//
	// Deprecated: use OnLate.
	OnStale func(Event)
	// OnEpoch: the group switched from sender epoch Event.From to
	// Event.Epoch (the sender lost its state and began again).
	OnEpoch func(Event)
	// OnDeadLetter: a message was sent to ReceiveOptions.DeadLetter;
	// Event.Err says why.
	OnDeadLetter func(Event)
	// OnStuck: a group cannot progress on its own: a message failed
	// MaxAttempts times under PoisonBlock (its group retries it and
	// delivers nothing else until it succeeds), or the store refused the
	// group's cursor with an error that retrying soon cannot fix (corrupt
	// stored state: Event.Err; the group's messages come back from the
	// queue and its cursor is read again after Retry.Max).
	OnStuck func(Event)
	// OnConflict: the stored cursor was moved by someone else (a second
	// receiver on the stream): found by a refused advance, or by re-reading
	// the cursor after a write whose outcome was unknown. The group goes on
	// from the stored cursor.
	OnConflict func(Event)
	// OnUntagged: a body without a valid header arrived; Event.ID is its
	// message id, Event.Err says why when a header was refused (a MAC that
	// does not verify under Options.Key, an epoch too far in the future).
	OnUntagged func(Event)
	// OnMismatch: two messages with the same group, epoch and seq and
	// different payloads arrived (a forged or corrupted copy): the first
	// one is kept, the other deleted once the seq is handled.
	OnMismatch func(Event)
	// OnRepair: a repair was accepted (Queue.DeadLetterHead, SkipHole,
	// Reread, StartAt, or the status page's buttons): Event.Action names
	// it, Event.Group its group, Event.Seq (and Event.Last) what it acts
	// on. What it does is reported as it happens (OnDeadLetter, OnSkip,
	// OnConflict).
	OnRepair func(Event)

	// OnSettle: the application settled a message: Ack (or a Run handler
	// that returned nil), Event.Err nil; or Nack (or a handler error),
	// Event.Err the cause. Event.Duration is the time from the hand-out to
	// the Ack or Nack; Event.Attempt the hand-out's. Called once per
	// accepted Ack or Nack (not for ErrAcked or ErrClosed), before Ack or
	// Nack returns, on the caller's goroutine (see above).
	OnSettle func(Event)
	// OnCommit: a store write of cursor advances (Store.Advance: one write
	// for any number of groups, group commit) ended; Event.Duration is how
	// long it took, Event.Err its error (nil: durable). Called on the
	// goroutine of the write (see above), once the write is done: a Close
	// from OnCommit does not wait for it, and one may come as Close
	// returns. ExactlyOnce cursors, which the application writes, are not
	// reported.
	OnCommit func(Event)
}

// Event describes what a hook reports. Fields that do not apply are zero.
type Event struct {
	Group        string
	Epoch        uint64
	Seq          uint64
	Last         uint64        // end of a range (OnGap, OnSkip)
	From         uint64        // previous epoch (OnEpoch)
	ID           string        // the queue's message id, when one message is concerned
	DequeueCount int           // as reported by the queue
	Attempt      int           // hand-outs so far (OnStuck, OnDeadLetter, OnSettle)
	Age          time.Duration // age of a hole (OnGap, OnSkip)
	Duration     time.Duration // how long it took (OnSettle, OnCommit)
	Err          error         // the cause (OnStuck, OnDeadLetter, OnConflict, OnUntagged, OnSettle, OnCommit)
	Action       string        // the repair (OnRepair): "dead-letter-head", "skip-hole", "reread" or "start-at"
}
