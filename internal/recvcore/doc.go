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
// # The parts of a Core
//
// A Core is a thin struct over named parts, as raft's state is split into
// raftLog, tracker and readOnly; each file holds one of them:
//
//   - core.go: the Core, [New], the event wrapper (begin and end: every
//     event sets the time, and ends by settling the budget), [Core.Ready],
//     [Core.Deadline], [Core.Tick] and the timers.
//   - group.go: a group (one stream in memory) and its parkView (what it
//     knows of its parked messages); phase.go: its phases (loading, fresh,
//     active, resolving, failed, evicted), changed only by its become
//     functions, and the idle and quiet lists groups are dropped from.
//   - msg.go: a message, whose state (where it is: held, out, settled, on
//     its way to a delete, a dead letter or the park, gone; and while out,
//     what its hand-out waits for) changes only there; the pool that
//     reuses them.
//   - lane.go: one lane per kind of I/O, each owning its queue, its calls
//     in flight and the backoff after failed ones: reads.go (cursors),
//     commits.go (advances, group commit), deletes.go, visibility.go
//     (extensions, shortenings, the hold limit), dead.go (dead letters),
//     park.go (parks, unparks, scans of the park), requeue.go (bodies sent
//     back to the queue at Close). Deadline and Flushed go over the lanes.
//   - budget.go: memory, the cap on messages received and not deleted
//     (counted as the queue counts them), the undeleted rate, and makeRoom
//     and shed, which keep within them without walking every group.
//   - route.go: arrivals, routed to their group (the next seq, early,
//     duplicate, late, newer epoch, untagged); unordered.go: the Unordered
//     copies handed out once per life; skipped.go: skipped ranges.
//   - deliver.go: [Core.Next], [Core.Ack], [Core.Nack], [Core.Abandon];
//     gap.go: holes, skips and epoch switches; close.go: [Core.Close].
//   - status.go: read-only queries for a status page ([Core.StuckStatus],
//     [Core.GroupStatus]), bounded in cost, changing nothing.
//   - repair.go: an operator's repairs of a stuck group
//     ([Core.DeadLetterHead], [Core.SkipHole], [Core.Reread],
//     [Core.StartAt]), events like the others, each going the way of the
//     policy it stands in for.
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
//     settle, idle eviction, batching windows).
//   - [Core.Ready]: the actions due now, as one batch, with what holds until
//     the next event: whether Next may hand something out, the fetch room,
//     and when to Tick.
//   - [Core.Read], [Core.Committed], [Core.Deleted], [Core.Visibility],
//     [Core.DeadLettered], [Core.Parked], [Core.Unparked], [Core.Scanned],
//     [Core.Requeued]: outcomes.
//   - [Core.Close]: shutdown; [Core.Flushed] says when nothing is left to
//     write, delete, give back or send back.
//   - [Core.DeadLetterHead], [Core.SkipHole], [Core.Reread],
//     [Core.StartAt]: repairs, refused (ErrNotStuck) unless the group is in
//     the state each needs; each returns a Ticket that a later Ready
//     resolves once its effect is durable.
//
// # Guarantees
//
// The model tests check these on every step (model_test.go against the
// Core's own view, world_test.go against reference models of the queue and
// the store, across Close, crashes and restarts):
//
//   - Order: per group, messages are handed out in (epoch, seq) order, with
//     no seq passed over except a skipped range or an epoch switch that was
//     reported.
//   - One at a time: a group has at most one message out.
//   - Commit before delete: a receipt is deleted only when its message is
//     below the durable cursor (as the store confirmed it), is an Unordered
//     message that was settled or dead-lettered, or is parked durably.
//   - Skipped ranges are exact: none covers a handed-out seq, none is
//     dropped; a group whose cursor holds seqstore.MaxSkipped of them passes
//     over nothing more.
//   - AtMostOnce: nothing is handed out twice, Unordered copies included;
//     a clean Close leaves every message the cursor passed and nobody took
//     with a skip mark and a copy (in the queue, or sent back to it).
//   - Memory: everything held (bodies, per-group state, settled entries
//     waiting for their commit, Unordered and late copies, the dedup set) is
//     charged to one budget, Config.MaxMemory, and makeRoom and shed keep
//     within it, a flood of new groups included.
//   - Cap: at most Config.MaxHeld messages are received and not yet
//     deleted, as the queue counts them (a receipt whose delete failed, or
//     that was given back, counts until its visibility ends); none is held
//     longer than Config.MaxHold.
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
// write that took effect, and from a store that lost data (a cursor that
// went back: ErrStoreLost).
package recvcore
