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
		synced := map[string]int64{} // durable size of each log written this round
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
				return err
			},
			sync: func(f *os.File) error {
				mu.Lock()
				defer mu.Unlock()
				if cut {
					return errPowerCut
				}
				info, err := f.Stat()
				if err != nil {
					return err
				}
				if syncs++; syncs == cutAt {
					// The power goes: of the bytes written since the
					// last sync, a random prefix reached the disk.
					cut = true
					lost := info.Size() - synced[f.Name()]
					if err := f.Truncate(synced[f.Name()] + rnd.Int64N(lost+1)); err != nil {
						return err
					}
					return errPowerCut
				}
				if err := syncData(f); err != nil {
					return err
				}
				synced[f.Name()] = info.Size()
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
