// Package sqlstore is a seqstore.Store in a SQL database through
// database/sql: PostgreSQL, MySQL or MariaDB, and SQLite.
//
// The store registers no driver (it uses pgx's own API, not its
// database/sql driver, only for WatchLeases). Register one in your
// program, e.g.
// github.com/jackc/pgx/v5/stdlib ("pgx"), github.com/go-sql-driver/mysql
// ("mysql") or modernc.org/sqlite ("sqlite", pure Go), open a *sql.DB and
// pass it to Open with the matching Dialect. The *sql.DB stays yours: Close
// does not close it.
//
// # Schema
//
// Migrate creates the tables, explicitly and idempotently, and records the
// schema version in <prefix>schema_version:
//
//	<prefix>send     (queue, grp, epoch, last_seq)     sender counter; last_seq is the last seq reserved
//	<prefix>journal  (queue, grp, seq, body)           entries reserved with a journal and not yet Sent
//	<prefix>cursor   (queue, grp, epoch, next_seq, owner, skipped)
//	<prefix>parked   (queue, grp, epoch, seq, crc, body)  parked messages (version 2), key (queue, grp, epoch, seq)
//
// Migrate before use: code of this version needs schema version 2 (the
// parked table), its lease methods version 3 (the lease tables below), and
// Migrate upgrades a database of version 1 or 2 in place.
//
// Schema version 3 adds the lease capability (Store implements
// seqstore.Leaser):
//
//	<prefix>lease_ns (ns, topology, next_token, view_version)  one row per namespace; its lock orders the namespace's writes
//	<prefix>lease    (ns, shard, owner, token, expires_at)     one row per leased shard
//	<prefix>member   (ns, incarnation, name, weight, expires_at)
//
// Expiries are microseconds since 1970 by the database's clock
// (clock_timestamp() on PostgreSQL, UTC_TIMESTAMP(6) on MySQL,
// julianday('now') on SQLite, to the millisecond), computed and compared in
// SQL: the members' clocks never count. Acquire, Heartbeat, Topology and
// Leave lock the namespace's row (SELECT ... FOR UPDATE; SQLite's immediate
// transaction locks the database) and run in one transaction; Renew and
// Release compare the lease row's owner and token in their UPDATE and
// DELETE, which every dialect re-checks on the latest row version.
//
// # Wake-ups
//
// Store implements seqstore.LeaseWatcher on PostgreSQL through pgx: Release
// (when it ended a lease), Leave (when it removed a member) and Heartbeat
// (when the view changed) run pg_notify('<prefix>lease_wake', ns) in their
// own transaction, so the notification goes out at COMMIT, after the change
// is visible, and never for a transaction rolled back. WatchLeases LISTENs
// on a connection of the *sql.DB it keeps for itself (one per watch: leave
// room in SetMaxOpenConns), through Conn.Raw and pgx's
// WaitForNotification, and replaces it when it is lost. On MySQL/MariaDB and
// SQLite, and on PostgreSQL through another driver, WatchLeases returns an
// error wrapping seqstore.ErrNotSupported: the lease keeper then polls.
//
// The table prefix (Options.TablePrefix, default "inorder_") is validated as
// an identifier and is the only name written into SQL text; queue and group
// names always travel as bound parameters and are stored verbatim (binary
// columns on MySQL, so case and trailing spaces count). A row that fails
// validation when read (a negative number, an unparsable skipped list, a
// journal entry without a sender row) gives an error wrapping
// seqstore.ErrCorrupt; nothing is ever reset.
//
// # Group commit
//
// Reserve, Sent, Advance and Park calls, each of any number of streams, are
// submitted to a group commit (internal/batcher) whose handlers
// (Options.Writers at once) run everything waiting at that moment in one
// transaction and commit once: concurrent callers share the commit.
// The statements are set-based, so their number does not grow with the
// batch: one SELECT ... FOR UPDATE per table locks every row involved
// (SQLite: the transaction holds the database's write lock), the counters
// and compare-and-sets are computed in Go in queue order (so two calls on
// one stream in one transaction see each other), and one multi-row INSERT,
// upsert or DELETE per kind of change writes the result. Each call is
// atomic: a request at fault (a conflict, a corrupt row, an overflow) fails
// its call, whose other requests are aborted and nothing of it is written,
// while the other calls of the transaction go on. A new row is a plain
// INSERT, so two processes creating one stream at once cannot overwrite
// each other: the loser's transaction fails on the duplicate key and is
// retried, and then finds the winner's row. Busy databases, deadlocks and
// connections lost before COMMIT are retried with backoff (internal/retry)
// within TxTimeout. Stats reports calls, transactions, statements and
// retries. Cursors and Pending read outside the group commit; Cursors reads
// any number of streams in one statement per few hundred, and a corrupt row
// fails only its own stream.
//
// # Parking
//
// Store implements seqstore.Parker. Park is one call of the group commit,
// so concurrent Parks and Advances share transactions. In queue order
// with the Advances of its transaction, each entry is checked against its
// stream's cursor row, locked by the same SELECT ... FOR UPDATE as
// Advance's, so no Advance can pass an entry between the check and the
// insert; an entry below the cursor fails the call with ErrConflict. A
// stream without a cursor row gets a zero row (epoch 0, next 0: Cursors
// reports it as the zero Cursor) to lock, inserted plainly: a concurrent
// creation of the same row fails this transaction on the duplicate key and
// the retry locks the winner's row. Bodies go in with one multi-row upsert
// (a re-park replaces the body), each with a CRC-32C over the stream key,
// epoch, seq and body that Unpark checks (a mismatch wraps
// seqstore.ErrCorrupt). A body is BYTEA, BLOB or MEDIUMBLOB (MySQL), which
// hold seqstore.MaxParkBody.
//
// What parking costs: a Park transaction runs the cursor SELECT, an INSERT
// of the missing zero rows if any, and the upsert of the bodies (split at
// 256 rows or 4 MiB); every transaction with an Advance runs one more
// statement per 256 streams, a DELETE of at most 1,000 of the entries its
// streams' new cursors passed (by primary key range, so cheap when there
// are none; PostgreSQL: ctid = ANY(ARRAY(SELECT ... LIMIT)), MySQL:
// DELETE ... ORDER BY ... LIMIT, SQLite: rowid IN (SELECT ... LIMIT)).
// When a statement hit that bound, Advance drops the rest once its
// transaction committed and before it returns, in calls of the group
// commit of their own: each locks the streams' cursor rows and deletes at
// most 1,000 rows they passed, so other calls queue between chunks as
// between any two transactions. No transaction then holds its row locks
// (SQLite: the database's write lock) for the time of deleting a large
// park: with 200,000 parked entries passed by one Advance, another
// stream's Advances meanwhile waited at most 28-105 ms on PostgreSQL,
// 59-149 ms on MariaDB and 27-32 ms on SQLite, against 141-147 ms,
// 0.31-0.48 s and 0.55-1.0 s when one statement deleted them all
// (TestDropLatency on a busy 2-core host); the passing Advance itself took
// 1.2-3.8 s instead of 0.15-1 s, a transaction per chunk.
//
// AdvanceTx drops its first 1,000 in the caller's transaction and leaves
// the rest, which it cannot delete before that transaction commits, to
// later writes: the stream's next Advance or
// AdvanceTx (each drops another 1,000 with its own) and ParkedStreams.
// Passed entries left that way, or by a crash or an error between chunks,
// are never returned by Unpark (its query skips every entry the stream's
// cursor passed), and ParkedStreams lists only streams with entries their
// cursor has not passed, dropping the passed ones it finds. Unpark and
// ParkedStreams read outside the group commit: Unpark in one
// UNION ALL of indexed range reads per 64 queries, ParkedStreams in one
// SELECT ... GROUP BY.
//
// # Listing
//
// Store implements seqstore.Lister for operators' tools: Streams and State
// read the send, cursor, journal and parked rows of a queue (or one
// stream) in four SELECTs, body lengths only, outside the group commit
// and not as one snapshot. Unlike ParkedStreams they delete nothing.
//
// # Errors
//
// Errors carry the "sqlstore:" prefix and the operation and stream, and wrap
// the seqstore sentinels or the driver's error, which stays reachable with
// errors.As. A call that fails for some of its requests (ErrConflict,
// ErrCorrupt, ErrOverflow, ErrInvalidStream, ...) returns a
// *seqstore.BatchError naming them. A call whose COMMIT failed with the
// connection has an unknown outcome and returns the error: a Reserve may
// then leave a gap, an Advance a cursor that the next compare-and-set
// reports as a conflict.
//
// # Exactly-once processing
//
// AdvanceTx runs an Advance batch inside the caller's *sql.Tx. A handler
// that writes its results and advances the message's cursor in the same
// transaction makes both commit or roll back together: after a crash the
// message is either processed and past the cursor, or neither. See the
// example.
//
// # SQLite
//
// SQLite has one writer at a time. Open it with WAL, a busy timeout and
// immediate transactions, e.g.
//
//	file:app.db?_pragma=journal_mode(WAL)&_pragma=busy_timeout(10000)&_txlock=immediate
//
// so that a transaction takes the write lock when it begins instead of
// failing to upgrade later; the store also retries a transaction that found
// the database busy.
package sqlstore
