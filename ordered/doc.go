// Package ordered gives strict, per-group FIFO delivery over a queue that is
// at-least-once and not FIFO, such as an Alibaba Cloud MNS standard queue.
//
// The sender tags each message with its group, the sender's epoch and a
// sequence id; the receiver buffers early arrivals, hands messages to the
// application strictly in sequence order (one at a time per group, groups in
// parallel), deletes redelivered duplicates in the background, and persists
// its cursor in a seqstore.Store.
//
// A [Queue] is created with [New] over a [driver.Queue] and a
// [seqstore.Store]. [Queue.Send] and its variants tag and send; [Queue.Receive]
// returns the next message of any ready group and [Queue.Run] runs a
// [Handler] with bounded concurrency. Each [Message] is settled with
// [Message.Ack] or [Message.Nack].
//
//	q, err := ordered.New(ctx, drv, store, &ordered.Options{Name: "orders"})
//	if err != nil { ... }
//	defer q.Close(ctx)
//	err = q.Send(ctx, "order-42", []byte("paid")) // durable once it returns nil
//	err = q.Run(ctx, func(ctx context.Context, m *ordered.Message) error {
//		return apply(m.Group, m.Seq, m.Body) // nil acks; an error retries in place
//	})
//
// The runnable examples show the common tasks: sending ([Queue.SendAsync],
// [Queue.SendBatch]), receiving ([Queue.Run], [Queue.Receive]), reporting
// what the receiver does ([Hooks]), dead letters ([ReceiveOptions]),
// shutdown on a signal ([Queue.Close]) and moving a stuck group on
// ([Queue.SkipHole]).
//
// # Ordering guarantees
//
// Within a group (a stream), messages are handed out in seq order, each
// after the previous one was acknowledged: a group has at most one message
// out at a time, as with the group lock of a FIFO queue. Groups are
// independent and take turns fairly: a group that cannot progress (a hole,
// a poison message, a cursor conflict, a store error) never holds the
// others. Every decision of the receive side is made by one deterministic
// state machine (internal/recvcore), which a model test drives against an
// adversarial queue and store. It routes every arrival:
//
//   - seq equal to the group's next: handed out once nothing of the group
//     is out;
//   - seq above: held in memory (ReceiveOptions.Window, MaxMemory), its
//     visibility kept alive; beyond the cap on messages received and not
//     deleted (MaxUndeleted) or the window, parked in the store (then
//     deleted from the queue and read back in order; ReceiveOptions.NoPark:
//     left to come back). Nothing is ever deleted that was not delivered
//     (or durably parked). Nothing stays received and not deleted longer
//     than ReceiveOptions.MaxHold;
//   - seq below (a copy of a message already handed out): never delivered
//     again; deleted once the cursor past it is durable;
//   - the same seq again while held: one copy is kept, with the newest
//     receipt; a copy with another payload is reported (Hooks.OnMismatch);
//   - a newer sender epoch (the sender lost its state and began again at
//     1): held, and the group switches to it once the old epoch has nothing
//     held, out or missing (under GapWait a hole of the old epoch is never
//     passed over), GapTimeout after the newer epoch showed up;
//   - an older epoch, or a seq inside a range the gap policy skipped: a
//     late arrival, reported (Hooks.OnLate), then dead-lettered or handed
//     out flagged [Message.Unordered], once per receiver's life (within
//     ReceiveOptions.MaxMemory: see ReceiveStats.Forgotten), and under
//     AtMostOnce a skipped seq once for good (its hand-out takes it out
//     of the skipped range, durably, before the application sees it);
//     never silently deleted;
//   - a body without a valid header: by ReceiveOptions.Untagged. A header
//     whose epoch lies more than a day ahead of the clock, or (with
//     Options.Key) whose MAC does not verify for this queue's
//     Options.MACContext, counts as no header; with a key, the default
//     policy keeps such bodies from the handler.
//
// A hole (next seq missing while later ones wait) is reported after
// GapTimeout and, under GapSkip, skipped; skipped ranges are kept in the
// durable cursor so that late arrivals are recognised after a restart too.
// While a hole lasts, the group's cursor is read again every GapTimeout: a
// second receiver may have handled the missing seq.
//
// # Memory and the service's consumption rules
//
// ReceiveOptions.MaxMemory is one budget for everything the receiver holds:
// bodies, per-group state, acknowledged entries waiting for their commit,
// Unordered copies and the set that deduplicates them. MaxUndeleted caps
// the messages received and not deleted, everything included (MNS throttles
// a client with 5,000 of them), and MaxUndeletedRate the net rate of
// receipts without a delete. The cap counts what the service counts: a
// message whose delete failed, or that was given back, counts until its
// visibility ends, and so does each message of a receive that failed (its
// response may be lost). ReceiveOptions.MaxHold bounds how long a message
// is held (MNS throttles a queue where one is held 30 minutes). During a
// store outage the receiver stops fetching once the cap is reached and
// resumes by itself.
//
// The sender keeps deep backlogs within that cap: per group, a message more
// than SendOptions.MaxDisorder seqs past the oldest one not yet accepted by
// the queue waits for it (default a quarter of MaxUndeleted), so concurrent
// requests and retries never land a group further out of order on a
// FIFO-like queue, and the receiver has nothing to park.
//
// # Delivery modes
//
// [AtLeastOnce] (default): Ack unlocks the group at once; a committer makes
// cursor advances durable in the background (many groups, and many seqs of a
// group, per store write), and only then does the reaper delete the messages
// from the queue, in batches: commit before delete, always. A crash delivers
// again the messages acknowledged since the last durable advance, and those
// out but not acknowledged; nothing is lost. ReceiveOptions.SyncAck makes
// Ack wait for durability.
//
// [AtMostOnce]: the advance past a message is durable before the message is
// handed out, and the message is then deleted by the reaper. A crash may
// lose messages handed out but not yet processed; none is ever delivered
// twice, Unordered ones included. A Nack does not retry. A clean Close loses
// nothing: a message the cursor passed and no application took is marked
// skipped and keeps a copy in the queue, so that the next receiver hands it
// out flagged Unordered.
//
// [ExactlyOnce]: the application applies [Message.CursorAdvance] in its own
// transaction (seqstore/sqlstore's AdvanceTx) together with its writes, then
// calls Ack; the Queue never writes that cursor itself. A message whose
// effects committed is a duplicate after any crash.
//
// # Metadata
//
// [Queue.SendWithMetadata] carries a few string key/values with a message, up
// to 1 KiB encoded: a W3C trace context (package otelinorder injects and
// extracts it) or the application's own. The receiver reads them with
// [Message.Metadata] and [Message.TraceParent]. They are part of the header:
// covered by the MAC with Options.Key, journaled with the payload in durable
// mode, kept when a message is parked or dead-lettered. A message with
// metadata uses a newer header form that receivers of earlier releases take
// for untagged: upgrade receivers first. Messages without metadata are
// written exactly as before.
//
// # Errors
//
// Calls after Close return [ErrClosed]. Ack and Nack on a settled message
// return [ErrAcked]. A cursor write whose outcome is unknown is never
// retried blind: the cursor is read again and compared with what was
// written. A cursor moved by someone else (a second receiver) is reported
// through Hooks.OnConflict and Stats, and the group goes on from the stored
// cursor; a SyncAck Ack then returns an error wrapping [ErrConflict]. A
// store error that retrying soon cannot fix for one stream (corrupt stored
// state) stops that group only, reported as stuck; in AtLeastOnce mode what
// the application acknowledged stays acknowledged (not handed out again):
// the group's retry writes it, and Close waits for that (or for its ctx),
// unless the store refuses the group again first. Driver and store
// failures are retried with backoff (Options.Retry) and logged; a message
// that fails MaxAttempts times is handled by ReceiveOptions.Poison. Errors
// wrap their causes, so errors.Is and errors.As reach the driver's and the
// store's sentinels. A stored cursor that went back (the store lost data)
// is reported through Hooks.OnConflict with an Err wrapping
// [ErrStoreLost]. Hooks run on a goroutine of their own, outside the
// Queue's locks, one at a time.
//
// On the send side, [ErrInvalidGroup], [ErrTooLarge], [ErrInvalidMetadata]
// and [ErrClosed] mean nothing was reserved: the message does not exist. Any other error from a
// send in durable mode (SendDurable) means the outcome is unknown to the
// caller: the message keeps its seq in the journal and recovery sends it
// (New, [Queue.Recover]), so sending the payload again would deliver it
// twice, under two seqs. Retryable driver errors are retried before a send
// fails; a failed store reservation is not retried, since it may have been
// applied. [ErrEpochAhead] means the store handed out an epoch far ahead of
// the clock; recovery refuses such journal entries, and with Options.Key
// entries whose seal does not verify, counted in SendStats.Tampered.
//
// # Shutdown
//
// [Queue.Close] stops fetching and handing out, waits for running Run
// handlers, makes every acknowledged advance durable, deletes those
// messages, and waits for every goroutine the Queue started. Messages held
// in memory and not delivered are given back: their visibility is
// shortened (to a second with MNS), so that a restarted receiver takes them
// at once instead of after the queue's visibility timeout. An AtMostOnce
// Receive waiting for its message's commit is handed the message as the
// flush ends it. Close called from a hook does not wait for that hook. If
// ctx ends first, Close abandons the rest (nothing acknowledged is lost, at
// worst delivered again) and returns ctx's error. Close is idempotent. On the send side, Close stops
// admitting sends (ErrClosed), waits until the admitted ones are sent or ctx
// ends, and flushes the journal's sent marks.
//
// # Observability
//
// [Queue.Stats] returns the counters of both directions, [Hooks] report
// notable events, and Options.Logger logs them. [Queue.StatusHandler]
// serves a status page to mount on a debug server, as net/http/pprof's
// handlers are:
//
//	mux.Handle("/debug/inorder/", q.StatusHandler())
//
// It shows the counters that matter, the groups in trouble first (stuck on
// a hole, a poison message, a conflict or a store error: since when, the
// seq each waits on, the seqs it holds as ranges), and a chart of the
// delivery rate; ?format=json serves the same data as JSON. It costs
// nothing until it is requested. Made with StatusOptions.Repair, it also
// offers the repairs below as buttons, posted from the page's own origin.
//
// # Scale-out
//
// One Queue receives one queue, and its cursors are its own: a second
// receiver on the same streams is a conflict (Hooks.OnConflict), not a
// replica. To receive with several processes, for availability or
// throughput, use package [github.com/inorder/inorder/ordered/scaleout]: a
// logical queue is S queues (shards) and a group always travels through
// the shard its name hashes to (scaleout.NewSender); each shard has one
// owner at a time, a receiver holding a lease on it in the user's Redis or
// SQL store (scaleout.NewReceiver), which runs an ordinary Queue over it.
// Shards are spread over the live receivers by weighted rendezvous hashing
// of their stable names, move when one joins or leaves (drained first:
// its handlers finish and its advances are durable), and are taken over
// when one dies (after the lease's TTL). Every lease carries a token from a
// counter that only grows, claimed into each group's cursor before a
// message of it is handed out, so that an older owner can no longer move
// the cursor: the order and "nothing lost" hold whatever the pauses.
// Exclusive handler execution needs pauses shorter than the lease: a
// receiver hands out and settles nothing past its lease's local deadline
// (ReceiveOptions.Lease: Ack then returns an error wrapping
// seqstore.ErrFenced), and scaleout.Token gives a handler its token to
// fence its own downstream writes. FIFO queues shard the same way (S FIFO
// queues, each with one leased owner). The service's group lock does not
// make several Queues on one FIFO queue safe: each keeps per-group state
// (the cursor it read, early arrivals held or parked) that the lock does
// not cover, so run one receiver per FIFO queue, or scaleout over several.
//
// # Repairing a stuck group
//
// A group stuck on something only a person can decide is moved on by
// [Queue.DeadLetterHead] (a poison message, sent to the dead-letter queue
// first), [Queue.SkipHole] (a hole, skipped as GapSkip skips one, recorded
// in the cursor), [Queue.Reread] (a store error or a conflict: the cursor
// read now) or [Queue.StartAt] (a group without a stored cursor, started
// at a seq). Each is refused with [ErrNotStuck] unless the group is in the
// state it needs, returns once its effect is durable, and is reported by
// Hooks.OnRepair. None deletes a message that was not delivered without a
// dead-letter copy first.
package ordered
