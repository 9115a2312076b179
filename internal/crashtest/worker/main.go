// Command worker is the sender or receiver process of the crash harness in
// package crashtest. It runs one ordered.Queue over an MNS queue (the
// emulator of the test process, through the real SDK), appends what it does
// to a history file of its own incarnation, and can kill itself with SIGKILL
// at chosen points (INORDER_CRASH_KILL) or run with a planted bug
// (INORDER_CRASH_BUG) to show that the checker catches it.
//
// A sender (-role send) sends to its groups from several goroutines until it
// gets SIGTERM; a receiver (-role recv) receives and acknowledges in the mode
// given by -mode until SIGTERM. On SIGTERM both close their Queue and, if
// Close returned nil and nothing was left unresolved, write an "end" event.
//
// Kill points, as INORDER_CRASH_KILL="point=probability,point@n,...": with
// "=p" the process kills itself at each passage with probability p, with "@n"
// at the n-th passage (once; the harness arms the points a mode must show
// this way, see TestCrash):
//
//	send-before    in the driver's SendBatch, before the request (seqs reserved and journaled, nothing sent)
//	send-after     in the driver's SendBatch, after the queue accepted (not yet marked sent)
//	received       in the driver's ReceiveBatch, after a batch that returned messages (none handed out yet)
//	delete-before  in the driver's DeleteBatch, after the delete records, before the request (cursor durable, messages not deleted)
//	advance-after  in the store's Advance, after it returned (commit before delete)
//	park-after     in the store's Park, after it returned (parked, not yet deleted from the queue)
//	unpark-after   in the store's Unpark, after it returned (read back, not yet handed out or advanced past)
//	delivered      after the delivered record, before Ack
//	acked          after Ack returned, before the acked record
//	acked-recorded after the acked record (it says the advance past the message is durable: a SyncAck that
//	               resolved before its cursor was durable shows as a redelivery the checker refuses)
//	committed      after the exactly-once transaction committed, before Ack
//	sent           after Send returned nil, before the sent record
//
// Besides what the application sees, the receiver records what the library
// does under it, so that the checker can judge commit before delete: a
// "durable" record for each cursor the store returned (Cursor) or stored
// (Advance returned nil), and a "delete" record for each tagged message
// before the DeleteBatch request that deletes it.
//
// Planted bugs, as INORDER_CRASH_BUG=a: every received message is deleted at
// once, before the application acknowledged it. The others are planted
// inside the receive core by the harness (INORDER_PLANT=nodedup: a copy of
// a handed-out seq is handed out again; unsorted: a group hands out its
// second waiting message first), in a worker built with the tag
// inorder_plant.
package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	_ "modernc.org/sqlite"

	"github.com/inorder/inorder/internal/crashtest"
	"github.com/inorder/inorder/internal/envelope"
	"github.com/inorder/inorder/ordered"
	"github.com/inorder/inorder/ordered/driver"
	"github.com/inorder/inorder/ordered/mnsqueue"
	"github.com/inorder/inorder/seqstore"
	"github.com/inorder/inorder/seqstore/filestore"
	"github.com/inorder/inorder/seqstore/sqlstore"
)

type config struct {
	role, proc, mode   string
	inc                int
	endpoint, queue    string
	ak, sk             string
	storeDir, sqlite   string
	historyDir         string
	groupFrom, groupTo int
	workers            int
	window             int
	maxUndeleted       int
	pause              time.Duration
	fsync              bool
	seed               uint64
	storeFaults        string
	sendAttempts       int
}

func main() {
	var c config
	flag.StringVar(&c.role, "role", "", "send or recv")
	flag.StringVar(&c.proc, "proc", "", "process name (unique per role instance)")
	flag.IntVar(&c.inc, "inc", 0, "incarnation number")
	flag.StringVar(&c.mode, "mode", crashtest.ModeAtLeastOnce, "receive mode: alo, amo or eo")
	flag.StringVar(&c.endpoint, "endpoint", "", "MNS endpoint")
	flag.StringVar(&c.queue, "queue", "", "queue name")
	flag.StringVar(&c.ak, "ak", "inorder", "access key id")
	flag.StringVar(&c.sk, "sk", "inorder-secret", "access key secret")
	flag.StringVar(&c.storeDir, "store", "", "filestore directory")
	flag.StringVar(&c.sqlite, "sqlite", "", "SQLite file for the receiver's store and table (mode eo)")
	flag.StringVar(&c.historyDir, "history", "", "directory of history files")
	flag.IntVar(&c.groupFrom, "group-from", 0, "first group index (sender)")
	flag.IntVar(&c.groupTo, "group-to", 10, "group index past the last (sender)")
	flag.IntVar(&c.workers, "workers", 4, "sender or receiver goroutines")
	flag.IntVar(&c.window, "window", 0, "receive window (0: the library's default)")
	flag.IntVar(&c.maxUndeleted, "max-undeleted", 0, "receiver's cap on messages received and not deleted (0: the library's default)")
	flag.DurationVar(&c.pause, "pause", 0, "pause between a sender goroutine's rounds")
	flag.BoolVar(&c.fsync, "fsync", false, "fsync each gating history record (protects against power loss, not needed for SIGKILL)")
	flag.Uint64Var(&c.seed, "seed", 0, "random seed (0: from the clock)")
	flag.StringVar(&c.storeFaults, "store-faults", "", "faults of the store, as crashtest.ParseStoreFaults reads them (\"before=0.05,after=0.02,slow=0.05,reserve-after\")")
	flag.IntVar(&c.sendAttempts, "send-attempts", 0, "sender's SendOptions.MaxAttempts (0: the library's default)")
	var sc scaleConfig
	scaleFlags(flag.CommandLine, &sc)
	flag.Parse()
	go exitWithParent(os.Getppid())
	var err error
	if c.role == crashtest.RoleScaleSend || c.role == crashtest.RoleScaleRecv {
		err = runScaleOut(c, sc)
	} else {
		err = run(c)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		os.Exit(1)
	}
}

// exitWithParent ends the process once its parent, the test binary, is
// gone (the worker is reparented): a test binary killed by go test's
// -timeout, or by hand, would otherwise leave its workers running, and
// loading the machine and the stores, for the next run.
func exitWithParent(ppid int) {
	for range time.Tick(time.Second) {
		if os.Getppid() != ppid {
			fmt.Fprintln(os.Stderr, "worker: the test binary is gone; exiting")
			os.Exit(3)
		}
	}
}

// killer kills the process at kill points: with the configured
// probability, or at an armed passage.
type killer struct {
	mu     sync.Mutex
	rng    *rand.Rand
	probs  map[string]float64
	armed  map[string]int // point -> the passage at which it fires
	passed map[string]int // point -> passages so far
}

func newKiller(spec string, seed uint64) (*killer, error) {
	k := &killer{rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		probs: map[string]float64{}, armed: map[string]int{}, passed: map[string]int{}}
	for item := range strings.SplitSeq(spec, ",") {
		if item = strings.TrimSpace(item); item == "" {
			continue
		}
		if name, n, ok := strings.Cut(item, "@"); ok {
			at, err := strconv.Atoi(n)
			if err != nil || at < 1 || name == "" {
				return nil, fmt.Errorf("bad kill point %q", item)
			}
			k.armed[name] = at
			continue
		}
		name, p, ok := strings.Cut(item, "=")
		f, err := strconv.ParseFloat(p, 64)
		if !ok || err != nil || f < 0 || f > 1 || name == "" {
			return nil, fmt.Errorf("bad kill point %q", item)
		}
		k.probs[name] = f
	}
	return k, nil
}

func (k *killer) at(point string) {
	p, at := k.probs[point], k.armed[point]
	if p == 0 && at == 0 {
		return
	}
	k.mu.Lock()
	k.passed[point]++
	hit := k.rng.Float64() < p || k.passed[point] == at
	k.mu.Unlock()
	if hit {
		fmt.Fprintf(os.Stderr, "worker: kill point %s\n", point)
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // the signal is on its way
	}
}

func (k *killer) chance(p float64) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.rng.Float64() < p
}

// history appends events of one incarnation. Each event is one write(2) of a
// whole line to an O_APPEND file: once write returns, the line survives a
// SIGKILL of this process (it is in the kernel's page cache); fsync is only
// needed against a machine crash.
type history struct {
	mu    sync.Mutex
	f     *os.File
	base  crashtest.Event
	fsync bool
	stamp bool // set Event.T on every event (the scale-out roles)
}

func openHistory(c config) (*history, error) {
	name := filepath.Join(c.historyDir, fmt.Sprintf("%s-%s-%06d.jsonl", c.role, c.proc, c.inc))
	f, err := os.OpenFile(name, os.O_CREATE|os.O_WRONLY|os.O_APPEND|os.O_EXCL, 0o600)
	if err != nil {
		return nil, err
	}
	return &history{f: f, base: crashtest.Event{Proc: c.proc, Inc: c.inc, Role: c.role, Mode: c.mode}, fsync: c.fsync}, nil
}

// add writes ev; gate marks a record that must be on file before the action
// it precedes.
func (h *history) add(ev crashtest.Event, gate bool) {
	ev.Proc, ev.Inc, ev.Role = h.base.Proc, h.base.Inc, h.base.Role
	if ev.Kind == crashtest.KindStart {
		ev.Mode = h.base.Mode
	}
	if h.stamp && ev.T == 0 {
		ev.T = time.Now().UnixNano()
	}
	b, err := json.Marshal(ev)
	if err != nil {
		panic(err)
	}
	b = append(b, '\n')
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, err := h.f.Write(b); err != nil {
		fmt.Fprintln(os.Stderr, "worker: history write:", err)
		os.Exit(3) // a history that misses a gating record would lie
	}
	if gate && h.fsync {
		if err := h.f.Sync(); err != nil {
			fmt.Fprintln(os.Stderr, "worker: history sync:", err)
			os.Exit(3)
		}
	}
}

// killDriver wraps a driver with kill points and planted bug (a), and
// records each delete of a tagged message (receiver) before its request.
type killDriver struct {
	driver.Queue
	k         *killer
	h         *history
	deleteNow bool

	mu       sync.Mutex
	receipts [2]map[string]crashtest.Event // receipt -> message, two generations
}

// maxReceipts bounds a generation of the receipt map: a receipt older than
// two generations is forgotten, and its delete goes unrecorded, which only
// makes the checker more permissive.
const maxReceipts = 100_000

func (d *killDriver) remember(ms []*driver.Message) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, m := range ms {
		h, _, ok := envelope.Parse(m.Body)
		if !ok {
			continue
		}
		if len(d.receipts[0]) >= maxReceipts || d.receipts[0] == nil {
			d.receipts[1], d.receipts[0] = d.receipts[0], make(map[string]crashtest.Event)
		}
		d.receipts[0][m.Receipt] = crashtest.Event{Kind: crashtest.KindDelete, Group: h.Group, Epoch: h.Epoch, Seq: h.Seq}
	}
}

func (d *killDriver) recordDeletes(receipts []string) {
	d.mu.Lock()
	var evs []crashtest.Event
	for _, r := range receipts {
		for _, gen := range d.receipts {
			if ev, ok := gen[r]; ok {
				evs = append(evs, ev)
				delete(gen, r)
				break
			}
		}
	}
	d.mu.Unlock()
	for _, ev := range evs {
		d.h.add(ev, true)
	}
}

func (d *killDriver) SendBatch(ctx context.Context, bodies [][]byte) error {
	d.k.at("send-before")
	err := d.Queue.SendBatch(ctx, bodies)
	if err == nil {
		d.k.at("send-after")
	}
	return err
}

func (d *killDriver) DeleteBatch(ctx context.Context, receipts []string) error {
	d.recordDeletes(receipts)
	d.k.at("delete-before")
	return d.Queue.DeleteBatch(ctx, receipts)
}

func (d *killDriver) ReceiveBatch(ctx context.Context, n int, wait time.Duration) ([]*driver.Message, error) {
	ms, err := d.Queue.ReceiveBatch(ctx, n, wait)
	d.remember(ms)
	if d.deleteNow && len(ms) > 0 {
		// Bug (a): delete before the application acknowledged.
		rs := make([]string, len(ms))
		for i, m := range ms {
			rs[i] = m.Receipt
		}
		_ = d.Queue.DeleteBatch(ctx, rs)
	}
	if len(ms) > 0 {
		d.k.at("received")
	}
	return ms, err
}

// killStore wraps a store with the advance-after kill point, and records
// every cursor it knows to be durable (read back, or stored by Advance).
type killStore struct {
	seqstore.Store
	k *killer
	h *history
}

func (s *killStore) Cursors(ctx context.Context, streams []seqstore.Stream) ([]seqstore.Cursor, error) {
	cs, err := s.Store.Cursors(ctx, streams)
	for i, st := range streams {
		if seqstore.Failed(err, i, len(streams)) == nil && i < len(cs) {
			c := cs[i]
			s.h.add(crashtest.Event{Kind: crashtest.KindDurable, Group: st.Group, Epoch: c.Epoch, Seq: c.Next}, false)
		}
	}
	return cs, err
}

func (s *killStore) Advance(ctx context.Context, batch []seqstore.Advance) error {
	err := s.Store.Advance(ctx, batch)
	if err == nil {
		for _, a := range batch {
			s.h.add(crashtest.Event{Kind: crashtest.KindDurable, Group: a.Stream.Group, Epoch: a.To.Epoch, Seq: a.To.Next}, false)
		}
		s.k.at("advance-after")
	}
	return err
}

// killParkStore adds the store's parking to killStore, with the park-after
// and unpark-after kill points, and records each message parked durably.
type killParkStore struct {
	*killStore
	p seqstore.Parker
}

func (s *killParkStore) Park(ctx context.Context, entries []seqstore.Parked) error {
	err := s.p.Park(ctx, entries)
	if err == nil {
		for _, e := range entries {
			s.h.add(crashtest.Event{Kind: crashtest.KindParked, Group: e.Stream.Group, Epoch: e.Epoch, Seq: e.Seq}, false)
		}
		s.k.at("park-after")
	}
	return err
}

func (s *killParkStore) Unpark(ctx context.Context, queries []seqstore.ParkQuery) ([][]seqstore.Parked, error) {
	res, err := s.p.Unpark(ctx, queries)
	if err == nil {
		// What the park returned is durably parked: the receiver may
		// delete a queue copy of it (the park holds the message).
		n := 0
		for _, r := range res {
			for _, e := range r {
				s.h.add(crashtest.Event{Kind: crashtest.KindParked, Group: e.Stream.Group, Epoch: e.Epoch, Seq: e.Seq}, false)
				n++
			}
		}
		if n > 0 {
			s.k.at("unpark-after")
		}
	}
	return res, err
}

func (s *killParkStore) ParkedStreams(ctx context.Context, queue string) ([]seqstore.Stream, error) {
	return s.p.ParkedStreams(ctx, queue)
}

func run(c config) error {
	if c.seed == 0 {
		c.seed = uint64(time.Now().UnixNano())
	}
	k, err := newKiller(os.Getenv("INORDER_CRASH_KILL"), c.seed)
	if err != nil {
		return err
	}
	bug := os.Getenv("INORDER_CRASH_BUG")
	h, err := openHistory(c)
	if err != nil {
		return err
	}
	h.add(crashtest.Event{Kind: crashtest.KindStart}, true)

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	setup, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	// The emulator's chaos answers some requests with 500 or drops them,
	// setup's included: retry them, so that every exit with an error is a
	// finding.
	drv, err := retry(setup, func() (*mnsqueue.Queue, error) {
		return mnsqueue.New(setup, c.endpoint, c.queue, mnsqueue.Credentials{AccessKeyID: c.ak, AccessKeySecret: c.sk}, &mnsqueue.Options{Logger: logger})
	})
	if err != nil {
		return err
	}
	defer drv.Close()
	var qdrv driver.Queue = &killDriver{Queue: drv, k: k, h: h, deleteNow: bug == "a"}

	var store seqstore.Store
	var db *sql.DB
	var sqls *sqlstore.Store
	if c.sqlite != "" {
		db, err = sql.Open("sqlite", "file:"+c.sqlite+"?_pragma=journal_mode(WAL)&_pragma=busy_timeout(10000)&_txlock=immediate")
		if err != nil {
			return err
		}
		defer db.Close()
		if sqls, err = sqlstore.Open(db, sqlstore.SQLite, nil); err != nil {
			return err
		}
		if err := sqls.Migrate(setup); err != nil {
			return err
		}
		if _, err := db.ExecContext(setup, `CREATE TABLE IF NOT EXISTS applied (id INTEGER PRIMARY KEY AUTOINCREMENT, grp TEXT NOT NULL, epoch INTEGER NOT NULL, seq INTEGER NOT NULL, payload TEXT NOT NULL)`); err != nil {
			return err
		}
		store = sqls
	} else {
		fs, err := filestore.Open(c.storeDir, nil)
		if err != nil {
			return err
		}
		store = fs
	}
	defer store.Close()
	faults, err := crashtest.ParseStoreFaults(c.storeFaults)
	if err != nil {
		return err
	}
	if faults != (crashtest.StoreFaults{}) {
		// Under the kill points' records: what they record is what the
		// library heard, as a store that failed after applying answered.
		store = crashtest.NewFaultStore(store, c.seed, faults)
	}
	ks := &killStore{Store: store, k: k, h: h}
	store = ks
	if p, ok := ks.Store.(seqstore.Parker); ok {
		store = &killParkStore{killStore: ks, p: p}
	}

	opts := &ordered.Options{
		Name:   "crash",
		Logger: logger,
		Retry:  ordered.RetryOptions{Initial: 20 * time.Millisecond, Max: 500 * time.Millisecond},
		Send:   ordered.SendOptions{MaxAttempts: c.sendAttempts},
		Receive: ordered.ReceiveOptions{
			Wait:         time.Second,
			ReapInterval: 50 * time.Millisecond,
			Window:       c.window,
			MaxUndeleted: c.maxUndeleted,
		},
	}
	switch c.mode {
	case crashtest.ModeAtLeastOnce:
		opts.Receive.Mode, opts.Receive.SyncAck = ordered.AtLeastOnce, true
	case crashtest.ModeAtMostOnce:
		opts.Receive.Mode = ordered.AtMostOnce
	case crashtest.ModeExactlyOnce:
		opts.Receive.Mode = ordered.ExactlyOnce
	default:
		return fmt.Errorf("unknown mode %q", c.mode)
	}
	q, err := retry(setup, func() (*ordered.Queue, error) { return ordered.New(setup, qdrv, store, opts) })
	if err != nil {
		return err
	}
	clean := false
	switch c.role {
	case crashtest.RoleSend:
		clean = sender(ctx, c, q, h, k)
	case crashtest.RoleReceive:
		clean = receiver(ctx, c, q, h, k, db, sqls)
	default:
		return fmt.Errorf("unknown role %q", c.role)
	}
	cctx, ccancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer ccancel()
	if err := q.Close(cctx); err != nil {
		return fmt.Errorf("close: %w", err)
	}
	st := q.Stats()
	b, _ := json.Marshal(st)
	fmt.Fprintf(os.Stdout, "stats %s\n", b)
	if clean {
		h.add(crashtest.Event{Kind: crashtest.KindEnd}, true)
	}
	return nil
}

// retry calls f until it succeeds or ctx ends, and returns its last result.
func retry[T any](ctx context.Context, f func() (T, error)) (T, error) {
	for {
		v, err := f()
		if err == nil || ctx.Err() != nil {
			return v, err
		}
		fmt.Fprintln(os.Stderr, "worker: setup failed, retrying:", err)
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// sender sends to groups groupFrom..groupTo-1, goroutine w taking the groups
// of index w modulo workers, until ctx ends. Payload ids are
// "<proc>.<inc>.<group index>.<n>", n counting per group from 1. It reports
// whether every admitted message got its outcome.
func sender(ctx context.Context, c config, q *ordered.Queue, h *history, k *killer) bool {
	var wg sync.WaitGroup
	var mu sync.Mutex
	clean := true
	// A send that failed after its seq was reserved leaves its journal
	// entry behind, and a hole in its group until it is sent: recover as
	// the library's documentation tells a user to, while sending goes on.
	var failed atomic.Bool
	wg.Go(func() {
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if !failed.Swap(false) {
				continue
			}
			if _, err := q.Recover(ctx); err != nil {
				failed.Store(true) // a store fault: try again
			}
		}
	})
	for w := range c.workers {
		wg.Go(func() {
			n := map[int]int{}
			for ctx.Err() == nil {
				for g := c.groupFrom + w; g < c.groupTo && ctx.Err() == nil; g += c.workers {
					if !sendRound(c, q, h, k, g, n) {
						failed.Store(true)
						mu.Lock()
						clean = false
						mu.Unlock()
					}
				}
				if c.pause > 0 {
					select {
					case <-ctx.Done():
					case <-time.After(c.pause):
					}
				}
			}
		})
	}
	wg.Wait()
	if failed.Load() {
		// Stopping with a failed send's entry still journaled leaves its
		// hole to the next start; the harness's last incarnation has no
		// next start, so recover before closing, as a user stopping for
		// good would.
		rctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		for {
			if _, err := q.Recover(rctx); err == nil || rctx.Err() != nil {
				break
			}
		}
	}
	return clean
}

func groupName(g int) string { return fmt.Sprintf("g%03d", g) }

// sendRound sends 1..4 messages to group g, one at a time, pipelined with
// SendAsync, or with SendBatch.
func sendRound(c config, q *ordered.Queue, h *history, k *killer, g int, n map[int]int) bool {
	group := groupName(g)
	cnt := 1 + int(k.rngN(4))
	ids := make([]string, cnt)
	payloads := make([][]byte, cnt)
	for i := range ids {
		n[g]++
		ids[i] = fmt.Sprintf("%s.%d.%d.%d", c.proc, c.inc, g, n[g])
		payloads[i] = []byte(ids[i])
		h.add(crashtest.Event{Kind: crashtest.KindAttempt, Group: group, Payload: ids[i]}, true)
	}
	// Sends are not cut by SIGTERM: the harness stops a sender by SIGTERM
	// and wants every admitted message resolved.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if cnt > 1 && k.chance(0.3) {
		err := q.SendBatch(ctx, group, payloads)
		for _, id := range ids {
			if err != nil {
				h.add(crashtest.Event{Kind: crashtest.KindFailed, Group: group, Payload: id, Err: err.Error()}, false)
			} else {
				k.at("sent")
				h.add(crashtest.Event{Kind: crashtest.KindSent, Group: group, Payload: id}, false)
			}
		}
		return err == nil
	}
	rs := make([]*ordered.SendResult, cnt)
	ok := true
	for i := range payloads {
		r, err := q.SendAsync(ctx, group, payloads[i])
		if err != nil {
			h.add(crashtest.Event{Kind: crashtest.KindFailed, Group: group, Payload: ids[i], Err: err.Error()}, false)
			ok = false
			continue
		}
		rs[i] = r
	}
	for i, r := range rs {
		if r == nil {
			continue
		}
		if err := r.Wait(ctx); err != nil {
			h.add(crashtest.Event{Kind: crashtest.KindFailed, Group: group, Epoch: r.Epoch(), Seq: r.Seq(), Payload: ids[i], Err: err.Error()}, false)
			ok = false
			continue
		}
		k.at("sent")
		h.add(crashtest.Event{Kind: crashtest.KindSent, Group: group, Epoch: r.Epoch(), Seq: r.Seq(), Payload: ids[i]}, false)
	}
	return ok
}

func (k *killer) rngN(n uint64) uint64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.rng.Uint64N(n)
}

// receiver receives with c.workers goroutines until ctx ends. It reports
// whether every delivery was acknowledged.
func receiver(ctx context.Context, c config, q *ordered.Queue, h *history, k *killer, db *sql.DB, sqls *sqlstore.Store) bool {
	var wg sync.WaitGroup
	var mu sync.Mutex
	clean := true
	for range c.workers {
		wg.Go(func() {
			for {
				m, err := q.Receive(ctx)
				if err != nil {
					return
				}
				ev := crashtest.Event{Kind: crashtest.KindDelivered, Group: m.Group, Epoch: m.Epoch, Seq: m.Seq, Payload: string(m.Body), Unordered: m.Unordered}
				h.add(ev, true)
				k.at("delivered")
				if k.chance(0.05) {
					// Hold the message out for a while now and then, so
					// that arrivals of its group come while it is out.
					time.Sleep(time.Duration(1+k.rngN(20)) * time.Millisecond)
				}
				if !handle(q, h, k, c.mode, m, db, sqls) {
					mu.Lock()
					clean = false
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	return clean
}

// handle processes and acknowledges m; in exactly-once mode it applies m
// and its cursor advance in one transaction first.
func handle(q *ordered.Queue, h *history, k *killer, mode string, m *ordered.Message, db *sql.DB, sqls *sqlstore.Store) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if mode == crashtest.ModeExactlyOnce && !m.Unordered {
		for attempt := 0; ; attempt++ {
			err := applyEO(ctx, db, sqls, m)
			if err == nil {
				break
			}
			if errors.Is(err, seqstore.ErrConflict) || attempt >= 20 || ctx.Err() != nil {
				_ = m.Nack(ctx, err)
				return false
			}
			time.Sleep(50 * time.Millisecond)
		}
		k.at("committed")
		h.add(crashtest.Event{Kind: crashtest.KindCommitted, Group: m.Group, Epoch: m.Epoch, Seq: m.Seq, Payload: string(m.Body)}, false)
	}
	if err := m.Ack(ctx); err != nil {
		return false
	}
	k.at("acked")
	// In every mode the advance past m is durable once Ack returned:
	// AtLeastOnce runs with SyncAck, AtMostOnce made it durable before the
	// hand-out, and ExactlyOnce committed it in the transaction above.
	h.add(crashtest.Event{Kind: crashtest.KindAcked, Group: m.Group, Epoch: m.Epoch, Seq: m.Seq, Durable: !m.Unordered}, false)
	k.at("acked-recorded")
	return true
}

func applyEO(ctx context.Context, db *sql.DB, sqls *sqlstore.Store, m *ordered.Message) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `INSERT INTO applied (grp, epoch, seq, payload) VALUES (?, ?, ?, ?)`, m.Group, int64(m.Epoch), int64(m.Seq), string(m.Body)); err != nil {
		return err
	}
	if err := sqls.AdvanceTx(ctx, tx, []seqstore.Advance{m.CursorAdvance()}); err != nil {
		return err
	}
	return tx.Commit()
}
