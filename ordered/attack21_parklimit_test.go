package ordered_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/internal/envelope"
	"github.com/inorder/inorder/ordered"
	"github.com/inorder/inorder/ordered/memqueue"
	"github.com/inorder/inorder/seqstore/filestore"
)

// TestAttack21ParkLimitsChaosDrain: many groups sent backwards (every
// message early but the last), with duplicate sends and queue redeliveries,
// under small park limits (over all groups and per group): every message
// is handed out exactly once, in order, and once everything is handed out
// the receiver's park count (ParkedNow / ParkedBytes) is back to zero and
// the store holds no parks (no count drift that would later refuse parks
// for ever, nothing left on disk).
func TestAttack21ParkLimitsChaosDrain(t *testing.T) {
	t.Parallel() // mostly waits (timeouts, visibility): beside the others
	const groups, per = 6, 60
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "fs")
	fs, err := filestore.Open(dir, nil)
	require.NoError(t, err)
	t.Cleanup(func() { fs.Close() })
	drv := memqueue.New(&memqueue.Options{Shards: 4, Visibility: 2 * time.Second, MinVisibility: 10 * time.Millisecond,
		Seed: 21, Redeliver: 0.05, RedeliverAfter: 20 * time.Millisecond})
	q, err := ordered.New(ctx, drv, fs, &ordered.Options{
		Receive: ordered.ReceiveOptions{Wait: 30 * time.Millisecond, Window: 8, GapTimeout: time.Hour,
			ParkLimits: ordered.ParkLimits{Messages: 25, GroupMessages: 8}},
	})
	require.NoError(t, err)
	var g sec3Got
	sec3Run(t, q, &g)
	rng := rand.New(rand.NewPCG(21, 21))
	var bodies [][]byte
	for seq := per; seq >= 1; seq-- {
		for gi := range groups {
			b := envelope.Append(nil, envelope.Header{Group: fmt.Sprint("g", gi), Epoch: 1, Seq: uint64(seq)}, []byte(fmt.Sprintf("g%d-%d", gi, seq)))
			bodies = append(bodies, b)
			if rng.IntN(8) == 0 {
				bodies = append(bodies, b) // a duplicate send
			}
		}
	}
	for i := 0; i < len(bodies); i += 16 {
		require.NoError(t, drv.SendBatch(ctx, bodies[i:min(i+16, len(bodies))]))
	}
	var got []ordered.Message
	for range 12 {
		got = g.wait(t, groups*per, 5*time.Second)
		st := q.Stats().Receive
		t.Logf("handed out %d / %d; parked %d, park full %d, counted %d (%d B)", len(got), groups*per, st.Parked, st.ParkFull, st.ParkedNow, st.ParkedBytes)
		if len(got) >= groups*per {
			break
		}
	}
	next := map[string]uint64{}
	for _, m := range got {
		require.False(t, m.Unordered)
		require.Equal(t, next[m.Group]+1, m.Seq, "group %s in order, once", m.Group)
		next[m.Group] = m.Seq
	}
	require.Equal(t, groups*per, len(got), "every message handed out")
	// Let the cursors become durable.
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) && (q.Stats().Receive.ParkedNow != 0 || fs.Stats().Parked != 0) {
		time.Sleep(50 * time.Millisecond)
	}
	st := q.Stats().Receive
	t.Logf("after the drain: parked %d, park full %d, counted %d (%d B); store parked %d", st.Parked, st.ParkFull, st.ParkedNow, st.ParkedBytes, fs.Stats().Parked)
	require.NotZero(t, st.ParkFull, "the limits were reached")
	require.Zero(t, st.ParkedNow, "no count left once every park was passed")
	require.Zero(t, st.ParkedBytes)
	require.Zero(t, fs.Stats().Parked, "no park left in the store")
}
