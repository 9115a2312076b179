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
// what was synced. Hooks replace the writer's frame write and log sync: they
// work normally until a random sync, which instead drops a random part of
// the bytes written since the previous sync (keeping a prefix: possibly all
// of it, possibly nothing) and then refuses all I/O, as if the machine had
// stopped. Everything acknowledged before the cut must be there
// after reopening. A store that answered before its fsync would fail this
// test, which a SIGKILL test cannot show.
func TestPowerLoss(t *testing.T) {
	if testing.Short() {
		t.Skip("many rounds")
	}
	dir := t.TempDir()
	var h crashHistory
	rnd := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 2))
	const rounds = 12
	lines := 0
	for round := range rounds {
		var mu sync.Mutex
		syncs, cutAt := 0, 5+rnd.IntN(100)
		cut := false
		// The log's frames that reached the disk: up to synced, what the
		// last successful sync covered; up to written, what was written
		// since. Sizes would not do: the writer preallocates the log with
		// zeros ahead of its frames, so the file's size says nothing of
		// what was synced (measured by size, no frame was ever lost).
		synced := map[string]int64{}
		written := map[string]int64{}
		hooks := &testHooks{
			write: func(f *os.File, frame []byte, off int64) error {
				mu.Lock()
				defer mu.Unlock()
				if cut {
					return errPowerCut
				}
				if _, ok := synced[f.Name()]; !ok {
					synced[f.Name()] = off // what Open found, or a new log's header: synced
				}
				_, err := f.WriteAt(frame, off)
				if err == nil {
					written[f.Name()] = max(written[f.Name()], off+int64(len(frame)))
				}
				return err
			},
			sync: func(f *os.File) error {
				mu.Lock()
				defer mu.Unlock()
				if cut {
					return errPowerCut
				}
				name := f.Name()
				if syncs++; syncs == cutAt {
					// The power goes: of the bytes written since the
					// last sync, a random prefix reached the disk; the
					// rest reads as the zeros the log was preallocated
					// with.
					cut = true
					from := synced[name] + rnd.Int64N(max(written[name]-synced[name], 0)+1)
					if n := written[name] - from; n > 0 {
						if _, err := f.WriteAt(make([]byte, n), from); err != nil {
							return err
						}
					}
					return errPowerCut
				}
				if err := syncData(f); err != nil {
					return err
				}
				synced[name] = max(synced[name], written[name])
				return nil
			},
		}
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
	assert.Greater(t, h.parkChecks, 10, "acknowledged parks checked over %d rounds", rounds)
	t.Logf("%d park checks", h.parkChecks)
	t.Logf("%d power cuts: %d calls acknowledged, %d reservations, %d reservation/pair checks passed", rounds, lines, total, h.verified)
}
