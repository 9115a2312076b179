package filestore

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/seqstore"
)

// TestAttack21SnapshotFailuresKeepParks: snapshots (one after every write)
// whose park segment or snapshot file operations fail at random (create,
// write, sync, rename, remove of park-* and snapshot*: a full disk, an
// I/O error) while parks are added and passed. Whatever the store
// acknowledged must be there after a reopen on a healthy file system: no
// acknowledged park lost, no passed one returned, no ErrCorrupt, and the
// park segments left on disk are only those the final snapshot needs.
func TestAttack21SnapshotFailuresKeepParks(t *testing.T) {
	ctx := context.Background()
	for seed := uint64(1); seed <= 4; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			dir := t.TempDir()
			rng := rand.New(rand.NewPCG(seed, 77))
			rec := newRecFS(dir)
			var failing atomic.Bool
			failing.Store(true)
			var injected atomic.Int64
			faultRng := rand.New(rand.NewPCG(seed, 78)) // the store's writer goroutine draws from its own
			rec.fail = func(op fsOp) error {
				base := filepath.Base(op.path)
				if failing.Load() && (strings.HasPrefix(base, segPrefix) || strings.HasPrefix(base, snapName)) && faultRng.IntN(6) == 0 {
					injected.Add(1)
					return errInjected
				}
				return nil
			}
			s, err := Open(dir, &Options{SnapshotBytes: 1, hooks: &testHooks{fs: rec}})
			require.NoError(t, err)
			st := seqstore.Stream{Queue: "q", Group: "g"}
			cur := seqstore.Cursor{Epoch: 1, Next: 1}
			require.NoError(t, s.Advance(ctx, []seqstore.Advance{{Stream: st, To: cur}}))
			parks := map[uint64][]byte{}
			var callErrs int
			for step := range 300 {
				if rng.IntN(4) > 0 {
					seq := cur.Next + 1 + uint64(rng.IntN(200))
					b := bytes.Repeat([]byte{byte(step)}, 1+rng.IntN(4000))
					if err := s.Park(ctx, []seqstore.Parked{{Stream: st, Epoch: 1, Seq: seq, Body: b}}); err != nil {
						callErrs++
						t.Logf("step %d: park: %v", step, err)
						break
					}
					parks[seq] = b
				} else {
					to := seqstore.Cursor{Epoch: 1, Next: cur.Next + uint64(rng.IntN(20))}
					if err := s.Advance(ctx, []seqstore.Advance{{Stream: st, From: cur, To: to}}); err != nil {
						callErrs++
						t.Logf("step %d: advance: %v", step, err)
						break
					}
					cur = to
					for q := range parks {
						if q < cur.Next {
							delete(parks, q)
						}
					}
				}
			}
			failing.Store(false)
			cerr := s.Close()
			t.Logf("injected %d failures; call errors %d; close: %v", injected.Load(), callErrs, cerr)
			s2, err := Open(dir, &Options{SnapshotBytes: 1})
			require.NoError(t, err, "reopen after snapshot failures")
			defer s2.Close()
			cs, err := s2.Cursors(ctx, []seqstore.Stream{st})
			require.NoError(t, err)
			require.Equal(t, cur.Next, cs[0].Next)
			got, err := s2.Unpark(ctx, []seqstore.ParkQuery{{Stream: st, Epoch: 1, Max: 100000}})
			require.NoError(t, err)
			var want, have []uint64
			for q := range parks {
				want = append(want, q)
			}
			slices.Sort(want)
			for _, p := range got[0] {
				have = append(have, p.Seq)
				require.True(t, bytes.Equal(parks[p.Seq], p.Body), "body of %d", p.Seq)
			}
			require.Equal(t, want, have, "the acknowledged parks, none passed")
			segs, err := filepath.Glob(filepath.Join(dir, segPrefix+"*"))
			require.NoError(t, err)
			t.Logf("%d parks in %d segment files after reopen", len(have), len(segs))
			require.LessOrEqual(t, len(segs), 3, "only the segments the snapshot names are left")
		})
	}
}
