// Command receive is the receive half of the MNS ordered-queue sample, in Go:
// it receives the messages that command send sent, strictly in the order they
// were sent, printing
//
//	receive message body is 1
//	...
//	receive message body is 20
//	Finish receive 20 messages
//
// on stdout, and a summary on stderr. Early arrivals are buffered,
// redelivered copies are deleted, and the receive cursor is persisted in the
// store named by -store (by default a local directory, a filestore), so a
// second run continues after the last message acknowledged. See command send
// for a local run against examples/mns-emulator.
//
// Configuration, flags first, then the environment:
//
//	-endpoint   MNS_ENDPOINT           default http://127.0.0.1:8931/. (mns-emulator's default)
//	-queue      MNS_QUEUE              default inorder-sample
//	            MNS_ACCESS_KEY_ID      default: the emulator's key, on a loopback endpoint only
//	            MNS_ACCESS_KEY_SECRET
//	-n          messages to receive (default 20)
//	-store      INORDER_STORE          where the receive cursor is kept
//	            default file:<cache>/inorder-examples/<queue>/receive, where
//	            <cache> is the user's cache directory ($XDG_CACHE_HOME or
//	            ~/.cache on Linux; -h shows it), created mode 0700
//	              file:DIR or DIR        a local directory (filestore)
//	              sqlite:FILE            a SQLite database file
//	              redis://[user:pass@]host:port/db, rediss:// for TLS
//	              postgres://user:pass@host:port/db?sslmode=...
//	              mysql://user:pass@host:port/db (MySQL or MariaDB)
//	            ?prefix=P sets the Redis key prefix or the SQL table prefix;
//	            SQL tables are created if missing, a SQLite file mode 0600.
//	            A URL with a password belongs in INORDER_STORE: other users
//	            can read a command line (a warning says so). Passwords never
//	            appear in messages. A bare string with '=',
//	            '@' or HOST:PORT is refused (a connection string must be a
//	            URL); write file:DIR for a directory of such a name. A file
//	            store is locked by one process at a time; a server store can
//	            be shared by send and receive.
//	            INORDER_KEY            accept only headers signed with this key for
//	            this queue (at least 16 bytes; the sender's); unsigned bodies
//	            are then left in the queue and reported. Environment only, a
//	            flag would show in ps. Give it to receivers once every sender
//	            signs (see command send)
//	-v          log what the queue, the MNS driver and the store report
//	            (debug level) to stderr
//	-timeout    give up when the n messages have not all come within this time (default 2m)
//	-lowest     with no stored cursor, start at the lowest seq in the queue
//	            instead of waiting for seq 1
//	-gap-timeout  how long a missing seq is waited for before its group is
//	            reported stuck (default 5s; the library's default is 30s)
//	-gap-skip   skip a missing seq once it is -gap-timeout old, instead of
//	            waiting for it; a copy that comes later is printed as
//	            "receive unordered message"
//	-shards S   run as one member of a scale-out (package ordered/scaleout):
//	            the logical queue -queue is S shard queues, <queue>-0 ..
//	            <queue>-{S-1} (created if missing), which the members share
//	            through leases in -store (redis://, postgres://, mysql:// or
//	            sqlite:FILE; a filestore holds no leases); a sender places
//	            each group on a shard (scaleout.NewSender)
//	-member     with -shards, this member's name, stable across restarts
//	            (default the host name): a restarted member gets its
//	            shards back
//	-ttl        with -shards, the lease TTL (default 15s), renewed every
//	            TTL/3; a member that cannot renew stops its shards 2/3 TTL
//	            after its last good renewal
//
// With -shards, receive prints each message it handles with its group and
// shard, and on stderr each change of its own shards (as examples/scaleout
// prints them: acquired, hands over, released, lost) and, whenever it
// changes, who owns which shard as the store has it:
//
//	receive: r1 acquired shard 2 (token 7)
//	receive: owners: r1 [0 2], r2 [1 3]
//
// It runs until -n messages were handled when -n is given, else until
// -timeout or SIGINT/SIGTERM, and then hands its shards over (drained, then
// released) so that the other members take them at once. Start several,
// with distinct -member names, to see the shards spread and move.
//
// With the default endpoint, or any loopback one, and no MNS_ACCESS_KEY_ID,
// the emulator's published key is used. -h lists the flags and the
// environment and exits 0.
//
// # What it tells while it waits
//
// The messages go to stdout; everything else to stderr. While it waits,
// receive says why, at most every few seconds, with what fixes it:
//
//	receive: group "" waits for seq 1 (held 2-20) since 5s: the store has no cursor for it;
//	  if the store was lost, restart with -lowest to start at the lowest seq present
//
// for each stuck group (ReceiveStats.Stuck, with the seqs it holds from
// Queue.StatusHandler's JSON): a hole (-gap-skip, or the message is held by
// another receiver), a poison message (MaxAttempts, a dead-letter queue), a
// cursor conflict (a second receiver on the same store), a store error. When
// nothing arrives in the first seconds, it reads the queue's counts
// (GetQueueAttributes) and says whether the queue is empty or its messages
// are invisible, taken by an earlier receiver, and within how long (the
// queue's visibility timeout) they come back. The hooks' events (skips, cursor
// conflicts, a store that lost data, a sender that began again) are printed
// as they come. It ends with a summary line. On a terminal, stderr also shows
// a progress line (done/total, rate, time left), which output to a file or
// pipe never gets.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/inorder/inorder/examples/internal/cmdline"
	"github.com/inorder/inorder/examples/internal/progress"
	"github.com/inorder/inorder/examples/internal/storeurl"
	"github.com/inorder/inorder/ordered"
	"github.com/inorder/inorder/ordered/mnsqueue"
	"github.com/inorder/inorder/ordered/mnsqueue/mnstest"
	"github.com/inorder/inorder/seqstore"
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
	return cmdline.Status("receive", run(ctx, args, stdout, stderr), stderr)
}

type config struct {
	endpoint, queue, store string
	storeSpec              *storeurl.Spec
	cred                   mnsqueue.Credentials
	key                    []byte // INORDER_KEY, nil when unset
	verbose                bool
	n                      int
	timeout                time.Duration
	lowest                 bool
	gapTimeout             time.Duration
	gapSkip                bool
	// Scale-out (-shards): this process is one member.
	shards int
	member string
	ttl    time.Duration
	nSet   bool // -n was given
}

const synopsis = `receive [flags]: receive the messages that command send sent, in order, and
print them; say on stderr why it waits, when it does, and what to do about it.`

func parse(args []string, stderr io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("receive", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.endpoint, "endpoint", os.Getenv("MNS_ENDPOINT"), "MNS endpoint (env MNS_ENDPOINT; default "+cmdline.DefaultEndpoint+")")
	fs.StringVar(&c.queue, "queue", os.Getenv("MNS_QUEUE"), "queue name (env MNS_QUEUE; default inorder-sample)")
	defaultDir, err := storeurl.UserDir("<queue>", "receive")
	if err != nil {
		defaultDir = "<user cache dir>/inorder-examples/<queue>/receive"
	}
	fs.StringVar(&c.store, "store", "", "where the receive cursor is kept: file:DIR, sqlite:FILE, redis://..., postgres://... or mysql://... (env INORDER_STORE; default file:"+defaultDir+", created mode 0700)")
	fs.BoolVar(&c.verbose, "v", false, "log what the queue, the MNS driver and the store report (debug level) to stderr")
	fs.IntVar(&c.n, "n", 20, "messages to receive")
	fs.DurationVar(&c.timeout, "timeout", 2*time.Minute, "give up after this long")
	fs.BoolVar(&c.lowest, "lowest", false, "with no stored cursor, start at the lowest seq in the queue (after a lost store)")
	fs.DurationVar(&c.gapTimeout, "gap-timeout", 5*time.Second, "report a group stuck on a missing seq after this long (the library's default is 30s)")
	fs.BoolVar(&c.gapSkip, "gap-skip", false, "skip a missing seq once it is -gap-timeout old instead of waiting for it")
	fs.IntVar(&c.shards, "shards", 0, "run as one member of a scale-out over this many shard queues, <queue>-0, <queue>-1, ... (0: receive <queue> alone); needs a -store that holds leases")
	fs.StringVar(&c.member, "member", "", "with -shards, this member's name, stable across restarts (default the host name)")
	fs.DurationVar(&c.ttl, "ttl", 15*time.Second, "with -shards, the lease TTL (renewed every TTL/3, fenced 2/3 TTL after the last good renewal)")
	cmdline.SetUsage(fs, synopsis,
		cmdline.Env{Name: "MNS_ENDPOINT", Help: "-endpoint's default"},
		cmdline.Env{Name: "MNS_QUEUE", Help: "-queue's default"},
		cmdline.EnvKeyID, cmdline.EnvSecret,
		cmdline.Env{Name: "INORDER_STORE", Help: "-store's default (the place for a URL with a password)"},
		cmdline.Env{Name: "INORDER_KEY", Help: "accept only headers signed with this key (at least 16 bytes; environment only)"})
	if err := cmdline.Parse(fs, args); err != nil {
		return c, err
	}
	fs.Visit(func(f *flag.Flag) { c.nSet = c.nSet || f.Name == "n" })
	if c.queue == "" {
		c.queue = "inorder-sample"
	}
	if err := c.checkMember(); err != nil {
		return c, err
	}
	storeFlag := c.store != ""
	if c.store == "" {
		// Read here, not as the flag's default, which -h would print
		// with its password.
		c.store = os.Getenv("INORDER_STORE")
	}
	if c.store == "" {
		dir, err := storeurl.UserDir(c.queue, "receive")
		if err != nil {
			return c, fmt.Errorf("no -store, and no default: %w", err)
		}
		c.store = "file:" + dir
	}
	spec, err := storeurl.Parse(c.store)
	if err != nil {
		return c, fmt.Errorf("-store: %w", err)
	}
	c.storeSpec = spec
	if c.shards > 0 && spec.Kind == storeurl.File {
		return c, fmt.Errorf("-shards: -store %s is a filestore, which holds no leases: the members of a scale-out share a store: use redis://, postgres://, mysql:// or sqlite:FILE", spec)
	}
	if storeFlag && spec.HasPassword() {
		fmt.Fprintln(stderr, "receive: WARNING: other users of this machine can read the password in -store (ps, /proc); set INORDER_STORE instead")
	}
	if c.n < 1 || c.timeout <= 0 || c.gapTimeout <= 0 {
		return c, fmt.Errorf("-n %d, -timeout %v and -gap-timeout %v must be positive", c.n, c.timeout, c.gapTimeout)
	}
	c.cred = mnsqueue.Credentials{AccessKeyID: os.Getenv("MNS_ACCESS_KEY_ID"), AccessKeySecret: os.Getenv("MNS_ACCESS_KEY_SECRET")}
	if k := os.Getenv("INORDER_KEY"); k != "" {
		// ordered.New refuses it too; here it fails before any connection.
		if len(k) < 16 {
			return c, fmt.Errorf("INORDER_KEY has %d bytes: a key needs at least 16 (for example openssl rand -base64 32)", len(k))
		}
		c.key = []byte(k)
	}
	if c.endpoint == "" {
		c.endpoint = cmdline.DefaultEndpoint
	}
	if c.cred.AccessKeyID == "" && cmdline.IsLoopback(c.endpoint) {
		// The emulator's published key: it opens nothing but an emulator.
		c.cred = mnsqueue.Credentials{AccessKeyID: mnstest.DefaultAccessKeyID, AccessKeySecret: mnstest.DefaultAccessKeySecret}
	}
	if c.cred.AccessKeyID == "" || c.cred.AccessKeySecret == "" {
		return c, errors.New("MNS_ACCESS_KEY_ID and MNS_ACCESS_KEY_SECRET must be set with MNS_ENDPOINT")
	}
	return c, nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	c, err := parse(args, stderr)
	if err != nil {
		return err
	}
	if c.shards > 0 {
		return runMember(ctx, c, stdout, stderr)
	}
	qlog, log := cmdline.Loggers(c.verbose, stderr, slog.LevelDebug, c.queue)
	drv, err := mnsqueue.New(ctx, c.endpoint, c.queue, c.cred, &mnsqueue.Options{Logger: log})
	if err != nil {
		return cmdline.Unreachable(fmt.Errorf("open queue %s at %s (run send first to create it): %w", c.queue, c.endpoint, err), c.endpoint)
	}
	defer drv.Close()

	backend, err := c.storeSpec.Open(ctx, &storeurl.Options{Logger: log})
	if err != nil {
		return fmt.Errorf("open cursor store: %w", err)
	}
	defer func() {
		if err := backend.Close(); err != nil {
			fmt.Fprintln(stderr, "receive: close cursor store:", err)
		}
	}()

	// The progress line (on a terminal only) and every other line share
	// the terminal: they go through the meter, which erases its line first.
	var got atomic.Int64
	var started atomic.Pointer[ordered.Queue]
	meter := progress.Start(stderr, progress.Options{Label: "receive", Unit: "messages",
		Count: func() (int64, int64) { return got.Load(), int64(c.n) },
		Note:  func() string { return progressNote(started.Load()) }})
	defer meter.Stop()
	stdout, stderr = meter.Wrap(stdout), meter.Wrap(stderr)

	w := newWatcher(c, backend.Store, drv.Limits().Visibility, stderr)
	// With a key, MACs are bound to the MNS queue's name: a body signed for
	// another queue that shares the key is not accepted in this one.
	opts := &ordered.Options{Logger: qlog, Key: c.key, Hooks: w.hooks()}
	if c.key != nil {
		opts.MACContext = c.queue
	}
	if c.lowest {
		opts.Receive.Start = ordered.StartLowest
	}
	opts.Receive.GapTimeout = c.gapTimeout
	if c.gapSkip {
		opts.Receive.GapPolicy = ordered.GapSkip
	}
	q, err := ordered.New(ctx, drv, backend.Store, opts)
	if err != nil {
		return err
	}
	started.Store(q)
	w.start(ctx, q)
	rctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	// finish stops the watcher, which takes the last stats before Close
	// gives back what is held, closes the queue, and on a failure prints
	// the summary.
	finish := func(err error) error {
		w.stop()
		if cerr := closeQueue(q); cerr != nil {
			err = errors.Join(err, cerr)
		}
		if err != nil {
			w.summary(int(got.Load()), c.n)
		}
		return err
	}
	for got.Load() < int64(c.n) {
		m, err := q.Receive(rctx)
		if err != nil {
			return finish(fmt.Errorf("after %d of %d messages: %w", got.Load(), c.n, err))
		}
		if m.Unordered {
			fmt.Fprintf(stdout, "receive unordered message body is %s\n", m.Body)
		} else {
			fmt.Fprintf(stdout, "receive message body is %s\n", m.Body)
			got.Add(1)
		}
		if err := m.Ack(rctx); err != nil {
			return finish(fmt.Errorf("ack: %w", err))
		}
	}
	// Close makes the cursor durable and deletes the acknowledged messages.
	if err := finish(nil); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "Finish receive %d messages\n", got.Load())
	w.summary(int(got.Load()), c.n)
	return nil
}

func closeQueue(q *ordered.Queue) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return q.Close(ctx)
}

// checkMember validates the scale-out flags, and names the member after
// the host when -member is not given.
func (c *config) checkMember() error {
	if c.shards == 0 {
		if c.member != "" {
			return errors.New("-member needs -shards")
		}
		return nil
	}
	if c.shards < 0 || c.shards > seqstore.MaxShards {
		return fmt.Errorf("-shards %d: want 1..%d", c.shards, seqstore.MaxShards)
	}
	if c.ttl < 600*time.Millisecond {
		return fmt.Errorf("-ttl %v: want at least 600ms", c.ttl)
	}
	if c.member == "" {
		host, err := os.Hostname()
		if err != nil || host == "" {
			return errors.New("-shards: no -member, and the host has no name")
		}
		c.member = host
	}
	return nil
}
