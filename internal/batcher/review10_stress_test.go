package batcher

import (
	"math/rand/v2"
	"sync"
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
		var shutdownAfter time.Duration
		if round%4 == 0 {
			shutdownAfter = 5 * time.Millisecond
		}
		stressLoad{items: 40, kinds: 3, addWait: 3 * time.Millisecond, pause: 500 * time.Microsecond}.run(t, b, round, opts, shutdownAfter, nil)
		checkIdle(t, b, round, &mu, handled)
	}
}
