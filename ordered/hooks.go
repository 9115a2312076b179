package ordered

import "time"

// Hooks are called synchronously on notable events, often while the Queue
// holds an internal lock. They must not block and must not call back into
// the Queue; a nil hook is skipped. Use them for metrics and alerts.
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
	// OnStale: a late arrival: a seq of an epoch older than the group's, or
	// of a range the gap policy skipped. It is dead-lettered if
	// ReceiveOptions.DeadLetter is set, else handed out flagged Unordered.
	OnStale func(Event)
	// OnEpoch: the group switched from sender epoch Event.From to
	// Event.Epoch (the sender lost its state and began again).
	OnEpoch func(Event)
	// OnDeadLetter: a message was sent to ReceiveOptions.DeadLetter;
	// Event.Err says why.
	OnDeadLetter func(Event)
	// OnStuck: a message failed MaxAttempts times under PoisonBlock; its
	// group retries it and delivers nothing else until it succeeds.
	OnStuck func(Event)
	// OnConflict: a cursor advance found the stored cursor moved by
	// someone else (a second receiver on the stream); the group stops and
	// re-reads its cursor.
	OnConflict func(Event)
	// OnUntagged: a body without a valid header arrived; Event.ID is its
	// message id.
	OnUntagged func(Event)
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
	Attempt      int           // hand-outs so far (OnStuck, OnDeadLetter)
	Age          time.Duration // age of a hole (OnGap, OnSkip)
	Err          error         // the cause (OnStuck, OnDeadLetter, OnConflict)
}
