package batcher

import (
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
			time.Sleep(time.Duration(rand.Int64N(int64(3 * opts.PartialHold))))
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
		var shutdownAfter time.Duration
		if round%3 == 0 {
			shutdownAfter = 3 * time.Millisecond
		}
		stressLoad{items: 50, kinds: 4, addWait: 500 * time.Microsecond, pause: 300 * time.Microsecond}.run(t, b, round, opts, shutdownAfter, &stopping)
		stopping.Store(true)
		checkIdle(t, b, round, &mu, handled)
		if v := violations.Load(); v > 0 {
			t.Errorf("round %d: %d partial batches went while MaxPartial younger ones were in flight (opts %+v)", round, v, opts)
		}
	}
}
