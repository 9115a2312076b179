package recvcore_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/internal/envelope"
	"github.com/inorder/inorder/internal/recvcore"
	"github.com/inorder/inorder/seqstore"
)

// TestParkLimits: what a Core parks stays within Config.ParkLimits, per
// group and in all; arrivals beyond a limit are given back to the queue
// (their visibility shortened), counted and reported once; the counts fall
// as durable cursors pass the parks, and parking resumes.
func TestParkLimits(t *testing.T) {
	for _, tc := range []struct {
		name   string
		limits func(size int64) recvcore.ParkLimits
		groups int
		want   int64 // parks the limits let through
	}{
		{"group-messages", func(int64) recvcore.ParkLimits { return recvcore.ParkLimits{GroupMessages: 20} }, 1, 20},
		{"group-bytes", func(n int64) recvcore.ParkLimits { return recvcore.ParkLimits{GroupBytes: 20*n + n/2} }, 1, 20},
		{"messages", func(int64) recvcore.ParkLimits { return recvcore.ParkLimits{Messages: 25} }, 3, 25},
		{"bytes", func(n int64) recvcore.ParkLimits { return recvcore.ParkLimits{Bytes: 25*n + n/2} }, 3, 25},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := ehConfig()
			cfg.Park = true
			cfg.Window = 4
			body := func(g string, seq uint64) []byte {
				return envelope.Append(nil, envelope.Header{Group: g, Epoch: 1, Seq: seq}, []byte(strings.Repeat("x", 40)))
			}
			size := int64(len(body("g0", 10))) // every early arrival below has this size
			cfg.ParkLimits = tc.limits(size)
			h := newEH(t, cfg)
			w := newEHWorld()
			for g := range tc.groups {
				w.curs[fmt.Sprint("g", g)] = seqstore.Cursor{Epoch: 1, Next: 1}
			}
			var sent int
			for g := range tc.groups {
				for seq := uint64(10); seq < 40; seq++ { // all beyond the window of 4: parked or given back
					h.arrive(body(fmt.Sprint("g", g), seq))
					sent++
					h.pump(w)
				}
			}
			st := h.c.Stats()
			short := 0
			for _, v := range h.vis {
				if v.Timeout < cfg.VisibilityExtend {
					short++
				}
			}
			t.Logf("sent %d early arrivals: parked %d, given back %d (park full %d), counted %d / %d bytes", sent, st.Parked, st.Released, st.ParkFull, st.ParkedNow, st.ParkedBytes)
			require.Equal(t, tc.want, st.Parked, "parks within the limit")
			require.Equal(t, tc.want, st.ParkedNow)
			require.Equal(t, tc.want*size, st.ParkedBytes)
			require.Equal(t, int64(sent)-tc.want, st.ParkFull, "every other arrival is counted as kept out")
			require.Equal(t, int64(sent)-tc.want, st.Released, "and given back to the queue")
			warns := 0
			for _, r := range h.reports {
				if r.Kind == recvcore.ReportWarn && strings.Contains(r.Msg, "park limit") {
					warns++
				}
			}
			require.Equal(t, 1, warns, "one report per episode")

			// Fill group g0's hole: seqs 1..9 are handed out, the parks
			// read back in order, and each durable cursor that passes a
			// park takes it off the count.
			deliver := func() {
				for range 100 {
					d, ok := h.next()
					if !ok {
						return
					}
					_, err := h.c.Ack(h.now, &d, false)
					require.NoError(t, err)
					h.tick(10 * time.Millisecond)
					h.pump(w)
				}
			}
			for seq := uint64(1); seq < 10; seq++ { // one at a time: the window is 4
				h.arrive(body("g0", seq))
				h.pump(w)
				deliver()
			}
			for range 20 {
				h.tick(100 * time.Millisecond)
				h.pump(w)
				deliver()
			}
			st2 := h.c.Stats()
			t.Logf("after g0's hole filled: delivered %d, counted %d / %d bytes; cursor %v", st2.Delivered, st2.ParkedNow, st2.ParkedBytes, w.curs["g0"])
			// Every park was g0's (the first group filled the limits).
			require.Equal(t, 9+tc.want, st2.Delivered, "seqs 1..9 and every parked seq, in order")
			require.Zero(t, st2.ParkedNow, "the passed parks are no longer counted")
			require.Zero(t, st2.ParkedBytes)
			require.Equal(t, int64(0), int64(len(w.park["g0"])), "g0's parks were all read back and dropped")
			// Room again: a new early arrival of another group parks.
			h.arrive(body("g0", 100))
			h.pump(w)
			require.Equal(t, st.Parked+1, h.c.Stats().Parked, "parking resumes once the parks are passed")
		})
	}
}
