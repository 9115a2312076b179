package filestore

import (
	"fmt"
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
// are removed and before the new log gets its first frame.
func TestSnapshotSyncOrder(t *testing.T) {
	dir := t.TempDir()
	rec := newRecFS(dir)
	s := openT(t, dir, &Options{SnapshotBytes: 1, hooks: &testHooks{fs: rec}})
	st := seqstore.Stream{Queue: "q"}
	const snapshots = 3
	for i := range snapshots {
		_, err := reserve(ctx, s, st, 1, [][]byte{fmt.Appendf(nil, "body %d", i)})
		require.NoError(t, err)
		require.NoError(t, s.Park(ctx, []seqstore.Parked{{Stream: st, Epoch: 1, Seq: uint64(100 + i), Body: []byte("parked")}}))
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
	renames := 0
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
