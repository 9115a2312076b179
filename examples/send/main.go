// Command send is the send half of the MNS ordered-queue sample, in Go: it
// sends 20 messages, in order, to an MNS queue through ordered.Queue, which
// tags each with its sequence id. The sequence state is persisted in the
// store named by -store (by default a local directory, a filestore), so a
// second run continues where the first stopped. Run command receive to get
// them back in order.
//
// Against a local emulator, in two terminals:
//
//	go run ./examples/mns-emulator
//	go run ./examples/send && go run ./examples/receive
//
// The same with the state of both in one SQLite file:
//
//	go run ./examples/send -store sqlite:inorder.db
//	go run ./examples/receive -store sqlite:inorder.db
//
// Configuration, flags first, then the environment:
//
//	-endpoint   MNS_ENDPOINT           default http://127.0.0.1:8931/. (mns-emulator's default)
//	-queue      MNS_QUEUE              default inorder-sample
//	            MNS_ACCESS_KEY_ID      default: the emulator's key, on a loopback endpoint only
//	            MNS_ACCESS_KEY_SECRET
//	-n          messages to send (default 20)
//	-store      INORDER_STORE          where the sequence state is kept
//	            default file:<cache>/inorder-examples/<queue>/send, where
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
//	            INORDER_KEY            sign every header with this key (at least 16
//	            bytes, e.g. from openssl rand -base64 32), bound to the queue's
//	            name; environment only, a flag would show in ps. Roll out
//	            senders first: a receiver without the key ignores the MAC
//	-shards S   send to a scale-out logical queue (package ordered/scaleout):
//	            S shard queues <queue>-0 .. <queue>-{S-1}, created if
//	            missing, each group to the shard of its name's hash; run
//	            command receive -shards S -member NAME (several, with
//	            distinct names and a shared -store) to receive them
//	-groups     spread the messages round-robin over groups g1, g2, ...
//	            (default 1: the default group, as the sample)
//	-v          log what the queue, the MNS driver and the store report
//	            (debug level) to stderr
//	-legacy     write the sample's own "#<seq>#<body>" header instead of the
//	            default one, for receivers that run the original sample; it
//	            carries no sender epoch, so use it from a fresh queue and store
//
// With the default endpoint, or any loopback one, and no MNS_ACCESS_KEY_ID,
// the emulator's published key is used. -h lists the flags and the
// environment and exits 0; when nothing listens at the endpoint, the error
// says how to start the emulator there.
//
// The queue is created if it does not exist. Bodies are the numbers 1..n.
// On a terminal, stderr shows a progress line while the messages are sent
// (done/total, rate, time left); output to a file or pipe never gets it.
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
	"strconv"
	"syscall"
	"time"

	"github.com/inorder/inorder/examples/internal/cmdline"
	"github.com/inorder/inorder/examples/internal/progress"
	"github.com/inorder/inorder/examples/internal/storeurl"
	"github.com/inorder/inorder/ordered"
	"github.com/inorder/inorder/ordered/driver"
	"github.com/inorder/inorder/ordered/mnsqueue"
	"github.com/inorder/inorder/ordered/mnsqueue/mnstest"
	"github.com/inorder/inorder/ordered/scaleout"
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
	return cmdline.Status("send", run(ctx, args, stdout, stderr), stderr)
}

type config struct {
	endpoint, queue, store string
	storeSpec              *storeurl.Spec
	cred                   mnsqueue.Credentials
	key                    []byte // INORDER_KEY, nil when unset
	verbose                bool
	n                      int
	legacy                 bool
	shards                 int // -shards: the logical queue's shard queues (0: the one queue)
	groups                 int
}

const synopsis = `send [flags]: send the numbers 1..n, in order, to an MNS queue through
ordered.Queue; command receive gets them back in order.`

func parse(args []string, stderr io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("send", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.endpoint, "endpoint", os.Getenv("MNS_ENDPOINT"), "MNS endpoint (env MNS_ENDPOINT; default "+cmdline.DefaultEndpoint+")")
	fs.StringVar(&c.queue, "queue", os.Getenv("MNS_QUEUE"), "queue name (env MNS_QUEUE; default inorder-sample)")
	defaultDir, err := storeurl.UserDir("<queue>", "send")
	if err != nil {
		defaultDir = "<user cache dir>/inorder-examples/<queue>/send"
	}
	fs.StringVar(&c.store, "store", "", "where the sequence state is kept: file:DIR, sqlite:FILE, redis://..., postgres://... or mysql://... (env INORDER_STORE; default file:"+defaultDir+", created mode 0700)")
	fs.BoolVar(&c.verbose, "v", false, "log what the queue, the MNS driver and the store report (debug level) to stderr")
	fs.IntVar(&c.n, "n", 20, "messages to send")
	fs.BoolVar(&c.legacy, "legacy", false, `write the sample's "#<seq>#<body>" header`)
	fs.IntVar(&c.shards, "shards", 0, "send to a scale-out logical queue of this many shard queues, <queue>-0, <queue>-1, ..., each group to its shard (0: to <queue>)")
	fs.IntVar(&c.groups, "groups", 1, "spread the messages round-robin over this many groups, g1, g2, ... (1: the default group)")
	cmdline.SetUsage(fs, synopsis,
		cmdline.Env{Name: "MNS_ENDPOINT", Help: "-endpoint's default"},
		cmdline.Env{Name: "MNS_QUEUE", Help: "-queue's default"},
		cmdline.EnvKeyID, cmdline.EnvSecret,
		cmdline.Env{Name: "INORDER_STORE", Help: "-store's default (the place for a URL with a password)"},
		cmdline.Env{Name: "INORDER_KEY", Help: "sign every header with this key (at least 16 bytes; environment only)"})
	if err := cmdline.Parse(fs, args); err != nil {
		return c, err
	}
	if c.queue == "" {
		c.queue = "inorder-sample"
	}
	storeFlag := c.store != ""
	if c.store == "" {
		// Read here, not as the flag's default, which -h would print
		// with its password.
		c.store = os.Getenv("INORDER_STORE")
	}
	if c.store == "" {
		dir, err := storeurl.UserDir(c.queue, "send")
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
	if storeFlag && spec.HasPassword() {
		fmt.Fprintln(stderr, "send: WARNING: other users of this machine can read the password in -store (ps, /proc); set INORDER_STORE instead")
	}
	if c.n < 1 {
		return c, fmt.Errorf("-n %d: want at least 1", c.n)
	}
	switch {
	case c.shards < 0 || c.shards > seqstore.MaxShards:
		return c, fmt.Errorf("-shards %d: want 0..%d", c.shards, seqstore.MaxShards)
	case c.groups < 1:
		return c, fmt.Errorf("-groups %d: want at least 1", c.groups)
	case c.legacy && c.groups > 1:
		return c, errors.New("-legacy writes one group's header: it takes no -groups")
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

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c, err := parse(args, stderr)
	if err != nil {
		return err
	}
	qlog, log := cmdline.Loggers(c.verbose, stderr, slog.LevelDebug, c.queue)
	// The queue, or with -shards the shard queues <queue>-0.. (which
	// examples/receive -shards receives as a scale-out member).
	var shards []scaleout.Shard
	for i := range max(c.shards, 1) {
		name := c.queue
		if c.shards > 0 {
			name = c.queue + "-" + strconv.Itoa(i)
		}
		drv, err := openQueue(ctx, c, name, &mnsqueue.Options{Logger: log})
		if err != nil {
			return cmdline.Unreachable(err, c.endpoint)
		}
		defer drv.Close()
		shards = append(shards, scaleout.Shard{Name: name, Queue: drv})
	}

	backend, err := c.storeSpec.Open(ctx, &storeurl.Options{Logger: log})
	if err != nil {
		return fmt.Errorf("open sequence store: %w", err)
	}
	defer func() {
		if err := backend.Close(); err != nil {
			fmt.Fprintln(stderr, "send: close sequence store:", err)
		}
	}()

	// With a key, MACs are bound to the MNS queue's name: a body signed for
	// another queue that shares the key is not accepted in this one.
	opts := &ordered.Options{Logger: qlog, Key: c.key}
	if c.key != nil {
		opts.MACContext = c.queue
	}
	if c.legacy {
		opts.Send.Format = ordered.FormatLegacy
	}
	var q *ordered.Queue
	if c.shards > 0 {
		opts.Name = c.queue // the logical queue: the receivers' -queue
		q, err = scaleout.NewSender(ctx, shards, backend.Store, opts)
	} else {
		q, err = ordered.New(ctx, shards[0].Queue, backend.Store, opts)
	}
	if err != nil {
		return err
	}
	meter := progress.Start(stderr, progress.Options{Label: "send", Unit: "messages",
		Count: func() (int64, int64) { return q.Stats().Send.Sent, int64(c.n) }})
	defer meter.Stop()
	stdout = meter.Wrap(stdout)
	// SendAsync admits the messages in order and keeps several requests in
	// flight; order is restored by the receiver from the sequence ids.
	results := make([]*ordered.SendResult, 0, c.n)
	for i := 1; i <= c.n; i++ {
		r, err := q.SendAsync(ctx, c.group(i), []byte(strconv.Itoa(i)))
		if err != nil {
			q.Close(context.Background())
			return fmt.Errorf("send message %d: %w", i, err)
		}
		results = append(results, r)
	}
	var first error
	for i, r := range results {
		if err := r.Wait(ctx); err != nil {
			if first == nil {
				first = fmt.Errorf("send message %d: %w", i+1, err)
			}
			continue
		}
		where := ""
		if g := c.group(i + 1); g != "" {
			where = "group " + g + ", "
		}
		if c.shards > 0 {
			where += fmt.Sprintf("shard %d, ", scaleout.ShardOf(c.group(i+1), c.shards))
		}
		fmt.Fprintf(stdout, "send message body is %d (%sseq %d)\n", i+1, where, r.Seq())
	}
	meter.Stop()
	cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := q.Close(cctx); err != nil && first == nil {
		first = err
	}
	if first != nil {
		return first
	}
	if c.shards > 0 {
		fmt.Fprintf(stdout, "Finish send %d messages to queue %s (%d shards)\n", c.n, c.queue, c.shards)
	} else {
		fmt.Fprintf(stdout, "Finish send %d messages to queue %s\n", c.n, c.queue)
	}
	return nil
}

// group returns the group of message i (from 1): "" with one group, else
// g1, g2, ... round-robin.
func (c config) group(i int) string {
	if c.groups <= 1 {
		return ""
	}
	return "g" + strconv.Itoa((i-1)%c.groups+1)
}

// openQueue opens the MNS driver of the queue name, creating the queue if
// it does not exist.
func openQueue(ctx context.Context, c config, name string, opts *mnsqueue.Options) (*mnsqueue.Queue, error) {
	q, err := mnsqueue.New(ctx, c.endpoint, name, c.cred, opts)
	if errors.Is(err, driver.ErrQueueNotFound) {
		if err := mnsqueue.CreateQueue(ctx, c.endpoint, c.cred, name, nil); err != nil && !errors.Is(err, mnsqueue.ErrQueueExists) {
			return nil, fmt.Errorf("create queue %s: %w", name, err)
		}
		q, err = mnsqueue.New(ctx, c.endpoint, name, c.cred, opts)
	}
	if err != nil {
		return nil, fmt.Errorf("open queue %s at %s: %w", name, c.endpoint, err)
	}
	return q, nil
}
