package main

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/inorder/inorder/ordered/driver"
	"github.com/inorder/inorder/ordered/memqueue"
	"github.com/inorder/inorder/ordered/mnsqueue"
	"github.com/inorder/inorder/ordered/mnsqueue/mnstest"
	"github.com/inorder/inorder/seqstore"
	"github.com/inorder/inorder/seqstore/filestore"
	"github.com/inorder/inorder/seqstore/memstore"
	"github.com/inorder/inorder/seqstore/redisstore"
)

// Environment variables that add scenarios.
const (
	envRedis     = "INORDER_TEST_REDIS_ADDR"
	envPostgres  = "INORDER_TEST_POSTGRES_DSN"
	envMySQL     = "INORDER_TEST_MYSQL_DSN"
	envMNSURL    = "MNS_ENDPOINT"
	envMNSID     = "MNS_ACCESS_KEY_ID"
	envMNSSecret = "MNS_ACCESS_KEY_SECRET"
)

// environment says which optional services are configured.
type environment struct {
	runID                            string
	redisAddr, postgresDSN, mysqlDSN string
	mnsEndpoint                      string
	mnsCred                          mnsqueue.Credentials
	seq                              atomic.Int64
	// live is the running scenario's checker, if it has one: the progress
	// line counts its deliveries.
	live atomic.Pointer[checker]
}

// track makes chk the checker the progress line counts.
func (e *environment) track(chk *checker) *checker {
	e.live.Store(chk)
	return chk
}

// liveCount is the running scenario's messages delivered and to deliver
// (0, 0 for a scenario without a checker).
func (e *environment) liveCount() (n, total int64) {
	if chk := e.live.Load(); chk != nil {
		return chk.delivered.Load(), int64(chk.n)
	}
	return 0, 0
}

func newEnvironment() *environment {
	e := &environment{
		runID:       fmt.Sprintf("%d", time.Now().UnixNano()%1e10),
		redisAddr:   os.Getenv(envRedis),
		postgresDSN: os.Getenv(envPostgres),
		mysqlDSN:    os.Getenv(envMySQL),
	}
	if ep := os.Getenv(envMNSURL); ep != "" && os.Getenv(envMNSID) != "" && os.Getenv(envMNSSecret) != "" {
		e.mnsEndpoint = ep
		e.mnsCred = mnsqueue.Credentials{AccessKeyID: os.Getenv(envMNSID), AccessKeySecret: os.Getenv(envMNSSecret)}
	}
	return e
}

// loadAverage returns the 1-minute load average and the CPUs, so that a
// reader can judge how much other work shared the machine.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return fmt.Sprintf("%d CPUs", runtime.NumCPU())
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return fmt.Sprintf("%d CPUs", runtime.NumCPU())
	}
	return fmt.Sprintf("load average %s on %d CPUs", f[0], runtime.NumCPU())
}

func (e *environment) describe() string {
	var on []string
	for _, v := range []struct {
		name string
		set  bool
	}{{"redis", e.redisAddr != ""}, {"postgres", e.postgresDSN != ""}, {"mysql", e.mysqlDSN != ""}, {"real MNS", e.mnsEndpoint != ""}} {
		if v.set {
			on = append(on, v.name)
		}
	}
	if len(on) == 0 {
		return fmt.Sprintf("optional services: none (set %s, %s, %s, %s to add them)", envRedis, envPostgres, envMySQL, envMNSURL)
	}
	return "optional services: " + strings.Join(on, ", ")
}

// name returns a name unique to this run, for queues, streams and keys.
func (e *environment) name(prefix string) string {
	return fmt.Sprintf("%s-%s-%d", prefix, e.runID, e.seq.Add(1))
}

// openDriver is an open queue with a way to count the requests it served.
type openDriver struct {
	q driver.Queue
	// requests counts the requests served since the driver was opened;
	// received the messages its receives handed out, each redelivery again
	// (nil: the driver does not count them).
	requests, received func() int64
	// byKind counts the same requests by kind (nil: the driver does not
	// count them by kind).
	byKind func() reqKinds
	close  func()
}

// reqKinds is a count of queue requests by kind, or, per message, their
// rates: sends (SendMessage, BatchSendMessage), receives (ReceiveMessage,
// BatchReceiveMessage, empty ones included), deletes (DeleteMessage,
// BatchDeleteMessage) and visibility changes (ChangeMessageVisibility).
// Other requests (the queue's attributes read at open) are in the total
// only.
type reqKinds struct {
	Send       float64 `json:"send"`
	Receive    float64 `json:"receive"`
	Delete     float64 `json:"delete"`
	Visibility float64 `json:"visibility"`
}

// perMsg returns the requests between from and k, per message.
func (k reqKinds) perMsg(from reqKinds, n int) *reqKinds {
	m := float64(n)
	return &reqKinds{
		Send:       (k.Send - from.Send) / m,
		Receive:    (k.Receive - from.Receive) / m,
		Delete:     (k.Delete - from.Delete) / m,
		Visibility: (k.Visibility - from.Visibility) / m,
	}
}

func (k *reqKinds) String() string {
	return fmt.Sprintf("send/receive/delete/visibility per msg %.3f/%.3f/%.3f/%.3f", k.Send, k.Receive, k.Delete, k.Visibility)
}

// driverKind opens fresh queues of one kind; latency is an emulated delay
// per request (memqueue only).
type driverKind struct {
	name string
	// scale divides the message count: slower drivers run fewer.
	scale int
	open  func(ctx context.Context, e *environment, latency time.Duration) (*openDriver, error)
}

func drivers(e *environment) []driverKind {
	ds := []driverKind{
		{name: "memqueue", scale: 1, open: openMemqueue},
		{name: "emulator", scale: 4, open: openEmulator},
	}
	if e.mnsEndpoint != "" {
		ds = append(ds, driverKind{name: "mns", scale: 20, open: openMNS})
	}
	return ds
}

func openMemqueue(_ context.Context, _ *environment, latency time.Duration) (*openDriver, error) {
	return openMemqueueWith(&memqueue.Options{Seed: 1, Latency: latency}), nil
}

func openMemqueueWith(o *memqueue.Options) *openDriver {
	mq := memqueue.New(o)
	return &openDriver{
		q: mq,
		requests: func() int64 {
			s := mq.Stats()
			return s.SendRequests + s.ReceiveRequests + s.DeleteRequests + s.VisibilityRequests
		},
		received: func() int64 { return mq.Stats().Delivered },
		close:    func() { mq.Close() },
	}
}

func openEmulator(ctx context.Context, e *environment, _ time.Duration) (*openDriver, error) {
	return openEmulatorWith(ctx, e, nil)
}

// openEmulatorWith opens a queue with attrs (nil: the defaults, among them
// a 30 s visibility timeout) on a fresh emulator.
func openEmulatorWith(ctx context.Context, e *environment, attrs *mnstest.QueueAttributes) (*openDriver, error) {
	srv, err := mnstest.NewServer(nil)
	if err != nil {
		return nil, err
	}
	name := e.name("bench")
	if err := srv.CreateQueue(name, attrs); err != nil {
		srv.Close()
		return nil, err
	}
	cred := mnsqueue.Credentials{AccessKeyID: srv.AccessKeyID(), AccessKeySecret: srv.AccessKeySecret()}
	q, err := mnsqueue.New(ctx, srv.Endpoint(), name, cred, nil)
	if err != nil {
		srv.Close()
		return nil, err
	}
	sum := func() int64 {
		var n int64
		for _, v := range srv.Stats().Requests {
			n += v
		}
		return n
	}
	base := sum() // New read the queue's attributes
	return &openDriver{
		q:        q,
		requests: func() int64 { return sum() - base },
		received: func() int64 { return srv.Stats().Received },
		byKind: func() reqKinds {
			r := srv.Stats().Requests
			return reqKinds{
				Send:       float64(r["SendMessage"] + r["BatchSendMessage"]),
				Receive:    float64(r["ReceiveMessage"] + r["BatchReceiveMessage"]),
				Delete:     float64(r["DeleteMessage"] + r["BatchDeleteMessage"]),
				Visibility: float64(r["ChangeMessageVisibility"]),
			}
		},
		close: func() {
			q.Close()
			srv.Close()
		},
	}, nil
}

// emulatorFIFO is the emulator with a FIFO queue (QueueType fifo): the
// service hands out one message of a group at a time, in arrival order. Its
// visibility timeout is the service's default, 30 s, set explicitly.
var emulatorFIFO = driverKind{name: "emulator-fifo", scale: 4, open: func(ctx context.Context, e *environment, _ time.Duration) (*openDriver, error) {
	return openEmulatorWith(ctx, e, &mnstest.QueueAttributes{QueueType: mnstest.QueueTypeFIFO, VisibilityTimeout: 30})
}}

func openMNS(ctx context.Context, e *environment, _ time.Duration) (*openDriver, error) {
	name := strings.ReplaceAll(e.name("inorder-bench"), "_", "-")
	if err := mnsqueue.CreateQueue(ctx, e.mnsEndpoint, e.mnsCred, name, nil); err != nil {
		return nil, err
	}
	q, err := mnsqueue.New(ctx, e.mnsEndpoint, name, e.mnsCred, nil)
	if err != nil {
		_ = mnsqueue.DeleteQueue(ctx, e.mnsEndpoint, e.mnsCred, name)
		return nil, err
	}
	cq := &countingQueue{Queue: q}
	return &openDriver{
		q:        cq,
		requests: cq.n.Load,
		close: func() {
			q.Close()
			dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := mnsqueue.DeleteQueue(dctx, e.mnsEndpoint, e.mnsCred, name); err != nil {
				fmt.Fprintf(os.Stderr, "bench: delete queue %s: %v\n", name, err)
			}
		},
	}, nil
}

// countingQueue counts the requests made through a driver that does not
// count them itself (real MNS).
type countingQueue struct {
	driver.Queue
	n atomic.Int64
}

func (c *countingQueue) SendBatch(ctx context.Context, bodies [][]byte) error {
	c.n.Add(1)
	return c.Queue.SendBatch(ctx, bodies)
}

func (c *countingQueue) ReceiveBatch(ctx context.Context, max int, wait time.Duration) ([]*driver.Message, error) {
	c.n.Add(1)
	return c.Queue.ReceiveBatch(ctx, max, wait)
}

func (c *countingQueue) DeleteBatch(ctx context.Context, receipts []string) error {
	c.n.Add(1)
	return c.Queue.DeleteBatch(ctx, receipts)
}

func (c *countingQueue) ChangeVisibility(ctx context.Context, receipt string, timeout time.Duration) (string, error) {
	c.n.Add(1)
	return c.Queue.ChangeVisibility(ctx, receipt, timeout)
}

// openStore is an open store with a note on the work it did.
type openStore struct {
	s seqstore.Store
	// notes describes store-specific work per message (fsyncs, round trips).
	notes func(messages int) string
	close func()
}

// sqlStores returns the SQL stores configured in e (set by sqlstores.go).
var sqlStores func(e *environment) []storeKind

type storeKind struct {
	name string
	open func(ctx context.Context, e *environment) (*openStore, error)
}

func stores(e *environment) []storeKind {
	ss := []storeKind{
		{name: "memstore", open: func(context.Context, *environment) (*openStore, error) {
			s := memstore.New()
			return &openStore{s: s, close: func() { s.Close() }}, nil
		}},
		{name: "filestore", open: openFilestore},
	}
	if e.redisAddr != "" {
		ss = append(ss, storeKind{name: "redisstore", open: openRedis})
	}
	if sqlStores != nil {
		ss = append(ss, sqlStores(e)...)
	}
	return ss
}

func openFilestore(context.Context, *environment) (*openStore, error) {
	dir, err := os.MkdirTemp("", "inorder-bench-")
	if err != nil {
		return nil, err
	}
	s, err := filestore.Open(dir, nil)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return &openStore{
		s: s,
		notes: func(messages int) string {
			st := s.Stats()
			return fmt.Sprintf("%.4f fsyncs/msg", float64(st.Fsyncs)/float64(messages))
		},
		close: func() {
			s.Close()
			os.RemoveAll(dir)
		},
	}, nil
}

func openRedis(ctx context.Context, e *environment) (*openStore, error) {
	client := redis.NewClient(&redis.Options{Addr: e.redisAddr})
	if err := client.Ping(ctx).Err(); err != nil {
		client.Close()
		return nil, fmt.Errorf("redis at %s: %w", e.redisAddr, err)
	}
	prefix := "inorder-bench:" + e.runID + ":"
	s, err := redisstore.New(client, &redisstore.Options{Prefix: prefix})
	if err != nil {
		client.Close()
		return nil, err
	}
	return &openStore{
		s: s,
		notes: func(messages int) string {
			st := s.Stats()
			return fmt.Sprintf("%.4f round trips/msg", float64(st.RoundTrips)/float64(messages))
		},
		close: func() {
			s.Close()
			// Remove the run's keys.
			cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			iter := client.Scan(cctx, 0, prefix+"*", 1000).Iterator()
			var keys []string
			for iter.Next(cctx) {
				if keys = append(keys, iter.Val()); len(keys) == 1000 {
					client.Unlink(cctx, keys...)
					keys = keys[:0]
				}
			}
			if len(keys) > 0 {
				client.Unlink(cctx, keys...)
			}
			client.Close()
		},
	}, nil
}
