package main

// The scale-out roles (TestScaleOut): -role ssend sends to the groups
// -group-from..-group-to through scaleout.NewSender over -shards queues
// named -queue plus "-0", "-1", ... (its own filestore at -store); -role
// srecv runs a scaleout.Receiver, member -proc, with its leases and cursors
// in the Redis (-redis) or PostgreSQL (-postgres) the harness names, under
// -prefix. Both stamp every event with the wall clock (Event.T).
//
// The receiver records its lease changes (OnChange), each delivery first
// thing in the handler and its end last thing before the handler returns
// (KindDelivered, KindDone, with the shard's token from scaleout.Token),
// and every write the store accepted under the library's fencedStore
// (KindClaim, KindCommit, with the token and the call's start), and the
// number of store calls it made (KindOps).
//
// Planted bugs (INORDER_CRASH_BUG), to show that CheckScaleOut catches
// them:
//
//	so-nofence  the store under the receiver ignores fencing: an advance
//	            refused with ErrFenced is written again from the stored
//	            cursor (to the later of the two, with the stored owner
//	            token) and recorded with the receiver's own (stale) token;
//	            and 5% of advances are delayed by 1.5 x TTL, so that some
//	            arrive after their shard moved
//	so-stale-token  the advances carry the lease's token minus 1 (the
//	            claims carry the right one)
//
// INORDER_CRASH_BUG=so-slow is no bug: it delays 5% of advances by 1.5 x
// TTL as so-nofence does, with the store's fencing intact, so that late
// writes of lost shards reach the store and must be refused (recorded as a
// KindCommit with Err "fenced", or "conflict" when the cursor moved too).
//	so-linger   handlers take 200 ms, and one whose ctx is cancelled (its
//	            shard was lost) keeps working for 3 x DrainTimeout before it
//	            returns, so that the next owner hands the message out while
//	            it still runs

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"
	"github.com/redis/go-redis/v9"

	"github.com/inorder/inorder/internal/crashtest"
	"github.com/inorder/inorder/ordered"
	"github.com/inorder/inorder/ordered/mnsqueue"
	"github.com/inorder/inorder/ordered/scaleout"
	"github.com/inorder/inorder/seqstore"
	"github.com/inorder/inorder/seqstore/filestore"
	"github.com/inorder/inorder/seqstore/redisstore"
	"github.com/inorder/inorder/seqstore/sqlstore"
)

// scaleConfig is the scale-out part of a worker's configuration.
type scaleConfig struct {
	shards         int
	redis, pg      string
	prefix         string
	ttl            time.Duration
	drain          time.Duration
	work           time.Duration
	visibility     time.Duration
	opsEvery       time.Duration
	queueNamespace string
}

func scaleFlags(fs *flag.FlagSet, s *scaleConfig) {
	fs.IntVar(&s.shards, "shards", 8, "scale-out: shard queues")
	fs.StringVar(&s.redis, "redis", "", "scale-out receiver: Redis address of the lease store")
	fs.StringVar(&s.pg, "postgres", "", "scale-out receiver: PostgreSQL DSN of the lease store")
	fs.StringVar(&s.prefix, "prefix", "", "scale-out receiver: key or table prefix in the lease store")
	fs.DurationVar(&s.ttl, "ttl", 2*time.Second, "scale-out receiver: lease TTL (the other timings scale with it)")
	fs.DurationVar(&s.drain, "drain-timeout", 2*time.Second, "scale-out receiver: DrainTimeout")
	fs.DurationVar(&s.work, "work", 20*time.Millisecond, "scale-out receiver: a handler's longest usual work (2% take 10 times as long)")
	fs.DurationVar(&s.visibility, "visibility", 2*time.Second, "scale-out: the driver's visibility timeout")
	fs.DurationVar(&s.opsEvery, "ops-every", 2*time.Second, "scale-out receiver: how often the store-call count is recorded")
	fs.StringVar(&s.queueNamespace, "name", "scale", "scale-out: the logical queue's name (Options.Name)")
}

// LeaseTimings scales the library's default ratios (TTL 15 s, renewals
// every 5 s, fenced 10 s after the last good renewal) down to ttl.
func leaseTimings(ttl time.Duration) scaleout.LeaseOptions {
	return scaleout.LeaseOptions{TTL: ttl, RenewEvery: ttl / 4, RetryPeriod: ttl / 8, RenewDeadline: ttl * 2 / 3,
		RebalanceDelay: ttl / 6, CloseDrain: 2 * ttl, Balance: 1.25}
}

func runScaleOut(c config, s scaleConfig) error {
	if c.seed == 0 {
		c.seed = uint64(time.Now().UnixNano())
	}
	k, err := newKiller("", c.seed)
	if err != nil {
		return err
	}
	bug := os.Getenv("INORDER_CRASH_BUG")
	h, err := openHistory(c)
	if err != nil {
		return err
	}
	h.stamp = true
	h.add(crashtest.Event{Kind: crashtest.KindStart}, true)

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	setup, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))

	shards := make([]scaleout.Shard, s.shards)
	for i := range shards {
		name := c.queue + "-" + strconv.Itoa(i)
		drv, err := retry(setup, func() (*mnsqueue.Queue, error) {
			return mnsqueue.New(setup, c.endpoint, name, mnsqueue.Credentials{AccessKeyID: c.ak, AccessKeySecret: c.sk},
				&mnsqueue.Options{Logger: logger, Visibility: s.visibility})
		})
		if err != nil {
			return err
		}
		defer drv.Close()
		shards[i] = scaleout.Shard{Name: name, Queue: drv}
	}
	qopts := ordered.Options{
		Name:    s.queueNamespace,
		Logger:  logger,
		Retry:   ordered.RetryOptions{Initial: 20 * time.Millisecond, Max: 300 * time.Millisecond},
		Receive: ordered.ReceiveOptions{Wait: time.Second, ReapInterval: 50 * time.Millisecond},
	}
	switch c.role {
	case crashtest.RoleScaleSend:
		store, err := filestore.Open(c.storeDir, nil)
		if err != nil {
			return err
		}
		defer store.Close()
		q, err := retry(setup, func() (*ordered.Queue, error) { return scaleout.NewSender(setup, shards, store, &qopts) })
		if err != nil {
			return err
		}
		clean := sender(ctx, c, q, h, k)
		cctx, ccancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer ccancel()
		if err := q.Close(cctx); err != nil {
			return fmt.Errorf("close: %w", err)
		}
		if clean {
			h.add(crashtest.Event{Kind: crashtest.KindEnd}, true)
		}
		return nil
	case crashtest.RoleScaleRecv:
		return scaleReceiver(ctx, setup, c, s, h, k, shards, qopts, bug)
	}
	return fmt.Errorf("unknown role %q", c.role)
}

func scaleReceiver(ctx, setup context.Context, c config, s scaleConfig, h *history, k *killer, shards []scaleout.Shard, qopts ordered.Options, bug string) error {
	inner, closeStore, err := openLeaseStore(setup, s)
	if err != nil {
		return err
	}
	defer closeStore()
	rs := &recStore{Store: inner, ls: inner.(seqstore.Leaser), h: h, k: k, ttl: s.ttl, bug: bug}
	opsCtx, stopOps := context.WithCancel(context.Background())
	defer stopOps()
	go rs.recordOps(opsCtx, s.opsEvery)

	opts := &scaleout.Options{
		Queue: qopts, Member: c.proc, Lease: leaseTimings(s.ttl), DrainTimeout: s.drain,
		OnChange: func(ch scaleout.Change) {
			kind := ""
			switch ch.Kind {
			case "start":
				kind = crashtest.KindAcquire
			case "revoke":
				kind = crashtest.KindRevoke
			case "drained":
				kind = crashtest.KindDrained
			case "fence":
				kind = crashtest.KindFence
			default:
				return
			}
			ev := crashtest.Event{Kind: kind, Shard: ch.Shard, Token: ch.Token}
			if ch.Err != nil {
				ev.Err = ch.Err.Error()
			}
			h.add(ev, true)
		},
	}
	r, err := retry(setup, func() (*scaleout.Receiver, error) { return scaleout.NewReceiver(setup, shards, rs, opts) })
	if err != nil {
		return err
	}
	handler := func(hctx context.Context, m *ordered.Message) error {
		tok, _ := scaleout.Token(hctx)
		ev := crashtest.Event{Kind: crashtest.KindDelivered, Group: m.Group, Epoch: m.Epoch, Seq: m.Seq, Payload: string(m.Body),
			Unordered: m.Unordered, Shard: scaleout.ShardOf(m.Group, len(shards)), Token: tok}
		h.add(ev, true)
		work := time.Duration(k.rngN(uint64(s.work) + 1))
		if k.chance(0.02) {
			work = 10 * s.work // now and then a longer one, so that faults land inside handlers
		}
		if bug == "so-linger" {
			work = 200 * time.Millisecond // handlers open most of the time, so that a fence finds some
		}
		select {
		case <-time.After(work):
		case <-hctx.Done():
		}
		if bug == "so-linger" && hctx.Err() != nil {
			// Planted: the shard was lost, and the handler keeps working
			// past the time its Queue keeps the message invisible.
			time.Sleep(3 * s.drain)
		}
		ev.Kind, ev.Payload, ev.Unordered = crashtest.KindDone, "", false
		h.add(ev, true)
		return nil
	}
	err = r.Run(ctx, handler)
	stopOps()
	rs.writeOps()
	if err != nil {
		return fmt.Errorf("run: %w", err)
	}
	h.add(crashtest.Event{Kind: crashtest.KindEnd}, true)
	return nil
}

// openLeaseStore opens the receiver's store: Redis or PostgreSQL. Its
// clients fail fast, so that a cut connection shows as errors, not hangs.
func openLeaseStore(ctx context.Context, s scaleConfig) (seqstore.Store, func(), error) {
	switch {
	case s.redis != "":
		cl := redis.NewClient(&redis.Options{Addr: s.redis, MaxRetries: -1, DialTimeout: 200 * time.Millisecond,
			ReadTimeout: 500 * time.Millisecond, WriteTimeout: 500 * time.Millisecond})
		st, err := redisstore.New(cl, &redisstore.Options{Prefix: s.prefix})
		if err != nil {
			cl.Close()
			return nil, nil, err
		}
		return st, func() { _ = st.Close(); _ = cl.Close() }, nil
	case s.pg != "":
		db, err := sql.Open("pgx", s.pg)
		if err != nil {
			return nil, nil, err
		}
		db.SetConnMaxLifetime(time.Second)
		st, err := sqlstore.Open(db, sqlstore.Postgres, &sqlstore.Options{TablePrefix: s.prefix, TxTimeout: 2 * time.Second})
		if err != nil {
			db.Close()
			return nil, nil, err
		}
		if _, err := retry(ctx, func() (struct{}, error) { return struct{}{}, st.Migrate(ctx) }); err != nil {
			db.Close()
			return nil, nil, err
		}
		return st, func() { _ = st.Close(); _ = db.Close() }, nil
	}
	return nil, nil, errors.New("scale-out receiver: -redis or -postgres is required")
}

// recStore is the store under a scale-out receiver's fencedStore: it
// records every write the store accepted (a claim or an advance, with its
// token) and counts every call; with a planted bug it misbehaves.
type recStore struct {
	seqstore.Store
	ls  seqstore.Leaser
	h   *history
	k   *killer
	ttl time.Duration
	bug string
	ops atomic.Int64
}

func (s *recStore) writeOps() {
	s.h.add(crashtest.Event{Kind: crashtest.KindOps, Seq: uint64(s.ops.Load())}, false)
}

func (s *recStore) recordOps(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.writeOps()
		}
	}
}

func (s *recStore) Cursors(ctx context.Context, streams []seqstore.Stream) ([]seqstore.Cursor, error) {
	s.ops.Add(1)
	return s.Store.Cursors(ctx, streams)
}

func (s *recStore) Advance(ctx context.Context, batch []seqstore.Advance) error {
	s.ops.Add(1)
	if (s.bug == "so-nofence" || s.bug == "so-slow") && s.k.chance(0.05) {
		// Planted: a write delayed past a lease's life (a pause, a slow
		// network), so that some arrive after their shard moved; the
		// caller's ctx may have ended meanwhile, the write goes out anyway.
		time.Sleep(3 * s.ttl / 2)
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
	}
	t0 := time.Now().UnixNano()
	write := batch
	if s.bug == "so-stale-token" {
		// Planted: the advances carry a token below the lease's.
		write = make([]seqstore.Advance, len(batch))
		for i, a := range batch {
			if a.From.Owner == a.To.Owner && a.To.Owner > 0 {
				a.From.Owner, a.To.Owner = a.From.Owner-1, a.To.Owner-1
			}
			write[i] = a
		}
	}
	err := s.Store.Advance(ctx, write)
	if s.bug == "so-nofence" && err != nil {
		err = s.forceFenced(ctx, batch, err)
	}
	for i, a := range batch {
		ev := crashtest.Event{Kind: crashtest.KindCommit, Group: a.Stream.Group, Epoch: a.To.Epoch, Seq: a.To.Next, Token: a.To.Owner, T0: t0}
		if a.To.Owner != a.From.Owner {
			ev.Kind = crashtest.KindClaim
		}
		if e := seqstore.Failed(err, i, len(batch)); e != nil {
			switch {
			case errors.Is(e, seqstore.ErrFenced):
				ev.Err = "fenced" // refused: the checker counts it
			case errors.Is(e, seqstore.ErrConflict):
				ev.Err = "conflict"
			default:
				continue
			}
		}
		s.h.add(ev, false)
	}
	return err
}

// forceFenced is planted bug so-nofence: each advance refused with
// ErrFenced (or ErrConflict: the cursor moved too) is written again from the stored cursor with the stored
// owner's token, as a store that ignores fences would accept it. It
// returns the batch's outcome as if the fence had not been there.
func (s *recStore) forceFenced(ctx context.Context, batch []seqstore.Advance, err error) error {
	errs := make([]error, len(batch))
	failed := false
	for i, a := range batch {
		e := seqstore.Failed(err, i, len(batch))
		if e != nil && (errors.Is(e, seqstore.ErrFenced) || errors.Is(e, seqstore.ErrConflict)) && a.From.Owner == a.To.Owner {
			cs, cerr := s.Store.Cursors(ctx, []seqstore.Stream{a.Stream})
			if cerr == nil && cs[0].Epoch == a.To.Epoch {
				f := seqstore.Advance{Stream: a.Stream, From: cs[0], To: cs[0]}
				f.To.Next = max(a.To.Next, cs[0].Next)
				e = s.Store.Advance(ctx, []seqstore.Advance{f})
				e = seqstore.Failed(e, 0, 1)
			}
		}
		errs[i] = e
		failed = failed || e != nil
	}
	if !failed {
		return nil
	}
	return &seqstore.BatchError{Errs: errs}
}

func (s *recStore) Park(ctx context.Context, entries []seqstore.Parked) error {
	s.ops.Add(1)
	return s.Store.Park(ctx, entries)
}

func (s *recStore) Unpark(ctx context.Context, queries []seqstore.ParkQuery) ([][]seqstore.Parked, error) {
	s.ops.Add(1)
	return s.Store.Unpark(ctx, queries)
}

func (s *recStore) ParkedStreams(ctx context.Context, queue string) ([]seqstore.Stream, error) {
	s.ops.Add(1)
	return s.Store.ParkedStreams(ctx, queue)
}

func (s *recStore) Topology(ctx context.Context, ns string, t seqstore.Topology) error {
	s.ops.Add(1)
	return s.ls.Topology(ctx, ns, t)
}

func (s *recStore) Heartbeat(ctx context.Context, ns string, m seqstore.Member, ttl time.Duration) (seqstore.View, error) {
	s.ops.Add(1)
	return s.ls.Heartbeat(ctx, ns, m, ttl)
}

func (s *recStore) Acquire(ctx context.Context, ns string, shards []int, owner string, ttl time.Duration) ([]seqstore.Lease, error) {
	s.ops.Add(1)
	return s.ls.Acquire(ctx, ns, shards, owner, ttl)
}

func (s *recStore) Renew(ctx context.Context, ns string, held []seqstore.Lease, ttl time.Duration) ([]seqstore.Lease, error) {
	s.ops.Add(1)
	return s.ls.Renew(ctx, ns, held, ttl)
}

func (s *recStore) Release(ctx context.Context, ns string, held []seqstore.Lease) error {
	s.ops.Add(1)
	return s.ls.Release(ctx, ns, held)
}

func (s *recStore) Leave(ctx context.Context, ns string, incarnation string) error {
	s.ops.Add(1)
	return s.ls.Leave(ctx, ns, incarnation)
}

func (s *recStore) Leases(ctx context.Context, ns string) ([]seqstore.Lease, error) {
	s.ops.Add(1)
	return s.ls.Leases(ctx, ns)
}

// Close leaves the inner store to its owner (scaleReceiver).
func (s *recStore) Close() error { return nil }
