package filestore

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var errPowerCut = errors.New("simulated power cut")

// TestPowerLoss simulates losing power rather than killing the process: a
// SIGKILL keeps everything written to the page cache, a power cut keeps only
// what was synced. A hook replaces the writer's frame write: it writes and
// syncs normally until a random frame, of which it writes a random prefix
// (possibly all of it, possibly nothing) and then refuses all I/O, as if the
// machine had stopped. Everything acknowledged before the cut must be there
// after reopening. A store that answered before its fsync would fail this
// test, which a SIGKILL test cannot show.
func TestPowerLoss(t *testing.T) {
	if testing.Short() {
		t.Skip("many rounds")
	}
	dir := t.TempDir()
	var h crashHistory
	rnd := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 2))
	const rounds = 20
	lines := 0
	for round := range rounds {
		var mu sync.Mutex
		frames, cutAt := 0, 5+rnd.IntN(150)
		cut := false
		hooks := &testHooks{writeFrame: func(f *os.File, frame []byte, off int64) error {
			mu.Lock()
			defer mu.Unlock()
			if cut {
				return errPowerCut
			}
			frames++
			if frames == cutAt {
				cut = true
				keep := rnd.IntN(len(frame) + 1)
				if _, err := f.WriteAt(frame[:keep], off); err != nil {
					return err
				}
				return errPowerCut
			}
			if _, err := f.WriteAt(frame, off); err != nil {
				return err
			}
			return syncData(f)
		}}
		s, err := Open(dir, &Options{SnapshotBytes: 32 << 10, hooks: hooks})
		require.NoError(t, err, "round %d: open", round)
		var out []string
		var outMu sync.Mutex
		emit := func(format string, args ...any) {
			outMu.Lock()
			defer outMu.Unlock()
			out = append(out, fmt.Sprintf(format, args...))
		}
		crashWorkload(s, emit, time.Now().Add(20*time.Second))
		require.ErrorIs(t, s.Close(), errPowerCut, "round %d: Close reports the failed write", round)
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
	t.Logf("%d power cuts: %d calls acknowledged, %d reservations, %d reservation/pair checks passed", rounds, lines, total, h.verified)
}
