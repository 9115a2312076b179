package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/inorder/inorder/ordered"
	"github.com/inorder/inorder/ordered/driver"
	"github.com/inorder/inorder/ordered/mnsqueue"
	"github.com/inorder/inorder/ordered/mnsqueue/mnstest"
	"github.com/inorder/inorder/ordered/scaleout"
	"github.com/inorder/inorder/seqstore"
	"github.com/inorder/inorder/seqstore/memstore"
)

// -measure: the same load (-groups x -messages at -rate) through one
// receiver over one queue, then -receivers receivers over -shards shards,
// each on a fresh emulator without chaos and a fresh memstore, counting
// the queue requests (the drivers' calls, by kind) and the store calls
// per message. The figure compares R=1, S=1 with R=4, S=16.

// counts are the requests of one measured run.
type counts struct {
	send, receive, emptyReceive, delete, changeVisibility atomic.Int64
	// store calls: the senders' (reserve, sent), the receivers' (cursor
	// reads and claims, advances, parks), the leases'.
	reserve, sent, cursors, advance, park, lease atomic.Int64
}

func (c *counts) reset() {
	for _, n := range []*atomic.Int64{&c.send, &c.receive, &c.emptyReceive, &c.delete, &c.changeVisibility,
		&c.reserve, &c.sent, &c.cursors, &c.advance, &c.park, &c.lease} {
		n.Store(0)
	}
}

func (c *counts) queue() int64 {
	return c.send.Load() + c.receive.Load() + c.delete.Load() + c.changeVisibility.Load()
}

func (c *counts) store() int64 {
	return c.reserve.Load() + c.sent.Load() + c.cursors.Load() + c.advance.Load() + c.park.Load()
}

// countQueue counts a driver's requests.
type countQueue struct {
	driver.Queue
	c *counts
}

func (q countQueue) SendBatch(ctx context.Context, bodies [][]byte) error {
	q.c.send.Add(1)
	return q.Queue.SendBatch(ctx, bodies)
}

func (q countQueue) ReceiveBatch(ctx context.Context, max int, wait time.Duration) ([]*driver.Message, error) {
	q.c.receive.Add(1)
	ms, err := q.Queue.ReceiveBatch(ctx, max, wait)
	if err == nil && len(ms) == 0 {
		q.c.emptyReceive.Add(1)
	}
	return ms, err
}

func (q countQueue) DeleteBatch(ctx context.Context, receipts []string) error {
	q.c.delete.Add(1)
	return q.Queue.DeleteBatch(ctx, receipts)
}

func (q countQueue) ChangeVisibility(ctx context.Context, receipt string, d time.Duration) (string, error) {
	q.c.changeVisibility.Add(1)
	return q.Queue.ChangeVisibility(ctx, receipt, d)
}

// countStore counts a memstore's calls.
type countStore struct {
	*memstore.Store
	c *counts
}

func (s countStore) Reserve(ctx context.Context, reqs []seqstore.ReserveRequest) ([]seqstore.Reservation, error) {
	s.c.reserve.Add(1)
	return s.Store.Reserve(ctx, reqs)
}

func (s countStore) Sent(ctx context.Context, marks []seqstore.SentMark) error {
	s.c.sent.Add(1)
	return s.Store.Sent(ctx, marks)
}

func (s countStore) Cursors(ctx context.Context, streams []seqstore.Stream) ([]seqstore.Cursor, error) {
	s.c.cursors.Add(1)
	return s.Store.Cursors(ctx, streams)
}

func (s countStore) Advance(ctx context.Context, batch []seqstore.Advance) error {
	s.c.advance.Add(1)
	return s.Store.Advance(ctx, batch)
}

func (s countStore) Park(ctx context.Context, entries []seqstore.Parked) error {
	s.c.park.Add(1)
	return s.Store.Park(ctx, entries)
}

func (s countStore) Unpark(ctx context.Context, queries []seqstore.ParkQuery) ([][]seqstore.Parked, error) {
	s.c.park.Add(1)
	return s.Store.Unpark(ctx, queries)
}

func (s countStore) Heartbeat(ctx context.Context, ns string, m seqstore.Member, ttl time.Duration) (seqstore.View, error) {
	s.c.lease.Add(1)
	return s.Store.Heartbeat(ctx, ns, m, ttl)
}

func (s countStore) Acquire(ctx context.Context, ns string, shards []int, owner string, ttl time.Duration) ([]seqstore.Lease, error) {
	s.c.lease.Add(1)
	return s.Store.Acquire(ctx, ns, shards, owner, ttl)
}

func (s countStore) Renew(ctx context.Context, ns string, held []seqstore.Lease, ttl time.Duration) ([]seqstore.Lease, error) {
	s.c.lease.Add(1)
	return s.Store.Renew(ctx, ns, held, ttl)
}

func (s countStore) Release(ctx context.Context, ns string, held []seqstore.Lease) error {
	s.c.lease.Add(1)
	return s.Store.Release(ctx, ns, held)
}

// measured is one row of the table.
type measured struct {
	receivers, shards int
	msgs              int
	took              time.Duration
	c                 *counts
}

func (m measured) per(n int64) float64 { return float64(n) / float64(m.msgs) }

// measureRun sends c's load through shards queues received by receivers
// receivers, and counts from the first send until every message was
// handled and the receivers stopped (their last deletes and advances
// included). The receivers join first and settle before the load starts,
// so that joins and handovers are not counted.
func measureRun(ctx context.Context, c config, receivers, shards int) (m measured, err error) {
	m = measured{receivers: receivers, shards: shards, msgs: c.groups * c.messages, c: &counts{}}
	srv, err := mnstest.NewServer(&mnstest.Options{Seed: c.seed, Faults: mnstest.Faults{Latency: c.latency}})
	if err != nil {
		return m, err
	}
	defer srv.Close()
	cred := mnsqueue.Credentials{AccessKeyID: srv.AccessKeyID(), AccessKeySecret: srv.AccessKeySecret()}
	mem := memstore.New()
	defer mem.Close()
	store := countStore{Store: mem, c: m.c}
	var closers []func() error
	defer func() {
		for i := len(closers) - 1; i >= 0; i-- {
			err = errors.Join(err, closers[i]())
		}
	}()
	names := make([]string, shards)
	for i := range names {
		names[i] = c.name + "-" + strconv.Itoa(i)
		if err := srv.CreateQueue(names[i], &mnstest.QueueAttributes{VisibilityTimeout: 30}); err != nil {
			return m, err
		}
	}
	open := func() ([]scaleout.Shard, error) {
		out := make([]scaleout.Shard, shards)
		for i, name := range names {
			q, err := mnsqueue.New(ctx, srv.Endpoint(), name, cred, nil)
			if err != nil {
				return nil, err
			}
			closers = append(closers, q.Close)
			out[i] = scaleout.Shard{Name: name, Queue: countQueue{Queue: q, c: m.c}}
		}
		return out, nil
	}

	var handled atomic.Int64
	seen := sync.Map{}
	handler := func(_ context.Context, msg *ordered.Message) error {
		if _, dup := seen.LoadOrStore(fmt.Sprint(msg.Group, "/", msg.Seq), true); !dup {
			handled.Add(1)
		}
		if c.work > 0 {
			time.Sleep(c.work)
		}
		return nil
	}
	lo := c.leaseOptions()
	var rs []*scaleout.Receiver
	var stops []context.CancelFunc
	var dones []chan error
	stopAll := func() error {
		for _, s := range stops {
			s()
		}
		var err error
		for _, d := range dones {
			err = errors.Join(err, <-d)
		}
		stops, dones = nil, nil
		return err
	}
	defer func() { err = errors.Join(err, stopAll()) }()
	for i := range receivers {
		sh, err := open()
		if err != nil {
			return m, err
		}
		r, err := scaleout.NewReceiver(ctx, sh, store, &scaleout.Options{
			Queue:  ordered.Options{Name: c.name, Receive: ordered.ReceiveOptions{Wait: time.Second}},
			Member: "r" + strconv.Itoa(i+1), Lease: lo, DrainTimeout: 2 * time.Second,
		})
		if err != nil {
			return m, err
		}
		rctx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- r.Run(rctx, handler) }()
		rs, stops, dones = append(rs, r), append(stops, stop), append(dones, done)
	}
	// Settle: every shard owned, by the members that should own it, and
	// no change for RebalanceDelay plus a renewal.
	settled, last := time.Time{}, ""
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			return m, fmt.Errorf("measure R=%d, S=%d: the shards' owners did not settle within 30s: %s", receivers, shards, last)
		}
		own, n := "", 0
		for _, r := range rs {
			o := r.Owned()
			n += len(o)
			own += fmt.Sprint(sortedKeys(o), " ")
		}
		if n != shards || own != last {
			last, settled = own, time.Time{}
			continue
		}
		if settled.IsZero() {
			settled = time.Now()
		}
		if time.Since(settled) > lo.RebalanceDelay+lo.RenewEvery {
			break
		}
	}
	m.c.reset() // count the load only

	sh, err := open()
	if err != nil {
		return m, err
	}
	snd, err := scaleout.NewSender(ctx, sh, store, &ordered.Options{Name: c.name})
	if err != nil {
		return m, err
	}
	closers = append(closers, func() error { return snd.Close(context.Background()) })
	groups := make([]string, c.groups)
	for g := range groups {
		groups[g] = "acct-" + strconv.Itoa(g)
	}
	start := time.Now()
	if err := send(ctx, snd, groups, c.messages, c.rate); err != nil {
		return m, err
	}
	for handled.Load() < int64(m.msgs) {
		if ctx.Err() != nil {
			return m, fmt.Errorf("measure R=%d, S=%d: %d of %d handled: %w", receivers, shards, handled.Load(), m.msgs, ctx.Err())
		}
		time.Sleep(10 * time.Millisecond)
	}
	m.took = time.Since(start)
	if err := stopAll(); err != nil { // the last deletes and advances count
		return m, err
	}
	return m, nil
}

// measure runs the load at R=1, S=1 and at R=c.receivers, S=c.shards and
// prints the table.
func measure(ctx context.Context, c config) error {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	rate := "as fast as possible"
	if c.rate > 0 {
		rate = fmt.Sprintf("at %g/s", c.rate)
	}
	sender := "scaleout.NewSender"
	fmt.Fprintf(c.out, "measure: %d messages (%d groups x %d) sent %s through %s, handlers %v; emulator without chaos, latency %v, memstore; per message:\n\n",
		c.groups*c.messages, c.groups, c.messages, rate, sender, c.work, c.latency)
	var rows []measured
	for _, rs := range [][2]int{{1, 1}, {c.receivers, c.shards}} {
		m, err := measureRun(ctx, c, rs[0], rs[1])
		if err != nil {
			return err
		}
		rows = append(rows, m)
	}
	printMeasure(c.out, rows)
	return nil
}

func printMeasure(out io.Writer, rows []measured) {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "R\tS\tsend\treceive\t(empty)\tdelete\tvisibility\tqueue\tstore\t(sender)\t(cursor)\t(advance)\tlease calls\ttook\t")
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', 4, 64) }
	for _, m := range rows {
		c := m.c
		fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%.1fs\t\n", m.receivers, m.shards,
			f(m.per(c.send.Load())), f(m.per(c.receive.Load())), f(m.per(c.emptyReceive.Load())), f(m.per(c.delete.Load())),
			f(m.per(c.changeVisibility.Load())), f(m.per(c.queue())), f(m.per(c.store())),
			f(m.per(c.reserve.Load()+c.sent.Load())), f(m.per(c.cursors.Load())), f(m.per(c.advance.Load())), c.lease.Load(), m.took.Seconds())
	}
	_ = tw.Flush()
	if len(rows) == 2 {
		a, b := rows[0], rows[1]
		fmt.Fprintf(out, "\nqueue requests per message: R=%d,S=%d is %.2fx R=%d,S=%d (%+.1f%%); store calls per message: %.2fx\n",
			b.receivers, b.shards, b.per(b.c.queue())/a.per(a.c.queue()), a.receivers, a.shards,
			100*(b.per(b.c.queue())/a.per(a.c.queue())-1), b.per(b.c.store())/a.per(a.c.store()))
	}
}
