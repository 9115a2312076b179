package ordered_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/internal/envelope"
	"github.com/inorder/inorder/ordered"
	"github.com/inorder/inorder/ordered/memqueue"
	"github.com/inorder/inorder/seqstore/filestore"
)

// Parks have limits (ReceiveOptions.ParkLimits). A sender without a key
// floods one group with 16 KiB messages behind a hole: before the limits,
// everything was parked (16,000 x 16 KiB: 250 MiB on disk, 739 MiB
// written by snapshots). Now what is parked stays within the group's byte
// limit, the rest stays in the queue (given back, counted in ParkFull), and
// once the hole is filled every message is handed out in order: the limit
// costs receives, never a message.
func TestSec3ParkDiskFill(t *testing.T) {
	t.Parallel() // mostly waits (timeouts, visibility): beside the others
	const (
		n     = 400 // early arrivals, seqs hole+1..
		hole  = 50  // seqs 1..hole come last
		size  = 16 << 10
		limit = 1 << 20 // GroupBytes
	)
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "fs")
	fs, err := filestore.Open(dir, nil)
	require.NoError(t, err)
	t.Cleanup(func() { fs.Close() }) // after the queue's Close (cleanups run last first)
	drv := memqueue.New(&memqueue.Options{Shards: 1, Visibility: 2 * time.Second, MinVisibility: 10 * time.Millisecond})
	logs := &lockedWriter{w: &strings.Builder{}}
	q, err := ordered.New(ctx, drv, fs, &ordered.Options{
		Receive: ordered.ReceiveOptions{Wait: 50 * time.Millisecond, MaxUndeleted: 200, ParkLimits: ordered.ParkLimits{GroupBytes: limit}},
		Logger:  slog.New(slog.NewTextHandler(logs, nil)),
	})
	require.NoError(t, err)
	var g sec3Got
	sec3Run(t, q, &g)
	pad := []byte(strings.Repeat("x", size))
	body := func(seq int, payload []byte) []byte {
		return envelope.Append(nil, envelope.Header{Group: "victim", Epoch: 1, Seq: uint64(seq)}, payload)
	}
	for i := 0; i < n; i += 16 {
		var bs [][]byte
		for j := i; j < min(i+16, n); j++ {
			bs = append(bs, body(hole+1+j, pad))
		}
		require.NoError(t, drv.SendBatch(ctx, bs))
	}
	deadline := time.Now().Add(30 * time.Second)
	for q.Stats().Receive.ParkFull < n && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	st, fst := q.Stats().Receive, fs.Stats()
	var disk int64
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if info, err := e.Info(); err == nil {
			disk += info.Size()
		}
	}
	vis, infl := drv.Len()
	t.Logf("sent %d x %d B behind a hole: parked %d (%d counted, %.2f MiB), park full %d, given back %d; filestore parked %d (%.2f MiB); dir %.2f MiB; queue %d+%d",
		n, size, st.Parked, st.ParkedNow, float64(st.ParkedBytes)/(1<<20), st.ParkFull, st.NotKept, fst.Parked, float64(fst.ParkedBytes)/(1<<20), float64(disk)/(1<<20), vis, infl)
	require.GreaterOrEqual(t, st.ParkFull, int64(n), "arrivals beyond the limit are counted, and keep coming back")
	require.LessOrEqual(t, st.ParkedBytes, int64(limit), "what is counted stays within the limit")
	require.LessOrEqual(t, fst.ParkedBytes, int64(limit), "what the store holds stays within the limit")
	require.Less(t, disk, int64(limit)+limit/2, "the store's files stay near the limit")
	require.Equal(t, n, vis+infl+int(fst.Parked), "every message is in the queue or parked")
	require.Contains(t, logs.String(), "park limit reached", "the limit is reported")

	// Fill the hole: everything comes out, in order.
	for seq := 1; seq <= hole; seq += 16 {
		var bs [][]byte
		for s := seq; s < min(seq+16, hole+1); s++ {
			bs = append(bs, body(s, []byte(fmt.Sprint("hole-", s))))
		}
		require.NoError(t, drv.SendBatch(ctx, bs))
	}
	var got []ordered.Message
	for range 18 {
		got = g.wait(t, n+hole, 5*time.Second)
		st := q.Stats().Receive
		vis, infl := drv.Len()
		t.Logf("handed out %d; received %d, given back %d, parked %d, park full %d, counted %d, undeleted %d; queue %d+%d",
			len(got), st.Received, st.NotKept, st.Parked, st.ParkFull, st.ParkedNow, st.Undeleted, vis, infl)
		if len(got) >= n+hole {
			break
		}
	}
	require.Equal(t, n+hole, len(got), "every message handed out once the hole is filled")
	for i, m := range got {
		require.Equal(t, uint64(i+1), m.Seq, "in order")
		require.False(t, m.Unordered)
	}
}

// lockedWriter serializes writes to w.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (l *lockedWriter) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return fmt.Sprint(l.w)
}
