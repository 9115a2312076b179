package ordered_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/ordered"
	"github.com/inorder/inorder/ordered/memqueue"
	"github.com/inorder/inorder/seqstore/memstore"
)

// TestReview5CloseDeadlineThenNext: receivers over one queue and store,
// each closed with a deadline that passes while its handlers run (steps
// after stopped start no I/O); the next receiver must hand out every seq
// that was not acked, in order: no loss, no stuck cursor.
func TestReview5CloseDeadlineThenNext(t *testing.T) {
	t.Parallel() // mostly waits (timeouts, visibility): beside the others
	for _, mode := range []ordered.Mode{ordered.AtLeastOnce} {
		for _, sync_ := range []bool{false, true} {
			t.Run(fmt.Sprintf("%v/sync=%v", mode, sync_), func(t *testing.T) {
				drv := memqueue.New(&memqueue.Options{Seed: 55, Visibility: 300 * time.Millisecond})
				store := memstore.New()
				const groups, per = 5, 300
				var bodies [][]byte
				rng := rand.New(rand.NewPCG(1, 2))
				for g := range groups {
					bodies = append(bodies, rxBodies(fmt.Sprintf("g%d", g), 1, 1, per, nil)...)
				}
				rng.Shuffle(len(bodies), func(i, j int) { bodies[i], bodies[j] = bodies[j], bodies[i] })
				rxSend(t, drv, bodies)

				var mu sync.Mutex
				acked := map[string]map[uint64]bool{}
				var errs []string
				total := func() int {
					mu.Lock()
					defer mu.Unlock()
					n := 0
					for _, s := range acked {
						n += len(s)
					}
					return n
				}
				deadline := time.Now().Add(30 * time.Second)
				for round := 0; total() < groups*per; round++ {
					require.True(t, time.Now().Before(deadline), "round %d: %d of %d acked", round, total(), groups*per)
					q, err := ordered.New(context.Background(), drv, store, &ordered.Options{
						Receive: ordered.ReceiveOptions{Mode: mode, SyncAck: sync_, Concurrency: 4, CommitInterval: 2 * time.Millisecond},
					})
					require.NoError(t, err)
					last := map[string]uint64{}
					runDone := make(chan struct{})
					go func() {
						defer close(runDone)
						_ = q.Run(context.Background(), func(ctx context.Context, m *ordered.Message) error {
							time.Sleep(time.Duration(rand.IntN(2000)) * time.Microsecond)
							mu.Lock()
							if l, ok := last[m.Group]; ok && m.Seq < l {
								errs = append(errs, fmt.Sprintf("round %d group %s: seq %d after %d", round, m.Group, m.Seq, l))
							}
							last[m.Group] = m.Seq
							if acked[m.Group] == nil {
								acked[m.Group] = map[uint64]bool{}
							}
							acked[m.Group][m.Seq] = true
							mu.Unlock()
							return nil
						})
					}()
					time.Sleep(time.Duration(10+rand.IntN(30)) * time.Millisecond)
					final := round >= 15
					d := 3 * time.Millisecond
					if final {
						// the last receiver gets the time to take everything left
						require.Eventually(t, func() bool { return total() == groups*per }, 10*time.Second, 10*time.Millisecond,
							"final receiver: %d of %d acked", total(), groups*per)
						d = 5 * time.Second
					}
					ctx, cancel := context.WithTimeout(context.Background(), d)
					_ = q.Close(ctx)
					cancel()
					select {
					case <-runDone:
					case <-time.After(5 * time.Second):
						t.Fatalf("round %d: Run did not return after Close", round)
					}
				}
				mu.Lock()
				defer mu.Unlock()
				require.Empty(t, errs)
			})
		}
	}
}
