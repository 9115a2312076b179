package memstore

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/seqstore"
)

// TestParkCorrupt flips bits of stored parks (body, seq, a stream's parks
// moved to another stream) and checks that Unpark reports ErrCorrupt for
// the query that reads them, never a wrong body, while other queries of
// the same call are answered.
// at returns the i-th parked entry of l in order.
func (l *parkList) at(i int) *parked { return l.m[l.sorted()[i]] }

// rekey moves the i-th parked entry of l, as it is, to position to: a
// corruption of where it is kept.
func (l *parkList) rekey(i int, to pos) {
	from := l.sorted()[i]
	l.m[to] = l.m[from]
	delete(l.m, from)
	l.keys[i], l.dirty = to, true
}

func TestParkCorrupt(t *testing.T) {
	for _, tc := range []struct {
		name    string
		corrupt func(st *Store, s, moved seqstore.Stream)
	}{
		{"body", func(st *Store, s, _ seqstore.Stream) { st.parks[s].at(1).body[0] ^= 1 }},
		{"seq", func(st *Store, s, _ seqstore.Stream) { st.parks[s].rekey(1, pos{7, 3}) }},
		{"epoch", func(st *Store, s, _ seqstore.Stream) {
			st.parks[s].rekey(1, pos{9, 2})
			st.parks[s].rekey(0, pos{9, 1})
		}},
		{"stream", func(st *Store, s, moved seqstore.Stream) { st.parks[moved] = st.parks[s] }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := New()
			defer st.Close()
			ctx := t.Context()
			s := seqstore.Stream{Queue: "q", Group: "s"}
			moved := seqstore.Stream{Queue: "q", Group: "moved"}
			other := seqstore.Stream{Queue: "q", Group: "other"}
			require.NoError(t, st.Park(ctx, []seqstore.Parked{
				{Stream: s, Epoch: 7, Seq: 1, Body: []byte("one")},
				{Stream: s, Epoch: 7, Seq: 2, Body: []byte("two")},
				{Stream: other, Epoch: 7, Seq: 1, Body: []byte("fine")},
			}))
			st.mu.Lock()
			tc.corrupt(st, s, moved)
			st.mu.Unlock()

			bad := seqstore.ParkQuery{Stream: s, Epoch: 7, Max: 10}
			switch tc.name {
			case "stream":
				bad.Stream = moved
			case "epoch":
				bad.Epoch = 9
			}
			got, err := st.Unpark(ctx, []seqstore.ParkQuery{{Stream: other, Epoch: 7, Max: 10}, bad})
			require.ErrorIs(t, err, seqstore.ErrCorrupt, "Unpark of a corrupt park")
			assert.NoError(t, seqstore.Failed(err, 0, 2), "a sound stream in the same call is read")
			assert.ErrorIs(t, seqstore.Failed(err, 1, 2), seqstore.ErrCorrupt, "the corrupt stream's query fails")
			require.Len(t, got, 2)
			assert.Equal(t, []seqstore.Parked{{Stream: other, Epoch: 7, Seq: 1, Body: []byte("fine")}}, got[0])
			assert.Empty(t, got[1], "no body of a corrupt park is returned")
		})
	}
}
