// Command demo shows inorder restoring strict per-group order over a queue
// that does not keep it. It is the README's first command:
//
//	go run ./examples/demo
//
// It needs no cloud account. By default the queue is the MNS driver over the
// real MNS Go SDK, talking to the embedded MNS emulator (package mnstest) on
// loopback, or to real MNS when MNS_ENDPOINT, MNS_ACCESS_KEY_ID and
// MNS_ACCESS_KEY_SECRET are set; with -driver memqueue it is memqueue, an
// in-process queue that behaves like an MNS standard queue. Chaos is on (messages
// spread over shards and received from a random shard, some delivered twice,
// some requests failing; real MNS brings its own), and sequence state lives
// in a filestore in a temporary directory. It runs four steps:
//
//  1. 20 messages through the plain queue, printed as they arrive, the way
//     the MNS ordered-queue sample prints them: out of order, with
//     duplicates.
//  2. The same 20 through ordered.Queue: 1..20, in order, once each.
//  3. A larger run (-messages over -groups, several producers, handlers in
//     parallel across groups) that checks every group's order and prints a
//     one-line summary, the Queue's stats and (-metrics, on by default)
//     a table of its OpenTelemetry metrics (package otelinorder, read with
//     the SDK's ManualReader).
//  4. A stuck group: the sender of group acct-7 (SendFast) loses seq 2,
//     sends 3 and 4; the receiver (GapWait, GapTimeout -gap-timeout)
//     delivers 1, reports the hole (Hooks.OnGap, Stats().Receive.Stuck,
//     inorder.groups.stuck), the demo repairs it with Queue.SkipHole, 3
//     and 4 follow, and the lost seq 2, delivered late, is handed out
//     flagged Unordered.
//
// While it runs, it serves the status page of the ordered.Queue of the
// current step (ordered.Queue.StatusHandler) on -status, a random loopback
// port by default, and prints its address; -hold keeps the demo, and the
// page of its last Queue, up that long after it finishes. With -hold, step
// 4 leaves acct-7 stuck for the page to show and, when -status is a
// loopback address, to repair: its page alone is served with
// ordered.StatusOptions{Repair: true} (a button, or the curl lines the demo
// prints); the demo prints what follows the repair.
//
// Usage:
//
//	go run ./examples/demo [-driver mns|memqueue] [-messages 20000] [-groups 1000] [-seed 1] [-v]
//	                       [-status 127.0.0.1:0|off] [-hold 5m] [-metrics=true] [-gap-timeout 1s]
//
// On real MNS the demo creates its queues (named after -queue and the time)
// and deletes them at the end. -h lists the flags and the environment and
// exits 0.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/inorder/inorder/examples/internal/cmdline"
	"github.com/inorder/inorder/ordered"
	"github.com/inorder/inorder/ordered/driver"
	"github.com/inorder/inorder/ordered/memqueue"
	"github.com/inorder/inorder/ordered/mnsqueue"
	"github.com/inorder/inorder/ordered/mnsqueue/mnstest"
	"github.com/inorder/inorder/seqstore"
	"github.com/inorder/inorder/seqstore/filestore"
)

type config struct {
	out        io.Writer // where the demo prints
	driver     string
	queue      string
	messages   int
	groups     int
	producers  int
	seed       int64
	verbose    bool
	status     string        // address of the status page ("" or "off": none)
	hold       time.Duration // how long to stay up after the steps
	metrics    bool          // print the OTel metrics of step 3 and step 4's stuck gauge
	gapTimeout time.Duration // GapTimeout of step 4 (0 skips the step)

	page   *statusPage      // set by run: the page of the current step's Queue
	served func(url string) // tests: called with the page's URL once it serves
	done   <-chan struct{}  // tests: closing it ends the hold, as Ctrl-C does
}

func main() {
	os.Exit(command(os.Args[1:], os.Stdout, os.Stderr))
}

// command runs the program with args and returns its exit status: 0 on
// success and for -h, 2 for a bad command line, 1 for any other failure.
func command(args []string, stdout, stderr io.Writer) int {
	c, err := parse(args, stdout, stderr)
	if err == nil {
		err = run(c)
		if ep := os.Getenv("MNS_ENDPOINT"); ep != "" && c.driver == "mns" {
			err = cmdline.Unreachable(err, ep)
		}
	}
	return cmdline.Status("demo", err, stderr)
}

const synopsis = `demo [flags]: show strict per-group order restored over a queue that does not
keep it: a plain queue, the same through ordered.Queue, a larger run, then a
group stuck on a lost seq and its repair. Without MNS_ENDPOINT it runs on the
embedded MNS emulator. With -hold the group stays stuck: its status page (on a
loopback -status only) repairs it, and the demo prints curl lines that do.`

func parse(args []string, stdout, stderr io.Writer) (config, error) {
	c := config{out: stdout}
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.driver, "driver", "mns", "queue driver: mns (the embedded emulator, or real MNS from MNS_ENDPOINT), or memqueue")
	fs.StringVar(&c.queue, "queue", "inorder-demo", "queue name prefix (-driver mns)")
	fs.IntVar(&c.messages, "messages", 20000, "messages in the large run (0 skips it)")
	fs.IntVar(&c.groups, "groups", 1000, "groups in the large run")
	fs.IntVar(&c.producers, "producers", 4, "sending goroutines in the large run")
	fs.Int64Var(&c.seed, "seed", 1, "seed of the queue's chaos")
	fs.BoolVar(&c.verbose, "v", false, "log the Queue's warnings to stderr")
	fs.StringVar(&c.status, "status", "127.0.0.1:0", "address of the status page of the running ordered.Queue (port 0: any free port; off: no page)")
	fs.DurationVar(&c.hold, "hold", 0, "stay up this long after the demo finishes, with its status page (Ctrl-C ends it);\n"+
		"step 4's group stays stuck, and its page alone can repair it (StatusOptions.Repair), on a loopback -status only")
	fs.BoolVar(&c.metrics, "metrics", true, "print step 3's OpenTelemetry metrics and step 4's stuck-group gauge")
	fs.DurationVar(&c.gapTimeout, "gap-timeout", time.Second, "GapTimeout of step 4, the stuck group (0 skips the step)")
	cmdline.SetUsage(fs, synopsis,
		cmdline.Env{Name: "MNS_ENDPOINT", Help: "run on real MNS at this endpoint instead of the embedded emulator (-driver mns)"},
		cmdline.EnvKeyID, cmdline.EnvSecret)
	return c, cmdline.Parse(fs, args)
}

func run(c config) error {
	if c.messages < 0 || c.groups < 1 || c.producers < 1 || c.hold < 0 || c.gapTimeout < 0 {
		return errors.New("need -messages >= 0, -groups >= 1, -producers >= 1, -hold >= 0 and -gap-timeout >= 0")
	}
	c.page = &statusPage{}
	if c.status != "" && c.status != "off" {
		stop, err := c.page.serve(c)
		if err != nil {
			return err
		}
		defer stop()
	}
	e, err := setup(c)
	if err == nil {
		defer e.close()
		err = steps(c, e)
	}
	if c.hold > 0 {
		if err != nil {
			fmt.Fprintf(c.out, "\ndemo failed: %v\n", err)
		}
		fmt.Fprintf(c.out, "\nholding for %v (Ctrl-C ends it)\n", c.hold)
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
		defer stop()
		ctx, cancel := context.WithTimeout(ctx, c.hold)
		defer cancel()
		var held *stuckGroup
		if e != nil {
			held = e.held
		}
		err = errors.Join(err, hold(ctx, c, held))
	}
	return err
}

// hold waits until ctx ends (the -hold time, Ctrl-C) or c.done is closed.
// If step 4 left its group stuck (held), it receives from that Queue
// meanwhile, prints what follows a repair on the page, and closes it at
// the end.
func hold(ctx context.Context, c config, held *stuckGroup) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	var heldErr error
	if held != nil {
		wg.Go(func() {
			if err := held.finish(ctx, c); err != nil && ctx.Err() == nil {
				heldErr = fmt.Errorf("stuck group: %w", err)
			}
		})
	}
	select {
	case <-ctx.Done():
	case <-c.done:
	}
	cancel()
	wg.Wait()
	if held != nil {
		heldErr = errors.Join(heldErr, held.close())
	}
	return heldErr
}

// statusPage serves the status page of the current step's ordered.Queue.
type statusPage struct {
	current atomic.Pointer[http.Handler]

	url      string // set by serve: the page's address ("": no page)
	loopback bool   // set by serve: the page listens on a loopback address
}

// show makes the page show q, with opts.
func (p *statusPage) show(q *ordered.Queue, opts ...ordered.StatusOptions) {
	h := q.StatusHandler(opts...)
	p.current.Store(&h)
}

func (p *statusPage) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := p.current.Load()
	if h == nil {
		http.Error(w, "no ordered.Queue yet: the demo's first step uses the plain queue; reload in a moment", http.StatusServiceUnavailable)
		return
	}
	(*h).ServeHTTP(w, r)
}

// serve serves the page on c.status and prints its address; stop ends it.
func (p *statusPage) serve(c config) (stop func(), err error) {
	ln, err := net.Listen("tcp", c.status)
	if err != nil {
		return nil, fmt.Errorf("status page: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/debug/inorder/", p)
	mux.Handle("/{$}", http.RedirectHandler("/debug/inorder/", http.StatusFound))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln) // ends with Close
	}()
	url := "http://" + ln.Addr().String() + "/debug/inorder/"
	p.url = url
	if a, ok := ln.Addr().(*net.TCPAddr); ok {
		p.loopback = a.IP.IsLoopback()
	}
	hint := "-hold 5m keeps it up after the demo"
	if c.hold > 0 {
		hint = fmt.Sprintf("up %v after the demo", c.hold)
	}
	fmt.Fprintf(c.out, "status page: %s (%s)\n", url, hint)
	if c.served != nil {
		c.served(url)
	}
	return func() {
		srv.Close()
		<-done
	}, nil
}

// env is what the steps share: the filestores' directory and the queues,
// and step 4's Queue when it is left stuck for the hold.
type env struct {
	dir  string
	qs   *queues
	held *stuckGroup
}

func setup(c config) (*env, error) {
	dir, err := os.MkdirTemp("", "inorder-demo-")
	if err != nil {
		return nil, err
	}
	qs, err := newQueues(c)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return &env{dir: dir, qs: qs}, nil
}

func (e *env) close() {
	e.qs.close()
	os.RemoveAll(e.dir)
}

// steps runs the demo's four steps.
func steps(c config, e *env) error {
	dir, qs := e.dir, e.qs
	fmt.Fprintf(c.out, "queue: %s\n\n", qs.describe)

	fmt.Fprintln(c.out, "== 1. a plain queue: 20 messages, as they arrive")
	if err := plain(c, qs, 20); err != nil {
		return fmt.Errorf("plain queue: %w", err)
	}
	fmt.Fprintln(c.out)
	fmt.Fprintln(c.out, "== 2. the same through ordered.Queue")
	if err := inOrder(c, qs, dir, 20); err != nil {
		return fmt.Errorf("ordered queue: %w", err)
	}
	if c.messages > 0 {
		fmt.Fprintln(c.out)
		fmt.Fprintf(c.out, "== 3. %d messages over %d groups through ordered.Queue\n", c.messages, c.groups)
		if err := large(c, qs, dir); err != nil {
			return fmt.Errorf("large run: %w", err)
		}
	}
	if c.gapTimeout > 0 {
		fmt.Fprintln(c.out)
		fmt.Fprintln(c.out, "== 4. a stuck group: acct-7's sender lost seq 2")
		held, err := stuck(c, qs, dir)
		if err != nil {
			return fmt.Errorf("stuck group: %w", err)
		}
		e.held = held
	}
	return nil
}

// queues opens the demo's queues, each step its own, all with chaos on.
type queues struct {
	describe string
	open     func(step string) (driver.Queue, error)
	close    func()
}

func newQueues(c config) (*queues, error) {
	switch c.driver {
	case "memqueue":
		seed := c.seed
		return &queues{
			describe: "memqueue (in process) with chaos: 4 shards, 5% redelivered, 1% of requests failing",
			open: func(string) (driver.Queue, error) {
				seed++
				return memqueue.New(&memqueue.Options{
					Seed:       seed,
					Shards:     4,
					Redeliver:  0.05,
					ErrorRate:  0.01,
					Visibility: 2 * time.Second,
				}), nil
			},
			close: func() {},
		}, nil
	case "mns":
		return mnsQueues(c)
	}
	return nil, fmt.Errorf("unknown -driver %q (want memqueue or mns)", c.driver)
}

// mnsQueues opens queues through the MNS driver: on real MNS if
// MNS_ENDPOINT is set, else on the embedded emulator.
func mnsQueues(c config) (*queues, error) {
	ctx := context.Background()
	endpoint := os.Getenv("MNS_ENDPOINT")
	cred := mnsqueue.Credentials{AccessKeyID: os.Getenv("MNS_ACCESS_KEY_ID"), AccessKeySecret: os.Getenv("MNS_ACCESS_KEY_SECRET")}
	qs := &queues{}
	var created []string
	var srv *mnstest.Server
	if endpoint == "" {
		var err error
		srv, err = mnstest.NewServer(&mnstest.Options{
			Seed:   c.seed,
			Faults: mnstest.Faults{Redeliver: 0.05, Error5xx: 0.01},
		})
		if err != nil {
			return nil, err
		}
		endpoint = srv.Endpoint()
		cred = mnsqueue.Credentials{AccessKeyID: srv.AccessKeyID(), AccessKeySecret: srv.AccessKeySecret()}
		qs.describe = "MNS emulator at " + endpoint + " with chaos: 4 shards, 5% redelivered, 1% of requests failing with 500"
	} else {
		if cred.AccessKeyID == "" || cred.AccessKeySecret == "" {
			return nil, errors.New("MNS_ENDPOINT needs MNS_ACCESS_KEY_ID and MNS_ACCESS_KEY_SECRET")
		}
		qs.describe = "real MNS at " + endpoint
	}
	prefix := fmt.Sprintf("%s-%d", c.queue, time.Now().Unix())
	var drivers []*mnsqueue.Queue
	qs.open = func(step string) (driver.Queue, error) {
		name := prefix + "-" + step
		attrs := &mnsqueue.QueueAttributes{Visibility: 2 * time.Second}
		if err := mnsqueue.CreateQueue(ctx, endpoint, cred, name, attrs); err != nil {
			return nil, err
		}
		created = append(created, name)
		q, err := mnsqueue.New(ctx, endpoint, name, cred, &mnsqueue.Options{Logger: logger(c)})
		if err != nil {
			return nil, err
		}
		drivers = append(drivers, q)
		return q, nil
	}
	qs.close = func() {
		for _, q := range drivers {
			q.Close()
		}
		for _, name := range created {
			if err := mnsqueue.DeleteQueue(ctx, endpoint, cred, name); err != nil {
				fmt.Fprintf(os.Stderr, "demo: delete queue %s: %v\n", name, err)
			}
		}
		if srv != nil {
			srv.Close()
		}
	}
	return qs, nil
}

func logger(c config) *slog.Logger {
	if !c.verbose {
		return nil
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// retry calls f until it succeeds or fails for good, as a careful user of a
// plain queue must.
func retry(ctx context.Context, drv driver.Queue, f func() error) error {
	for {
		err := f()
		if err == nil || !drv.IsRetryable(err) {
			return err
		}
		select {
		case <-time.After(10 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// plain sends n numbered messages through the queue alone and prints them
// in arrival order, deleting each.
func plain(c config, qs *queues, n int) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	drv, err := qs.open("plain")
	if err != nil {
		return err
	}
	defer drv.Close()
	for i := 1; i <= n; i++ {
		body := []byte(strconv.Itoa(i))
		if err := retry(ctx, drv, func() error { return drv.SendBatch(ctx, [][]byte{body}) }); err != nil {
			return err
		}
	}
	var arrived []int
	seen := make(map[int]bool)
	for len(seen) < n {
		var msgs []*driver.Message
		err := retry(ctx, drv, func() error {
			var err error
			msgs, err = drv.ReceiveBatch(ctx, drv.Limits().MaxBatch, time.Second)
			return err
		})
		if err != nil {
			return err
		}
		for _, m := range msgs {
			fmt.Fprintf(c.out, "receive message body is %s\n", m.Body)
			v, _ := strconv.Atoi(string(m.Body))
			arrived = append(arrived, v)
			seen[v] = true
			// A failed delete only means the message comes back.
			_ = drv.DeleteBatch(ctx, []string{m.Receipt})
		}
	}
	fmt.Fprintf(c.out, "plain queue: %d deliveries of %d messages, %d out of order, %d duplicates\n",
		len(arrived), n, outOfOrder(arrived), len(arrived)-n)
	return nil
}

// outOfOrder counts deliveries that came after a higher number.
func outOfOrder(seq []int) int {
	n, high := 0, 0
	for _, v := range seq {
		if v < high {
			n++
		}
		high = max(high, v)
	}
	return n
}

// inOrder sends n numbered messages through ordered.Queue and prints them
// as Receive hands them out.
func inOrder(c config, qs *queues, dir string, n int) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	drv, err := qs.open("ordered")
	if err != nil {
		return err
	}
	defer drv.Close()
	store, err := filestore.Open(dir+"/small", nil)
	if err != nil {
		return err
	}
	defer store.Close()
	q, err := ordered.New(ctx, drv, store, &ordered.Options{Name: "demo", Logger: logger(c)})
	if err != nil {
		return err
	}
	c.page.show(q)
	payloads := make([][]byte, n)
	for i := range payloads {
		payloads[i] = []byte(strconv.Itoa(i + 1))
	}
	if err := q.SendBatch(ctx, "", payloads); err != nil {
		return errors.Join(err, q.Close(ctx))
	}
	var got []int
	for len(got) < n {
		m, err := q.Receive(ctx)
		if err != nil {
			return errors.Join(err, q.Close(ctx))
		}
		fmt.Fprintf(c.out, "receive message body is %s\n", m.Body)
		v, _ := strconv.Atoi(string(m.Body))
		got = append(got, v)
		if err := m.Ack(ctx); err != nil {
			return errors.Join(err, q.Close(ctx))
		}
	}
	if err := q.Close(ctx); err != nil {
		return err
	}
	st := q.Stats()
	fmt.Fprintf(c.out, "ordered.Queue: %d deliveries of %d messages, %d out of order, %d duplicates reaped by the Queue\n",
		len(got), n, outOfOrder(got), st.Receive.DuplicatesReaped)
	if !slices.IsSorted(got) || len(got) != n {
		return fmt.Errorf("delivered %v, want 1..%d", got, n)
	}
	return nil
}

// large runs producers and a handler pool concurrently and checks that every
// group sees its seqs 1, 2, 3... exactly once, in order.
func large(c config, qs *queues, dir string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	drv, err := qs.open("large")
	if err != nil {
		return err
	}
	defer drv.Close()
	store, err := filestore.Open(dir+"/large", nil)
	if err != nil {
		return err
	}
	defer store.Close()
	opts := &ordered.Options{Name: "demo-large", Logger: logger(c)}
	var m *meters
	if c.metrics {
		if m, err = instrument(opts); err != nil {
			return err
		}
		defer m.close()
	}
	q, err := ordered.New(ctx, drv, store, opts)
	if err != nil {
		return err
	}
	if m != nil {
		if err := m.observe(q); err != nil {
			return errors.Join(err, q.Close(ctx))
		}
	}
	c.page.show(q)

	names := make([]string, c.groups)
	for i := range names {
		names[i] = fmt.Sprintf("account-%04d", i)
	}
	next := make([]atomic.Uint64, c.groups) // last seq handed out, per group
	var delivered, repeats, violations atomic.Int64
	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	handler := func(_ context.Context, m *ordered.Message) error {
		g, err := strconv.Atoi(strings.TrimPrefix(m.Group, "account-"))
		if err != nil || g < 0 || g >= c.groups {
			violations.Add(1)
			return nil
		}
		last := next[g].Load()
		switch {
		case m.Seq <= last:
			repeats.Add(1) // delivered again
		case m.Seq != last+1 || string(m.Body) != strconv.FormatUint(m.Seq, 10):
			violations.Add(1)
			next[g].Store(m.Seq)
		default:
			next[g].Store(m.Seq)
			if delivered.Add(1) == int64(c.messages) {
				stopRun()
			}
		}
		return nil
	}

	progressDone := make(chan struct{})
	var progress sync.WaitGroup
	progress.Go(func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				st := q.Stats()
				fmt.Fprintf(c.out, "   ... sent %d, delivered %d, buffered %d\n", st.Send.Sent, delivered.Load(), st.Receive.Buffered)
			case <-progressDone:
				return
			}
		}
	})

	start := time.Now()
	var producers sync.WaitGroup
	nprod := min(c.producers, c.groups)
	sendErr := make(chan error, nprod)
	for p := range nprod {
		producers.Go(func() {
			// Producer p owns the groups g with g % nprod == p and sends
			// each group's messages in order, so payload = seq.
			var owned []int
			for g := p; g < c.groups; g += nprod {
				owned = append(owned, g)
			}
			count := c.messages / nprod
			if p < c.messages%nprod {
				count++
			}
			sent := make([]int, c.groups)
			var results []*ordered.SendResult
			for k := range count {
				g := owned[k%len(owned)]
				sent[g]++
				r, err := q.SendAsync(ctx, names[g], []byte(strconv.Itoa(sent[g])))
				if err != nil {
					sendErr <- err
					return
				}
				results = append(results, r)
			}
			for _, r := range results {
				if err := r.Wait(ctx); err != nil {
					sendErr <- err
					return
				}
			}
		})
	}
	runErr := q.Run(runCtx, handler)
	elapsed := time.Since(start)
	producers.Wait()
	close(progressDone)
	progress.Wait()
	close(sendErr)
	closeErr := q.Close(ctx)
	if err := errors.Join(<-sendErr, runErr, closeErr); err != nil {
		return err
	}
	if ctx.Err() != nil {
		return fmt.Errorf("timed out after %d of %d messages", delivered.Load(), c.messages)
	}

	st := q.Stats()
	fmt.Fprintf(c.out, "%d messages, %d groups, in order: %v (violations %d, repeats %d), duplicates reaped %d, max buffered %d, %.0f msg/s end to end\n",
		delivered.Load(), c.groups, violations.Load() == 0, violations.Load(), repeats.Load(),
		st.Receive.DuplicatesReaped, st.Receive.MaxBuffered, float64(delivered.Load())/elapsed.Seconds())
	printStats(c.out, st, delivered.Load())
	if m != nil {
		if err := m.table(ctx, c.out, st); err != nil {
			return err
		}
	}
	if violations.Load() > 0 {
		return fmt.Errorf("%d order violations", violations.Load())
	}
	return nil
}

func printStats(w io.Writer, st ordered.Stats, delivered int64) {
	s, r, q := st.Send, st.Receive, st.Requests
	fmt.Fprintf(w, "send:     sent %d, failed %d, retries %d, recovered %d, reservations %d, requests %d\n",
		s.Sent, s.Failed, s.Retries, s.Recovered, s.Reservations, s.Batches)
	fmt.Fprintf(w, "receive:  received %d, delivered %d, acked %d, duplicates %d (reaped %d), redelivered %d, not kept %d, max buffered %d\n",
		r.Received, r.Delivered, r.Acked, r.Duplicates, r.DuplicatesReaped, r.Redelivered, r.NotKept, r.MaxBuffered)
	fmt.Fprintf(w, "cursor:   commits %d (%d advances), deleted %d, stale receipts %d, visibility extended %d\n",
		r.Commits, r.Committed, r.Deleted, r.StaleReceipts, r.Extended)
	total := q.Send + q.Receive + q.Delete + q.ChangeVisibility
	perMsg := 0.0
	if delivered > 0 {
		perMsg = float64(total) / float64(delivered)
	}
	fmt.Fprintf(w, "requests: send %d, receive %d (%d empty), delete %d, visibility %d: %.3f per message; store: reserve %d, sent %d, advance %d\n",
		q.Send, q.Receive, q.EmptyReceive, q.Delete, q.ChangeVisibility, perMsg, q.Reserve, q.Sent, q.Advance)
}

// Compile-time check that the store used here is a seqstore.Store.
var _ seqstore.Store = (*filestore.Store)(nil)
