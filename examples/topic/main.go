// Command topic shows ordered fan-out through an MNS topic: one publisher
// sends each group's messages in order through a topic; three queues are
// subscribed to the topic, one in each notify content format the service
// offers (SIMPLIFIED, XML and JSON); a receiver on each queue prints its
// groups, each in order.
//
//	go run ./examples/topic
//
// It needs no cloud account: by default it starts the embedded MNS emulator
// (package mnstest) with push faults on (each push delayed up to 200ms, so
// that pushes overtake each other, and 5% of them made twice) and 4 shards
// per queue. With MNS_ENDPOINT, MNS_ACCESS_KEY_ID and MNS_ACCESS_KEY_SECRET
// set it runs on real MNS: it creates a topic and three queues named after
// -name and the time, subscribes the queues, and deletes all of them at the
// end unless -keep is given.
//
// What it shows:
//   - the publisher is an ordered.Queue over mnsqueue.NewTopic: the same
//     header, pipelining and durable journal as over a queue;
//   - each receiver is an ordinary ordered.Queue over its subscribed queue;
//     the mnsqueue driver unwraps the XML and JSON notifications, so a
//     subscription left at the service's default format (XML) works;
//   - each subscribed queue has its own copy of every group's stream and
//     its own cursor.
//
// The queues are subscribed before anything is published. A queue that
// subscribes later receives only what is published after (the service
// pushes from the latest message on), so its receiver should start with
// ordered.ReceiveOptions{Start: ordered.StartLowest}.
//
// Usage:
//
//	go run ./examples/topic [-groups 3] [-messages 8] [-name inorder-topic] [-seed 1] [-keep] [-timeout 2m]
//
// -h lists the flags and the environment and exits 0.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/inorder/inorder/examples/internal/cmdline"
	"github.com/inorder/inorder/ordered"
	"github.com/inorder/inorder/ordered/mnsqueue"
	"github.com/inorder/inorder/ordered/mnsqueue/mnstest"
	"github.com/inorder/inorder/seqstore/memstore"
)

type config struct {
	out      io.Writer
	groups   int
	messages int // per group
	name     string
	seed     int64
	keep     bool
	timeout  time.Duration
}

func main() {
	os.Exit(command(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

// command runs the program with args and returns its exit status: 0 on
// success and for -h, 2 for a bad command line, 1 for any other failure.
func command(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c, err := parse(args, stdout, stderr)
	if err == nil {
		err = run(ctx, c)
		if ep := os.Getenv("MNS_ENDPOINT"); ep != "" {
			err = cmdline.Unreachable(err, ep)
		}
	}
	return cmdline.Status("topic", err, stderr)
}

const synopsis = `topic [flags]: publish groups in order through an MNS topic to three
subscribed queues, one per notify format, and print what each receives.
Without MNS_ENDPOINT it runs on the embedded emulator.`

func parse(args []string, stdout, stderr io.Writer) (config, error) {
	c := config{out: stdout}
	fs := flag.NewFlagSet("topic", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&c.groups, "groups", 3, "groups to publish")
	fs.IntVar(&c.messages, "messages", 8, "messages per group")
	fs.StringVar(&c.name, "name", "inorder-topic", "prefix of the topic and queue names")
	fs.Int64Var(&c.seed, "seed", 1, "seed of the emulator's push faults")
	fs.BoolVar(&c.keep, "keep", false, "on real MNS, keep the topic and queues at the end")
	fs.DurationVar(&c.timeout, "timeout", 2*time.Minute, "give up after this long")
	cmdline.SetUsage(fs, synopsis,
		cmdline.Env{Name: "MNS_ENDPOINT", Help: "run on real MNS at this endpoint instead of the embedded emulator"},
		cmdline.EnvKeyID, cmdline.EnvSecret)
	return c, cmdline.Parse(fs, args)
}

// formats are the subscriptions' notify content formats, one queue each.
var formats = []string{mnsqueue.FormatSimplified, mnsqueue.FormatXML, mnsqueue.FormatJSON}

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
	srv, err := mnstest.NewServer(&mnstest.Options{Seed: c.seed,
		Faults: mnstest.Faults{PushDelay: 200 * time.Millisecond, PushDuplicate: 0.05}})
	if err != nil {
		return nil, err
	}
	s.srv, s.endpoint = srv, srv.Endpoint()
	s.cred = mnsqueue.Credentials{AccessKeyID: srv.AccessKeyID(), AccessKeySecret: srv.AccessKeySecret()}
	fmt.Fprintf(c.out, "MNS emulator at %s: pushes delayed up to 200ms, 5%% of them made twice, 4 shards per queue\n", s.endpoint)
	return s, nil
}

// received collects what one receiver hands out, per group.
type received struct {
	mu     sync.Mutex
	groups map[string][]string
	n      int
	bad    []string
}

func (l *received) handle(_ context.Context, m *ordered.Message) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if m.Unordered {
		l.bad = append(l.bad, fmt.Sprintf("%s %q handed out out of order", m.Group, m.Body))
	}
	l.groups[m.Group] = append(l.groups[m.Group], string(m.Body))
	l.n++
	return nil
}

func (l *received) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n
}

func run(ctx context.Context, c config) (err error) {
	if c.groups < 1 || c.messages < 1 {
		return errors.New("-groups and -messages must be positive")
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	s, err := connect(c)
	if err != nil {
		return err
	}
	if s.srv != nil {
		defer s.srv.Close()
	}
	prefix := fmt.Sprintf("%s-%d", c.name, time.Now().Unix())
	topic := prefix
	var cleanups []func() error
	defer func() {
		for i := len(cleanups) - 1; i >= 0; i-- {
			err = errors.Join(err, cleanups[i]())
		}
	}()
	remote := s.srv == nil && !c.keep
	if err := mnsqueue.CreateTopic(ctx, s.endpoint, s.cred, topic, 0); err != nil {
		return err
	}
	if remote {
		cleanups = append(cleanups, func() error { return mnsqueue.DeleteTopic(context.Background(), s.endpoint, s.cred, topic) })
	}

	// The subscribed queues and their receivers.
	logs := map[string]*received{}
	var runs sync.WaitGroup
	runErrs := make(chan error, len(formats))
	rctx, stop := context.WithCancel(ctx)
	defer stop()
	for _, format := range formats {
		q := prefix + "-" + strings.ToLower(format)
		if err := mnsqueue.CreateQueue(ctx, s.endpoint, s.cred, q, &mnsqueue.QueueAttributes{Visibility: 10 * time.Second}); err != nil {
			return err
		}
		if remote {
			cleanups = append(cleanups, func() error { return mnsqueue.DeleteQueue(context.Background(), s.endpoint, s.cred, q) })
		}
		if err := mnsqueue.Subscribe(ctx, s.endpoint, s.cred, topic, "to-"+q, q, &mnsqueue.Subscription{Format: format}); err != nil {
			return err
		}
		drv, err := mnsqueue.New(ctx, s.endpoint, q, s.cred, nil)
		if err != nil {
			return err
		}
		cleanups = append(cleanups, drv.Close)
		// Each subscriber has its own cursors: its own store (here in
		// memory) and its own stream name.
		rx, err := ordered.New(ctx, drv, memstore.New(), &ordered.Options{Name: q,
			Receive: ordered.ReceiveOptions{Wait: time.Second}})
		if err != nil {
			return err
		}
		cleanups = append(cleanups, func() error { return rx.Close(context.Background()) })
		l := &received{groups: map[string][]string{}}
		logs[format] = l
		runs.Go(func() { runErrs <- rx.Run(rctx, l.handle) })
	}

	// The publisher.
	tp, err := mnsqueue.NewTopic(ctx, s.endpoint, topic, s.cred, nil)
	if err != nil {
		return err
	}
	cleanups = append(cleanups, tp.Close)
	pub, err := ordered.New(ctx, tp, memstore.New(), &ordered.Options{Name: topic})
	if err != nil {
		return err
	}
	cleanups = append(cleanups, func() error { return pub.Close(context.Background()) })
	var pending []*ordered.SendResult
	for i := 1; i <= c.messages; i++ {
		for g := range c.groups {
			r, err := pub.SendAsync(ctx, "g"+strconv.Itoa(g), []byte(strconv.Itoa(i)))
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
	fmt.Fprintf(c.out, "published %d messages in %d groups to topic %s; subscribed: %d queues\n\n",
		c.groups*c.messages, c.groups, topic, len(formats))

	want := c.groups * c.messages
	for ctx.Err() == nil {
		done := true
		for _, l := range logs {
			done = done && l.count() >= want
		}
		if done {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	stop()
	runs.Wait()
	close(runErrs)
	for e := range runErrs {
		err = errors.Join(err, e)
	}
	if err != nil {
		return err
	}
	if ctx.Err() != nil {
		return fmt.Errorf("not every receiver got every message within %v", c.timeout)
	}

	var bad []string
	for _, format := range formats {
		l := logs[format]
		fmt.Fprintf(c.out, "%s subscriber:\n", format)
		for _, g := range slices.Sorted(maps.Keys(l.groups)) {
			fmt.Fprintf(c.out, "  %s: %s\n", g, strings.Join(l.groups[g], " "))
		}
		bad = append(bad, l.bad...)
	}
	if s.srv != nil {
		st := s.srv.Stats()
		fmt.Fprintf(c.out, "\nemulator: %d published, %d pushes (%d made twice: %d duplicates, which the receivers dropped)\n",
			st.Published, st.Pushed, st.PushDuplicated, st.Pushed-int64(len(formats)*want))
	}
	if len(bad) > 0 {
		return fmt.Errorf("%d deliveries out of order: %s", len(bad), strings.Join(bad, "; "))
	}
	return nil
}
