// Package filestore is a seqstore.Store kept in one local directory: the
// embedded default store of inorder.
//
// One directory holds any number of streams. Open takes an exclusive lock
// on it (a LOCK file, flock), so a second Open, from this process or
// another, fails with an error wrapping seqstore.ErrLocked. The directory is
// created with mode 0700 if missing and every file with mode 0600.
//
// Whoever can write the directory can replace the log and roll the
// counters back, so Open refuses (ErrUnsafeDir) a directory owned by
// another user or writable by group or others. Open opens the directory
// once (os.OpenRoot, following symbolic links in the path given), checks
// the directory it opened, and from then on opens, creates, renames,
// removes and syncs every file through that handle, never by path: if the
// directory is renamed or replaced while the store is open, the store
// goes on in the directory it opened, wherever it now is, and writes
// nothing into whatever took its place (Dir still returns the path given
// to Open). Files are created with O_EXCL|O_NOFOLLOW (a stale temporary
// file is removed first), so a planted symbolic link is never written
// through. LOCK, the logs and the snapshot are opened without waiting and
// must be regular files: a symbolic link (even to a file beside it), a
// FIFO, device, socket or directory in their place makes Open fail with
// ErrUnsafeDir, before anything is read from it.
//
// # Group commit
//
// Every call takes many streams. A Reserve or Advance call is one record of
// the append-only log, covering all its streams, and is applied whole or
// not at all: a request at fault fails the call with a *seqstore.BatchError
// naming it (the others seqstore.ErrAborted). Calls go to one writer
// goroutine, which takes every call waiting, applies them to the in-memory
// state, encodes them as one frame, writes it, fsyncs once (fdatasync on
// Linux) and only then answers all of those callers. N concurrent callers
// therefore cost about one fsync per round, not N. Journal bodies go in the
// same record as their reservation. Sent marks are lazy: they leave memory
// at once and ride, as one record, on the next commit, or are written on
// their own after Options.SentFlushDelay.
//
// Callers that wait on every call come back to the writer a few
// microseconds after their commit; a writer that committed whatever had
// arrived by then would split N callers into two alternating half-full
// commits. So when fewer requests are waiting than the previous commit
// answered, the writer waits for the rest, at most one average fsync
// (capped by Options.CommitWait), and applies and encodes them in chunks
// as they arrive, so that little is left to do after the last one. A lone
// serial caller never waits.
//
// The writer fills the log with zeros 1 MiB ahead of its frames and writes
// frames over them: a frame appended to a file makes fdatasync commit the
// file system's journal too (the new size and blocks), a frame written over
// blocks already on disk does not, which on ext4 halves the fsync time of
// the 2 to 8 KiB frames of 16 to 64 reservations. A clean Close cuts the
// zeros; after a crash, recovery cuts them (logged at Info; a torn tail
// with other bytes is logged at Warn).
//
// One call may journal up to 64 MiB; a commit takes requests up to 4 MiB
// (or one larger request) so that frames stay bounded.
//
// Reads (Cursors, Pending, Unpark, ParkedStreams) see only durable state:
// if they observe a frame that is still being written, they wait for its
// fsync.
//
// # Parking
//
// Store implements seqstore.Parker. A Park call is one record of the log,
// like an Advance, and goes through the same writer: concurrent Park,
// Advance and Reserve calls share one frame and one fsync, and a lone Park
// call costs one fsync. The record holds every entry of the call, so a
// torn tail loses the whole call or none of it. Each entry carries a
// CRC-32C over its stream key, epoch, seq and body.
//
// Parked bodies are not kept in memory: parking exists to keep them out of
// the receiver's memory. The store keeps, per stream and ordered by epoch
// and seq, only where each body is (the log frame of its Park call, or a
// park segment) and its checksum, 48 bytes an entry. Unpark reads each body
// with one pread (usually from the page cache) and verifies its checksum;
// a mismatch, or a body past the end of its file, fails the call with an
// error wrapping seqstore.ErrCorrupt. A re-park writes a new record and
// points the entry at it.
//
// Applying an Advance, and replaying its record at Open, drops the parked
// entries its new cursor passed: no record of its own is needed, and a
// park below its stream's cursor is refused (seqstore.ErrConflict).
//
// What parking costs: the bodies are written once to the log, and once
// more by the first snapshot after it, which copies the bodies still
// parked out of the logs it is about to delete into a park segment file
// (park-<generation>, written whole and synced before the snapshot names
// it; read back from the old files, outside the store's mutex, while
// commits wait). Later snapshots refer to a body where it is, so a body
// parked for long is not copied again, until its segment is mostly
// garbage: a snapshot copies the live bodies of every segment less than
// half of whose bytes are still parked into its new segment, and removes
// the segments it no longer names (after the directory sync that makes
// the snapshot durable). The segments thus hold at most about twice the
// bytes parked, and each byte parked is copied about twice at most. A
// snapshot that writes a segment also merges into it the segments smaller
// than a quarter of SnapshotBytes (at least 64 KiB, at most 1 MiB), so
// that a few long-parked bodies per snapshot do not leave a small file
// and an open descriptor per snapshot for ever. (It
// used to be copied by every snapshot: 200 bodies of 16 KiB parked across
// 32 snapshots of 256 KiB of log wrote 82 MiB of snapshots, 26 times the
// bytes parked; now 3.2 MiB, 1.02 times; see TestSnapshotsCopyParksOnce.)
// Open reads the snapshot and logs whole and keeps only the locations; it
// checks that each body lies within its segment and reads the bodies
// themselves only on Unpark. The store holds one open descriptor per file
// that may hold bodies: the park segments and the logs since the snapshot.
//
// # Memory
//
// The whole state but the parked bodies is in memory: per stream its name,
// sender counter, unsent journal bodies, cursor and parked entries'
// locations. A stream is never forgotten, since its cursor must be kept;
// but what it no longer needs is freed. A stream whose only state is a
// cursor with no owner and no skipped ranges (what a receiver stores for
// each group it has seen) is kept as 16 bytes beside its name in a map:
// about its name plus 55 bytes of heap (measured: 181 bytes with 128-byte
// group names, 68 with 14-byte ones; it was 260 and 147 with a whole
// stream state each). A stream grows to a whole state while it has more
// (sender state, an owner, skipped ranges, parked entries) and shrinks
// back once the Advance that passes its parked entries leaves it only a
// plain cursor. Names are copied when a stream is created, so that the
// store never keeps a larger string of the caller's alive. A sender that
// invents group names still costs a receiver that much per name, for
// ever: bound them above the store.
//
// # Files and recovery
//
// A log file starts with a header (magic, format version, generation) and
// holds frames: length, CRC-32C, the frame's own offset and the payload;
// the checksum also covers the log's generation, so a frame shifted, swapped
// or copied from another log is recognised as out of place. The writer syncs
// each frame before writing the next, so a crash can only tear the last
// frame of the last log. When the log passes Options.SnapshotBytes, the
// writer saves the state (counters, cursors, unsent journal bodies, and the
// parked entries with where their bodies are in the park segments) to a
// snapshot file through a temporary file, fsync, rename and directory
// fsync, then continues in a fresh log and deletes the old one. Commits
// wait while the writer does this (three fsyncs plus writing the state,
// and two more when it writes a park segment), once per SnapshotBytes of
// log. Snapshots are written in format version 3; a store whose snapshot
// is of version 2 (parked bodies in the snapshot itself) or 1 (before
// parking) opens as before, and its next snapshot moves the bodies to a
// park segment. A release before version 3 refuses a version 3 snapshot
// (ErrCorrupt) rather than misread it. A park segment the snapshot names
// that is missing, has a bad header or is too short for a body is
// reported as ErrCorrupt; one the snapshot does not name (left by a
// snapshot that did not finish) is removed.
//
// Open loads the snapshot and replays the logs written since. A torn tail (a
// last frame cut short or failing its checksum with no valid frame after
// it) is truncated to the last good frame and logged at Warn. A bad frame
// with valid frames after it, a bad frame in an older log, a bad snapshot, a
// missing log, or a bad or short header in the log a snapshot continues in
// (that header was synced before the snapshot was renamed into place) or in
// the first log of a store without a snapshot are reported as errors
// wrapping seqstore.ErrCorrupt that name the file: the store never silently
// resets state. Open creates that first log whole (its header written to
// log.tmp, synced, renamed into place, and the directory synced), so a short
// one was cut or damaged, not torn by a crash. (A store whose very first
// Open, by a release before this rule, crashed before that header was
// synced reports it too; it held no state, and the directory can be
// removed.) Only the log a snapshot was creating when it crashed, never
// named by a snapshot and never written, may have a short header: it is
// created again.
//
// # Read-only
//
// Options.ReadOnly opens a store to inspect it (examples/inorderctl):
// Open writes nothing, not even what recovery repairs (it reads past a
// torn tail and leaves leftovers), and every write fails with
// ErrReadOnly. It takes the directory's lock like any Open, so it fails
// with seqstore.ErrLocked while a process has the store open.
//
// # Listing
//
// Store implements seqstore.Lister (Streams and State) from the state in
// memory, bodies left out.
//
// # Leases
//
// Store implements seqstore.Leaser only to refuse: its directory belongs to
// one process, so every lease method fails with an error wrapping
// seqstore.ErrNotSupported (after validating its arguments).
//
// # Cancellation
//
// A Reserve or Advance whose ctx ends before the writer takes the request
// returns the ctx error and nothing is applied. Once taken, the call waits
// for the fsync (bounded by the disk, about a millisecond) and reports the
// true outcome, so a ctx error always means "not applied".
//
// # Errors
//
// Errors wrap the seqstore sentinels. If a log write or fsync fails, the
// outcome of the frame is unknown (it may or may not be on disk), so the
// store fails for good: the callers of that frame and every later call get
// the write error, and the directory must be reopened, which recovers
// whatever reached the disk. This follows the lesson of PostgreSQL's fsync
// handling: after a failed fsync, retrying cannot prove durability.
//
// # Shutdown
//
// Close writes pending Sent marks, stops the writer, closes the files and
// releases the lock. It is idempotent; later calls of other methods return
// errors wrapping seqstore.ErrClosed.
package filestore
