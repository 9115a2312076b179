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
//	<prefix>{<stream key>}:park     sorted set of parked entries (see Parking)
//	<prefix>{<stream key>}:parkbody hash: park member -> CRC-32C and body
//	<prefix>pending:{<queue>}       set of stream keys that may have journal entries
//	<prefix>parked:{<queue>}        set of stream keys that may have parked entries
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
// Every call, whatever its number of streams, is one script on a single
// node: Reserve, Sent, Cursors, Advance, Park and Unpark each check every
// key they touch before the first write, so a request at fault fails its
// call (a *seqstore.BatchError naming it, the other requests
// seqstore.ErrAborted) and nothing of it is written. Calls are submitted to a group commit
// (internal/batcher) whose flushers (Options.Flushers at once) send
// everything waiting at that moment as one pipeline, one EVALSHA per call:
// concurrent calls across streams share round trips. Stats reports calls
// and round trips. A call returns once Redis has applied its script; what
// that means for durability (AOF fsync policy, replication) is the
// server's configuration. A call whose context ends before its pipeline is
// sent is withdrawn; one whose context ends while its pipeline is in flight
// returns the context's error, and its write may still take effect.
//
// # Parking
//
// Store implements seqstore.Parker. A stream's parked entries are members
// of its park sorted set, all with score 0, each the epoch and the seq as
// 19-digit zero-padded decimals joined by ':' (epoch 5, seq 12:
// "0000000000000000005:0000000000000000012"), so that the set's lexical order
// is (epoch, seq) order: Unpark reads one ZRANGEBYLEX range (and HMGET of
// the bodies), and a cursor bounds the range Advance drops. The park
// bodies hash maps each member to a 4-byte big-endian CRC-32C (Castagnoli)
// over the stream key, a NUL, the epoch and seq as 8 bytes big-endian
// each, and the body, followed by the body. Unpark verifies it; a
// mismatch, a member without a body or a malformed member or value is
// seqstore.ErrCorrupt, never a wrong body.
//
// Park is one script (per stream on a cluster, see below) that reads the
// stream's cursor, refuses every entry the cursor passed
// (seqstore.ErrConflict, the others seqstore.ErrAborted) and otherwise
// writes all of them: ZADD and HSET per entry, replacing the body of an entry parked
// again. Advance's script, after its compare-and-set, drops in the same
// script up to 1,000 of the entries each new cursor passed, from the lowest
// (ZRANGEBYLEX with LIMIT, HDEL, ZREMRANGEBYLEX) and, on a single node,
// unlists the stream from the queue's park index when its park is empty; a
// failed Advance drops nothing. When a stream had more passed entries,
// Advance drops the rest before it returns, 1,000 per script, each script
// its own round trip outside the group commit, reading the stored cursor
// again and dropping only what it passed: no script holds the server for
// more than a few milliseconds (one script dropping 200,000 entries held it
// about 0.5 s; in chunks another client's PING waited at most about 2 ms
// on a quiet host, TestSec3AdvanceDropsParkInOneScript). A crash or an error
// between chunks leaves entries below the cursor: Unpark never returns
// them (its script reads the cursor), ParkedStreams does not list a stream
// that has only such entries and drops them, and the next Advance of the
// stream drops them with what it passes. A stream without parks costs
// Advance one ZCARD in the script and two more keys and arguments per
// stream (the script checks the cursor's and the park's types with pcall
// rather than TYPE, which keeps the compare-and-set about as cheap as
// before parking existed).
//
// The park index lists, per queue, the streams that may have parks;
// ParkedStreams reads it, counts each listed stream's entries that its
// cursor has not passed (a small script, in pipelines of a few hundred),
// returns the streams that have some sorted by stream key, drops passed
// entries it finds, and unlists streams left without parks. On a single node Park lists a stream
// in the same script as its entries and Advance unlists it, so the index
// is exact. Costs: Park is one script in one round trip whatever its
// number of streams; Unpark one script, one round trip; ParkedStreams one
// round trip per 1,000 listed streams plus one per 256 to check them.
// BenchmarkPark (storetest.BenchPark: a Park of 16 streams' 1 KiB bodies,
// then the Advance that drops them) measured about 23,000 entries/s on a
// single Redis 7.0 with 2 round trips per op, bound by the server's time
// in the two scripts (about 20 µs per stream each on a busy 2-vCPU host);
// an Advance of a stream without parks took about 1.1 times the server
// time of the script before parking existed (BenchmarkAdvance16).
//
// # Listing
//
// Store implements seqstore.Lister for operators' tools. No index lists
// every stream, so Streams SCANs the key space (every master of a cluster,
// every shard of a ring) for the keys of the queue's streams: it costs a
// pass over the whole database. It then reads their hashes and park
// members and the lengths of the bodies (HSTRLEN) in pipelines, and writes
// nothing; State reads one stream without the SCAN. Unlike Pending and
// ParkedStreams it never tidies the indexes.
//
// # Leases
//
// Store implements seqstore.Leaser. A namespace's keys share one hash tag,
// <prefix>lease:{<ns>}:..., so that each call is one script on one node,
// cluster included: a token counter without TTL (INCR), a hash per leased
// shard (owner, token) that expires by PEXPIRE, the members in a sorted set
// scored by their expiry in ms of the server's TIME, their names and
// weights, a view version, and the topology (SET NX). Expiry is the
// server's clock. A failover can roll back the counter or a lease (Redis
// replicates asynchronously), so the fence is as strong as the primary's
// durability: best effort across a failover; use sqlstore where that is
// not enough.
//
// Store implements seqstore.LeaseWatcher with Pub/Sub: the scripts of a
// Release that ended a lease, a Leave that removed a member and a
// Heartbeat that changed the view PUBLISH on <prefix>lease:{<ns>}:wake, so
// the message leaves after the change; WatchLeases SUBSCRIBEs through the
// client's PubSub (one connection per watch), which reconnects and
// subscribes again on its own, and each new subscription wakes. The
// channel carries the namespace's hash tag: a Ring subscribes on the
// shard that runs the scripts, and classic PUBLISH reaches every node of a
// cluster (not exercised on a real cluster).
//
// # Errors
//
// Errors carry the "redisstore:" prefix and the operation and stream, and
// wrap the seqstore sentinels (ErrConflict, ErrCorrupt, ErrOverflow,
// ErrInvalidStream, per request in a *seqstore.BatchError; ErrClosed) or
// go-redis's error (a refused connection, a timeout), which stays reachable
// with errors.As. A key holding a foreign or malformed value fails only its
// own stream with ErrCorrupt. A call whose reply was lost has an unknown
// outcome: a Reserve may then leave a gap, an Advance a cursor that the
// next compare-and-set reports as a conflict.
//
// # Single node, sentinel and cluster
//
// With a *redis.Client (single node or sentinel failover) the pending and
// park indexes are updated inside the same scripts as the journal and the
// parks, and every call is one script over all its streams: atomic, as
// seqstore.Store and seqstore.Parker require.
//
// With a *redis.ClusterClient (or a client-sharded *redis.Ring) each
// stream's keys share a hash tag, but different streams and the index sit
// on different slots or shards, and Redis cannot run one script across
// them. Then each call sends one script per stream, all in one pipeline:
//
//   - a Reserve or Advance of several streams is first checked: the same
//     scripts run dry (they check and plan but write nothing) in one round
//     trip, and a failure there writes nothing. Then each stream is applied
//     atomically, the call is not: if another writer makes a stream fail
//     between the check and the write (a compare-and-set that lost a race),
//     the *seqstore.BatchError reports the requests of the other streams as
//     nil (they took effect; Reserve returns their Reservations with it).
//     Use a single node (or sentinel) where a caller needs all-or-nothing
//     calls across streams even under such races;
//   - a journaled Reserve writes the journal first and adds the stream to
//     the index in a second round trip; if that second step fails Reserve
//     returns an error (the entries stay in the journal, unlisted, and
//     their seqs become a gap for the receiver);
//   - Sent does not touch the index; Pending drops streams whose journal is
//     empty (remove, re-check, re-add if a Reserve raced it), so the index
//     holds at most the streams journaled since the last Pending.
//   - Park has the atomicity of Advance: a call of several streams is first
//     checked in one round trip (nothing written if an entry is refused or
//     a key is corrupt), then each stream's entries are written by its own
//     script; if an Advance of another instance passes an entry between
//     the check and the write, that stream's entries are refused
//     (ErrConflict, ErrAborted) and the *seqstore.BatchError reports the
//     other streams' entries as nil: they are parked. The park index lives
//     on another slot: Park adds the stream to it in a second round trip,
//     only after the entries are written (a Park whose index update fails
//     returns an error: its entries are parked but unlisted until a later
//     Park of the stream lists it). Advance does not touch the index;
//     ParkedStreams unlists streams with empty parks (remove, re-check,
//     re-add if a Park raced it: Park writes before it lists, so one of
//     the two sees the other). A Park costs two round trips on a cluster
//     (three for several streams), Unpark one.
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
