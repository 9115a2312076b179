// Package scaleout runs the receivers of one logical queue on several
// processes and machines, with strict order per group and no coordinator.
//
// A logical queue is S MNS queues, its shards. A sender places each group on
// a shard by a stable hash of the group's name (NewSender), so a group's
// messages always travel through one queue. Each shard has at most one
// owner at a time: a receiver (NewReceiver) holds a lease on it in the
// user's store (seqstore.Leaser: Redis or SQL), renews it, and runs an
// ordinary ordered.Queue over the shard's queue while it does. Shards are
// spread over the live receivers by weighted rendezvous hashing of their
// stable names, so a restarted receiver gets its shards back and a
// receiver that joins or leaves moves only the shards it wins or held.
//
// # Fencing
//
// A lease gives exclusion only while pauses are shorter than its timings. The
// store's cursors make it unconditional: every lease takes a token from a
// counter that only grows, and before a shard's owner hands out anything of
// a group it claims the group's cursor with its token (seqstore.Claim); its
// advances compare that token, so once a newer owner claimed a group, an
// older one can no longer move the cursor, and the reaper deletes only what a
// durable cursor passed. A stale owner therefore never moves a cursor, and
// nothing is lost. A handler that was running when its receiver paused
// longer than the lease may overlap with the new owner's: ExactlyOnce mode
// (the cursor advanced in the application's transaction, which the token
// fences too) makes effects exclusive outright, and Token gives at-least-once
// handlers the token to fence their own downstream writes.
//
// # Losing a shard
//
// A receiver delivers only while its lease is good: before each hand-out,
// Ack and Nack, the shard's Queue checks the lease's local deadline (the
// send time of its last good renewal plus RenewDeadline, before the store
// lets another receiver take it over) against the clock
// (ordered.ReceiveOptions.Lease), so a paused or stalled keeper cannot
// overrun it, and an Ack past it returns an error wrapping ErrFenced. The
// receiver stops the shard when that deadline passes, when a renewal
// reports the lease lost, or when a cursor shows a newer owner. It then
// cancels the contexts of the shard's handlers, makes no further advance,
// and gives back the messages it held with a short visibility timeout,
// never deleting them. A shard handed
// over on purpose (a member joined, Close) is drained first: its handlers
// finish, its advances are made durable, then the lease is released and the
// next owner takes it at once.
//
// # FIFO queues
//
// The shards may be MNS FIFO queues (all of them, or none): the sender
// sends each message's group as its MessageGroupId, and each queue has one
// leased owner, as a standard shard does. The service's group lock alone
// does not let several receivers share one FIFO queue: each receiver keeps
// per-group state (the cursor it read, early arrivals held or parked) that
// the lock does not cover.
//
// # Topics
//
// A topic's subscriber scales out the same way. The publisher is a sender
// over T shards that all publish to the topic, shard i with MessageTag
// TopicTag(i). A subscriber is S queues (S divides T) with T subscriptions,
// FilterTag TopicTag(i) into queue i mod S (TopicSubscriptions), so that
// each group reaches exactly the queue of its shard; its receivers are
// ordinary Receivers over the S queues, named after the subscriber.
// CheckTopicSubscriptions and CheckTopicTags check the topic's
// subscriptions from each side. Each sharded subscriber takes T of the
// topic's 100 subscriptions.
//
// # Topology
//
// Senders and receivers store and check the topology (the number of
// shards, the hash, the queue names) in the store at start, and refuse to run
// on a different one (seqstore.ErrTopology). With one shard the logical
// queue is today's single queue: messages are written exactly as by an
// ordered.Queue, and the streams' names are the same (ordered.Options.Name).
package scaleout
