// Package recvcore is the decision core of inorder's receive side: a pure,
// deterministic state machine that turns what happens (arrivals from the
// queue, hand-out requests, acks, timers, results of store and queue calls)
// into what must be done (hand this message out, write these cursor
// advances, delete these receipts, extend this visibility, park these
// bodies, report this to the application).
//
// It follows etcd's raft package. A Core holds no mutex, starts no
// goroutine, reads no clock and calls no driver or store: time comes in as
// a value with every event. The shell (package ordered) feeds events with
// the methods below, takes the actions with [Core.Ready], executes them
// outside its lock, and reports each outcome as a new event ([Core.Read],
// [Core.Committed], [Core.Deleted], ...). Every invariant of the receive
// side is therefore a property of this one type that a test can drive step
// by step, and hooks and logs run in the shell, outside any lock.
//
// # Events and actions
//
//   - [Core.Arrive]: messages from the queue. Each is decoded and routed
//     to its group: the next seq, an early one (held, or parked in the store
//     beyond the cap), a duplicate (deleted once the cursor past it is
//     durable), a late one (older epoch or skipped seq: reported, then
//     dead-lettered or handed out flagged Unordered), a newer epoch, or
//     untagged.
//   - [Core.Next], [Core.Ack], [Core.Nack], [Core.Abandon]: the
//     application's side. Next hands out the next message of a ready group,
//     groups taking turns; a group has at most one message out.
//   - [Core.Tick]: timers (retry backoff, gap timeout, epoch switch, start
//     settle, idle eviction, batching windows). [Core.Deadline] says when
//     the next one is due.
//   - [Core.Ready]: the actions due now, as one batch.
//   - [Core.Read], [Core.Committed], [Core.Deleted], [Core.Visibility],
//     [Core.DeadLettered], [Core.Parked], [Core.Unparked]: outcomes.
//   - [Core.Close]: shutdown; [Core.Flushed] says when nothing is left to
//     write or delete.
//
// # Guarantees (each checked by the model test on every step)
//
//   - Order: per group, messages are handed out in (epoch, seq) order, with
//     no seq passed over except a skipped range or an epoch switch that was
//     reported.
//   - One at a time: a group has at most one message out.
//   - Commit before delete: a receipt is deleted only when its message is
//     below the durable cursor (as the store confirmed it), is an Unordered
//     message that was settled or dead-lettered, or is parked durably.
//   - No Unordered copy is handed out twice in one Core's life (within the
//     memory budget of its dedup set).
//   - Memory: everything held (bodies, per-group state, acked entries
//     waiting for their commit, Unordered and late copies, the dedup set)
//     is charged to one budget, Config.MaxMemory.
//   - Cap: at most Config.MaxHeld messages are received and not yet
//     deleted, everything included (MNS throttles clients that receive
//     without deleting).
//   - Liveness: a group whose messages are all present is delivered to its
//     end, whatever other groups do (poisoned, stuck on a gap, conflicted,
//     failing in the store).
//
// # Ambiguity
//
// A store write whose outcome is unknown (an error that is not a
// *seqstore.BatchError) is never retried blind: the Core re-reads the
// cursors concerned and compares them with what it wrote. A real conflict
// (someone else moved the cursor) is told apart from this receiver's own
// write that took effect.
package recvcore
