package batcher

import (
	"sync"
	"testing"
	"time"
)

// TestReview5DrainedStress: posters, Drained callers and a MaxPartial bound
// race; after Shutdown every channel Drained returned is closed.
func TestReview5DrainedStress(t *testing.T) {
	for range 5 {
		b, err := New(&Options{MaxHandlers: 3, MaxItems: 4, MaxPartial: 1}, func(batch []int, _ []error) {
			time.Sleep(50 * time.Microsecond)
		})
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		var chans []<-chan struct{}
		var wg sync.WaitGroup
		stop := make(chan struct{})
		for p := range 4 {
			wg.Go(func() {
				for i := 0; i < 500; i++ { // bounded: Shutdown handles everything posted
					select {
					case <-stop:
						return
					default:
					}
					if i%3 == 0 {
						_ = b.PostAll([]int{p, i, i})
					} else {
						_ = b.Post(i)
					}
				}
			})
		}
		for range 2 {
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					d := b.Drained()
					mu.Lock()
					chans = append(chans, d)
					mu.Unlock()
					select {
					case <-d:
					case <-time.After(time.Millisecond):
					}
				}
			})
		}
		time.Sleep(20 * time.Millisecond)
		close(stop)
		wg.Wait()
		b.Shutdown()
		for i, d := range chans {
			select {
			case <-d:
			default:
				t.Fatalf("Drained channel %d of %d not closed after Shutdown", i, len(chans))
			}
		}
	}
}
