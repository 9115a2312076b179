package ordered_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/ordered"
	"github.com/inorder/inorder/ordered/memqueue"
	"github.com/inorder/inorder/seqstore/memstore"
)

// r4closeRound: Runs (cancelled over and over) and a Receive caller work
// on q1 while messages arrive; Close comes at a random moment (and the
// lease may end first). A second receiver then drains the queue. Every
// message is acked by one of them; a clean Close leaves no acked message
// to come back; the second receiver sees each group in order from where
// the first left it.
func r4closeRound(t *testing.T, seed uint64, leaseEnds bool) {
	const groups, perGroup, untagged = 12, 30, 40
	drv := memqueue.New(&memqueue.Options{Seed: int64(seed) + 1, Visibility: 2 * time.Second})
	store := memstore.New()
	var acked1 sync.Map // key -> true, acked by q1 (OnSettle)
	var gone atomic.Bool
	o := &ordered.Options{
		Name: "q",
		Receive: ordered.ReceiveOptions{Concurrency: 5, MaxAttempts: 1000, Untagged: ordered.UntaggedDeliver,
			Lease: func() error {
				if gone.Load() {
					return errLeaseGone
				}
				return nil
			}},
		Retry: ordered.RetryOptions{Initial: time.Millisecond, Max: 3 * time.Millisecond},
		Hooks: ordered.Hooks{OnSettle: func(e ordered.Event) {
			if e.Err == nil {
				k := fmt.Sprintf("%s/%d", e.Group, e.Seq)
				if e.Seq == 0 {
					k = "id:" + e.ID
				}
				acked1.Store(k, true)
			}
		}},
	}
	q1, err := ordered.New(context.Background(), drv, store, o)
	require.NoError(t, err)
	var bodies [][]byte
	for s := uint64(1); s <= perGroup; s++ {
		for g := range groups {
			bodies = append(bodies, rxBody(fmt.Sprintf("g%d", g), 1, s))
		}
	}
	for i := range untagged {
		bodies = append(bodies, []byte(fmt.Sprintf("untagged-%d", i)))
	}
	rxSend(t, drv, bodies)
	b := newR4Book()
	var wg sync.WaitGroup
	var stop atomic.Bool
	nackErr := errors.New("nack")
	for i := range 2 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(seed, uint64(i)))
			for !stop.Load() {
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration(rng.IntN(2000))*time.Microsecond)
				err := q1.Run(ctx, func(ctx context.Context, m *ordered.Message) error {
					b.start(m)
					nack := rand.IntN(8) == 0
					b.end(m, !nack) // an ack refused (Close, lease) is not handed out again by q1
					if nack {
						return nackErr
					}
					return nil
				})
				cancel()
				if err != nil {
					if !errors.Is(err, ordered.ErrClosed) && !errors.Is(err, errLeaseGone) {
						t.Errorf("Run: %v", err)
					}
					return
				}
			}
		})
	}
	wg.Go(func() {
		rng := rand.New(rand.NewPCG(seed, 99))
		for !stop.Load() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Duration(rng.IntN(2000))*time.Microsecond)
			m, err := q1.Receive(ctx)
			cancel()
			if errors.Is(err, ordered.ErrClosed) || errors.Is(err, errLeaseGone) {
				return
			}
			if err != nil {
				continue
			}
			b.start(m)
			nack := rng.IntN(8) == 0
			b.end(m, !nack)
			if nack {
				_ = m.Nack(context.Background(), nackErr)
			} else {
				_ = m.Ack(context.Background())
			}
		}
	})
	rng := rand.New(rand.NewPCG(seed, 1234))
	time.Sleep(time.Duration(5+rng.IntN(40)) * time.Millisecond)
	if leaseEnds {
		gone.Store(true)
		time.Sleep(time.Duration(rng.IntN(5)) * time.Millisecond)
	}
	cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
	require.NoError(t, q1.Close(cctx), "Close")
	ccancel()
	stop.Store(true)
	wg.Wait()
	b.mu.Lock()
	require.Empty(t, b.errs, "q1")
	b.mu.Unlock()

	// Drain with a second receiver.
	q2, err := ordered.New(context.Background(), drv, store, &ordered.Options{Name: "q",
		Receive: ordered.ReceiveOptions{Untagged: ordered.UntaggedDeliver}})
	require.NoError(t, err)
	defer rxClose(t, q2)
	total := len(bodies)
	n1 := 0
	acked1.Range(func(any, any) bool { n1++; return true })
	seen2 := map[string]bool{}
	first2 := map[string]uint64{}
	last2 := map[string]uint64{}
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	for {
		missing := 0
		for s := uint64(1); s <= perGroup; s++ {
			for g := range groups {
				k := fmt.Sprintf("g%d/%d", g, s)
				if _, ok := acked1.Load(k); !ok && !seen2[k] {
					missing++
				}
			}
		}
		un := 0
		for k := range seen2 {
			if len(k) > 3 && k[:3] == "id:" {
				un++
			}
		}
		acked1.Range(func(k, _ any) bool {
			if s := k.(string); len(s) > 3 && s[:3] == "id:" && !seen2[s] {
				un++
			}
			return true
		})
		if missing == 0 && un >= untagged {
			break
		}
		m, err := q2.Receive(ctx)
		require.NoError(t, err, "draining: %d tagged missing, %d of %d untagged seen (q1 acked %d of %d)", missing, un, untagged, n1, total)
		k := fmt.Sprintf("%s/%d", m.Group, m.Seq)
		if m.Unordered {
			k = "id:" + m.ID
		}
		if _, ok := acked1.Load(k); ok && !leaseEnds {
			t.Errorf("%s acked by q1 before a clean Close, handed out again by q2", k)
		}
		if !m.Unordered {
			if l, ok := last2[m.Group]; ok && m.Seq != l+1 {
				t.Errorf("q2: group %s: seq %d after %d", m.Group, m.Seq, l)
			}
			if _, ok := first2[m.Group]; !ok {
				first2[m.Group] = m.Seq
			}
			last2[m.Group] = m.Seq
		}
		seen2[k] = true
		require.NoError(t, m.Ack(ctx))
	}
}

func TestReview4CloseMidHandOff(t *testing.T) {
	t.Parallel() // mostly waits (timeouts, visibility): beside the others
	for seed := range uint64(6) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { r4closeRound(t, seed, false) })
	}
}

func TestReview4LeaseThenCloseMidHandOff(t *testing.T) {
	t.Parallel() // mostly waits (timeouts, visibility): beside the others
	for seed := range uint64(6) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { r4closeRound(t, seed, true) })
	}
}
