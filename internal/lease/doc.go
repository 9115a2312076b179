// Package lease keeps a receiver's shard leases (scaleout.md 3.5 and 3.7):
// it heartbeats the membership, acquires the shards the assignment wants
// for this member, renews what it holds, revokes and releases what the
// assignment moved elsewhere, and fences what it can no longer prove it
// holds.
//
// # Core and shell
//
// [Core] decides; it follows etcd's raft package as internal/recvcore
// does. It holds no mutex, starts no goroutine and reads no clock: every
// event brings the time (a monotonic reading in the shell), and every
// event's consequences are [Action]s that [Core.Ready] hands out. The
// shell, [Keeper] (started by [New]), is one goroutine that runs the actions against a
// seqstore.Leaser (each store call in a goroutine of its own, so that a
// store that hangs never delays a fence), tells the receiver through
// [Receiver] to start, revoke or fence a shard, and feeds every outcome
// back as an event.
//
// # Events and actions
//
// Events: [Core.Tick]; the outcomes of the store calls
// ([Core.HeartbeatDone], [Core.AcquireDone], [Core.RenewDone],
// [Core.ReleaseDone], [Core.LeaveDone]); [Core.Drained], the receiver's
// word that a revoked shard has nothing outstanding and its advances are
// durable; [Core.Wake], the store's word that a lease was released or the
// membership changed; and [Core.Close]. Actions: Heartbeat (which also reads the
// live leases), Acquire, Renew, Release and Leave go to the store; Start,
// Revoke and Fence go to the receiver.
//
// # Local deadlines
//
// A lease's local deadline is the send time of the last call that proved
// it (its Acquire, then each good Renew) plus RenewDeadline: the send
// time, never the time the answer came, and never the store's clock,
// because the store's TTL also started no earlier than the send. Every
// event first fences each lease whose deadline passed, before it does
// anything else, and a fenced lease is not released: it expires at the
// store, RenewDeadline-TTL later than the receiver stopped (5 s by
// default), which is the margin for pauses and clock-rate error.
//
// # Handover
//
// Revoke comes before acquire: a held shard whose desired owner
// ([shard.Assign] over the view) is another member is revoked after
// RebalanceDelay, and released only once the receiver reports it
// Drained; the new owner's Acquire succeeds only after that release, or
// after the lease expired at the store. A member acquires only the shards
// assigned to it, and, once a shard has had no live lease for 2 x TTL,
// any such orphan. An adopted orphan is not revoked until the view
// changes, so a desired owner that is in the view but never acquires (a
// stuck member) does not make it flap.
//
// # Wake-ups
//
// Without help, a member learns that a shard was released, or that a
// member joined or left, at its next heartbeat: a handover waits up to
// RenewEvery for each step. When the store is a seqstore.LeaseWatcher
// (memstore, redisstore, sqlstore on PostgreSQL), the Keeper subscribes to
// the namespace's wake-ups and feeds each to [Core.Wake], which brings the
// next heartbeat forward to now, or to WakeGap (RenewEvery/4) after the
// last one: a storm of wake-ups costs at most one heartbeat per WakeGap.
// Wake-ups only shorten waits; the heartbeats every RenewEvery go on, so a
// lost wake-up, a lost subscription (the Keeper subscribes again after
// RenewEvery) or a store without the capability means polling, as before.
//
// # Shutdown
//
// [Core.Close] revokes every held shard and waits for Drained, for at most
// CloseDrain; it fences the shards not drained by then (which are not
// released). It then releases the drained ones and leaves the membership,
// and [Core.Closed] turns true after the Leave's answer. [Core.Abort] is
// the way out when even that cannot wait: it fences what the receiver
// still works on and releases nothing. [Keeper.Close] runs the first, and
// the second when its context ends first.
//
// # What the shell reports
//
// Nothing yet: store errors only delay (a retry, a fence), and the
// receiver learns what matters through Start, Revoke and Fence. Hooks or
// logs for failed calls belong in the shell, outside the core.
package lease
