package filestore

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPowerLoss simulates losing power rather than killing the process: a
// SIGKILL keeps everything written to the page cache, a power cut keeps only
// what was synced. The store runs on powerFS, which passes its calls to the
// real file system until a sync it picks (of any kind: a log's fdatasync, a
// new log's, a cut log's or a snapshot's fsync, the directory's fsync),
// where it drops part of every file's bytes written since that file's last
// sync (keeping a prefix: possibly all of it, possibly nothing) and then
// refuses all I/O, as if the machine had stopped. Each round the cut falls
// on another kind of sync: the directory's, a new log's, any, the
// snapshot's own fsync. Everything acknowledged before the cut must be there after
// reopening. A store that answered before its fsync, or renamed a snapshot
// into place before syncing it, would fail this test, which a SIGKILL test
// cannot show.
func TestPowerLoss(t *testing.T) {
	if testing.Short() {
		t.Skip("many rounds")
	}
	dir := t.TempDir()
	var h crashHistory
	rnd := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 2))
	const rounds = 12
	lines := 0
	var cuts []string
	for round := range rounds {
		pfs := newPowerFS(rnd)
		hooks := &testHooks{fs: pfs}
		// Where the cut falls: the n-th sync of the kind this round
		// aims at. The snapshot's syncs are few (SnapshotBytes is 32
		// KiB), so the cut comes within their first few.
		var target func(op fsOp) bool
		var n int
		switch round % 4 {
		case 0:
			n, target = 1+rnd.IntN(3), func(op fsOp) bool { return op.kind == "fsync-dir" }
		case 1:
			n, target = 1+rnd.IntN(3), func(op fsOp) bool { return op.kind == "fsync" && strings.HasPrefix(filepath.Base(op.path), logPrefix) }
		case 2:
			n, target = 5+rnd.IntN(100), func(fsOp) bool { return true }
		case 3:
			n, target = 1+rnd.IntN(3), func(op fsOp) bool { return op.kind == "fsync" && filepath.Base(op.path) == snapTmpName }
		}
		s, err := Open(dir, &Options{SnapshotBytes: 32 << 10, hooks: hooks})
		require.NoError(t, err, "round %d: open", round)
		seen := 0
		pfs.arm(func(op fsOp) bool {
			if target(op) {
				seen++
			}
			return seen == n
		})
		var out []string
		var outMu sync.Mutex
		emit := func(format string, args ...any) {
			outMu.Lock()
			defer outMu.Unlock()
			out = append(out, fmt.Sprintf(format, args...))
		}
		crashWorkload(s, emit, time.Now().Add(20*time.Second))
		require.ErrorIs(t, s.Close(), errPowerCut, "round %d: Close reports the failed write", round)
		_, on := pfs.fell()
		cuts = append(cuts, fmt.Sprintf("%s %s", on.kind, filepath.Base(on.path)))
		for _, line := range out {
			if strings.HasPrefix(line, "E ") {
				require.Contains(t, line, errPowerCut.Error(), "round %d: only the power cut may fail a call", round)
				continue
			}
			h.parse(t, line)
		}
		lines += len(out)
		h.verify(t, dir)
	}
	total := 0
	for g := range crashGroups {
		total += len(h.res[g])
	}
	assert.Greater(t, total, 100, "reservations acknowledged over %d rounds", rounds)
	assert.Greater(t, h.parkChecks, 10, "acknowledged parks checked over %d rounds", rounds)
	t.Logf("%d park checks", h.parkChecks)
	t.Logf("%d power cuts: %d calls acknowledged, %d reservations, %d reservation/pair checks passed", rounds, lines, total, h.verified)
	t.Logf("the cuts fell on: %s", strings.Join(cuts, ", "))
}
