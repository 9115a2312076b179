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

// r4book checks what the application sees: per message, the attempts
// are 1, 2, 3... (a hand-out given back is not an attempt); per group,
// one message out at a time and seq N only once N-1 was acked; and it
// counts hand-outs, to compare with Stats.Delivered.
type r4book struct {
	mu       sync.Mutex
	attempts map[string]int
	acked    map[string]bool
	out      map[string]bool
	next     map[string]uint64 // group -> next seq to ack
	handouts int64
	ackedN   int
	errs     []string
}

func newR4Book() *r4book {
	return &r4book{attempts: map[string]int{}, acked: map[string]bool{}, out: map[string]bool{}, next: map[string]uint64{}}
}

func r4key(m *ordered.Message) string {
	if m.Unordered {
		return "u:" + string(m.Body)
	}
	return fmt.Sprintf("%s/%d", m.Group, m.Seq)
}

func (b *r4book) start(m *ordered.Message) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.handouts++
	k := r4key(m)
	if b.acked[k] {
		b.errs = append(b.errs, fmt.Sprintf("%s handed out after its ack (attempt %d)", k, m.Attempt))
	}
	if m.Attempt != b.attempts[k]+1 {
		b.errs = append(b.errs, fmt.Sprintf("%s: attempt %d after %d hand-outs", k, m.Attempt, b.attempts[k]))
	}
	b.attempts[k]++
	if m.Unordered {
		return
	}
	if b.out[m.Group] {
		b.errs = append(b.errs, fmt.Sprintf("group %s: two out at once (seq %d)", m.Group, m.Seq))
	}
	b.out[m.Group] = true
	if want := max(b.next[m.Group], 1); m.Seq != want {
		b.errs = append(b.errs, fmt.Sprintf("group %s: seq %d handed out, want %d", m.Group, m.Seq, want))
	}
}

func (b *r4book) end(m *ordered.Message, acked bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !m.Unordered {
		b.out[m.Group] = false
	}
	if acked {
		k := r4key(m)
		if !b.acked[k] {
			b.acked[k] = true
			b.ackedN++
		}
		if !m.Unordered {
			b.next[m.Group] = m.Seq + 1
		}
	}
}

// TestReview4HandOffStress: two Runs started and cancelled over and over,
// at the same time, beside a Receive caller with short deadlines; the
// handlers nack one message in eight; tagged and untagged (Unordered)
// messages. Nothing is lost, nothing is handed out after its ack, each
// message's attempts count 1, 2, 3..., groups keep their order, and
// Stats.Delivered counts exactly the hand-outs the application saw.
func TestReview4HandOffStress(t *testing.T) {
	const groups, perGroup, untagged = 20, 40, 80
	drv := memqueue.New(&memqueue.Options{Seed: 11})
	q, err := ordered.New(context.Background(), drv, memstore.New(), &ordered.Options{
		Receive: ordered.ReceiveOptions{Concurrency: 6, MaxAttempts: 1000, Untagged: ordered.UntaggedDeliver},
		Retry:   ordered.RetryOptions{Initial: time.Millisecond, Max: 3 * time.Millisecond},
	})
	require.NoError(t, err)
	defer func() { require.NoError(t, q.Close(context.Background())) }()

	var bodies [][]byte
	for s := uint64(1); s <= perGroup; s++ {
		for g := range groups {
			bodies = append(bodies, rxBody(fmt.Sprintf("g%d", g), 1, s))
		}
	}
	for i := range untagged {
		bodies = append(bodies, []byte(fmt.Sprintf("untagged-%d", i)))
	}
	total := len(bodies)
	rand.New(rand.NewPCG(5, 6)).Shuffle(len(bodies), func(i, j int) { bodies[i], bodies[j] = bodies[j], bodies[i] })
	go func() {
		for i := 0; i < len(bodies); i += 8 {
			rxSend(t, drv, bodies[i:min(i+8, len(bodies))])
			time.Sleep(200 * time.Microsecond)
		}
	}()

	b := newR4Book()
	var nackErr = errors.New("nack")
	done := make(chan struct{})
	var doneOnce sync.Once
	check := func() {
		b.mu.Lock()
		n := b.ackedN
		b.mu.Unlock()
		if n == total {
			doneOnce.Do(func() { close(done) })
		}
	}
	var wg sync.WaitGroup
	var stop atomic.Bool
	for i := range 2 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(i), 9))
			for !stop.Load() {
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration(rng.IntN(3000))*time.Microsecond)
				err := q.Run(ctx, func(ctx context.Context, m *ordered.Message) error {
					b.start(m)
					nack := rand.IntN(8) == 0 // (handlers run at once: the global source)
					if !nack {
						// Run acks on return: count it acked now (the ack
						// made by Run cannot fail but on ctx end, which
						// still acks: ackReceive's fallback).
						b.end(m, true)
						check()
						return nil
					}
					b.end(m, false)
					return nackErr
				})
				cancel()
				if err != nil {
					t.Errorf("Run: %v", err)
					return
				}
			}
		})
	}
	wg.Go(func() {
		rng := rand.New(rand.NewPCG(77, 9))
		for !stop.Load() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Duration(rng.IntN(3000))*time.Microsecond)
			m, err := q.Receive(ctx)
			cancel()
			if err != nil {
				continue
			}
			b.start(m)
			if rng.IntN(8) == 0 {
				b.end(m, false)
				require.NoError(t, m.Nack(context.Background(), nackErr))
				continue
			}
			b.end(m, true)
			require.NoError(t, m.Ack(context.Background()))
			check()
		}
	})
	select {
	case <-done:
	case <-time.After(40 * time.Second):
	}
	stop.Store(true)
	wg.Wait()
	b.mu.Lock()
	defer b.mu.Unlock()
	require.Empty(t, b.errs)
	require.Equal(t, total, b.ackedN, "messages acked")
	st := q.Stats().Receive
	require.Equal(t, b.handouts, st.Delivered, "Stats.Delivered vs hand-outs the application saw")
}
