package ordered_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/ordered"
)

// TestReservationsWaitForSends: a reservation waits while messages
// reserved before it wait for a send, so that with a store that answers
// at once (memstore) one store call still reserves for many messages of
// many groups. 3,000 messages over 300 groups, one every 50 µs (a steady
// producer, not a burst), through a driver whose sends take 2 ms: the
// sends, not the store, set the pace.
func TestReservationsWaitForSends(t *testing.T) {
	const groups, n = 300, 3000
	ctx := context.Background()
	d := newSendDriver()
	d.fail = func(int, [][]byte) error {
		time.Sleep(2 * time.Millisecond)
		return nil
	}
	store := newTestStore()
	q := newSendQueue(t, d, store, nil)
	results := make([]*ordered.SendResult, 0, n)
	start := time.Now()
	for i := range n {
		for time.Since(start) < time.Duration(i)*50*time.Microsecond {
			// a steady producer
		}
		r, err := q.SendAsync(ctx, fmt.Sprintf("g%d", i%groups), []byte("x"))
		require.NoError(t, err)
		results = append(results, r)
	}
	for _, r := range results {
		require.NoError(t, r.Wait(ctx))
	}
	store.mu.Lock()
	calls := store.reserves
	store.mu.Unlock()
	per := float64(n) / float64(calls)
	t.Logf("%d Reserve calls for %d messages: %.1f messages per call; %d sends", calls, n, per, d.calls.Load())
	// Measured: 11.8-12.4 (without the wait: 2.2-2.5).
	require.GreaterOrEqual(t, per, 6.0, "a reservation per message or two: it did not wait for the sends")
	checkStreams(t, d)
}
