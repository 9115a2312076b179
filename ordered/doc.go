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
// # Ordering guarantees
//
// Within a group (a stream), messages are handed out in seq order, each
// after the previous one was acknowledged: a group has at most one message
// out at a time, as with the group lock of a FIFO queue. Groups are
// independent and take turns fairly. The receive side routes every arrival:
//
//   - seq equal to the group's next: delivered once nothing of the group is
//     out;
//   - seq above: held in a per-group reorder buffer (ReceiveOptions.Window,
//     MaxBufferedBytes); beyond the bounds it is not kept and comes back
//     from the queue later (its visibility is shortened when the request
//     budget allows). Nothing is ever deleted that was not delivered;
//   - seq below (a redelivery of a message already handed out): never
//     delivered again; it is deleted once the cursor past it is durable;
//   - the same seq again while held: one copy is kept, with the newest
//     receipt handle;
//   - a newer sender epoch (the sender lost its state and began again at
//     1): held, and the group switches to it once the old epoch has nothing
//     held or out and the new one waited GapTimeout;
//   - an older epoch, or a seq inside a range the gap policy skipped: a
//     late arrival, reported (Hooks.OnStale), then dead-lettered or handed
//     out flagged [Message.Unordered]; never silently deleted;
//   - a body without a header: by ReceiveOptions.Untagged.
//
// A hole (next seq missing while later ones wait) is reported after
// GapTimeout and, under GapSkip, skipped; skipped ranges are kept in the
// durable cursor so that late arrivals are recognised after a restart too.
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
// twice. A Nack does not retry.
//
// [ExactlyOnce]: the application applies [Message.CursorAdvance] in its own
// transaction (seqstore/sqlstore's AdvanceTx) together with its writes, then
// calls Ack; the Queue never writes that cursor itself. A message whose
// effects committed is a duplicate after any crash.
//
// # Errors
//
// Calls after Close return [ErrClosed]. Ack and Nack on a settled message
// return [ErrAcked]. A cursor advance refused by the store because another
// receiver moved the cursor ([seqstore.ErrConflict]) is reported through
// Hooks.OnConflict and Stats, the group stops and re-reads its cursor; a
// SyncAck Ack then returns an error wrapping [ErrConflict]. Driver and store
// failures are retried with backoff (Options.Retry) and logged; a message
// that fails MaxAttempts times is handled by ReceiveOptions.Poison. Errors
// wrap their causes, so errors.Is and errors.As reach the driver's and the
// store's sentinels.
//
// On the send side, [ErrInvalidGroup], [ErrTooLarge] and [ErrClosed] mean
// nothing was reserved: the message does not exist. Any other error from a
// send in durable mode (SendDurable) means the outcome is unknown to the
// caller: the message keeps its seq in the journal and recovery sends it
// (New, [Queue.Recover]), so sending the payload again would deliver it
// twice, under two seqs. Retryable driver errors are retried before a send
// fails; a failed store reservation is not retried, since it may have been
// applied.
//
// # Shutdown
//
// [Queue.Close] stops fetching and handing out, waits for running Run
// handlers, makes every acknowledged advance durable, deletes those
// messages, and waits for every goroutine the Queue started. Messages held
// in memory but not delivered are simply forgotten: they come back from the
// queue after their visibility timeout. If ctx ends first, Close abandons
// the rest (nothing acknowledged is lost, at worst delivered again) and
// returns ctx's error. Close is idempotent. On the send side, Close stops
// admitting sends (ErrClosed), waits until the admitted ones are sent or ctx
// ends, and flushes the journal's sent marks.
package ordered
