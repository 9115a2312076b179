package crashtest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/ordered"
	"github.com/inorder/inorder/ordered/mnsqueue"
	"github.com/inorder/inorder/ordered/mnsqueue/mnstest"
	"github.com/inorder/inorder/seqstore"
)

// env is one emulator with one queue, for the in-process fault tests.
type env struct {
	t     *testing.T
	srv   *mnstest.Server
	queue string
}

func newEnv(t *testing.T, opts *mnstest.Options, attrs *mnstest.QueueAttributes) *env {
	t.Helper()
	srv, err := mnstest.NewServer(opts)
	require.NoError(t, err, "mnstest.NewServer")
	t.Cleanup(func() { assert.NoError(t, srv.Close(), "emulator Close") })
	if attrs == nil {
		attrs = &mnstest.QueueAttributes{VisibilityTimeout: 2}
	}
	e := &env{t: t, srv: srv, queue: "fault"}
	require.NoError(t, srv.CreateQueue(e.queue, attrs), "CreateQueue")
	return e
}

func (e *env) cred() mnsqueue.Credentials {
	return mnsqueue.Credentials{AccessKeyID: e.srv.AccessKeyID(), AccessKeySecret: e.srv.AccessKeySecret()}
}

// driver opens a driver on queue name (e.queue when "").
func (e *env) driver(name string) *mnsqueue.Queue {
	e.t.Helper()
	if name == "" {
		name = e.queue
	}
	d, err := mnsqueue.New(context.Background(), e.srv.Endpoint(), name, e.cred(), &mnsqueue.Options{Visibility: 2 * time.Second})
	require.NoError(e.t, err, "mnsqueue.New")
	e.t.Cleanup(func() { assert.NoError(e.t, d.Close(), "driver Close") })
	return d
}

// open opens an ordered.Queue on a fresh driver; Close runs at cleanup
// unless the test closed it first.
func (e *env) open(store seqstore.Store, opts *ordered.Options) *ordered.Queue {
	e.t.Helper()
	if opts == nil {
		opts = &ordered.Options{}
	}
	if opts.Name == "" {
		opts.Name = "fault"
	}
	opts.Retry = ordered.RetryOptions{Initial: 20 * time.Millisecond, Max: 300 * time.Millisecond}
	if opts.Receive.Wait == 0 {
		opts.Receive.Wait = time.Second
	}
	if opts.Receive.ReapInterval == 0 {
		opts.Receive.ReapInterval = 50 * time.Millisecond
	}
	q, err := ordered.New(context.Background(), e.driver(""), store, opts)
	require.NoError(e.t, err, "ordered.New")
	e.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		assert.NoError(e.t, q.Close(ctx), "ordered Close")
	})
	return q
}

// left returns the messages the queue holds, in all states.
func (e *env) left() int {
	qi, err := e.srv.Queue(e.queue)
	require.NoError(e.t, err)
	return qi.Active + qi.Inactive + qi.Delayed
}

// waitEmpty waits up to d for the queue to hold nothing.
func (e *env) waitEmpty(d time.Duration) int {
	end := time.Now().Add(d)
	for e.left() > 0 && time.Now().Before(end) {
		time.Sleep(50 * time.Millisecond)
	}
	return e.left()
}

// recorder keeps in-process histories in the checker's format, so the
// fault tests judge their runs by the same rules as the crash harness.
type recorder struct {
	mu   sync.Mutex
	hs   map[string]*History // by proc/inc
	n    map[string]int      // payload counter per sender proc/inc/group
	acks atomic.Int64
}

func newRecorder() *recorder { return &recorder{hs: map[string]*History{}, n: map[string]int{}} }

func (r *recorder) add(role, proc string, inc int, ev Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	id := fmt.Sprintf("%s/%d", proc, inc)
	h := r.hs[id]
	if h == nil {
		h = &History{File: role + "-" + id, Proc: proc, Inc: inc, Role: role}
		r.hs[id] = h
	}
	ev.Proc, ev.Inc, ev.Role = proc, inc, role
	ev.File, ev.Line = h.File, len(h.Events)+1
	if ev.Kind == KindEnd {
		h.Clean = true
	}
	h.Events = append(h.Events, ev)
}

func (r *recorder) histories() []*History {
	r.mu.Lock()
	defer r.mu.Unlock()
	var hs []*History
	for _, h := range r.hs {
		c := *h
		c.Events = append([]Event(nil), h.Events...)
		hs = append(hs, &c)
	}
	SortHistories(hs)
	return hs
}

// send sends n messages to group from sender proc/inc with SendAsync and
// records attempts and outcomes; it returns how many succeeded.
func (r *recorder) send(ctx context.Context, q *ordered.Queue, proc string, inc int, group string, n int) int {
	ok := 0
	type pending struct {
		res *ordered.SendResult
		id  string
	}
	var ps []pending
	for range n {
		r.mu.Lock()
		k := fmt.Sprintf("%s/%d/%s", proc, inc, group)
		r.n[k]++
		id := fmt.Sprintf("%s.%d.%s.%d", proc, inc, group, r.n[k])
		r.mu.Unlock()
		r.add(RoleSend, proc, inc, Event{Kind: KindAttempt, Group: group, Payload: id})
		res, err := q.SendAsync(ctx, group, []byte(id))
		if err != nil {
			r.add(RoleSend, proc, inc, Event{Kind: KindFailed, Group: group, Payload: id, Err: err.Error()})
			continue
		}
		ps = append(ps, pending{res, id})
	}
	for _, p := range ps {
		if err := p.res.Wait(ctx); err != nil {
			r.add(RoleSend, proc, inc, Event{Kind: KindFailed, Group: group, Payload: p.id, Err: err.Error()})
			continue
		}
		ok++
		r.add(RoleSend, proc, inc, Event{Kind: KindSent, Group: group, Epoch: p.res.Epoch(), Seq: p.res.Seq(), Payload: p.id})
	}
	return ok
}

// handler returns a Run handler that records deliveries and acks of
// receiver proc/inc; fail, when set, decides a Nack.
func (r *recorder) handler(proc string, inc int, fail func(*ordered.Message) error) ordered.Handler {
	return func(ctx context.Context, m *ordered.Message) error {
		r.add(RoleReceive, proc, inc, Event{Kind: KindDelivered, Group: m.Group, Epoch: m.Epoch, Seq: m.Seq, Payload: string(m.Body), Unordered: m.Unordered})
		if fail != nil {
			if err := fail(m); err != nil {
				return err
			}
		}
		r.acks.Add(1)
		return nil
	}
}

// run runs q.Run with h until stop is closed; the returned func stops it
// and waits.
func run(t *testing.T, q *ordered.Queue, h ordered.Handler) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- q.Run(ctx, h) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			err := <-done
			if !errors.Is(err, ordered.ErrClosed) {
				assert.NoError(t, err, "Run")
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// waitFor polls cond for up to d.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	end := time.Now().Add(d)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("waited %v for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// delivered counts recorded deliveries that are not Unordered.
// handedOut counts every delivery, those flagged Unordered included.
func (r *recorder) handedOut() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, h := range r.hs {
		for _, ev := range h.Events {
			if ev.Kind == KindDelivered {
				n++
			}
		}
	}
	return n
}

func (r *recorder) delivered() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, h := range r.hs {
		for _, ev := range h.Events {
			if ev.Kind == KindDelivered && !ev.Unordered {
				n++
			}
		}
	}
	return n
}

// waitDelivered waits up to d until the checker finds nothing wrong with
// what was recorded so far: every Send that returned nil was delivered. A
// count of deliveries does not say as much: failed Sends whose messages
// reached the queue anyway are delivered too and make up for ones still on
// their way. On timeout it says what is missing and what the receiver q
// reports.
func (r *recorder) waitDelivered(t *testing.T, d time.Duration, q *ordered.Queue) {
	t.Helper()
	end := time.Now().Add(d)
	for {
		rep := Check(r.histories(), Config{})
		if rep.OK() {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("waited %v for every sent message delivered: first missing %v (%s); receiver stats %+v",
				d, rep.First(), rep.Figures(), q.Stats().Receive)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// check runs the checker on what was recorded and requires no violation.
func (r *recorder) check(t *testing.T, cfg Config) *Report {
	t.Helper()
	rep := Check(r.histories(), cfg)
	require.True(t, rep.OK(), "want no violation, first: %v (%s)", rep.First(), rep.Figures())
	return rep
}

// flaky is a store that fails every call while down is set.
type flaky struct {
	seqstore.Store
	down  atomic.Bool
	fails atomic.Int64
}

var errOutage = errors.New("crashtest: injected store outage")

func (f *flaky) err() error {
	if f.down.Load() {
		f.fails.Add(1)
		return errOutage
	}
	return nil
}

func (f *flaky) Reserve(ctx context.Context, reqs []seqstore.ReserveRequest) ([]seqstore.Reservation, error) {
	if err := f.err(); err != nil {
		return nil, err
	}
	return f.Store.Reserve(ctx, reqs)
}

func (f *flaky) Sent(ctx context.Context, marks []seqstore.SentMark) error {
	if err := f.err(); err != nil {
		return err
	}
	return f.Store.Sent(ctx, marks)
}

func (f *flaky) Pending(ctx context.Context, q string) ([]seqstore.Entry, error) {
	if err := f.err(); err != nil {
		return nil, err
	}
	return f.Store.Pending(ctx, q)
}

func (f *flaky) Cursors(ctx context.Context, streams []seqstore.Stream) ([]seqstore.Cursor, error) {
	if err := f.err(); err != nil {
		return nil, err
	}
	return f.Store.Cursors(ctx, streams)
}

func (f *flaky) Advance(ctx context.Context, b []seqstore.Advance) error {
	if err := f.err(); err != nil {
		return err
	}
	return f.Store.Advance(ctx, b)
}
