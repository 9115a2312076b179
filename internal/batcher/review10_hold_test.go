package batcher

import (
	"testing"
	"time"
)

// review10Batcher: MaxItems 3, MaxPartial 1, PartialHold 5 ms (the
// sender's), and a handler that sleeps for the item's value in ms (an item
// of 0 sleeps 1 ms), or forever (until the test ends) for an item >= 10000.
// It reports each batch's start on started.
func review10Batcher(t *testing.T) (*Batcher[int], chan time.Time) {
	started := make(chan time.Time, 64)
	stop := make(chan struct{})
	b, err := New(&Options{MaxHandlers: 8, MaxItems: 3, MaxPartial: 1, PartialHold: 5 * time.Millisecond}, func(batch []int, _ []error) {
		started <- time.Now()
		d := batch[0]
		if d >= 10000 {
			<-stop
			return
		}
		time.Sleep(time.Duration(max(d, 1)) * time.Millisecond)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		close(stop)
		b.Shutdown()
	})
	return b, started
}

// behindStuck posts a batch that never ends, then a partial one, and
// returns how long after the stuck batch started the partial one did.
func behindStuck(t *testing.T, b *Batcher[int], started chan time.Time) time.Duration {
	t.Helper()
	if err := b.Post(10000); err != nil {
		t.Fatal(err)
	}
	stuck := <-started
	if err := b.Post(1); err != nil {
		t.Fatal(err)
	}
	select {
	case next := <-started:
		return next.Sub(stuck)
	case <-time.After(10 * time.Second):
		t.Fatal("the partial batch behind a stuck one never started")
		return 0
	}
}

// TestReview10SlowBatchInflatesHold: batches usually take 10 ms; one took
// 2 s (a request that ran into the client's timeout and was retried, or a
// handler that waited out its retries' backoff). The moving average takes
// it at weight 1/8: the usual time jumps to about 260 ms, and even after
// ten more batches of 10 ms it is still about 70 ms, so a stuck partial
// batch holds every other partial batch back for about 280 ms, seven times
// the 4 x 10 ms the docs promise ("HoldFactor times the handlers' usual
// time per batch"). The time of the one slow batch is weighted as much as
// the last normal one, and it shrinks by 7/8 per batch, not per second: a
// Batcher that handles a batch a second stays inflated for half a minute.
func TestReview10SlowBatchInflatesHold(t *testing.T) {
	b, started := review10Batcher(t)
	for range 20 {
		if err := <-b.AddNoWait(10); err != nil {
			t.Fatal(err)
		}
		<-started
	}
	if d := behindStuck(t, b, started); d > 100*time.Millisecond {
		t.Fatalf("baseline: behind a stuck batch %v, want about 40 ms", d)
	}
	if err := <-b.AddNoWait(2000); err != nil {
		t.Fatal(err)
	}
	<-started
	for range 10 {
		if err := <-b.AddNoWait(10); err != nil {
			t.Fatal(err)
		}
		<-started
	}
	d := behindStuck(t, b, started)
	t.Logf("behind a stuck batch, after one slow batch and ten normal ones: %v", d)
	if d > 100*time.Millisecond {
		t.Fatalf("one slow batch inflated the hold: a partial batch waited %v behind a stuck one, batches usually take 10 ms (HoldFactor x 10 ms = 40 ms)", d)
	}
}

// TestReview10FirstHoldOutlivesEvidence: a partial batch taken before any
// batch ended holds its place for FirstHold (1 s), and keeps that hold
// when full batches end in 10 ms meanwhile: the hold is fixed when the
// batch is taken. A partial batch that waits behind it starts a second
// after it, though after the first full batch ended the Batcher knew a
// batch usually takes 10 ms.
func TestReview10FirstHoldOutlivesEvidence(t *testing.T) {
	b, started := review10Batcher(t)
	if err := b.Post(10000); err != nil {
		t.Fatal(err)
	}
	stuck := <-started
	for range 5 { // full batches of 10 ms: the usual time is 10 ms
		var cs []<-chan error
		for range 3 {
			cs = append(cs, b.AddNoWait(10))
		}
		for _, c := range cs {
			if err := <-c; err != nil {
				t.Fatal(err)
			}
		}
		<-started
	}
	if err := b.Post(1); err != nil {
		t.Fatal(err)
	}
	next := <-started
	d := next.Sub(stuck)
	t.Logf("the partial batch started %v after the stuck one", d)
	if d > 250*time.Millisecond {
		t.Fatalf("a partial batch waited %v behind a stuck one taken before any batch ended, though full batches of 10 ms ended meanwhile", d)
	}
}
