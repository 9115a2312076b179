package batcher

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestReview10VaryingHoldStress: per-batch holds that differ widely (the
// usual time swings between sub-millisecond and tens of milliseconds,
// some batches far slower than usual), with withdrawals, AddNoWait, Post
// and Shutdown mid-load, MaxHandlers small enough to be reached. Every
// item not withdrawn is handled exactly once, none waits longer than the
// slowest possible hold chain, and the idle Batcher counts no partials.
func TestReview10VaryingHoldStress(t *testing.T) {
	for round := range 30 {
		rng := rand.New(rand.NewPCG(uint64(round), 10))
		opts := Options{
			MaxHandlers: 1 + rng.IntN(3),
			MaxItems:    1 + rng.IntN(4),
			MaxPartial:  1 + rng.IntN(2),
			PartialHold: time.Duration(100+rng.IntN(1000)) * time.Microsecond,
		}
		var mu sync.Mutex
		handled := make(map[int]int)
		b, err := New(&opts, func(batch []int, _ []error) {
			mu.Lock()
			for _, it := range batch {
				handled[it]++
			}
			mu.Unlock()
			switch r := rand.IntN(20); {
			case r == 0:
				time.Sleep(40 * time.Millisecond)
			case r < 10:
				time.Sleep(time.Duration(rand.IntN(2000)) * time.Microsecond)
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var next atomic.Int64
		for w := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := rand.New(rand.NewPCG(uint64(round), uint64(w)))
				for range 40 {
					id := int(next.Add(1))
					switch r.IntN(3) {
					case 0:
						ctx, cancel := context.WithTimeout(context.Background(), time.Duration(r.IntN(3000))*time.Microsecond)
						_ = b.Add(ctx, id)
						cancel()
					case 1:
						select {
						case <-b.AddNoWait(id):
						case <-time.After(5 * time.Second):
							t.Errorf("round %d: item %d not handled in 5 s (opts %+v)", round, id, opts)
						}
					default:
						_ = b.Post(id)
					}
					time.Sleep(time.Duration(r.IntN(500)) * time.Microsecond)
				}
			}()
		}
		if round%4 == 0 {
			time.Sleep(5 * time.Millisecond)
			b.Shutdown()
		}
		wg.Wait()
		b.Shutdown()
		b.mu.Lock()
		p, h, s, q := b.partials, b.handlers, b.starting, len(b.queue)-b.head
		b.mu.Unlock()
		if p != 0 || h != 0 || s != 0 || q != 0 {
			t.Errorf("round %d: idle batcher with partials %d handlers %d starting %d waiting %d", round, p, h, s, q)
		}
		mu.Lock()
		for id, n := range handled {
			if n != 1 {
				t.Errorf("round %d: item %d handled %d times", round, id, n)
			}
		}
		mu.Unlock()
	}
}
