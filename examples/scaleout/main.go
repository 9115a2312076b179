// Command scaleout shows one logical queue received by several receivers,
// with strict order per group and no coordinator (package
// ordered/scaleout). The logical queue is -shards MNS standard queues, its
// shards; a sender (scaleout.NewSender) places each group on a shard by a
// hash of its name; receivers (scaleout.NewReceiver) share the shards
// through leases in a store and run an ordinary ordered.Queue over each
// shard they own.
//
//	go run ./examples/scaleout
//
// It needs no cloud account: by default it starts the embedded MNS emulator
// (package mnstest) with its chaos on (4 shards per queue, 5% of deliveries
// redelivered early, 1% of requests failing with 500). With MNS_ENDPOINT,
// MNS_ACCESS_KEY_ID and MNS_ACCESS_KEY_SECRET set it runs on real MNS: it
// creates the shard queues (-name plus "-0", "-1", ...) and deletes them at
// the end unless -keep is given.
//
// What it does: it sends -groups x -messages messages at -rate per second
// through one sender, while -receivers receivers in this process, members
// r1, r2, ..., share the shards. Each handler takes -work. It prints a line
// per ownership change (Options.OnChange) and every -every a table of who
// owns which shard and how many messages each receiver handled. After a
// third of the messages it cuts the receiver -kill from the lease store: its
// lease calls hang, as if its process hung, so it stops renewing; it fences
// its shards itself (RenewDeadline after its last good renewal) and the
// others take them over once the store lets its leases expire (-ttl). After
// two thirds it stops the receiver -stop cleanly: its shards are drained,
// released and taken over at once. At the end it checks every group: its
// messages were handled in order and none is missing; a message may have
// been handled twice only after the receiver that handled it first lost
// its shard (at-least-once), and the count is printed. It prints both
// failover times and a summary.
//
// The lease timings are scaled down from the defaults (TTL 15 s) so that
// the run takes about 15 s: -ttl sets the TTL, renewals run every TTL/3, a
// receiver fences RenewDeadline = 2/3 TTL after its last good renewal, and
// a shard moves RebalanceDelay = TTL/6 after the membership changed.
//
// The leases live in an in-process memstore shared by the receivers, which
// is honest here because they share this process; receivers on several
// machines need a shared store: -store (or INORDER_STORE) takes
// redis://..., postgres://..., mysql://... or sqlite:FILE as the other
// examples do (see examples/internal/storeurl). A filestore (file:DIR, or a
// bare directory) is refused: it holds no leases.
//
// With -measure it instead sends the same load (-groups x -messages at
// -rate, handlers taking -work) twice, each time on a fresh emulator
// without chaos and a fresh memstore: through one receiver over one queue,
// then through -receivers receivers over -shards shards, and prints the
// queue requests per message by kind (the drivers' calls: sends,
// receives, of them empty, deletes, visibility changes), the store calls
// per message (the sender's reservations and marks, the receivers' cursor
// reads and claims, advances and parks) and the lease calls, counted from
// the first send (the receivers have joined and settled before) until
// every message was handled and the receivers stopped:
//
//	go run ./examples/scaleout -measure -receivers 4 -shards 16 -groups 200 -messages 50 -rate 0 -work 0
//
// Usage:
//
//	go run ./examples/scaleout [-shards 8] [-groups 40] [-messages 50] [-rate 150] [-receivers 3]
//	                           [-kill r2] [-stop r1] [-ttl 3s] [-work 5ms] [-every 3s]
//	                           [-store URL] [-name inorder-scaleout] [-keep] [-seed 1] [-v] [-timeout 2m] [-measure]
//
// -h lists the flags and the environment and exits 0.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/inorder/inorder/examples/internal/cmdline"
	"github.com/inorder/inorder/examples/internal/storeurl"
	"github.com/inorder/inorder/ordered"
	"github.com/inorder/inorder/ordered/mnsqueue"
	"github.com/inorder/inorder/ordered/mnsqueue/mnstest"
	"github.com/inorder/inorder/ordered/scaleout"
	"github.com/inorder/inorder/seqstore"
	"github.com/inorder/inorder/seqstore/memstore"
)

type config struct {
	out       io.Writer
	stderr    io.Writer
	shards    int
	groups    int
	messages  int // per group
	rate      float64
	receivers int
	kill      string // receiver cut from the lease store after a third ("" none)
	stop      string // receiver stopped cleanly after two thirds ("" none)
	ttl       time.Duration
	work      time.Duration
	every     time.Duration
	store     *storeurl.Spec // nil: an in-process memstore
	name      string
	keep      bool
	seed      int64
	verbose   bool
	timeout   time.Duration
	measure   bool          // -measure: count requests per message at R=1,S=1 and R=receivers,S=shards
	latency   time.Duration // -measure: the emulator's latency per message operation
}

func main() {
	os.Exit(command(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

// command runs the program with args and returns its exit status: 0 on
// success and for -h, 2 for a bad command line, 1 for any other failure.
func command(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c, err := parse(args, stdout, stderr)
	if err == nil && c.measure {
		err = measure(ctx, c)
	} else if err == nil {
		err = run(ctx, c)
		if ep := os.Getenv("MNS_ENDPOINT"); ep != "" {
			err = cmdline.Unreachable(err, ep)
		}
	}
	return cmdline.Status("scaleout", err, stderr)
}

const synopsis = `scaleout [flags]: one logical queue over several MNS queues (shards),
received by several receivers that share the shards through leases; one
receiver is cut from the lease store midway, another stopped cleanly, and
every group is checked to have been handled in order. Without MNS_ENDPOINT
it runs on the embedded emulator.`

func parse(args []string, stdout, stderr io.Writer) (config, error) {
	c := config{out: stdout, stderr: stderr}
	var store string
	fs := flag.NewFlagSet("scaleout", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&c.shards, "shards", 8, "shard queues of the logical queue")
	fs.IntVar(&c.groups, "groups", 40, "groups to send")
	fs.IntVar(&c.messages, "messages", 50, "messages per group")
	fs.Float64Var(&c.rate, "rate", 150, "messages sent per second (0: as fast as possible)")
	fs.IntVar(&c.receivers, "receivers", 3, "receivers in this process (members r1, r2, ...)")
	fs.StringVar(&c.kill, "kill", "r2", `receiver cut from the lease store after a third of the messages, as if its process hung ("" for none)`)
	fs.StringVar(&c.stop, "stop", "r1", `receiver stopped cleanly after two thirds ("" for none)`)
	fs.DurationVar(&c.ttl, "ttl", 3*time.Second, "lease TTL (renewed every TTL/3, fenced 2/3 TTL after the last good renewal)")
	fs.DurationVar(&c.work, "work", 5*time.Millisecond, "time each handler takes")
	fs.DurationVar(&c.every, "every", 3*time.Second, "print the owners and counts this often")
	fs.StringVar(&store, "store", "", "lease and sequence store: redis://..., postgres://..., mysql://... or sqlite:FILE (env INORDER_STORE; default: an in-process memstore)")
	fs.StringVar(&c.name, "name", "inorder-scaleout", `the logical queue; its shard queues are this plus "-0", "-1", ...`)
	fs.BoolVar(&c.keep, "keep", false, "on real MNS, keep the shard queues at the end")
	fs.Int64Var(&c.seed, "seed", 1, "seed of the emulator's chaos")
	fs.BoolVar(&c.verbose, "v", false, "log what the queues, the MNS driver and the store warn about to stderr")
	fs.DurationVar(&c.timeout, "timeout", 2*time.Minute, "give up after this long")
	fs.BoolVar(&c.measure, "measure", false, "instead: send the load through 1 receiver over 1 queue, then -receivers over -shards, on the emulator, and print the queue requests and store calls per message")
	fs.DurationVar(&c.latency, "latency", 0, "with -measure, the emulator's latency per message operation (real MNS in a region: a few ms)")
	cmdline.SetUsage(fs, synopsis,
		cmdline.Env{Name: "MNS_ENDPOINT", Help: "run on real MNS at this endpoint instead of the embedded emulator"},
		cmdline.EnvKeyID, cmdline.EnvSecret,
		cmdline.Env{Name: "INORDER_STORE", Help: "-store's default (the place for a URL with a password)"})
	if err := cmdline.Parse(fs, args); err != nil {
		return c, err
	}
	storeFlag := store != ""
	if store == "" {
		store = os.Getenv("INORDER_STORE")
	}
	if store != "" {
		spec, err := storeurl.Parse(store)
		if err != nil {
			return c, fmt.Errorf("-store: %w", err)
		}
		if spec.Kind == storeurl.File {
			return c, fmt.Errorf("-store %s: a filestore holds no leases, which receivers that share shards need: "+
				"use redis://, postgres://, mysql:// or sqlite:FILE, or no -store for an in-process memstore", spec)
		}
		if storeFlag && spec.HasPassword() {
			fmt.Fprintln(stderr, "scaleout: WARNING: other users of this machine can read the password in -store (ps, /proc); set INORDER_STORE instead")
		}
		c.store = spec
	}
	return c, c.validate()
}

func (c config) validate() error {
	switch {
	case c.shards < 1 || c.shards > seqstore.MaxShards:
		return fmt.Errorf("-shards %d: want 1..%d", c.shards, seqstore.MaxShards)
	case c.groups < 1 || c.messages < 1:
		return errors.New("-groups and -messages must be positive")
	case c.rate < 0:
		return errors.New("-rate must not be negative")
	case c.receivers < 1:
		return errors.New("-receivers must be positive")
	case c.ttl < 600*time.Millisecond:
		return fmt.Errorf("-ttl %v: want at least 600ms", c.ttl)
	case c.every <= 0 || c.work < 0 || c.timeout <= 0:
		return errors.New("-every and -timeout must be positive, -work not negative")
	}
	if c.measure {
		return nil // -kill and -stop do not apply
	}
	ends := 0
	for _, m := range []struct{ flag, name string }{{"-kill", c.kill}, {"-stop", c.stop}} {
		if m.name == "" {
			continue
		}
		ends++
		if n, err := strconv.Atoi(strings.TrimPrefix(m.name, "r")); err != nil || !strings.HasPrefix(m.name, "r") || n < 1 || n > c.receivers {
			return fmt.Errorf("%s %q: want one of r1..r%d, or \"\"", m.flag, m.name, c.receivers)
		}
	}
	if c.kill != "" && c.kill == c.stop {
		return fmt.Errorf("-kill and -stop name the same receiver %s", c.kill)
	}
	if ends >= c.receivers {
		return fmt.Errorf("-receivers %d: one must be left when %d are cut or stopped", c.receivers, ends)
	}
	return nil
}

// leaseOptions scales the defaults' ratios down to c.ttl.
func (c config) leaseOptions() scaleout.LeaseOptions {
	return scaleout.LeaseOptions{
		TTL: c.ttl, RenewEvery: c.ttl / 3, RetryPeriod: c.ttl / 6, RenewDeadline: c.ttl * 2 / 3,
		RebalanceDelay: c.ttl / 6, CloseDrain: 5 * time.Second,
		Balance: 1.25, // with few shards, plain rendezvous hashing can leave a receiver idle
	}
}

// service is where the example runs: real MNS or the emulator.
type service struct {
	endpoint string
	cred     mnsqueue.Credentials
	srv      *mnstest.Server // nil on real MNS
}

func connect(c config) (*service, error) {
	s := &service{endpoint: os.Getenv("MNS_ENDPOINT"),
		cred: mnsqueue.Credentials{AccessKeyID: os.Getenv("MNS_ACCESS_KEY_ID"), AccessKeySecret: os.Getenv("MNS_ACCESS_KEY_SECRET")}}
	if s.endpoint != "" {
		if s.cred.AccessKeyID == "" || s.cred.AccessKeySecret == "" {
			return nil, errors.New("MNS_ENDPOINT needs MNS_ACCESS_KEY_ID and MNS_ACCESS_KEY_SECRET")
		}
		fmt.Fprintf(c.out, "real MNS at %s\n", s.endpoint)
		return s, nil
	}
	srv, err := mnstest.NewServer(&mnstest.Options{Seed: c.seed, Faults: mnstest.Faults{Redeliver: 0.05, Error5xx: 0.01}})
	if err != nil {
		return nil, err
	}
	s.srv, s.endpoint = srv, srv.Endpoint()
	s.cred = mnsqueue.Credentials{AccessKeyID: srv.AccessKeyID(), AccessKeySecret: srv.AccessKeySecret()}
	fmt.Fprintf(c.out, "MNS emulator at %s with chaos: 4 shards per queue, 5%% redelivered, 1%% of requests failing with 500\n", s.endpoint)
	return s, nil
}

// receiver is one member of the logical queue.
type receiver struct {
	name string
	r    *scaleout.Receiver
	link *link
	stop context.CancelFunc
	done chan error // Run's result
	note string     // "cut", "stopped"

	ended bool // Run returned, with err
	err   error
}

// wait waits for Run to return and returns its error.
func (r *receiver) wait() error {
	if !r.ended {
		r.err, r.ended = <-r.done, true
	}
	return r.err
}

func run(ctx context.Context, c config) (err error) {
	if err := c.validate(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	var cleanups []func() error
	defer func() {
		for i := len(cleanups) - 1; i >= 0; i-- {
			err = errors.Join(err, cleanups[i]())
		}
	}()
	qlog, log := cmdline.Loggers(c.verbose, c.stderr, slog.LevelWarn, c.name)

	s, err := connect(c)
	if err != nil {
		return err
	}
	if s.srv != nil {
		cleanups = append(cleanups, func() error { s.srv.Close(); return nil })
	}

	// The store: one for the whole process, as the receivers share it.
	var store seqstore.Store
	storeText := "an in-process memstore shared by the receivers (honest for one process; receivers on several machines need -store)"
	if c.store == nil {
		store = memstore.New()
		cleanups = append(cleanups, store.Close)
	} else {
		b, err := c.store.Open(ctx, &storeurl.Options{Logger: log})
		if err != nil {
			return fmt.Errorf("open the store: %w", err)
		}
		cleanups = append(cleanups, b.Close)
		if _, ok := b.Store.(seqstore.Leaser); !ok {
			return fmt.Errorf("-store %s: the store holds no leases", b)
		}
		store, storeText = b.Store, b.String()
	}

	// The shard queues, and a driver over each for every member and the
	// sender, as separate processes would have.
	names := make([]string, c.shards)
	for i := range names {
		names[i] = c.name + "-" + strconv.Itoa(i)
		if err := mnsqueue.CreateQueue(ctx, s.endpoint, s.cred, names[i], &mnsqueue.QueueAttributes{Visibility: 3 * time.Second}); err != nil {
			return err
		}
		if s.srv == nil && !c.keep {
			name := names[i]
			cleanups = append(cleanups, func() error { return mnsqueue.DeleteQueue(context.Background(), s.endpoint, s.cred, name) })
		}
	}
	openShards := func() ([]scaleout.Shard, error) {
		shards := make([]scaleout.Shard, c.shards)
		for i, name := range names {
			q, err := mnsqueue.New(ctx, s.endpoint, name, s.cred, &mnsqueue.Options{Logger: log})
			if err != nil {
				return nil, err
			}
			cleanups = append(cleanups, q.Close)
			shards[i] = scaleout.Shard{Name: name, Queue: q}
		}
		return shards, nil
	}
	lo := c.leaseOptions()
	total := c.groups * c.messages
	fmt.Fprintf(c.out, "logical queue %s: %d shard queues %s..%s; leases in %s\n", c.name, c.shards, names[0], names[len(names)-1], storeText)
	fmt.Fprintf(c.out, "lease timings: TTL %v, renewed every %v, fenced %v after the last good renewal, rebalanced after %v\n",
		lo.TTL, lo.RenewEvery, lo.RenewDeadline, lo.RebalanceDelay)
	rateText := "as fast as possible"
	if c.rate > 0 {
		rateText = fmt.Sprintf("at %g/s", c.rate)
	}
	fmt.Fprintf(c.out, "sending %d messages (%d groups x %d) %s; %d receivers, each handler %v\n\n", total, c.groups, c.messages, rateText, c.receivers, c.work)

	start := time.Now()
	w := newWatch(c.out, start, c.shards, c.work)

	// The receivers.
	var rs []*receiver
	defer func() {
		// On an early return: end what still runs.
		for _, r := range rs {
			r.link.end()
			r.stop()
		}
		for _, r := range rs {
			_ = r.wait()
		}
	}()
	members := make([]string, c.receivers)
	for i := range members {
		members[i] = "r" + strconv.Itoa(i+1)
	}
	w.say("%s join (the first to see itself alone takes every shard, then hands over those the others win)", strings.Join(members, ", "))
	for _, name := range members {
		shards, err := openShards()
		if err != nil {
			return err
		}
		r := &receiver{name: name, link: newLink(store), done: make(chan error, 1)}
		r.r, err = scaleout.NewReceiver(ctx, shards, r.link, &scaleout.Options{
			Queue:  ordered.Options{Name: c.name, Logger: qlog, Receive: ordered.ReceiveOptions{Wait: time.Second}},
			Member: r.name, Lease: lo, DrainTimeout: 2 * time.Second,
			OnChange: w.onChange(r.name),
		})
		if err != nil {
			return err
		}
		rctx, stop := context.WithCancel(ctx)
		r.stop = stop
		rs = append(rs, r)
		go func() { r.done <- r.r.Run(rctx, w.handler(r.name)) }()
	}
	byName := func(name string) *receiver {
		i := slices.IndexFunc(rs, func(r *receiver) bool { return r.name == name })
		if i < 0 {
			return nil
		}
		return rs[i]
	}

	// The sender, at c.rate.
	groups := make([]string, c.groups)
	for g := range groups {
		groups[g] = "acct-" + strconv.Itoa(g)
	}
	shards, err := openShards()
	if err != nil {
		return err
	}
	snd, err := scaleout.NewSender(ctx, shards, store, &ordered.Options{Name: c.name, Logger: qlog})
	if err != nil {
		return err
	}
	cleanups = append(cleanups, func() error { return snd.Close(context.Background()) })
	sent := make(chan error, 1)
	sendCtx, cancelSend := context.WithCancel(ctx)
	go func() { sent <- send(sendCtx, snd, groups, c.messages, c.rate) }()
	sendDone := false
	defer func() {
		// On an early return: the sender ends before its Queue closes.
		cancelSend()
		if !sendDone {
			<-sent
		}
	}()

	// The story: a cut after a third, a clean stop after two thirds.
	var (
		cut, stopped           = byName(c.kill), byName(c.stop)
		cutAt, stopAt          time.Time
		cutShards, stopShards  []int
		cutMoved, stopMoved    time.Duration
		stopReturned           time.Duration
		stopDone               <-chan error
		nextTable              = start.Add(c.every)
		tick                   = time.NewTicker(50 * time.Millisecond)
		movedCut, movedStopped bool
	)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			w.table(rs, total)
			return fmt.Errorf("%d of %d messages handled within -timeout %v", w.progress(), total, c.timeout)
		case err := <-sent:
			if err != nil {
				return fmt.Errorf("send: %w", err)
			}
			sendDone = true
			w.say("sent all %d messages", total)
		case err := <-stopDone:
			stopDone = nil
			stopped.ended, stopped.err = true, err
			stopReturned = time.Since(stopAt)
			if err != nil {
				return fmt.Errorf("%s: %w", stopped.name, err)
			}
			w.say("%s's Run returned: it handed its shards over and left", stopped.name)
		case <-tick.C:
		}
		p := w.progress()
		if cut != nil && cutAt.IsZero() && p >= total/3 && len(cut.r.Owned()) > 0 {
			// It owns a shard: the cut shows something.
			cutShards = sortedKeys(cut.r.Owned())
			cut.link.sever()
			cut.note = "cut"
			cutAt = time.Now()
			w.say("%s stops renewing (as if its process hung): its shards %v move after the lease TTL", cut.name, cutShards)
		}
		if !cutAt.IsZero() && !movedCut {
			if t, ok := w.movedAt(cutShards, cut.name, cutAt); ok {
				movedCut, cutMoved = true, t.Sub(cutAt)
				w.say("%s's shards %v all started elsewhere, %.1fs after the cut", cut.name, cutShards, cutMoved.Seconds())
			}
		}
		if cut != nil && cutAt.IsZero() && p >= total*2/3 {
			w.say("%s still owns no shard: it is not cut", cut.name)
			cut = nil
		}
		if stopped != nil && stopAt.IsZero() && p >= total*2/3 && (cut == nil || movedCut) {
			stopShards = sortedKeys(stopped.r.Owned())
			stopped.stop()
			stopped.note = "stopped"
			stopAt = time.Now()
			w.say("%s stops cleanly (its Run's ctx ends): it hands its shards %v over", stopped.name, stopShards)
			stopDone = stopped.done
		}
		if !stopAt.IsZero() && !movedStopped {
			if t, ok := w.movedAt(stopShards, stopped.name, stopAt); ok {
				movedStopped, stopMoved = true, t.Sub(stopAt)
				w.say("%s's shards %v all started elsewhere, %.1fs after the stop", stopped.name, stopShards, stopMoved.Seconds())
			}
		}
		if now := time.Now(); !now.Before(nextTable) {
			w.table(rs, total)
			nextTable = now.Add(c.every)
		}
		if p == total && sendDone && (cutAt.IsZero() || movedCut) && (stopAt.IsZero() || (movedStopped && stopDone == nil)) {
			break
		}
	}
	elapsed := time.Since(start)
	w.table(rs, total)
	w.say("all %d messages handled; stopping the receivers", total)

	// The end: the cut receiver's process is gone (its lease calls fail at
	// once), the others stop cleanly.
	var runErr error
	for _, r := range rs {
		if r == stopped {
			continue
		}
		if r == cut {
			r.link.end()
		}
		r.stop()
	}
	for _, r := range rs {
		e := r.wait()
		if r != cut && r != stopped && e != nil {
			runErr = errors.Join(runErr, fmt.Errorf("%s: %w", r.name, e))
		}
	}
	rs = nil
	if runErr != nil {
		return runErr
	}

	// The check and the summary.
	v := w.check(groups, c.messages)
	fmt.Fprintln(c.out)
	if len(v.problems) == 0 {
		fmt.Fprintf(c.out, "check: every group's messages were handled in order, none lost; no group by two receivers at once, nothing by a receiver after it lost the shard: %d groups x %d, %d handled\n", c.groups, c.messages, v.deliveries)
	} else {
		fmt.Fprintf(c.out, "check FAILED: %d problems\n", len(v.problems))
		for i, p := range v.problems {
			if i == 10 {
				fmt.Fprintf(c.out, "  ... and %d more\n", len(v.problems)-i)
				break
			}
			fmt.Fprintf(c.out, "  %s\n", p)
		}
	}
	if v.repeats == 0 {
		fmt.Fprintln(c.out, "repeats: none")
	} else {
		var who []string
		for _, m := range sortedKeys(v.repeatsBy) {
			who = append(who, fmt.Sprintf("%d first handled by %s", v.repeatsBy[m], m))
		}
		fmt.Fprintf(c.out, "repeats: %d (%s), each after that receiver lost the shard: its last acks had not reached the store, so the next owner handled them again (at-least-once)\n",
			v.repeats, strings.Join(who, ", "))
	}
	w.mu.Lock()
	if n := w.interrupted["revoke"] + w.interrupted["fence"]; n > 0 {
		fmt.Fprintf(c.out, "handlers whose ctx was cancelled mid-work (they returned its error, a nack, and the shard's next owner handled the message): %d on a shard handed over on purpose, %d on a fenced one\n",
			w.interrupted["revoke"], w.interrupted["fence"])
	}
	w.mu.Unlock()
	if c.kill != "" && cutAt.IsZero() {
		fmt.Fprintf(c.out, "failover after a hang: none: %s owned no shard while a third to two thirds of the messages were handled, so it was not cut\n", c.kill)
	}
	if stopped != nil && stopAt.IsZero() {
		fmt.Fprintf(c.out, "failover after a clean stop: none: the messages were all handled before %s was stopped\n", stopped.name)
	}
	if !cutAt.IsZero() {
		fmt.Fprintf(c.out, "failover after a hang: %s was cut from the lease store at %.1fs holding shards %v;", cut.name, cutAt.Sub(start).Seconds(), cutShards)
		if t, ok := w.lastOf(cut.name, "fence", cutShards, cutAt); ok {
			fmt.Fprintf(c.out, " it fenced them itself %.1fs later;", t.Sub(cutAt).Seconds())
		}
		fmt.Fprintf(c.out, " the last was started by another receiver %.1fs after the cut (TTL %v)\n", cutMoved.Seconds(), lo.TTL)
	}
	if !stopAt.IsZero() {
		fmt.Fprintf(c.out, "failover after a clean stop: %s stopped at %.1fs holding shards %v; the last was started by another receiver %.1fs later; its Run returned after %.1fs\n",
			stopped.name, stopAt.Sub(start).Seconds(), stopShards, stopMoved.Seconds(), stopReturned.Seconds())
	}
	if s.srv != nil {
		st := s.srv.Stats()
		fmt.Fprintf(c.out, "emulator: %d sent, %d received (%d redelivered early by the chaos), %d deleted, %d answers 500\n",
			st.Sent, st.Received, st.Redelivered, st.Deleted, st.Errors5xx)
	}
	fmt.Fprintf(c.out, "done: %d messages over %d shards in %.1fs\n", total, c.shards, elapsed.Seconds())
	if len(v.problems) > 0 {
		return fmt.Errorf("the check failed: %d problems", len(v.problems))
	}
	return nil
}

// send sends every group's messages 1..n, round-robin over the groups, at
// rate messages per second (0: at once), and waits until they are stored.
func send(ctx context.Context, q *ordered.Queue, groups []string, n int, rate float64) error {
	start := time.Now()
	var pending []*ordered.SendResult
	k := 0
	for i := 1; i <= n; i++ {
		for _, g := range groups {
			if rate > 0 {
				due := start.Add(time.Duration(float64(k) / rate * float64(time.Second)))
				if d := time.Until(due); d > 0 {
					select {
					case <-ctx.Done():
						return ctx.Err()
					case <-time.After(d):
					}
				}
			}
			k++
			r, err := q.SendAsync(ctx, g, []byte(strconv.Itoa(i)))
			if err != nil {
				return err
			}
			pending = append(pending, r)
		}
	}
	for _, r := range pending {
		if err := r.Wait(ctx); err != nil {
			return err
		}
	}
	return nil
}

func sortedKeys[K interface{ ~int | ~string }, V any](m map[K]V) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
