// Command mns-emulator runs the MNS-compatible server of package
// github.com/inorder/inorder/ordered/mnsqueue/mnstest as a standalone
// program, so that programs using the real Alibaba Cloud MNS Go SDK can be
// run against it locally, in other processes.
//
//	go run ./examples/mns-emulator
//
// It prints the endpoint and the environment lines to export in the shell
// of the programs that use it:
//
//	export MNS_ENDPOINT=http://127.0.0.1:8931/.
//	export MNS_ACCESS_KEY_ID=inorder
//	export MNS_ACCESS_KEY_SECRET=inorder-secret
//
// The endpoint ends in "/." because the SDK rejects endpoints without
// exactly four dots (see the mnstest package documentation).
//
// Flags:
//
//	-addr host:port          listen address (default 127.0.0.1:8931; IPv4 only). An
//	                         address that is not loopback needs -access-key-secret
//	                         other than the published default
//	-read-timeout d          longest time to read a request, headers and body (default 30s)
//	-access-key-id id        accepted access key id (default inorder)
//	-access-key-secret s     accepted access key secret (default inorder-secret)
//	-shards n                internal shards per queue: 1 is FIFO, more reorder (default 4)
//	-reorder-window n        how far a message can be overtaken (default 16)
//	-seed n                  seed of shard choice and faults (default: fixed)
//	-queue name              create this queue at start (repeatable or comma-separated)
//	-redeliver p             probability a received message comes back early (0..1)
//	-error5xx p              probability of a 500 InternalError answer (0..1)
//	-drop p                  probability of a connection closed without answer (0..1)
//	-latency d, -jitter d    added delay of message operations (e.g. 2ms)
//	-lose-acked-sends p      probability a message whose send succeeded is thrown away
//	                         (0..1, default 0): the service never does this; it makes
//	                         holes that never fill, to test a receiver's gap policy
//	-early-empty p           probability a receive answers "no message" at once (0..1)
//	-stats d                 print request and message counts every d (0: never; default 10s)
//	-v                       log every request
//
// It stops cleanly on SIGINT or SIGTERM: open long polls are answered, and
// the final counts are printed. State lives in memory only, within caps: 1,000
// queues, 1,000 topics, 100 subscriptions per topic (the service's limits), and
// 1,000,000 messages or 1 GiB of bodies stored in all.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/inorder/inorder/ordered/mnsqueue/mnstest"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(2)
		}
		fmt.Fprintln(os.Stderr, "mns-emulator:", err)
		os.Exit(1)
	}
}

// queueList collects -queue flags.
type queueList []string

func (q *queueList) String() string { return strings.Join(*q, ",") }
func (q *queueList) Set(v string) error {
	for _, name := range strings.Split(v, ",") {
		if name = strings.TrimSpace(name); name != "" {
			*q = append(*q, name)
		}
	}
	return nil
}

// run serves until ctx is done.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("mns-emulator", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		opts    mnstest.Options
		queues  queueList
		every   time.Duration
		verbose bool
	)
	fs.StringVar(&opts.Addr, "addr", "127.0.0.1:8931", "listen address (IPv4 host:port)")
	fs.StringVar(&opts.AccessKeyID, "access-key-id", mnstest.DefaultAccessKeyID, "accepted access key id")
	fs.StringVar(&opts.AccessKeySecret, "access-key-secret", mnstest.DefaultAccessKeySecret, "accepted access key secret")
	fs.DurationVar(&opts.ReadTimeout, "read-timeout", 30*time.Second, "longest time to read a request, headers and body")
	fs.IntVar(&opts.Shards, "shards", 4, "internal shards per queue (1 = FIFO)")
	fs.IntVar(&opts.ReorderWindow, "reorder-window", 16, "how many later sends may overtake a message")
	fs.Int64Var(&opts.Seed, "seed", 0, "seed of shard choice and faults (0: fixed default)")
	fs.Var(&queues, "queue", "queue to create at start (repeatable, or comma-separated)")
	fs.Float64Var(&opts.Faults.Redeliver, "redeliver", 0, "probability a received message comes back early")
	fs.Float64Var(&opts.Faults.Error5xx, "error5xx", 0, "probability of a 500 InternalError answer")
	fs.Float64Var(&opts.Faults.Drop, "drop", 0, "probability a connection is closed without an answer")
	fs.DurationVar(&opts.Faults.Latency, "latency", 0, "added delay of message operations")
	fs.DurationVar(&opts.Faults.Jitter, "jitter", 0, "random extra delay, up to this")
	fs.Float64Var(&opts.Faults.LoseAckedSends, "lose-acked-sends", 0,
		"probability a message whose send succeeded is thrown away (the service never does this)")
	fs.Float64Var(&opts.Faults.EarlyEmpty, "early-empty", 0, "probability a receive answers no message at once")
	fs.DurationVar(&every, "stats", 10*time.Second, "print counts this often (0: never)")
	fs.BoolVar(&verbose, "v", false, "log every request")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	level := slog.LevelInfo
	if verbose {
		level = slog.LevelDebug
	}
	opts.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))

	srv, err := mnstest.NewServer(&opts)
	if err != nil {
		return err
	}
	for _, q := range queues {
		if err := srv.CreateQueue(q, nil); err != nil {
			_ = srv.Close()
			return err
		}
	}
	eff := srv.Options() // what the server uses: -shards 0 means its default
	fmt.Fprintf(stdout, "MNS emulator listening on %s (shards %d, reorder window %d, seed %d)\n",
		srv.Addr(), eff.Shards, eff.ReorderWindow, eff.Seed)
	if f := srv.Faults(); f != (mnstest.Faults{}) {
		fmt.Fprintf(stdout, "faults: redeliver %g, error5xx %g, drop %g, latency %v+%v, early-empty %g\n",
			f.Redeliver, f.Error5xx, f.Drop, f.Latency, f.Jitter, f.EarlyEmpty)
		if f.LoseAckedSends > 0 {
			fmt.Fprintf(stdout, "WARNING: -lose-acked-sends %g throws away messages whose send succeeded, which the service never does\n",
				f.LoseAckedSends)
		}
	}
	if len(queues) > 0 {
		fmt.Fprintf(stdout, "queues: %s\n", strings.Join(queues, ", "))
	}
	fmt.Fprintf(stdout, "endpoint: %s\n\n", srv.Endpoint())
	fmt.Fprintf(stdout, "export MNS_ENDPOINT=%s\n", srv.Endpoint())
	fmt.Fprintf(stdout, "export MNS_ACCESS_KEY_ID=%s\n", srv.AccessKeyID())
	fmt.Fprintf(stdout, "export MNS_ACCESS_KEY_SECRET=%s\n\n", srv.AccessKeySecret())
	fmt.Fprintln(stdout, "Ctrl-C to stop.")

	var tick <-chan time.Time
	if every > 0 {
		t := time.NewTicker(every)
		defer t.Stop()
		tick = t.C
	}
	last := int64(0)
	for {
		select {
		case <-ctx.Done():
			err := srv.Close()
			fmt.Fprintln(stdout, "\nstopped;", summary(srv.Stats()))
			return err
		case <-tick:
			st := srv.Stats()
			total := sum(st.Requests)
			if total != last {
				fmt.Fprintln(stdout, summary(st))
				last = total
			}
		}
	}
}

func sum(m map[string]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}

// summary is one line of counts.
func summary(st mnstest.Stats) string {
	var b strings.Builder
	fmt.Fprintf(&b, "requests %d", sum(st.Requests))
	for _, k := range slices.Sorted(maps.Keys(st.Requests)) {
		fmt.Fprintf(&b, " %s=%d", k, st.Requests[k])
	}
	fmt.Fprintf(&b, "; messages sent %d received %d deleted %d expired %d; now active %d inactive %d delayed %d",
		st.Sent, st.Received, st.Deleted, st.Expired, st.Active, st.Inactive, st.Delayed)
	if st.LostAckedSends+st.Redelivered+st.Errors5xx+st.Drops+st.EarlyEmpty > 0 {
		fmt.Fprintf(&b, "; faults lost-acked-sends %d redelivered %d 5xx %d drops %d early-empty %d",
			st.LostAckedSends, st.Redelivered, st.Errors5xx, st.Drops, st.EarlyEmpty)
	}
	return b.String()
}
