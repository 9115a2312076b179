package ordered_test

import (
	"bytes"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/ordered"
)

// TestReview6RecoverAfterRecoveredSendFailedAgain: a failed send is
// re-sent by Recover while its group has another message in flight; the
// re-send fails again (Recover says so). A later Recover, with the queue
// healthy again, must send it: it returns nil only once every failed send
// of this process went out. On 134b61b a failed seq, once re-sent, was
// forgotten, and the group, kept live by its in-flight message, covered the
// seq with its reserved range: the second Recover skipped it as "in flight
// or sent by this process". Both orders: the failed send first (the group
// is dropped and reserved again) and the in-flight one first (the group
// lives throughout, the failed seq inside its range).
func TestReview6RecoverAfterRecoveredSendFailedAgain(t *testing.T) {
	for _, holdFirst := range []bool{false, true} {
		t.Run(fmt.Sprint("hold-first-", holdFirst), func(t *testing.T) {
			ctx := sendCtx(t)
			d := newSendDriver()
			var bad atomic.Bool
			bad.Store(true)
			hold := make(chan struct{})
			d.fail = func(_ int, bodies [][]byte) error {
				for _, b := range bodies {
					if bytes.HasSuffix(b, []byte("hold")) {
						<-hold
					}
					if bytes.HasSuffix(b, []byte("bad")) && bad.Load() {
						return errPermanent
					}
				}
				return nil
			}
			q := newSendQueue(t, d, newTestStore(), &ordered.Options{Send: ordered.SendOptions{MarkInterval: time.Millisecond}})
			sendHold := func() *ordered.SendResult {
				r, err := q.SendAsync(ctx, "g", []byte("hold")) // in flight until hold closes
				require.NoError(t, err)
				require.Eventually(t, func() bool { return d.inflight.Load() == 1 }, 5*time.Second, time.Millisecond)
				return r
			}
			var r2 *ordered.SendResult
			if holdFirst {
				r2 = sendHold()
			}
			r1, err := q.SendAsync(ctx, "g", []byte("bad"))
			require.NoError(t, err)
			require.ErrorIs(t, r1.Wait(ctx), errPermanent)
			if !holdFirst {
				r2 = sendHold()
			}

			n, err := q.Recover(ctx) // re-sends the failed one, which fails again
			require.Error(t, err, "the re-send failed: Recover says so")
			assert.Equal(t, 1, n)

			bad.Store(false)
			n, err = q.Recover(ctx)
			require.NoError(t, err)
			assert.Equal(t, 1, n, "Recover returned nil without sending the failed seq")
			close(hold)
			require.NoError(t, r2.Wait(ctx))
			var seqs []uint64
			for _, m := range d.byGroup()["g"] {
				seqs = append(seqs, m.Seq)
			}
			assert.ElementsMatch(t, []uint64{1, 2}, seqs, "the failed seq never went out although the last Recover returned nil")
		})
	}
}

// TestReview6SendRecoverStress: concurrent SendAsync in few groups, random
// permanent send failures and concurrent Recover calls. Once the queue is
// healthy, Recover returning (0, nil) must mean every admitted message went
// out (each seq 1..n of every group, once), and the groups' state is gone.
func TestReview6SendRecoverStress(t *testing.T) {
	for _, md := range []int{0, 3} {
		t.Run(fmt.Sprint("maxdisorder", md), func(t *testing.T) { review6Stress(t, md) })
	}
}

func review6Stress(t *testing.T, maxDisorder int) {
	ctx := sendCtx(t)
	d := newSendDriver()
	var bad atomic.Bool
	bad.Store(true)
	var n atomic.Int64
	d.fail = func(_ int, bodies [][]byte) error {
		if bad.Load() && n.Add(1)%3 == 0 {
			return errPermanent
		}
		return nil
	}
	q := newSendQueue(t, d, newTestStore(), &ordered.Options{Send: ordered.SendOptions{MarkInterval: time.Millisecond, MaxDisorder: maxDisorder}})
	stop := make(chan struct{})
	recDone := make(chan struct{})
	go func() {
		defer close(recDone)
		for {
			select {
			case <-stop:
				return
			default:
			}
			_, _ = q.Recover(ctx)
		}
	}()
	var wg sync.WaitGroup
	var rmu sync.Mutex
	var all []*ordered.SendResult
	for w := range 4 {
		wg.Go(func() {
			for i := range 200 {
				g := fmt.Sprintf("g%d", (w*7+i)%5)
				r, err := q.SendAsync(ctx, g, []byte(fmt.Sprintf("%d-%d", w, i)))
				if err == nil {
					rmu.Lock()
					all = append(all, r)
					rmu.Unlock()
					if i%10 == 0 {
						_ = r.Wait(ctx)
					}
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	<-recDone
	for _, r := range all {
		_ = r.Wait(ctx) // nothing of this process in flight any more
	}
	bad.Store(false)
	for range 50 {
		k, err := q.Recover(ctx)
		require.NoError(t, err)
		if k == 0 {
			break
		}
	}
	// Copies are allowed (a receiver drops them by seq); holes are not.
	total, dups := 0, 0
	for g, msgs := range d.byGroup() {
		seen := map[uint64]bool{}
		for _, m := range msgs {
			if seen[m.Seq] {
				dups++
			}
			seen[m.Seq] = true
		}
		for s := uint64(1); s <= uint64(len(seen)); s++ {
			assert.True(t, seen[s], "group %s: seq %d missing (hole)", g, s)
		}
		total += len(seen)
	}
	t.Logf("copies sent: %d", dups)
	assert.Equal(t, 800, total, "distinct messages sent once Recover returned 0, nil")
	assert.Zero(t, q.Stats().Send.Groups, "send groups left in memory")
}
