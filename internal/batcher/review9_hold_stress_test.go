package batcher

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestReview9HoldStress: random loads on a Batcher with MaxPartial and
// PartialHold, with withdrawals and Shutdown mid-load. Every item not
// withdrawn is handled exactly once, no item waits forever, partials is 0
// once idle, and no more than MaxPartial partial batches younger than
// PartialHold are in flight at once.
func TestReview9HoldStress(t *testing.T) {
	for round := range 60 {
		rng := rand.New(rand.NewPCG(uint64(round), 9))
		opts := Options{
			MaxHandlers: 1 + rng.IntN(4),
			MaxItems:    1 + rng.IntN(4),
			MaxPartial:  1 + rng.IntN(2),
			PartialHold: time.Duration(200+rng.IntN(2000)) * time.Microsecond,
		}
		var mu sync.Mutex
		var young []time.Time // start of partial batches in flight
		var violations atomic.Int64
		var stopping atomic.Bool
		handled := make(map[int]int)
		var b *Batcher[int]
		b, err := New(&opts, func(batch []int, errs []error) {
			now := time.Now()
			partial := len(batch) < opts.MaxItems
			mu.Lock()
			for _, it := range batch {
				handled[it]++
			}
			if partial {
				n := 0
				// a slack of 20% of the hold for scheduling
				for _, s := range young {
					if now.Sub(s) < opts.PartialHold*8/10 {
						n++
					}
				}
				if n >= opts.MaxPartial && !stopping.Load() {
					violations.Add(1)
				}
				young = append(young, now)
			}
			mu.Unlock()
			time.Sleep(time.Duration(rng2(opts.PartialHold)))
			if partial {
				mu.Lock()
				for i, s := range young {
					if s.Equal(now) {
						young = append(young[:i], young[i+1:]...)
						break
					}
				}
				mu.Unlock()
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var withdrawn sync.Map
		next := atomic.Int64{}
		for w := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := rand.New(rand.NewPCG(uint64(round), uint64(w)))
				for range 50 {
					id := int(next.Add(1))
					switch r.IntN(4) {
					case 0:
						ctx, cancel := context.WithTimeout(context.Background(), time.Duration(r.IntN(500))*time.Microsecond)
						if err := b.Add(ctx, id); err != nil && err != ErrShutdown {
							withdrawn.Store(id, true)
						}
						cancel()
					case 1:
						c := b.AddNoWait(id)
						select {
						case <-c:
						case <-time.After(5 * time.Second):
							t.Errorf("round %d: item %d not handled in 5s (opts %+v)", round, id, opts)
						}
					default:
						_ = b.Post(id)
					}
					time.Sleep(time.Duration(r.IntN(300)) * time.Microsecond)
				}
			}()
		}
		if round%3 == 0 {
			time.Sleep(3 * time.Millisecond)
			stopping.Store(true)
			b.Shutdown()
		}
		wg.Wait()
		stopping.Store(true)
		b.Shutdown()
		b.mu.Lock()
		p, h, s := b.partials, b.handlers, b.starting
		b.mu.Unlock()
		if p != 0 || h != 0 || s != 0 {
			t.Errorf("round %d: idle batcher with partials %d handlers %d starting %d", round, p, h, s)
		}
		mu.Lock()
		for id, n := range handled {
			if n != 1 {
				t.Errorf("round %d: item %d handled %d times", round, id, n)
			}
		}
		mu.Unlock()
		if v := violations.Load(); v > 0 {
			t.Errorf("round %d: %d partial batches went while MaxPartial younger ones were in flight (opts %+v)", round, v, opts)
		}
	}
}

func rng2(hold time.Duration) int64 {
	return rand.Int64N(int64(3 * hold))
}
