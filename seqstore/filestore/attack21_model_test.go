package filestore

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/seqstore"
)

// TestAttack21ParksAndCursorsOverSnapshotsAndReopens: a model check of
// the new filestore state (plain cursors that grow to a full state and
// shrink back, park segments referenced by version 3 snapshots, merged and
// compacted) over random Park / Advance (with owners and skipped ranges
// that come and go, and epoch switches) with a snapshot after every write
// (SnapshotBytes 1) and reopenings: after every step and every reopen the
// store's cursors and parked entries are exactly the model's (no lost or
// resurrected park, no lost owner or skipped range).
func TestAttack21ParksAndCursorsOverSnapshotsAndReopens(t *testing.T) {
	ctx := context.Background()
	for seed := uint64(1); seed <= 6; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			dir := t.TempDir()
			rng := rand.New(rand.NewPCG(seed, 21))
			opts := func() *Options { return &Options{SnapshotBytes: int64(1 + rng.IntN(3)*2048)} }
			s, err := Open(dir, opts())
			require.NoError(t, err)
			defer func() { _ = s.Close() }()
			streams := []seqstore.Stream{{Queue: "q", Group: "a"}, {Queue: "q", Group: "b"}, {Queue: "r", Group: "a"}}
			curs := map[seqstore.Stream]seqstore.Cursor{}
			type pk struct{ epoch, seq uint64 }
			parks := map[seqstore.Stream]map[pk][]byte{}
			type sender struct {
				epoch, next uint64
				pending     map[uint64]bool
			}
			senders := map[seqstore.Stream]*sender{}
			check := func(when string) {
				for _, q := range []string{"q", "r"} {
					ents, err := s.Pending(ctx, q)
					require.NoError(t, err, when)
					got := map[string]int{}
					for _, e := range ents {
						got[fmt.Sprint(e.Stream, e.Seq)]++
					}
					want := map[string]int{}
					for _, st := range streams {
						if sd := senders[st]; st.Queue == q && sd != nil {
							for seq := range sd.pending {
								want[fmt.Sprint(st, seq)]++
							}
						}
					}
					require.Equal(t, want, got, "%s: pending of %s", when, q)
				}
				for _, st := range streams {
					cs, err := s.Cursors(ctx, []seqstore.Stream{st})
					require.NoError(t, err, when)
					c := cs[0]
					want := curs[st]
					require.Equal(t, want.Epoch, c.Epoch, "%s: %s epoch", when, st)
					require.Equal(t, want.Next, c.Next, "%s: %s next", when, st)
					require.Equal(t, want.Owner, c.Owner, "%s: %s owner", when, st)
					require.Equal(t, len(want.Skipped), len(c.Skipped), "%s: %s skipped %v vs %v", when, st, want.Skipped, c.Skipped)
					for i := range want.Skipped {
						require.Equal(t, want.Skipped[i], c.Skipped[i], when)
					}
					// Every epoch the model has parks in, and the cursor's.
					epochs := map[uint64]bool{want.Epoch: true}
					for k := range parks[st] {
						epochs[k.epoch] = true
					}
					for e := range epochs {
						got, err := s.Unpark(ctx, []seqstore.ParkQuery{{Stream: st, Epoch: e, From: 0, Max: 10000}})
						require.NoError(t, err, when)
						var wantSeqs []uint64
						for k := range parks[st] {
							if k.epoch == e && !want.Below(k.epoch, k.seq) {
								wantSeqs = append(wantSeqs, k.seq)
							}
						}
						slices.Sort(wantSeqs)
						var gotSeqs []uint64
						for _, p := range got[0] {
							gotSeqs = append(gotSeqs, p.Seq)
							require.True(t, bytes.Equal(parks[st][pk{e, p.Seq}], p.Body), "%s: %s %d/%d body", when, st, e, p.Seq)
						}
						require.Equal(t, wantSeqs, gotSeqs, "%s: %s parks of epoch %d", when, st, e)
					}
				}
			}
			for step := range 400 {
				st := streams[rng.IntN(len(streams))]
				c := curs[st]
				switch r := rng.IntN(10); {
				case r == 9 && rng.IntN(2) == 0: // sender: reserve, mark some sent
					k := 1 + rng.IntN(3)
					var js [][]byte
					for range k {
						js = append(js, []byte{byte(step)})
					}
					res, err := s.Reserve(ctx, []seqstore.ReserveRequest{{Stream: st, N: k, Journal: js}})
					require.NoError(t, err, "step %d", step)
					sd := senders[st]
					if sd == nil {
						sd = &sender{epoch: res[0].Epoch, next: 1, pending: map[uint64]bool{}}
						senders[st] = sd
					}
					require.Equal(t, sd.epoch, res[0].Epoch, "step %d: sender epoch of %s kept", step, st)
					require.Equal(t, sd.next, res[0].First, "step %d: sender of %s continues", step, st)
					sd.next += uint64(k)
					var marks []uint64
					for q := res[0].First; q < sd.next; q++ {
						sd.pending[q] = true
					}
					for q := range sd.pending {
						if rng.IntN(3) > 0 {
							marks = append(marks, q)
							delete(sd.pending, q)
						}
					}
					if len(marks) > 0 {
						slices.Sort(marks)
						require.NoError(t, s.Sent(ctx, []seqstore.SentMark{{Stream: st, Seqs: marks}}), "step %d", step)
					}
				case r < 5 && (c.Epoch != 0 || rng.IntN(4) == 0): // park a few above the cursor (or on a stream without one)
					var ps []seqstore.Parked
					used := map[uint64]bool{}
					for range 1 + rng.IntN(4) {
						seq := max(c.Next, 1) + 1 + uint64(rng.IntN(30))
						if used[seq] {
							continue
						}
						used[seq] = true
						b := bytes.Repeat([]byte{byte(step), byte(seq)}, 1+rng.IntN(3000))
						ps = append(ps, seqstore.Parked{Stream: st, Epoch: max(c.Epoch, 1), Seq: seq, Body: b})
					}
					require.NoError(t, s.Park(ctx, ps), "step %d", step)
					if parks[st] == nil {
						parks[st] = map[pk][]byte{}
					}
					for _, p := range ps {
						parks[st][pk{p.Epoch, p.Seq}] = p.Body
					}
				case r < 9: // advance
					to := seqstore.Cursor{Epoch: max(c.Epoch, 1), Next: max(c.Next, 1) + uint64(rng.IntN(12))}
					if c.Epoch != 0 && rng.IntN(12) == 0 {
						to = seqstore.Cursor{Epoch: c.Epoch + 1, Next: 1 + uint64(rng.IntN(3))}
					}
					switch rng.IntN(3) {
					case 0: // plain: shrinks
					case 1:
						to.Owner = 1 + uint64(rng.IntN(3))
					case 2:
						if to.Next > 2 {
							to.Skipped = []seqstore.Range{{Epoch: to.Epoch, First: 1, Last: to.Next - 1}}
						}
					}
					require.NoError(t, s.Advance(ctx, []seqstore.Advance{{Stream: st, From: c, To: to}}), "step %d: %v -> %v", step, c, to)
					curs[st] = to
					for k := range parks[st] {
						if to.Below(k.epoch, k.seq) {
							delete(parks[st], k)
						}
					}
				default: // reopen
					require.NoError(t, s.Close())
					s, err = Open(dir, opts())
					require.NoError(t, err, "reopen at step %d", step)
					check(fmt.Sprintf("after reopen at step %d", step))
				}
				if step%7 == 0 {
					check(fmt.Sprintf("step %d", step))
				}
			}
			require.NoError(t, s.Close())
			s, err = Open(dir, opts())
			require.NoError(t, err)
			check("final reopen")
		})
	}
}
