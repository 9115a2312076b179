package filestore

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/seqstore"
)

// TestAttack21DamagedSegment: a store with parked bodies in a park segment
// named by the snapshot; the segment is then truncated, emptied, replaced
// by a symlink to a good copy, by a FIFO, or removed. Open must report
// seqstore.ErrCorrupt (or refuse), never hang on the FIFO, never follow the
// link, and never open with the parks silently gone (loss of parked
// messages).
func TestAttack21DamagedSegment(t *testing.T) {
	ctx := context.Background()
	st := seqstore.Stream{Queue: "q", Group: "g"}
	setup := func(t *testing.T) (dir, seg string) {
		dir = t.TempDir()
		s, err := Open(dir, &Options{SnapshotBytes: 1})
		require.NoError(t, err)
		require.NoError(t, s.Advance(ctx, []seqstore.Advance{{Stream: st, To: seqstore.Cursor{Epoch: 1, Next: 1}}}))
		for seq := uint64(5); seq < 25; seq++ {
			require.NoError(t, s.Park(ctx, []seqstore.Parked{{Stream: st, Epoch: 1, Seq: seq, Body: bytes.Repeat([]byte{byte(seq)}, 500)}}))
		}
		require.NoError(t, s.Close())
		ents, err := os.ReadDir(dir)
		require.NoError(t, err)
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), segPrefix) {
				seg = filepath.Join(dir, e.Name())
			}
		}
		require.NotEmpty(t, seg, "a park segment was written")
		return dir, seg
	}
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, seg string)
	}{
		{"truncated", func(t *testing.T, seg string) {
			info, err := os.Stat(seg)
			require.NoError(t, err)
			require.NoError(t, os.Truncate(seg, info.Size()-100))
		}},
		{"header-only", func(t *testing.T, seg string) { require.NoError(t, os.Truncate(seg, segHeaderSize)) }},
		{"empty", func(t *testing.T, seg string) { require.NoError(t, os.Truncate(seg, 0)) }},
		{"removed", func(t *testing.T, seg string) { require.NoError(t, os.Remove(seg)) }},
		{"symlink", func(t *testing.T, seg string) {
			cp := filepath.Join(t.TempDir(), "copy")
			b, err := os.ReadFile(seg)
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(cp, b, 0o600))
			require.NoError(t, os.Remove(seg))
			require.NoError(t, os.Symlink(cp, seg))
		}},
		{"fifo", func(t *testing.T, seg string) {
			require.NoError(t, os.Remove(seg))
			require.NoError(t, syscall.Mkfifo(seg, 0o600))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, seg := setup(t)
			tc.damage(t, seg)
			done := make(chan error, 1)
			go func() {
				s, err := Open(dir, &Options{SnapshotBytes: 1})
				if err == nil {
					got, uerr := s.Unpark(ctx, []seqstore.ParkQuery{{Stream: st, Epoch: 1, From: 0, Max: 100}})
					n := 0
					if uerr == nil {
						n = len(got[0])
					}
					_ = s.Close()
					if uerr != nil {
						err = uerr
					} else if n != 20 {
						err = errors.New("opened with parks missing")
					} else if tc.name != "symlink" {
						err = errors.New("opened a damaged store as if whole")
					}
				}
				done <- err
			}()
			select {
			case err := <-done:
				t.Logf("%s: %v", tc.name, err)
				require.Error(t, err)
				if tc.name != "symlink" && tc.name != "fifo" {
					require.ErrorIs(t, err, seqstore.ErrCorrupt)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("Open hung")
			}
		})
	}
}
