package ordered

import (
	"container/heap"
	"errors"
	"sync"
	"time"

	"github.com/inorder/inorder/ordered/driver"
)

// keeperLoop runs the receive side's timers (retry backoff, gap timeout,
// epoch switch, start settle), extends the visibility of handed-out messages
// and evicts idle groups.
//
// Visibility policy: a message handed out (or waiting for its retry) gets
// its visibility extended when it would expire within VisibilityMargin, at
// most MaxVisibilityRate requests per second. Messages buffered ahead of
// their turn are not extended: on MNS one ChangeVisibility request per
// message costs more than receiving them again (one request per 16), and a
// copy that comes back only replaces the receipt held. Either way nothing is
// delivered twice.
func (r *receiver) keeperLoop() {
	tick := time.NewTicker(r.keeperTick())
	defer tick.Stop()
	tm := time.NewTimer(time.Hour)
	defer tm.Stop()
	for {
		r.mu.Lock()
		wait := time.Hour
		if len(r.timers) > 0 {
			wait = max(time.Until(r.timers[0].at), 0)
		}
		r.mu.Unlock()
		tm.Reset(wait)
		select {
		case <-r.ctx.Done():
			return
		case <-tick.C:
		case <-tm.C:
		case <-r.keeperWake:
		}
		now := time.Now()
		r.mu.Lock()
		for len(r.timers) > 0 && !r.timers[0].at.After(now) {
			t := heap.Pop(&r.timers).(timer)
			r.fireLocked(t, now)
		}
		if r.o.IdleEvict >= 0 {
			r.evictLocked(now)
		}
		due := r.visibilityDueLocked(now)
		r.mu.Unlock()
		signal(r.room) // a safety net: fetch conditions are re-checked at least every tick
		if len(due) > 0 {
			r.extend(due)
		}
	}
}

func (r *receiver) keeperTick() time.Duration {
	d := time.Second
	if r.o.VisibilityMargin > 0 {
		d = min(d, r.o.VisibilityMargin/4)
	}
	if r.o.IdleEvict > 0 {
		d = min(d, r.o.IdleEvict/4)
	}
	return max(d, 10*time.Millisecond)
}

type extension struct {
	e       *entry
	receipt string
	shorten bool
}

// maxShorten bounds the messages waiting for their visibility to be
// shortened; beyond it they are left to expire.
const maxShorten = 1024

// visibilityDueLocked picks the handed-out messages whose visibility ends
// within the margin, within the request budget.
func (r *receiver) visibilityDueLocked(now time.Time) []extension {
	if r.o.VisibilityMargin < 0 {
		r.shortq = r.shortq[:0]
		return nil
	}
	rate := r.o.MaxVisibilityRate
	r.tokens = min(rate, r.tokens+rate*now.Sub(r.tokensAt).Seconds())
	r.tokensAt = now
	var due []extension
	for e := range r.out {
		if e.nextVisible.IsZero() || e.nextVisible.Sub(now) >= r.o.VisibilityMargin {
			continue
		}
		if r.tokens < 1 {
			break
		}
		r.tokens--
		due = append(due, extension{e: e, receipt: e.receipt})
	}
	// Then messages not kept: make them come back soon rather than after a
	// whole visibility timeout, which would stall their group that long.
	n := 0
	for n < len(r.shortq) && r.tokens >= 1 {
		x := r.shortq[n]
		x.shorten = true
		due = append(due, x)
		r.tokens--
		n++
	}
	rest := copy(r.shortq, r.shortq[n:])
	clear(r.shortq[rest:])
	r.shortq = r.shortq[:rest]
	return due
}

// extend changes the visibility of due messages, a few requests at a time,
// and keeps each new receipt unless the message got a newer one meanwhile.
func (r *receiver) extend(due []extension) {
	const parallel = 8
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	for _, x := range due {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			d := r.o.VisibilityExtend
			if x.shorten {
				d = r.shortVisibility()
			}
			receipt, err := r.q.drvChangeVisibility(r.ctx, x.receipt, d)
			r.mu.Lock()
			defer r.mu.Unlock()
			if err != nil {
				if !errors.Is(err, driver.ErrStaleReceipt) && r.ctx.Err() == nil {
					r.log.Warn("ordered: extend visibility", "id", x.e.id, "err", err)
				}
				return
			}
			if x.shorten {
				r.st.Shortened++
				return // not held: nothing to update
			}
			r.st.Extended++
			if x.e.receipt == x.receipt {
				x.e.receipt = receipt
				x.e.nextVisible = time.Now().Add(r.o.VisibilityExtend)
			}
		})
	}
	wg.Wait()
}

// shortVisibility is the timeout given to messages not kept: the shortest
// the driver accepts, at least a second.
func (r *receiver) shortVisibility() time.Duration {
	return max(r.q.limits.MinVisibility, time.Second)
}
