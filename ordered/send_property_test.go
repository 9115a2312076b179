package ordered_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/inorder/inorder/ordered"
	"github.com/inorder/inorder/ordered/driver"
)

// TestSendProperties drives the send pipeline with random traffic and
// random failures (whole requests and single entries, retryable and not,
// failed reservations) and checks its invariants:
//
//   - a result is nil exactly when the driver accepted the message, under
//     the result's seq;
//   - per group, the reserved seqs are 1..N without holes or repeats, in
//     admission order;
//   - in durable mode the journal holds exactly the messages that were
//     reserved and failed, and Recover (with a healthy driver) sends exactly
//     those, after which every group's seqs 1..N are in the queue.
func TestSendProperties(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		durable := rapid.Bool().Draw(rt, "durable")
		groups := rapid.IntRange(1, 4).Draw(rt, "groups")
		n := rapid.IntRange(1, 120).Draw(rt, "messages")
		pRetry := rapid.Float64Range(0, 0.4).Draw(rt, "pRetry")
		pPerm := rapid.Float64Range(0, 0.2).Draw(rt, "pPerm")
		pEntry := rapid.Float64Range(0, 0.5).Draw(rt, "pEntry")
		storeFails := rapid.IntRange(0, 2).Draw(rt, "storeFails")
		seed := rapid.Uint64().Draw(rt, "seed")

		d := newSendDriver()
		d.limits.MaxBatch = rapid.IntRange(1, 16).Draw(rt, "maxBatch")
		var mu sync.Mutex
		rng := newSplitMix(seed)
		broken := true
		d.fail = func(call int, bodies [][]byte) error {
			mu.Lock()
			defer mu.Unlock()
			if !broken {
				return nil
			}
			switch r := rng.float(); {
			case r < pRetry:
				return errRetryable
			case r < pRetry+pPerm:
				return errPermanent
			case r < pRetry+pPerm+pEntry:
				be := &driver.BatchError{Errs: make([]error, len(bodies))}
				for i := range bodies {
					switch e := rng.float(); {
					case e < 0.3:
						be.Errs[i] = errRetryable
					case e < 0.45:
						be.Errs[i] = errPermanent
					}
				}
				return be
			}
			return nil
		}
		store := newTestStore()
		mode := ordered.SendFast
		if durable {
			mode = ordered.SendDurable
		}
		// A pipeline that never finishes must fail the case, with a
		// message, not hang it until go test's timeout.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		q, err := ordered.New(context.Background(), d, store, &ordered.Options{
			Retry: ordered.RetryOptions{Initial: 10 * time.Microsecond, Max: 50 * time.Microsecond},
			Send:  ordered.SendOptions{Mode: mode, MaxAttempts: 3, Concurrency: 3, MaxInFlight: 32},
		})
		require.NoError(rt, err)

		type sent struct {
			group   string
			payload string
			res     *ordered.SendResult
		}
		pick := newSplitMix(seed ^ 0x5eed)
		var all []sent
		for i := range n {
			if storeFails > 0 && i%40 == 7 {
				store.mu.Lock()
				store.failNext = errors.New("store down")
				store.mu.Unlock()
				storeFails--
			}
			g := "g" + strconv.Itoa(int(pick.next()%uint64(groups)))
			p := fmt.Sprintf("%s-%d", g, i)
			r, err := q.SendAsync(ctx, g, []byte(p))
			require.NoError(rt, err, "admission of %s (within 10s)", p)
			all = append(all, sent{g, p, r})
		}
		for _, s := range all {
			_ = s.res.Wait(ctx)
		}
		require.NoError(rt, ctx.Err(), "every result done within 10s")
		require.NoError(rt, q.Close(ctx))

		accepted := make(map[string]sentMsg)
		for _, m := range d.sent() {
			_, dup := accepted[m.Payload]
			require.False(rt, dup, "payload %s accepted twice", m.Payload)
			accepted[m.Payload] = m
		}
		next := make(map[string]uint64)
		journaled := 0
		for _, s := range all {
			m, ok := accepted[s.payload]
			err := s.res.Err()
			require.Equal(rt, err == nil, ok, "payload %s: result %v, accepted %v", s.payload, err, ok)
			if ok {
				require.Equal(rt, s.res.Seq(), m.Seq, "payload %s: seq", s.payload)
			}
			if s.res.Seq() == 0 {
				require.Error(rt, err, "payload %s: no seq but no error", s.payload)
				continue // its reservation failed
			}
			next[s.group]++
			require.Equal(rt, next[s.group], s.res.Seq(), "payload %s: seqs follow admission, without holes", s.payload)
			if err != nil {
				journaled++
			}
		}
		if !durable {
			require.Zero(rt, store.journalLen(), "fast mode journals nothing")
			return
		}
		require.Equal(rt, journaled, store.journalLen(), "the journal holds exactly the reserved messages that failed")

		mu.Lock()
		broken = false
		mu.Unlock()
		q2, err := ordered.New(context.Background(), d, store, &ordered.Options{Send: ordered.SendOptions{NoRecover: true}})
		require.NoError(rt, err)
		got, err := q2.Recover(ctx)
		require.NoError(rt, err, "Recover (within 10s)")
		require.Equal(rt, journaled, got, "Recover sends the failed messages")
		require.NoError(rt, q2.Close(ctx))
		require.Zero(rt, store.journalLen())
		for g, msgs := range d.byGroup() {
			for i, m := range msgs {
				require.Equal(rt, uint64(i+1), m.Seq, "group %s after recovery", g)
			}
			require.Len(rt, msgs, int(next[g]), "group %s after recovery", g)
		}
	})
}

// splitMix is a tiny deterministic generator for the fake driver's choices.
type splitMix struct{ s uint64 }

func newSplitMix(seed uint64) *splitMix { return &splitMix{seed} }

func (r *splitMix) next() uint64 {
	r.s += 0x9e3779b97f4a7c15
	z := r.s
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

func (r *splitMix) float() float64 { return float64(r.next()>>11) / (1 << 53) }
