package mnstest

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// Default credentials accepted when Options leaves them empty.
const (
	DefaultAccessKeyID     = "inorder"
	DefaultAccessKeySecret = "inorder-secret"
)

// MinRemoteSecretLen is the shortest AccessKeySecret a server accepts on an
// address that is not loopback: 16 bytes, so that a secret of one word or a
// few characters cannot be guessed by whoever reaches the port.
const MinRemoteSecretLen = 16

// Options configures a Server. A nil *Options means all defaults.
type Options struct {
	// Addr is the TCP address to listen on (default "127.0.0.1:0", a free
	// loopback port). The host must be an IPv4 literal: the SDK accepts only
	// endpoints with exactly four dots. An unspecified host (0.0.0.0)
	// listens everywhere and is advertised as 127.0.0.1. A host that is
	// not loopback is refused unless AccessKeySecret is set to a secret of
	// at least MinRemoteSecretLen bytes other than the published
	// DefaultAccessKeySecret: anyone who can reach the port could otherwise
	// use the server.
	Addr string
	// AccessKeyID and AccessKeySecret are the one credential the server
	// accepts (defaults DefaultAccessKeyID and DefaultAccessKeySecret).
	AccessKeyID, AccessKeySecret string
	// AccountID is the account the server reports as the owner of topics
	// and the subscriber of subscriptions (default DefaultAccountID).
	AccountID string
	// ReadTimeout bounds the reading of a request, headers and body
	// (default 30s); a client that sends slower gets an error answer or a
	// closed connection. Reading the headers alone is bounded by the
	// smaller of it and 10s. Long polls are not affected.
	ReadTimeout time.Duration
	// MaxQueues and MaxTopics cap how many queues and topics may exist
	// (default 1,000 each, the service's quota per region); CreateQueue and
	// CreateTopic beyond them answer 400 QueueNumExceededLimit and
	// TopicNumExceededLimit (codes of our choosing, after the MNS .NET
	// SDK's QueueNumExceededLimitException: the service documents none).
	// Subscriptions are capped at the service's 100 per topic.
	MaxQueues, MaxTopics int
	// MaxMessages and MaxMessageBytes cap the messages stored in all queues
	// together, and the sum of their bodies (defaults 1,000,000 and 1 GiB;
	// the service has no such limit, the emulator's memory does). A send
	// beyond them answers 400 MessageNumExceededLimit (our code) and
	// stores nothing. Topic pushes count from their publish, while
	// Faults.PushDelay holds them back: one beyond the caps fails at once
	// (Stats.PushFailed).
	MaxMessages     int
	MaxMessageBytes int64
	// Shards is the number of internal shards per queue (default 4, at most
	// 64). A message goes to a random shard; receives take from shards at
	// random, so delivery is "basically ordered" like the service's
	// standard queues. 1 makes queues deliver in send order (apart from
	// redeliveries and priorities); a FIFO queue (QueueTypeFIFO) keeps
	// each group's order with any number of shards.
	Shards int
	// ReorderWindow bounds how far a message can be overtaken: a receive
	// takes from a shard only if its oldest message is within this many
	// sends of the oldest visible message (default 16).
	ReorderWindow int
	// Seed seeds shard choice and fault injection; 0 is a fixed default, so
	// runs are reproducible when requests arrive in the same order.
	Seed int64
	// Faults injects failures from the start; SetFaults changes them later.
	Faults Faults
	// Throttle makes the server throttle requests and abnormal consumption
	// as the service does; the zero value throttles nothing.
	Throttle Throttle
	// Logger receives one debug line per request and errors (nil: discard).
	Logger *slog.Logger
	// OnPushLost, if set, is called for each topic push that never reaches
	// its queue (Faults.PushDrop, or a queue gone or too small), so that a
	// test knows the holes to expect. It is called synchronously from the
	// publish request, outside the server's locks, and must not block.
	OnPushLost func(LostPush)
}

// Faults are probabilities (0..1) and delays of injected failures. They
// apply to message operations only (send, receive, peek, delete, change
// visibility), never to queue management, so that test setup stays
// reliable. The zero value injects nothing.
type Faults struct {
	// Redeliver is the probability that a received message has its
	// visibility cut short (to under a second), so that it is delivered
	// again while its first receiver still holds it: a duplicate, and a
	// stale handle for the first receiver.
	Redeliver float64
	// Error5xx is the probability of a 500 InternalError answer, decided
	// per request: half of them before the operation takes effect, half
	// after (a send that "failed" was stored; a receive that "failed" made
	// its messages invisible). Batch sends and deletes may instead fail
	// only some of their entries.
	Error5xx float64
	// Drop is the probability that the connection is closed without an
	// answer, half of them after the operation took effect.
	Drop float64
	// Latency delays every message operation, plus a uniform random part
	// up to Jitter.
	Latency, Jitter time.Duration
	// LoseAckedSends is the probability that a sent message is thrown away
	// although its send succeeds. The service never does this (an
	// acknowledged send is stored); it stands for what nothing else
	// produces, a hole that never fills, to test a receiver's gap policy.
	// Keep it off (0) unless that is the point of the test.
	LoseAckedSends float64
	// EarlyEmpty is the probability that a receive answers 404
	// MessageNotExist at once, without looking or waiting, as the service
	// does when its long-poll limit is exceeded.
	EarlyEmpty float64
	// Faults of the pushes a topic makes to its subscribed queues, which
	// the service makes "at least once" and in no guaranteed order:
	// PushDelay delays each push by a uniform random time up to it (so
	// pushes overtake each other), PushDuplicate is the probability that
	// a push arrives twice, PushDrop the probability that it never
	// arrives, as when the service's retries fail. Dropped pushes are
	// counted (Stats.PushDropped): they are the holes a test may expect.
	PushDelay               time.Duration
	PushDuplicate, PushDrop float64
}

func (f *Faults) validate() error {
	for _, p := range []struct {
		name string
		v    float64
	}{{"Redeliver", f.Redeliver}, {"Error5xx", f.Error5xx}, {"Drop", f.Drop}, {"LoseAckedSends", f.LoseAckedSends}, {"EarlyEmpty", f.EarlyEmpty},
		{"PushDuplicate", f.PushDuplicate}, {"PushDrop", f.PushDrop}} {
		if !(p.v >= 0 && p.v <= 1) {
			return fmt.Errorf("mnstest: fault %s %v not in 0..1: %w", p.name, p.v, ErrInvalidArgument)
		}
	}
	if f.Latency < 0 || f.Jitter < 0 || f.PushDelay < 0 {
		return fmt.Errorf("mnstest: negative latency %v or jitter %v: %w", f.Latency, f.Jitter, ErrInvalidArgument)
	}
	return nil
}

func (o *Options) validate() error {
	if o.Addr == "" {
		o.Addr = "127.0.0.1:0"
	}
	host, _, err := net.SplitHostPort(o.Addr)
	if err != nil {
		return fmt.Errorf("mnstest: address %q: %w", o.Addr, err)
	}
	ip := net.ParseIP(host)
	if ip == nil || ip.To4() == nil {
		return fmt.Errorf("mnstest: address %q: host must be an IPv4 literal (the SDK rejects other endpoints): %w",
			o.Addr, ErrInvalidArgument)
	}
	if !ip.IsLoopback() && (o.AccessKeySecret == DefaultAccessKeySecret || len(o.AccessKeySecret) < MinRemoteSecretLen) {
		return fmt.Errorf("mnstest: address %q is not loopback: set an AccessKeySecret of at least %d bytes other than the published default "+
			"(got %d bytes), or anyone who reaches the port can use the server: %w", o.Addr, MinRemoteSecretLen, len(o.AccessKeySecret), ErrInvalidArgument)
	}
	if o.ReadTimeout == 0 {
		o.ReadTimeout = defaultReadTimeout
	}
	if o.MaxQueues == 0 {
		o.MaxQueues = defaultMaxQueues
	}
	if o.MaxTopics == 0 {
		o.MaxTopics = defaultMaxTopics
	}
	if o.MaxMessages == 0 {
		o.MaxMessages = defaultMaxMessages
	}
	if o.MaxMessageBytes == 0 {
		o.MaxMessageBytes = defaultMaxMessageBytes
	}
	if o.ReadTimeout < 0 || o.MaxQueues < 0 || o.MaxTopics < 0 || o.MaxMessages < 0 || o.MaxMessageBytes < 0 {
		return fmt.Errorf("mnstest: negative ReadTimeout or cap: %w", ErrInvalidArgument)
	}
	if o.AccessKeyID == "" {
		o.AccessKeyID = DefaultAccessKeyID
	}
	if o.AccessKeySecret == "" {
		o.AccessKeySecret = DefaultAccessKeySecret
	}
	if o.AccountID == "" {
		o.AccountID = DefaultAccountID
	}
	if o.Shards == 0 {
		o.Shards = 4
	}
	if o.Shards < 1 || o.Shards > maxShards {
		return fmt.Errorf("mnstest: shards %d not in 1..%d: %w", o.Shards, maxShards, ErrInvalidArgument)
	}
	if o.ReorderWindow == 0 {
		o.ReorderWindow = defaultReorderWindow
	}
	if o.ReorderWindow < 0 {
		return fmt.Errorf("mnstest: negative reorder window %d: %w", o.ReorderWindow, ErrInvalidArgument)
	}
	if o.Seed == 0 {
		o.Seed = 0x5eed
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if err := o.Throttle.validate(); err != nil {
		return err
	}
	return o.Faults.validate()
}

// Defaults of the hardening options.
const (
	defaultReadTimeout     = 30 * time.Second
	maxReadHeaderTimeout   = 10 * time.Second
	defaultMaxQueues       = 1000
	defaultMaxTopics       = 1000
	defaultMaxMessages     = 1_000_000
	defaultMaxMessageBytes = 1 << 30
)

// options is Options after validation, with the window in the type the
// queues compare with.
type options struct {
	Options
	window uint64
}

// Server is an MNS-compatible HTTP server. It is safe for concurrent use.
type Server struct {
	opts       options
	ln         net.Listener
	http       *http.Server
	endpoint   string
	tag        string // per-server prefix of message ids
	handleSeed maphash.Seed
	clockSkew  atomic.Int64 // ns added to the wall clock by Advance
	faults     atomic.Pointer[Faults]
	faultMu    sync.Mutex
	faultRng   *rand.Rand
	reqSeq     atomic.Uint64
	macs       signers
	stats      counters
	// stored and storedBytes count the messages of all queues and their
	// bodies, topic pushes on their way included, against MaxMessages and
	// MaxMessageBytes.
	stored, storedBytes atomic.Int64

	mu       sync.RWMutex
	queues   map[string]*queue
	topics   map[string]*topic
	entityID uint32 // the last id given to a queue or a topic

	done      chan struct{} // closed by Close: long polls and latency sleeps end
	closeOnce sync.Once
	closeErr  error
	serveDone chan struct{}
	handlers  sync.WaitGroup
}

// NewServer starts a server listening on opts.Addr; it serves at once.
func NewServer(opts *Options) (*Server, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if err := o.validate(); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp4", o.Addr)
	if err != nil {
		return nil, fmt.Errorf("mnstest: listen: %w", err)
	}
	s := &Server{
		opts:       options{Options: o, window: uint64(o.ReorderWindow)},
		ln:         ln,
		handleSeed: maphash.MakeSeed(),
		faultRng:   rand.New(rand.NewPCG(uint64(o.Seed), 0xfa017)),
		queues:     make(map[string]*queue),
		topics:     make(map[string]*topic),
		done:       make(chan struct{}),
		serveDone:  make(chan struct{}),
	}
	f := o.Faults
	s.faults.Store(&f)
	s.tag = string(appendHex(nil, uint64(rand.Uint32()), 8))
	addr := ln.Addr().(*net.TCPAddr)
	host := addr.IP.String()
	if addr.IP.IsUnspecified() {
		host = "127.0.0.1"
	}
	// The SDK splits the endpoint on "." and wants exactly 5 pieces
	// (client.go:182 in v1.0.11): "/." supplies the missing dot, and the
	// SDK's HTTP client normalises "/./queues/..." to "/queues/...".
	s.endpoint = "http://" + net.JoinHostPort(host, fmt.Sprint(addr.Port)) + "/."
	s.http = &http.Server{
		Handler: s,
		// ReadTimeout bounds headers and body; net/http lifts it once the
		// body is read, so long polls last their wait. No WriteTimeout:
		// it would cut them.
		ReadTimeout:       o.ReadTimeout,
		ReadHeaderTimeout: min(o.ReadTimeout, maxReadHeaderTimeout),
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(o.Logger.Handler(), slog.LevelDebug),
	}
	go func() {
		defer close(s.serveDone)
		if err := s.http.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.opts.Logger.Error("mnstest: serve", "err", err)
		}
	}()
	return s, nil
}

// Endpoint returns the endpoint to give the SDK:
// "http://127.0.0.1:PORT/." (the trailing "/." satisfies the SDK's
// endpoint check; see the package documentation).
func (s *Server) Endpoint() string { return s.endpoint }

// Addr returns the address the server listens on.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Options returns the options in force, defaults filled in. Faults are the
// ones given at start; Faults returns those in force now.
func (s *Server) Options() Options { return s.opts.Options }

// AccessKeyID returns the accepted access key id.
func (s *Server) AccessKeyID() string { return s.opts.AccessKeyID }

// AccessKeySecret returns the accepted access key secret.
func (s *Server) AccessKeySecret() string { return s.opts.AccessKeySecret }

// Close stops the listener, ends long polls (they answer MessageNotExist),
// and waits for every handler to return. It is idempotent.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		close(s.done)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.http.Shutdown(ctx); err != nil {
			s.closeErr = fmt.Errorf("mnstest: shutdown: %w", err)
			_ = s.http.Close()
		}
		<-s.serveDone
		s.handlers.Wait()
	})
	return s.closeErr
}

func (s *Server) closed() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// now is the server clock: the wall clock plus whatever Advance added, in ns.
func (s *Server) now() int64 { return time.Now().UnixNano() + s.clockSkew.Load() }

// Advance moves the server clock forward by d: delays end, visibility
// timeouts lapse and messages expire as if d had passed, and waiting long
// polls look again. Times the server reports (EnqueueTime, NextVisibleTime,
// ...) include the skew. Tests use it instead of sleeping.
func (s *Server) Advance(d time.Duration) {
	if d <= 0 {
		return
	}
	s.clockSkew.Add(int64(d))
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, q := range s.queues {
		q.mu.Lock()
		q.wake()
		q.mu.Unlock()
	}
}

// SetFaults replaces the injected faults; it applies to requests that start
// after it returns.
func (s *Server) SetFaults(f Faults) error {
	if err := f.validate(); err != nil {
		return err
	}
	s.faults.Store(&f)
	return nil
}

// Faults returns the faults in force.
func (s *Server) Faults() Faults { return *s.faults.Load() }

// CreateQueue creates a queue as the CreateQueue API does: nil attrs means
// the defaults; creating an existing queue with the same attributes
// succeeds, with other attributes it fails with ErrQueueExists.
func (s *Server) CreateQueue(name string, attrs *QueueAttributes) error {
	var a QueueAttributes
	if attrs != nil {
		a = *attrs
	}
	if s.closed() {
		return ErrClosed
	}
	_, aerr := s.createQueue(name, a.withDefaults())
	switch {
	case aerr == nil:
		return nil
	case aerr == errQueueExists:
		return fmt.Errorf("mnstest: create queue %q: %w", name, ErrQueueExists)
	case aerr == errQueueLimit:
		return fmt.Errorf("mnstest: create queue %q: %d queues exist: %w", name, s.opts.MaxQueues, ErrLimitExceeded)
	default:
		return fmt.Errorf("mnstest: create queue %q: %s: %w", name, aerr.message, ErrInvalidArgument)
	}
}

// createQueue creates the queue or reports whether an identical one exists
// (created false, nil error).
func (s *Server) createQueue(name string, a QueueAttributes) (created bool, _ *apiError) {
	if err := checkQueueName(name); err != nil {
		return false, err
	}
	if err := a.check(); err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.checkDeadLetterQueue(name, a.DeadLetterQueue, a.QueueType == QueueTypeFIFO); err != nil {
		return false, err
	}
	if q, ok := s.queues[name]; ok {
		q.mu.Lock()
		same := q.attrs == a
		q.mu.Unlock()
		if same {
			return false, nil
		}
		return false, errQueueExists
	}
	if len(s.queues) >= s.opts.MaxQueues {
		return false, errQueueLimit
	}
	s.entityID++
	s.queues[name] = newQueue(s, name, s.entityID, a, s.now())
	return true, nil
}

// checkDeadLetterQueue refuses a dead-letter queue that is the queue itself,
// does not exist, or is not of the queue's type (fifo tells it). The
// caller holds s.mu.
func (s *Server) checkDeadLetterQueue(name, dlq string, fifo bool) *apiError {
	switch {
	case dlq == "":
		return nil
	case dlq == name:
		return invalidArgument("A queue cannot be its own dead-letter queue.")
	case s.queues[dlq] == nil:
		return invalidArgument("The dead-letter queue " + dlq + " does not exist.")
	case s.queues[dlq].fifo != fifo:
		return errDeadLetterType
	}
	return nil
}

// deadLetter moves messages removed by name's dead-letter policy into the
// dead-letter queue dlq; if it no longer exists they are dropped, and
// counted. The caller holds no queue lock.
func (s *Server) deadLetter(dlq string, moved []*message, now int64) {
	if len(moved) == 0 {
		return
	}
	s.stats.deadLettered.Add(int64(len(moved)))
	d := s.queue(dlq)
	if d != nil {
		d.mu.Lock()
		if !d.deleted {
			d.advance(now)
			d.adopt(moved)
			d.mu.Unlock()
			return
		}
		d.mu.Unlock()
	}
	s.stats.deadLetterDropped.Add(int64(len(moved)))
}

// DeleteQueue deletes a queue and its messages; waiting long polls on it
// answer QueueNotExist.
func (s *Server) DeleteQueue(name string) error {
	if !s.deleteQueue(name) {
		return fmt.Errorf("mnstest: delete queue %q: %w", name, ErrQueueNotExist)
	}
	return nil
}

func (s *Server) deleteQueue(name string) bool {
	s.mu.Lock()
	q, ok := s.queues[name]
	delete(s.queues, name)
	s.mu.Unlock()
	if !ok {
		return false
	}
	q.mu.Lock()
	q.deleted = true
	q.wake()
	s.release(int64(len(q.msgs)+len(q.incoming)), q.bytes+q.incomingBytes)
	s.stats.pushFailed.Add(int64(len(q.incoming)))
	q.mu.Unlock()
	return true
}

// reserve makes room for n messages of bytes in all, within MaxMessages and
// MaxMessageBytes unless force (a move between queues, which frees as much
// as it takes). It reports whether it did.
func (s *Server) reserve(n, bytes int64, force bool) bool {
	c, b := s.stored.Add(n), s.storedBytes.Add(bytes)
	if !force && (c > int64(s.opts.MaxMessages) || b > s.opts.MaxMessageBytes) {
		s.release(n, bytes)
		return false
	}
	return true
}

// release gives back the room of n messages of bytes in all.
func (s *Server) release(n, bytes int64) {
	s.stored.Add(-n)
	s.storedBytes.Add(-bytes)
}

func (s *Server) queue(name string) *queue {
	s.mu.RLock()
	q := s.queues[name]
	s.mu.RUnlock()
	return q
}

// Queue describes one queue, with its message counts.
func (s *Server) Queue(name string) (QueueInfo, error) {
	q := s.queue(name)
	if q == nil {
		return QueueInfo{}, fmt.Errorf("mnstest: queue %q: %w", name, ErrQueueNotExist)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.advance(s.now())
	return q.info(), nil
}

// Groups describes the message groups of a FIFO queue that hold messages,
// sorted by MessageGroupId (none for a standard queue): what a test needs
// to see which message of a group is next and whether the group is
// locked.
func (s *Server) Groups(queue string) ([]GroupInfo, error) {
	q := s.queue(queue)
	if q == nil {
		return nil, fmt.Errorf("mnstest: groups of queue %q: %w", queue, ErrQueueNotExist)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.advance(s.now())
	return q.groupInfos(), nil
}

// Queues describes every queue, sorted by name.
func (s *Server) Queues() []QueueInfo {
	s.mu.RLock()
	qs := make([]*queue, 0, len(s.queues))
	for _, q := range s.queues {
		qs = append(qs, q)
	}
	s.mu.RUnlock()
	sort.Slice(qs, func(i, j int) bool { return qs[i].name < qs[j].name })
	now := s.now()
	out := make([]QueueInfo, len(qs))
	for i, q := range qs {
		q.mu.Lock()
		q.advance(now)
		out[i] = q.info()
		q.mu.Unlock()
	}
	return out
}

// draw returns true with probability p, from the seeded fault stream.
func (s *Server) draw(p float64) bool {
	if p <= 0 {
		return false
	}
	s.faultMu.Lock()
	v := s.faultRng.Float64()
	s.faultMu.Unlock()
	return v < p
}

// drawN returns a uniform value in [0, n) from the fault stream.
func (s *Server) drawN(n int64) int64 {
	if n <= 0 {
		return 0
	}
	s.faultMu.Lock()
	defer s.faultMu.Unlock()
	return s.faultRng.Int64N(n)
}
