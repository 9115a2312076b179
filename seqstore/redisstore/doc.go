// Package redisstore is a seqstore.Store kept in Redis, through
// github.com/redis/go-redis/v9.
//
// # Keys
//
// Every key starts with Options.Prefix (default "inorder:") and carries the
// stream's seqstore.Stream.Key in a hash tag, so that one stream's keys live
// on one cluster slot and a Lua script can update them atomically:
//
//	<prefix>{<stream key>}:send     hash: epoch, last (the last seq reserved)
//	<prefix>{<stream key>}:journal  hash: seq -> body, entries not yet Sent
//	<prefix>{<stream key>}:cursor   hash: epoch, next, owner, skipped
//	<prefix>pending:{<queue>}       set of stream keys that may have journal entries
//
// Numbers are canonical decimal strings; skipped is "epoch:first-last"
// ranges joined by commas. Lua numbers are doubles, exact only up to 2^53,
// so the scripts add and compare numbers as decimal strings. A value read
// back that does not parse (a foreign key, a wrong type, a negative or
// non-canonical number) yields an error wrapping seqstore.ErrCorrupt; nothing
// is ever reset.
//
// # Group commit
//
// Calls are queued to a few flusher goroutines owned by the Store. Each
// flusher takes everything queued at that moment and sends it as one
// pipeline (one round trip), each call being one EVALSHA of a small script, so
// concurrent Reserve, Sent, Cursor and Advance calls across streams share
// round trips. Stats reports calls and round trips. A call returns once
// Redis has applied its script; what that means for durability (AOF fsync
// policy, replication) is the server's configuration. A call whose context
// ends before its pipeline is sent is dropped; one whose context ends while
// its pipeline is in flight returns the context's error, and its write may
// still take effect.
//
// # Errors
//
// Errors carry the "redisstore:" prefix and the operation and stream, and
// wrap the seqstore sentinels (ErrConflict through *seqstore.ConflictError,
// ErrCorrupt, ErrOverflow, ErrClosed, ...) or go-redis's error (a refused
// connection, a timeout), which stays reachable with errors.As. A call
// whose reply was lost has an unknown outcome: a Reserve may then leave a
// gap, an Advance a cursor that the next compare-and-set reports as a
// conflict.
//
// # Single node, sentinel and cluster
//
// With a *redis.Client (single node or sentinel failover) the pending index
// is updated inside the same scripts as the journal, and an Advance batch is
// one script over all its streams: atomic, as seqstore.Store requires.
//
// With a *redis.ClusterClient (or a client-sharded *redis.Ring) the index
// sits on a different slot or shard from the streams, and Redis cannot run
// one script across them. Then:
//
//   - a journaled Reserve writes the journal first and adds the stream to the
//     index in a second round trip; if that second step fails Reserve
//     returns an error (the entries stay in the journal, unlisted, and
//     their seqs become a gap for the receiver);
//   - Sent does not touch the index; Pending drops streams whose journal is
//     empty (remove, re-check, re-add if a Reserve raced it), so the index
//     holds at most the streams journaled since the last Pending;
//   - an Advance batch of several streams is checked first (one round trip
//     reading every cursor; a conflict there writes nothing), then applied
//     stream by stream: each stream's compare-and-set is atomic, the batch
//     is not. If another writer moves one of the streams between the check
//     and the writes, the other streams of the batch have moved and the
//     *seqstore.ConflictError names only the conflicting ones. Use a single
//     node (or sentinel) where a receiver needs all-or-nothing batches
//     across groups even under such races.
//
// The package's tests, the conformance suite included, also run on a
// cluster when INORDER_TEST_REDIS_CLUSTER_ADDRS lists its nodes
// (comma-separated).
//
// # Client ownership
//
// The client passed to New stays the caller's: Close stops the flushers but
// does not close the client. Configure AUTH, TLS, timeouts and retries on the
// client; this package never logs client options, keys' values or bodies.
package redisstore
