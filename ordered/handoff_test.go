package ordered_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/ordered"
	"github.com/inorder/inorder/ordered/memqueue"
	"github.com/inorder/inorder/seqstore/memstore"
)

// TestRunLeavesWhileHandedOut: Run's waiting workers are handed messages
// by whichever step makes them ready. A worker whose context ends as it is
// handed one gives it back, and it comes next, as the same attempt: Runs
// started and cancelled over and over while messages arrive lose none,
// hand none out twice, and keep each group in order. (A worker that left
// without giving its hand-out back would hold its group for good.)
func TestRunLeavesWhileHandedOut(t *testing.T) {
	const groups, perGroup = 40, 60
	drv := memqueue.New(&memqueue.Options{Seed: 3})
	q, err := ordered.New(context.Background(), drv, memstore.New(), &ordered.Options{
		Receive: ordered.ReceiveOptions{Concurrency: 8},
	})
	require.NoError(t, err)
	defer func() { require.NoError(t, q.Close(context.Background())) }()

	var bodies [][]byte
	want := map[string]uint64{}
	for s := uint64(1); s <= perGroup; s++ {
		for g := range groups {
			name := fmt.Sprintf("g%d", g)
			bodies = append(bodies, rxBody(name, 1, s))
			want[name] = perGroup
		}
	}
	rc := newRxRecorder(len(bodies))
	go func() {
		for i := 0; i < len(bodies); i += 16 {
			rxSend(t, drv, bodies[i:min(i+16, len(bodies))])
			time.Sleep(100 * time.Microsecond)
		}
	}()
	rng := rand.New(rand.NewPCG(1, 2))
	deadline := time.After(30 * time.Second)
	runs := 0
	for done := false; !done; {
		ctx, cancel := context.WithTimeout(context.Background(), time.Duration(rng.IntN(2000))*time.Microsecond)
		err := q.Run(ctx, func(ctx context.Context, m *ordered.Message) error {
			defer rc.record(m)()
			return nil
		})
		cancel()
		require.NoError(t, err)
		runs++
		select {
		case <-rc.done:
			done = true
		case <-deadline:
			rc.mu.Lock()
			total := rc.total
			rc.mu.Unlock()
			t.Fatalf("after %d Runs, %d of %d messages handled: a hand-out was kept by a worker that left", runs, total, len(bodies))
		default:
		}
	}
	rc.check(t, want)
	st := q.Stats()
	require.Equal(t, int64(len(bodies)), st.Receive.Delivered, "hand-outs given back do not count as delivered")
	t.Logf("%d Runs", runs)
}
