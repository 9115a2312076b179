package batcher

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// stressLoad is how the hold stress tests load a Batcher: four goroutines
// each submit items, one in kinds at random by Add with a deadline of up
// to addWait (withdrawn when it passes), AddNoWait waited for (5 s at
// most), or Post, pausing up to pause between items.
type stressLoad struct {
	items   int           // per goroutine
	kinds   int           // 3: Add, AddNoWait, Post; 4: Post twice as often
	addWait time.Duration // the longest deadline of an Add
	pause   time.Duration
}

// run submits the load to b; with shutdownAfter > 0 it shuts b down that
// long after the load begins (stopping is set first), then waits for the
// load.
func (l stressLoad) run(t *testing.T, b *Batcher[int], round int, opts Options, shutdownAfter time.Duration, stopping *atomic.Bool) {
	t.Helper()
	var wg sync.WaitGroup
	var next atomic.Int64
	for w := range 4 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(round), uint64(w)))
			for range l.items {
				id := int(next.Add(1))
				switch r.IntN(l.kinds) {
				case 0:
					ctx, cancel := context.WithTimeout(context.Background(), time.Duration(r.Int64N(int64(l.addWait))))
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
				time.Sleep(time.Duration(r.Int64N(int64(l.pause))))
			}
		})
	}
	if shutdownAfter > 0 {
		time.Sleep(shutdownAfter)
		if stopping != nil {
			stopping.Store(true)
		}
		b.Shutdown()
	}
	wg.Wait()
}

// checkIdle shuts b down and checks that it counts nothing any more and
// that every item handled was handled once.
func checkIdle(t *testing.T, b *Batcher[int], round int, mu *sync.Mutex, handled map[int]int) {
	t.Helper()
	b.Shutdown()
	b.mu.Lock()
	p, h, s, q := b.partials, b.handlers, b.starting, len(b.queue)-b.head
	b.mu.Unlock()
	if p != 0 || h != 0 || s != 0 || q != 0 {
		t.Errorf("round %d: idle batcher with partials %d handlers %d starting %d waiting %d", round, p, h, s, q)
	}
	mu.Lock()
	defer mu.Unlock()
	for id, n := range handled {
		if n != 1 {
			t.Errorf("round %d: item %d handled %d times", round, id, n)
		}
	}
}
