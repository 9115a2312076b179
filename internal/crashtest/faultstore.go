package crashtest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/inorder/inorder/seqstore"
)

// StoreFaults says how often a FaultStore fails calls, the three ways a
// real store does.
type StoreFaults struct {
	// Before is the share of calls that fail before they are applied.
	Before float64
	// After is the share of writes (Reserve with ReserveAfter, Sent,
	// Advance, Park) that fail after they were applied: the write is
	// durable, the caller hears of a failure (a timeout, a lost answer).
	After float64
	// Slow is the share of calls answered late (by SlowFor, default 20ms).
	Slow    float64
	SlowFor time.Duration
	// ReserveAfter lets Reserve fail after it was applied too: the seqs
	// are reserved (and journaled, in durable mode) though the sender
	// hears of a failure.
	ReserveAfter bool
	// ParkEvery, when positive, fails every ParkEvery-th Park before it is
	// applied, whatever the draw: a receiver that parks meets a failed
	// park in every run.
	ParkEvery int64
}

// ParseStoreFaults reads StoreFaults from "before=0.05,after=0.02,slow=0.05,
// reserve-after,park-every=3" (any subset; "" is no faults).
func ParseStoreFaults(spec string) (StoreFaults, error) {
	var f StoreFaults
	for item := range strings.SplitSeq(spec, ",") {
		if item = strings.TrimSpace(item); item == "" {
			continue
		}
		name, v, _ := strings.Cut(item, "=")
		var err error
		switch name {
		case "before":
			f.Before, err = strconv.ParseFloat(v, 64)
		case "after":
			f.After, err = strconv.ParseFloat(v, 64)
		case "slow":
			f.Slow, err = strconv.ParseFloat(v, 64)
		case "slow-for":
			f.SlowFor, err = time.ParseDuration(v)
		case "reserve-after":
			f.ReserveAfter = true
		case "park-every":
			f.ParkEvery, err = strconv.ParseInt(v, 10, 64)
		default:
			err = errors.New("unknown fault")
		}
		if err != nil {
			return f, fmt.Errorf("crashtest: store fault %q: %v", item, err)
		}
	}
	if f.Before < 0 || f.After < 0 || f.Slow < 0 || f.Before+f.Slow > 1 || f.After > 1 || f.ParkEvery < 0 {
		return f, fmt.Errorf("crashtest: store faults %q out of range", spec)
	}
	return f, nil
}

// Errors a FaultStore injects.
var (
	ErrInjectedBefore = errors.New("crashtest: injected store failure (not applied)")
	ErrInjectedAfter  = errors.New("crashtest: injected store failure (applied, answer lost)")
)

// FaultStore wraps a seqstore.Store and fails a share of its calls at
// random as StoreFaults says. It is the store of the fault tests and, with
// the worker's -store-faults, of the crash harness's processes.
type FaultStore struct {
	seqstore.Store
	f StoreFaults

	mu  sync.Mutex
	rng *rand.Rand

	parks atomic.Int64
	// FailedBefore, FailedAfter and Slowed count the faults injected.
	FailedBefore, FailedAfter, Slowed atomic.Int64
}

// NewFaultStore wraps s; seed makes the draws repeatable.
func NewFaultStore(s seqstore.Store, seed uint64, f StoreFaults) *FaultStore {
	if f.SlowFor <= 0 {
		f.SlowFor = 20 * time.Millisecond
	}
	return &FaultStore{Store: s, f: f, rng: rand.New(rand.NewPCG(seed, 1))}
}

func (c *FaultStore) draw() float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.rng.Float64()
}

// call runs fn under the faults; afterOK says whether fn may fail after it
// was applied.
func (c *FaultStore) call(ctx context.Context, afterOK bool, fn func() error) error {
	r := c.draw()
	switch {
	case r < c.f.Before:
		c.FailedBefore.Add(1)
		return ErrInjectedBefore
	case r < c.f.Before+c.f.Slow:
		c.Slowed.Add(1)
		t := time.NewTimer(c.f.SlowFor)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
	}
	err := fn()
	if err == nil && afterOK && c.draw() < c.f.After {
		c.FailedAfter.Add(1)
		return ErrInjectedAfter
	}
	return err
}

func (c *FaultStore) Reserve(ctx context.Context, reqs []seqstore.ReserveRequest) (res []seqstore.Reservation, err error) {
	err = c.call(ctx, c.f.ReserveAfter, func() error { res, err = c.Store.Reserve(ctx, reqs); return err })
	if err != nil {
		res = nil
	}
	return res, err
}

func (c *FaultStore) Sent(ctx context.Context, marks []seqstore.SentMark) error {
	return c.call(ctx, true, func() error { return c.Store.Sent(ctx, marks) })
}

func (c *FaultStore) Pending(ctx context.Context, q string) (es []seqstore.Entry, err error) {
	err = c.call(ctx, false, func() error { es, err = c.Store.Pending(ctx, q); return err })
	return es, err
}

func (c *FaultStore) Cursors(ctx context.Context, streams []seqstore.Stream) (cs []seqstore.Cursor, err error) {
	err = c.call(ctx, false, func() error { cs, err = c.Store.Cursors(ctx, streams); return err })
	return cs, err
}

func (c *FaultStore) Advance(ctx context.Context, b []seqstore.Advance) error {
	return c.call(ctx, true, func() error { return c.Store.Advance(ctx, b) })
}

func (c *FaultStore) Park(ctx context.Context, es []seqstore.Parked) error {
	if c.f.ParkEvery > 0 && c.parks.Add(1)%c.f.ParkEvery == 0 {
		c.FailedBefore.Add(1)
		return ErrInjectedBefore
	}
	return c.call(ctx, true, func() error { return c.Store.Park(ctx, es) })
}

func (c *FaultStore) Unpark(ctx context.Context, qs []seqstore.ParkQuery) (res [][]seqstore.Parked, err error) {
	err = c.call(ctx, false, func() error { res, err = c.Store.Unpark(ctx, qs); return err })
	return res, err
}

func (c *FaultStore) ParkedStreams(ctx context.Context, queue string) (ss []seqstore.Stream, err error) {
	err = c.call(ctx, false, func() error { ss, err = c.Store.ParkedStreams(ctx, queue); return err })
	return ss, err
}
