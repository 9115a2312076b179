package filestore

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/seqstore"
)

// TestSnapshotSyncOrder records every call the store makes through its
// file-system seam while it writes snapshots, and checks the order its crash
// safety rests on (see Store.snapshot): the log being left is cut and
// synced before the next exists; the next log's header is synced before the
// snapshot that names it is renamed into place; the snapshot is written to
// snapshot.tmp and fsynced, and nothing is written to it after, before the
// rename; the directory is synced after the rename and before the old logs
// are removed and before the new log gets its first frame. A new park
// segment is fsynced, and the directory synced, before the snapshot that
// names it is renamed into place; a segment is removed only after the
// directory sync that makes a snapshot not naming it durable.
func TestSnapshotSyncOrder(t *testing.T) {
	dir := t.TempDir()
	rec := newRecFS(dir)
	s := openT(t, dir, &Options{SnapshotBytes: 1, hooks: &testHooks{fs: rec}})
	st := seqstore.Stream{Queue: "q"}
	const snapshots = 3
	var cursor seqstore.Cursor
	for i := range snapshots {
		_, err := reserve(ctx, s, st, 1, [][]byte{fmt.Appendf(nil, "body %d", i)})
		require.NoError(t, err)
		require.NoError(t, s.Park(ctx, []seqstore.Parked{{Stream: st, Epoch: 1, Seq: uint64(100 + i), Body: []byte("parked")}}))
		// Hand out the one parked before: its segment is dropped.
		to := seqstore.Cursor{Epoch: 1, Next: uint64(100 + i)}
		require.NoError(t, s.Advance(ctx, []seqstore.Advance{{Stream: st, From: cursor, To: to}}))
		cursor = to
		// The writer snapshots after answering the commit.
		require.Eventually(t, func() bool { return s.Stats().Snapshots >= int64(i+1) }, 10*time.Second, time.Millisecond,
			"snapshot %d written", i+1)
	}
	require.NoError(t, s.Close())

	ops := rec.calls(true)
	index := func(from int, want fsOp) int {
		for i := from; i < len(ops); i++ {
			if ops[i] == want {
				return i
			}
		}
		return -1
	}
	lastBefore := func(before int, want fsOp) int {
		for i := before - 1; i >= 0; i-- {
			if ops[i] == want {
				return i
			}
		}
		return -1
	}
	renames, segs := 0, 0
	for r, op := range ops {
		if op != (fsOp{kind: "rename", path: snapTmpName, to: snapName}) {
			continue
		}
		renames++
		// The snapshot names the log it continues in: the last one
		// created before the rename.
		newLog := ""
		for i := r - 1; i >= 0 && newLog == ""; i-- {
			if ops[i].kind == "create" && strings.HasPrefix(ops[i].path, logPrefix) {
				newLog = ops[i].path
			}
		}
		require.NotEmpty(t, newLog, "snapshot %d: no new log created before its rename; calls:\n%s", renames, describeOps(ops[:r+1]))
		gen, ok := parseLogName(newLog)
		require.True(t, ok)
		oldLog := logName(gen - 1)
		what := fmt.Sprintf("snapshot %d (continues in %s)", renames, newLog)

		created := lastBefore(r, fsOp{kind: "create", path: snapTmpName})
		require.GreaterOrEqual(t, created, 0, "%s: snapshot.tmp created before the rename", what)
		synced := lastBefore(r, fsOp{kind: "fsync", path: snapTmpName})
		require.Greater(t, synced, created, "%s: snapshot.tmp is fsynced after it is written and before its rename; calls:\n%s", what, describeOps(ops[created:r+1]))
		for i := synced + 1; i < r; i++ {
			require.NotEqual(t, fsOp{kind: "write", path: snapTmpName}, ops[i], "%s: snapshot.tmp written after its fsync, before its rename", what)
		}

		logCreated := lastBefore(r, fsOp{kind: "create", path: newLog})
		logSynced := lastBefore(r, fsOp{kind: "fsync", path: newLog})
		assert.Greater(t, logSynced, logCreated, "%s: the new log's header is synced before the snapshot naming it is renamed into place", what)
		if cut := lastBefore(logCreated, fsOp{kind: "truncate", path: oldLog}); cut >= 0 {
			assert.Greater(t, lastBefore(logCreated, fsOp{kind: "fsync", path: oldLog}), cut,
				"%s: the log left is synced after it is cut to its last frame and before the next log exists", what)
		}

		// A park segment created for this snapshot.
		for i := logCreated + 1; i < r; i++ {
			if ops[i].kind != "create" || !strings.HasPrefix(ops[i].path, segPrefix) {
				continue
			}
			seg := ops[i].path
			segSynced := index(i, fsOp{kind: "fsync", path: seg})
			require.Greater(t, segSynced, i, "%s: %s is fsynced", what, seg)
			assert.Less(t, segSynced, r, "%s: %s is fsynced before the snapshot naming it is renamed into place", what, seg)
			segDir := index(segSynced, fsOp{kind: "fsync-dir", path: "."})
			assert.True(t, segDir > segSynced && segDir < r, "%s: the directory is synced after %s is created and before the snapshot naming it is renamed into place; calls:\n%s", what, seg, describeOps(ops[i:r+1]))
			segs++
		}

		dirSynced := index(r+1, fsOp{kind: "fsync-dir", path: "."})
		require.Greater(t, dirSynced, r, "%s: the directory is synced after the rename; calls after it:\n%s", what, describeOps(ops[r:]))
		// The log left behind holds what the snapshot replaces: it may go
		// only once the rename is durable.
		removed := index(0, fsOp{kind: "remove", path: oldLog})
		require.GreaterOrEqual(t, removed, 0, "%s: the log left, %s, is removed", what, oldLog)
		assert.Greater(t, removed, dirSynced, "%s: %s removed before the directory sync that makes the rename durable; calls:\n%s", what, oldLog, describeOps(ops[created:]))
		// The new log's header is its first write; its first frame
		// comes after the directory sync.
		writes := 0
		for i := logCreated + 1; i < len(ops); i++ {
			if ops[i] == (fsOp{kind: "write", path: newLog}) {
				if writes++; writes > 1 {
					assert.Greater(t, i, dirSynced, "%s: a frame written to the new log before the directory sync", what)
					break
				}
			}
		}
	}
	require.GreaterOrEqual(t, renames, snapshots, "snapshots renamed into place; calls:\n%s", describeOps(rec.calls(false)))
	require.GreaterOrEqual(t, segs, snapshots, "park segments written; calls:\n%s", describeOps(rec.calls(false)))
	removed := 0
	for i, op := range ops {
		if op.kind != "remove" || !strings.HasPrefix(op.path, segPrefix) || index(i, fsOp{kind: "create", path: op.path}) > i {
			continue // not a segment, or a stale file removed before it is created
		}
		removed++
		r := lastBefore(i, fsOp{kind: "rename", path: snapTmpName, to: snapName})
		require.GreaterOrEqual(t, r, 0, "%s removed before any snapshot", op.path)
		d := lastBefore(i, fsOp{kind: "fsync-dir", path: "."})
		assert.Greater(t, d, r, "%s removed before the directory sync that makes the snapshot not naming it durable; calls:\n%s", op.path, describeOps(ops[r:i+1]))
	}
	assert.Positive(t, removed, "park segments dropped; calls:\n%s", describeOps(rec.calls(false)))
}

func describeOps(ops []fsOp) string {
	var b strings.Builder
	for _, op := range ops {
		if op.kind == "write" && b.Len() > 0 && strings.HasSuffix(b.String(), op.String()+"\n") {
			continue // a run of writes to one file reads as one
		}
		b.WriteString(op.String())
		b.WriteByte('\n')
	}
	return b.String()
}

// TestSyncFailures makes one kind of call of the real code path fail, by
// an error the seam injects, and checks what the store does with it. A
// failed fdatasync of a log frame fails that commit's calls (its outcome is
// unknown: never acknowledged) and every later call; so does a failed
// directory sync once a snapshot is renamed into place (the old log must not
// be written again). A failure before the rename (the new log's header, the
// snapshot's fsync, the rename itself) leaves the old log in use: the
// snapshot is abandoned, never renamed into place unsynced, and tried again
// later. Whatever was acknowledged is there after reopening.
func TestSyncFailures(t *testing.T) {
	isTmpSync := func(op fsOp) bool { return op.kind == "fsync" && op.path == snapTmpName }
	cases := []struct {
		name  string
		fails func(op fsOp) bool
		// fatal: the store refuses every call from the failure on.
		// Otherwise the failure comes once and the store goes on.
		fatal bool
		// inCommit: the failure is the commit's own, so the call that
		// meets it fails; else it comes in the snapshot after the call
		// was answered.
		inCommit bool
	}{
		{name: "fdatasync of a frame", fails: func(op fsOp) bool { return op.kind == "fdatasync" }, fatal: true, inCommit: true},
		{name: "write of a frame", fails: func(op fsOp) bool {
			return op.kind == "write" && strings.HasPrefix(op.path, logPrefix)
		}, fatal: true, inCommit: true},
		{name: "directory sync after the rename", fails: func(op fsOp) bool { return op.kind == "fsync-dir" }, fatal: true},
		{name: "fsync of the snapshot", fails: isTmpSync},
		{name: "fsync of the log left, cut to its last frame", fails: logSync(false)},
		{name: "fsync of the new log's header", fails: logSync(true)},
		{name: "rename of the snapshot", fails: func(op fsOp) bool { return op.kind == "rename" }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			rec := newRecFS(dir)
			s, err := Open(dir, &Options{SnapshotBytes: 1, hooks: &testHooks{fs: rec}})
			require.NoError(t, err)
			st := seqstore.Stream{Queue: "q"}
			var acked uint64 // the last seq acknowledged
			reserveOne := func() error {
				res, err := reserve(ctx, s, st, 1, [][]byte{fmt.Appendf(nil, "body %d", acked+1)})
				if err == nil {
					acked = res.First
				}
				return err
			}
			require.NoError(t, reserveOne())
			require.Eventually(t, func() bool { return s.Stats().Snapshots == 1 }, 10*time.Second, time.Millisecond, "the first snapshot")

			var failed []int // indexes in rec.ops of the calls failed
			rec.mu.Lock()
			rec.fail = func(op fsOp) error {
				if !c.fails(op) || !c.fatal && len(failed) > 0 {
					return nil
				}
				failed = append(failed, len(rec.ops)-1)
				return errInjected
			}
			rec.mu.Unlock()
			failedOnce := func() bool {
				rec.mu.Lock()
				defer rec.mu.Unlock()
				return len(failed) > 0
			}

			err = reserveOne()
			if c.inCommit {
				require.Error(t, err, "a commit whose %s failed is never acknowledged", c.name)
				assert.ErrorIs(t, err, errInjected, "the call reports the file system's error")
			} else {
				require.NoError(t, err, "the commit before the snapshot is durable")
			}
			require.Eventually(t, failedOnce, 10*time.Second, time.Millisecond, "the %s was made to fail", c.name)
			if c.fatal {
				// The writer records the failure before it answers
				// anyone again: the next calls see it.
				for _, call := range []func() error{
					reserveOne,
					func() error {
						return s.Advance(ctx, []seqstore.Advance{{Stream: st, To: seqstore.Cursor{Epoch: 1, Next: 2}}})
					},
					func() error {
						return s.Park(ctx, []seqstore.Parked{{Stream: st, Epoch: 1, Seq: 9, Body: []byte("p")}})
					},
					func() error { return sent(ctx, s, st, []uint64{1}) },
				} {
					err := call()
					require.Error(t, err, "a call after the %s failed", c.name)
					assert.ErrorIs(t, err, errInjected, "a call after the %s failed reports it", c.name)
				}
				assert.ErrorIs(t, s.Close(), errInjected, "Close reports the failure")
			} else {
				// The store goes on in the old log, and a later
				// snapshot succeeds.
				snaps := s.Stats().Snapshots
				for range 3 {
					require.NoError(t, reserveOne(), "a call after the %s failed once", c.name)
				}
				require.Eventually(t, func() bool { return s.Stats().Snapshots > snaps }, 10*time.Second, time.Millisecond, "a later snapshot")
				require.NoError(t, s.Close())
				ops := rec.calls(true)
				f := failed[0]
				next := len(ops)
				for i := f + 1; i < len(ops); i++ {
					if ops[i] == (fsOp{kind: "create", path: snapTmpName}) {
						next = i
						break
					}
				}
				for i := f + 1; i < next; i++ {
					require.NotEqual(t, "rename", ops[i].kind, "a rename after the %s failed; calls:\n%s", c.name, describeOps(ops[f:next]))
				}
				assert.Contains(t, ops[f+1:next], fsOp{kind: "remove", path: snapTmpName}, "the abandoned snapshot.tmp is removed")
				// The snapshot that succeeds later leaves a log whose
				// cut is durable: the last cut of that log is followed by
				// an fsync that did not fail, before the next log exists.
				r := slices.Index(ops[f+1:], fsOp{kind: "rename", path: snapTmpName, to: snapName}) + f + 1
				require.Greater(t, r, f, "a later snapshot renamed into place")
				created := -1
				for i := r; i > f && created < 0; i-- {
					if ops[i].kind == "create" && strings.HasPrefix(ops[i].path, logPrefix) {
						created = i
					}
				}
				require.Positive(t, created, "the later snapshot's new log")
				gen, _ := parseLogName(ops[created].path)
				left := logName(gen - 1)
				cut := -1
				for i := created; i >= 0 && cut < 0; i-- {
					if ops[i] == (fsOp{kind: "truncate", path: left}) {
						cut = i
					}
				}
				if cut >= 0 {
					synced := false
					for i := cut + 1; i < created; i++ {
						synced = synced || ops[i] == fsOp{kind: "fsync", path: left} && !slices.Contains(failed, i)
					}
					assert.True(t, synced, "the cut of %s is synced before %s is created; calls:\n%s", left, ops[created].path, describeOps(ops[cut:created+1]))
				}
			}

			s = openT(t, dir, nil)
			_, next := senderState(s, st)
			assert.Greater(t, next, acked, "every acknowledged reservation is there after reopening")
			pending, err := s.Pending(ctx, "q")
			require.NoError(t, err)
			bodies := map[uint64]string{}
			for _, e := range pending {
				bodies[e.Seq] = string(e.Body)
			}
			for seq := uint64(1); seq <= acked; seq++ {
				assert.Equal(t, fmt.Sprintf("body %d", seq), bodies[seq], "journal entry %d", seq)
			}
		})
	}
}

// logSync matches the fsync of a log created since it was made (created),
// or of one that was not (the log being left, cut to its last frame). It is
// to see every call.
func logSync(created bool) func(op fsOp) bool {
	made := map[string]bool{}
	return func(op fsOp) bool {
		if op.kind == "create" {
			made[op.path] = true
		}
		return op.kind == "fsync" && strings.HasPrefix(op.path, logPrefix) && made[op.path] == created
	}
}

// TestOpenSyncFailures: a sync that Open makes fails Open.
func TestOpenSyncFailures(t *testing.T) {
	t.Run("directory sync of a fresh store", func(t *testing.T) {
		dir := t.TempDir()
		rec := newRecFS(dir)
		rec.fail = func(op fsOp) error {
			if op.kind == "fsync-dir" {
				return errInjected
			}
			return nil
		}
		_, err := Open(dir, &Options{hooks: &testHooks{fs: rec}})
		require.ErrorIs(t, err, errInjected, "Open reports the failed directory sync")
	})
	t.Run("fsync of a torn tail's cut", func(t *testing.T) {
		dir := t.TempDir()
		s := openT(t, dir, nil)
		st := seqstore.Stream{Queue: "q"}
		reserveN(t, s, st, 3)
		require.NoError(t, s.Close())
		path := logPath(dir, 1)
		data, err := os.ReadFile(path)
		require.NoError(t, err)
		writeFile(t, path, append(data, 1, 2, 3)) // a torn frame
		rec := newRecFS(dir)
		rec.fail = func(op fsOp) error {
			if op.kind == "fsync" {
				return errInjected
			}
			return nil
		}
		_, err = Open(dir, &Options{hooks: &testHooks{fs: rec}})
		require.ErrorIs(t, err, errInjected, "Open reports the failed sync of the cut")
		assert.Contains(t, rec.calls(false), fsOp{kind: "truncate", path: logName(1)}, "the torn tail was cut")
	})
}

// TestFirstLogCreatedWhole checks how Open creates the first log of a
// store: its header is written to log.tmp and fsynced, the file renamed to
// the log's name and the directory synced, so that a log of that name is
// never shorter than its header and recovery can call a short one damage
// (TestSec3ShortLastLog). A log.tmp left by a crash is removed.
func TestFirstLogCreatedWhole(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir+"/"+logTmpName, []byte("half a header"))
	rec := newRecFS(dir)
	s := openT(t, dir, &Options{hooks: &testHooks{fs: rec}})
	reserveN(t, s, seqstore.Stream{Queue: "q"}, 1)
	require.NoError(t, s.Close())
	first := logName(1)
	want := []fsOp{
		{kind: "remove", path: logTmpName},
		{kind: "create", path: logTmpName},
		{kind: "fsync", path: logTmpName},
		{kind: "rename", path: logTmpName, to: first},
		{kind: "fsync-dir", path: "."},
		{kind: "fdatasync", path: first},
	}
	ops := rec.calls(false)
	require.GreaterOrEqual(t, len(ops), len(want), "calls:\n%s", describeOps(ops))
	assert.Equal(t, want, ops[:len(want)], "calls:\n%s", describeOps(ops))
	assert.NotContains(t, ops, fsOp{kind: "create", path: first}, "the log is never created under its own name")
	data, err := os.ReadFile(logPath(dir, 1))
	require.NoError(t, err)
	assert.Equal(t, logHeader(1), data[:logHeaderSize])
	_, err = os.Stat(dir + "/" + logTmpName)
	assert.ErrorIs(t, err, os.ErrNotExist, "no log.tmp left")
}
