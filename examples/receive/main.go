// Command receive is the receive half of the MNS ordered-queue sample, in Go:
// it receives the messages that command send sent, strictly in the order they
// were sent, printing
//
//	receive message body is 1
//	...
//	receive message body is 20
//	Finish receive 20 messages
//
// Early arrivals are buffered, redelivered copies are deleted, and the
// receive cursor is persisted in the store named by -store (by default a
// local directory, a filestore), so a second run continues after the last
// message acknowledged. See command send for a
// local run against examples/mns-emulator.
//
// Configuration, flags first, then the environment:
//
//	-endpoint   MNS_ENDPOINT           default http://127.0.0.1:8931/. (mns-emulator's default)
//	-queue      MNS_QUEUE              default inorder-sample
//	            MNS_ACCESS_KEY_ID      default: the emulator's key, with the default endpoint only
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
	"syscall"
	"time"

	"github.com/inorder/inorder/examples/internal/storeurl"
	"github.com/inorder/inorder/ordered"
	"github.com/inorder/inorder/ordered/mnsqueue"
	"github.com/inorder/inorder/ordered/mnsqueue/mnstest"
)

// defaultEndpoint is where examples/mns-emulator listens by default.
const defaultEndpoint = "http://127.0.0.1:8931/."

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(2)
		}
		fmt.Fprintln(os.Stderr, "receive:", err)
		os.Exit(1)
	}
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
}

func parse(args []string, stderr io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("receive", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.endpoint, "endpoint", os.Getenv("MNS_ENDPOINT"), "MNS endpoint (env MNS_ENDPOINT; default "+defaultEndpoint+")")
	fs.StringVar(&c.queue, "queue", os.Getenv("MNS_QUEUE"), "queue name (env MNS_QUEUE; default inorder-sample)")
	defaultDir, err := storeurl.UserDir("<queue>", "receive")
	if err != nil {
		defaultDir = "<user cache dir>/inorder-examples/<queue>/receive"
	}
	fs.StringVar(&c.store, "store", "", "where the receive cursor is kept: file:DIR, sqlite:FILE, redis://..., postgres://... or mysql://... (env INORDER_STORE; default file:"+defaultDir+", created mode 0700)")
	fs.BoolVar(&c.verbose, "v", false, "log what the queue, the MNS driver and the store report (debug level) to stderr")
	fs.IntVar(&c.n, "n", 20, "messages to receive")
	fs.DurationVar(&c.timeout, "timeout", 2*time.Minute, "give up after this long")
	fs.BoolVar(&c.lowest, "lowest", false, "with no stored cursor, start at the lowest seq in the queue")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments %q", fs.Args())
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
	if storeFlag && spec.HasPassword() {
		fmt.Fprintln(stderr, "receive: WARNING: other users of this machine can read the password in -store (ps, /proc); set INORDER_STORE instead")
	}
	if c.n < 1 || c.timeout <= 0 {
		return c, fmt.Errorf("-n %d and -timeout %v must be positive", c.n, c.timeout)
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
		c.endpoint = defaultEndpoint
		if c.cred.AccessKeyID == "" {
			c.cred = mnsqueue.Credentials{AccessKeyID: mnstest.DefaultAccessKeyID, AccessKeySecret: mnstest.DefaultAccessKeySecret}
		}
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
	log := logger(c.verbose, stderr)
	drv, err := mnsqueue.New(ctx, c.endpoint, c.queue, c.cred, &mnsqueue.Options{Logger: log})
	if err != nil {
		return fmt.Errorf("open queue %s at %s (run send first to create it): %w", c.queue, c.endpoint, err)
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

	// With a key, MACs are bound to the MNS queue's name: a body signed for
	// another queue that shares the key is not accepted in this one.
	opts := &ordered.Options{Logger: log, Key: c.key}
	if c.key != nil {
		opts.MACContext = c.queue
	}
	if c.lowest {
		opts.Receive.Start = ordered.StartLowest
	}
	q, err := ordered.New(ctx, drv, backend.Store, opts)
	if err != nil {
		return err
	}
	rctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	got := 0
	for got < c.n {
		m, err := q.Receive(rctx)
		if err != nil {
			err = fmt.Errorf("after %d of %d messages: %w", got, c.n, err)
			if cerr := closeQueue(q); cerr != nil {
				err = errors.Join(err, cerr)
			}
			return err
		}
		if m.Unordered {
			fmt.Fprintf(stdout, "receive unordered message body is %s\n", m.Body)
		} else {
			fmt.Fprintf(stdout, "receive message body is %s\n", m.Body)
			got++
		}
		if err := m.Ack(rctx); err != nil {
			closeQueue(q)
			return fmt.Errorf("ack: %w", err)
		}
	}
	// Close makes the cursor durable and deletes the acknowledged messages.
	if err := closeQueue(q); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "Finish receive %d messages\n", got)
	return nil
}

func closeQueue(q *ordered.Queue) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return q.Close(ctx)
}

// logger returns, with -v, a debug-level logger on w; else nil, which the
// queue, the driver and the store take for "discard".
func logger(verbose bool, w io.Writer) *slog.Logger {
	if !verbose {
		return nil
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}
