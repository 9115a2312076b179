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
// A secret of your own is never printed: only the published default is.
// Give it in a file (-access-key-secret-file) or in the environment
// (MNS_EMULATOR_ACCESS_KEY_SECRET), not with -access-key-secret: a command
// line is visible to every user of the machine (ps, /proc). Listening
// beyond loopback needs such a secret, of at least 16 bytes:
//
//	(umask 077; openssl rand -base64 24 > ~/.mns-emulator-secret)
//	go run ./examples/mns-emulator -addr 0.0.0.0:8931 -access-key-id me \
//	    -access-key-secret-file ~/.mns-emulator-secret
//
// The endpoint ends in "/." because the SDK rejects endpoints without
// exactly four dots (see the mnstest package documentation).
//
// Flags:
//
//	-addr host:port          listen address (default 127.0.0.1:8931; IPv4 only). An
//	                         address that is not loopback needs a secret of at least
//	                         16 bytes other than the published default
//	-read-timeout d          longest time to read a request, headers and body (default 30s)
//	-access-key-id id        accepted access key id (default inorder)
//	-access-key-secret-file f  read the accepted access key secret from file f (its
//	                         first line); or set MNS_EMULATOR_ACCESS_KEY_SECRET
//	-access-key-secret s     the secret on the command line, where other users can read
//	                         it (a warning says so); default inorder-secret, the
//	                         published one, when no secret is given at all
//	-shards n                internal shards per queue: 1 is FIFO, more reorder (default 4)
//	-reorder-window n        how far a message can be overtaken (default 16)
//	-seed n                  seed of shard choice and faults (default: fixed)
//	-queue name              create this queue at start (repeatable or comma-separated)
//	-topic name              create this topic at start (repeatable or comma-separated);
//	                         subscribe queues to it with the SDK (Subscribe)
//	-chaos                   the chaos preset (mnstest.Chaos): the fault flags below and
//	                         -consumption-throttle default to a hostile but lossless service
//	-redeliver p             probability a received message comes back early (0..1)
//	-error5xx p              probability of a 500 InternalError answer (0..1)
//	-drop p                  probability of a connection closed without answer (0..1)
//	-latency d, -jitter d    added delay of message operations (e.g. 2ms)
//	-lose-acked-sends p      probability a message whose send succeeded is thrown away
//	                         (0..1, default 0): the service never does this; it makes
//	                         holes that never fill, to test a receiver's gap policy
//	-early-empty p           probability a receive answers "no message" at once (0..1)
//	-push-delay d            delay each topic push by up to d, so pushes overtake each other
//	-push-duplicate p        probability a topic push arrives twice (0..1)
//	-push-drop p             probability a topic push never arrives (0..1)
//	-request-rate n          requests a second each queue and topic accepts, batches
//	                         counting per message (0: no limit); beyond, 429 TooManyRequests
//	-legacy-throttle         answer throttled requests 400 QpsLimitExceeded instead
//	-consumption-throttle    throttle receives of a queue whose client does not delete, as the
//	                         service does (5,000 held, 1,000/s lapsing, 30 min held)
//	-consumption-scale f     scale those thresholds (0..1, default 1)
//	-stats d                 print request and message counts every d (0: never; default 10s)
//	-v                       log every request
//
// -h lists the flags and the environment (MNS_EMULATOR_ACCESS_KEY_SECRET)
// and exits 0. When the address is taken, the error says so: another
// emulator may be running there already.
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

	"github.com/inorder/inorder/examples/internal/cmdline"
	"github.com/inorder/inorder/ordered/mnsqueue/mnstest"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := command(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// command runs the program with args and returns its exit status: 0 on
// success and for -h, 2 for a bad command line, 1 for any other failure.
func command(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return cmdline.Status("mns-emulator", run(ctx, args, stdout, stderr), stderr)
}

const synopsis = `mns-emulator [flags]: serve the MNS API (queues, topics) in memory, for
programs that use the MNS Go SDK; it prints the environment lines they need.`

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
		topics  queueList
		every   time.Duration
		verbose bool
	)
	// -chaos changes the defaults of the fault flags, so it is looked for
	// before they are defined; explicit fault flags still win.
	var preset mnstest.Options
	if slices.ContainsFunc(args, func(a string) bool { a = strings.TrimLeft(a, "-"); return a == "chaos" || a == "chaos=true" }) {
		preset.Faults, preset.Throttle = mnstest.Chaos()
	}
	pf := preset.Faults
	fs.StringVar(&opts.Addr, "addr", "127.0.0.1:8931", "listen address (IPv4 host:port)")
	fs.StringVar(&opts.AccessKeyID, "access-key-id", mnstest.DefaultAccessKeyID, "accepted access key id")
	fs.StringVar(&opts.AccessKeySecret, "access-key-secret", "",
		"accepted access key secret, visible to other users in ps: prefer -access-key-secret-file or "+secretEnv+" (default "+mnstest.DefaultAccessKeySecret+")")
	var secretFile string
	fs.StringVar(&secretFile, "access-key-secret-file", "", "read the accepted access key secret from this file (its first line)")
	fs.DurationVar(&opts.ReadTimeout, "read-timeout", 30*time.Second, "longest time to read a request, headers and body")
	fs.IntVar(&opts.Shards, "shards", 4, "internal shards per queue (1 = FIFO)")
	fs.IntVar(&opts.ReorderWindow, "reorder-window", 16, "how many later sends may overtake a message")
	fs.Int64Var(&opts.Seed, "seed", 0, "seed of shard choice and faults (0: fixed default)")
	fs.Var(&queues, "queue", "queue to create at start (repeatable, or comma-separated)")
	fs.Var(&topics, "topic", "topic to create at start (repeatable, or comma-separated)")
	fs.Bool("chaos", false, "the chaos preset: a hostile but lossless service (fault flags default to it)")
	fs.Float64Var(&opts.Faults.Redeliver, "redeliver", pf.Redeliver, "probability a received message comes back early")
	fs.Float64Var(&opts.Faults.Error5xx, "error5xx", pf.Error5xx, "probability of a 500 InternalError answer")
	fs.Float64Var(&opts.Faults.Drop, "drop", pf.Drop, "probability a connection is closed without an answer")
	fs.DurationVar(&opts.Faults.Latency, "latency", pf.Latency, "added delay of message operations")
	fs.DurationVar(&opts.Faults.Jitter, "jitter", pf.Jitter, "random extra delay, up to this")
	fs.Float64Var(&opts.Faults.LoseAckedSends, "lose-acked-sends", 0,
		"probability a message whose send succeeded is thrown away (the service never does this)")
	fs.Float64Var(&opts.Faults.EarlyEmpty, "early-empty", pf.EarlyEmpty, "probability a receive answers no message at once")
	fs.DurationVar(&opts.Faults.PushDelay, "push-delay", pf.PushDelay, "delay each topic push by up to this")
	fs.Float64Var(&opts.Faults.PushDuplicate, "push-duplicate", pf.PushDuplicate, "probability a topic push arrives twice")
	fs.Float64Var(&opts.Faults.PushDrop, "push-drop", pf.PushDrop, "probability a topic push never arrives")
	fs.Float64Var(&opts.Throttle.RequestRate, "request-rate", 0, "requests a second per queue and topic (0: no limit)")
	fs.BoolVar(&opts.Throttle.Legacy, "legacy-throttle", false, "answer throttled requests 400 QpsLimitExceeded, not 429")
	fs.BoolVar(&opts.Throttle.Consumption, "consumption-throttle", preset.Throttle.Consumption,
		"throttle receives of a queue whose client does not delete, as the service does")
	fs.Float64Var(&opts.Throttle.ConsumptionScale, "consumption-scale", 1, "scale the consumption thresholds (0..1)")
	fs.DurationVar(&every, "stats", 10*time.Second, "print counts this often (0: never)")
	fs.BoolVar(&verbose, "v", false, "log every request")
	cmdline.SetUsage(fs, synopsis,
		cmdline.Env{Name: secretEnv, Help: "the accepted access key secret, when neither -access-key-secret-file nor -access-key-secret is given"})
	if err := cmdline.Parse(fs, args); err != nil {
		return err
	}
	if err := chooseSecret(&opts, secretFile, stderr); err != nil {
		return err
	}
	level := slog.LevelInfo
	if verbose {
		level = slog.LevelDebug
	}
	opts.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))

	srv, err := mnstest.NewServer(&opts)
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return &cmdline.Hinted{Err: err, Hint: fmt.Sprintf("%s is taken: is an emulator running there already? Use it, or pick another -addr", opts.Addr)}
		}
		return err
	}
	for _, q := range queues {
		if err := srv.CreateQueue(q, nil); err != nil {
			_ = srv.Close()
			return err
		}
	}
	for _, t := range topics {
		if err := srv.CreateTopic(t, nil); err != nil {
			_ = srv.Close()
			return err
		}
	}
	eff := srv.Options() // what the server uses: -shards 0 means its default
	fmt.Fprintf(stdout, "MNS emulator listening on %s (shards %d, reorder window %d, seed %d)\n",
		srv.Addr(), eff.Shards, eff.ReorderWindow, eff.Seed)
	if f := srv.Faults(); f != (mnstest.Faults{}) {
		fmt.Fprintf(stdout, "faults: redeliver %g, error5xx %g, drop %g, latency %v+%v, early-empty %g; "+
			"pushes delayed up to %v, duplicated %g, dropped %g\n",
			f.Redeliver, f.Error5xx, f.Drop, f.Latency, f.Jitter, f.EarlyEmpty, f.PushDelay, f.PushDuplicate, f.PushDrop)
		if f.LoseAckedSends > 0 {
			fmt.Fprintf(stdout, "WARNING: -lose-acked-sends %g throws away messages whose send succeeded, which the service never does\n",
				f.LoseAckedSends)
		}
	}
	if th := eff.Throttle; th.RequestRate > 0 || th.Consumption {
		fmt.Fprintf(stdout, "throttle: %g requests/s per queue and topic (0: none), legacy answers %v, consumption throttle %v (scale %g)\n",
			th.RequestRate, th.Legacy, th.Consumption, th.ConsumptionScale)
	}
	if len(queues) > 0 {
		fmt.Fprintf(stdout, "queues: %s\n", strings.Join(queues, ", "))
	}
	if len(topics) > 0 {
		fmt.Fprintf(stdout, "topics: %s\n", strings.Join(topics, ", "))
	}
	fmt.Fprintf(stdout, "endpoint: %s\n\n", srv.Endpoint())
	fmt.Fprintf(stdout, "export MNS_ENDPOINT=%s\n", srv.Endpoint())
	fmt.Fprintf(stdout, "export MNS_ACCESS_KEY_ID=%s\n", srv.AccessKeyID())
	if srv.AccessKeySecret() == mnstest.DefaultAccessKeySecret {
		fmt.Fprintf(stdout, "export MNS_ACCESS_KEY_SECRET=%s\n\n", srv.AccessKeySecret())
	} else {
		// A secret of the user's own stays out of logs of this banner.
		fmt.Fprintf(stdout, "# and MNS_ACCESS_KEY_SECRET: the secret you gave the emulator\n\n")
	}
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

// secretEnv names the environment variable that may hold the secret.
const secretEnv = "MNS_EMULATOR_ACCESS_KEY_SECRET"

// chooseSecret sets opts.AccessKeySecret from, in order, -access-key-secret
// (with a warning: the command line is public), -access-key-secret-file and
// secretEnv; with none, the published default. Giving both flags is an
// error.
func chooseSecret(opts *mnstest.Options, file string, stderr io.Writer) error {
	switch {
	case opts.AccessKeySecret != "" && file != "":
		return errors.New("give -access-key-secret or -access-key-secret-file, not both")
	case opts.AccessKeySecret != "":
		if opts.AccessKeySecret != mnstest.DefaultAccessKeySecret {
			fmt.Fprintf(stderr, "mns-emulator: WARNING: other users of this machine can read -access-key-secret (ps, /proc); "+
				"use -access-key-secret-file or %s\n", secretEnv)
		}
	case file != "":
		b, err := os.ReadFile(file)
		if err != nil {
			return fmt.Errorf("-access-key-secret-file: %w", err)
		}
		line, _, _ := strings.Cut(string(b), "\n")
		if opts.AccessKeySecret = strings.TrimSuffix(line, "\r"); opts.AccessKeySecret == "" {
			return fmt.Errorf("-access-key-secret-file %s: the first line is empty", file)
		}
	default:
		opts.AccessKeySecret = os.Getenv(secretEnv)
	}
	if opts.AccessKeySecret == "" {
		opts.AccessKeySecret = mnstest.DefaultAccessKeySecret
	}
	return nil
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
	if st.Published > 0 {
		fmt.Fprintf(&b, "; topics published %d pushed %d (duplicated %d, dropped %d, failed %d)",
			st.Published, st.Pushed, st.PushDuplicated, st.PushDropped, st.PushFailed)
	}
	if st.Throttled+st.ConsumptionThrottled > 0 || len(st.ConsumptionTrips) > 0 {
		fmt.Fprintf(&b, "; throttled %d requests, %d receives (consumption trips %v)", st.Throttled, st.ConsumptionThrottled, st.ConsumptionTrips)
	}
	if st.LostAckedSends+st.Redelivered+st.Errors5xx+st.Drops+st.EarlyEmpty > 0 {
		fmt.Fprintf(&b, "; faults lost-acked-sends %d redelivered %d 5xx %d drops %d early-empty %d",
			st.LostAckedSends, st.Redelivered, st.Errors5xx, st.Drops, st.EarlyEmpty)
	}
	return b.String()
}
