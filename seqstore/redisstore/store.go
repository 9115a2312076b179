package redisstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/inorder/inorder/internal/batcher"
	"github.com/inorder/inorder/seqstore"
)

// DefaultPrefix is the key prefix used when Options.Prefix is empty.
const DefaultPrefix = "inorder:"

const (
	defaultFlushers  = 4
	maxBatchCalls    = 256
	maxPipelineBytes = 16 << 20
	maxPrefixLen     = 64
)

// Options configures a Store. The zero value (or a nil *Options) means the
// defaults.
type Options struct {
	// Prefix starts every key. Default DefaultPrefix. It must be 1..64 bytes
	// of [A-Za-z0-9:._/-]; braces are refused because they would break the
	// hash tags.
	Prefix string
	// Flushers is how many pipelines may be in flight at once. Default 4.
	Flushers int
	// Logger receives debug and warning messages; nil discards them. Keys'
	// values, bodies and client options are never logged.
	Logger *slog.Logger
}

func (o *Options) validate() error {
	if len(o.Prefix) > maxPrefixLen {
		return fmt.Errorf("redisstore: prefix is %d bytes, at most %d", len(o.Prefix), maxPrefixLen)
	}
	for i := 0; i < len(o.Prefix); i++ {
		c := o.Prefix[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
			c == ':' || c == '.' || c == '_' || c == '/' || c == '-') {
			return fmt.Errorf("redisstore: prefix %q: byte %q not allowed (want [A-Za-z0-9:._/-])", o.Prefix, c)
		}
	}
	if o.Flushers < 0 {
		return fmt.Errorf("redisstore: Flushers must not be negative, got %d", o.Flushers)
	}
	return nil
}

// Stats counts the work a Store did since New.
type Stats struct {
	// Calls is the number of script calls sent (Reserve, Sent, Cursors,
	// Advance, Park and Unpark each count one, whatever their number of
	// streams; on a cluster one per stream, a check before a call of
	// several streams, and the index update of a Park).
	Calls uint64
	// RoundTrips is the number of pipelines sent, retries included. On a
	// cluster one pipeline reaches every node it involves, in parallel.
	RoundTrips uint64
}

// Store is a seqstore.Store in Redis. Create it with New.
type Store struct {
	client  redis.UniversalClient
	prefix  string
	sharded bool
	log     *slog.Logger

	flushes *batcher.Batcher[*op]

	mu     sync.RWMutex // guards closed
	closed bool
	// closing is closed by Close, which then waits for watches: the
	// goroutines of WatchLeases.
	closing chan struct{}
	watches sync.WaitGroup

	calls, roundTrips atomic.Uint64
}

var _ seqstore.Store = (*Store)(nil)

// New returns a Store over client. The client stays owned by the caller:
// Close does not close it. A *redis.ClusterClient or *redis.Ring switches to
// the cluster rules described in the package documentation.
func New(client redis.UniversalClient, opts *Options) (*Store, error) {
	if client == nil {
		return nil, errors.New("redisstore: nil client")
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	if err := o.validate(); err != nil {
		return nil, err
	}
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	if o.Flushers == 0 {
		o.Flushers = defaultFlushers
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	// A Ring shards keys like a cluster (by hash tag) but would not refuse
	// a script touching another shard's keys: treat both as sharded.
	var sharded bool
	switch client.(type) {
	case *redis.ClusterClient, *redis.Ring:
		sharded = true
	}
	s := &Store{
		client:  client,
		prefix:  o.Prefix,
		sharded: sharded,
		log:     o.Logger,
		closing: make(chan struct{}),
	}
	var err error
	s.flushes, err = batcher.New(&batcher.Options{MaxHandlers: o.Flushers, MaxItems: maxBatchCalls, MaxSize: maxPipelineBytes}, s.flush)
	if err != nil {
		return nil, fmt.Errorf("redisstore: %w", err)
	}
	return s, nil
}

// Stats returns the counters since New.
func (s *Store) Stats() Stats {
	return Stats{Calls: s.calls.Load(), RoundTrips: s.roundTrips.Load()}
}

// Close waits until every call already submitted was sent, and ends the
// watches of WatchLeases. It does not close the client. Later calls return seqstore.ErrClosed.
func (s *Store) Close() error {
	s.mu.Lock()
	if !s.closed {
		close(s.closing)
	}
	s.closed = true
	s.mu.Unlock()
	s.watches.Wait()
	s.flushes.Shutdown()
	return nil
}

func (s *Store) isClosed() bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.closed
}

func (s *Store) key(st seqstore.Stream, kind string) string {
	return s.prefix + "{" + st.Key() + "}:" + kind
}

func (s *Store) indexKey(queue string) string {
	return s.prefix + "pending:{" + queueKey(queue) + "}"
}

func (s *Store) parkIndexKey(queue string) string {
	return s.prefix + "parked:{" + queueKey(queue) + "}"
}

// queueKey is a queue's part of its streams' keys.
func queueKey(queue string) string {
	return strings.TrimSuffix(seqstore.Stream{Queue: queue}.Key(), "/")
}

// Reserve implements seqstore.Store. On a single node the call is one
// script, all or nothing. On a cluster each stream is one script: a call of
// several streams is first checked (one dry-run script per stream, in one
// round trip; a failure there writes nothing), then applied stream by
// stream; if another writer makes a stream fail between the check and the
// write, the *seqstore.BatchError reports the requests that took effect as
// nil, and their Reservations are returned with it.
func (s *Store) Reserve(ctx context.Context, reqs []seqstore.ReserveRequest) ([]seqstore.Reservation, error) {
	if err := seqstore.CheckReserve(reqs); err != nil {
		return nil, fmt.Errorf("redisstore: reserve: %w", err)
	}
	if len(reqs) == 0 {
		return nil, nil
	}
	name := callName(len(reqs), reqs[0].Stream)
	parts := s.parts(len(reqs), func(i int) seqstore.Stream { return reqs[i].Stream })
	if len(parts) > 1 {
		if err := s.check(ctx, parts, len(reqs), func(ri []int) *call { return s.reserveCall(reqs, ri, true) }); err != nil {
			return nil, fmt.Errorf("redisstore: reserve %s: %w", name, err)
		}
	}
	o := &op{}
	for _, ri := range parts {
		o.calls = append(o.calls, s.reserveCall(reqs, ri, false))
	}
	for _, r := range reqs {
		for _, b := range r.Journal {
			o.bytes += len(b)
		}
	}
	if err := s.do(ctx, o); err != nil {
		return nil, fmt.Errorf("redisstore: reserve %s: %w", name, err)
	}
	out := make([]seqstore.Reservation, len(reqs))
	errs, err := outcomes(o, len(reqs), func(c *call, vals []any) error {
		if len(vals) != 2*len(c.idx) {
			return fmt.Errorf("%w: reserve reply of %d values for %d requests", seqstore.ErrCorrupt, len(vals), len(c.idx))
		}
		for k, i := range c.idx {
			es, _ := vals[2*k].(string)
			ls, _ := vals[2*k+1].(string)
			epoch, err1 := seqstore.ParseNum(es)
			last, err2 := seqstore.ParseNum(ls)
			if errors.Join(err1, err2) != nil || epoch == 0 {
				return fmt.Errorf("%w: send state of %s: epoch %q last %q", seqstore.ErrCorrupt, reqs[i].Stream, es, ls)
			}
			out[i] = seqstore.Reservation{Epoch: epoch, First: last + 1}
		}
		return nil
	})
	if err == nil {
		err = followUpsErr(o)
	}
	if err != nil {
		return nil, fmt.Errorf("redisstore: reserve %s: %w", name, err)
	}
	if errs != nil {
		if len(parts) == 1 {
			out = nil
		}
		return out, fmt.Errorf("redisstore: reserve %s: %w", name, &seqstore.BatchError{Errs: errs})
	}
	return out, nil
}

// reserveCall builds the reserve script call for requests ri of reqs.
func (s *Store) reserveCall(reqs []seqstore.ReserveRequest, ri []int, dry bool) *call {
	pos := map[seqstore.Stream]int{} // 1-based, in order of first appearance
	var streams []seqstore.Stream
	journaled := map[seqstore.Stream]bool{}
	for _, i := range ri {
		st := reqs[i].Stream
		if pos[st] == 0 {
			streams = append(streams, st)
			pos[st] = len(streams)
		}
		if reqs[i].Journal != nil {
			journaled[st] = true
		}
	}
	keys := make([]string, 0, 2*len(streams)+1)
	for _, st := range streams {
		keys = append(keys, s.key(st, "send"), s.key(st, "journal"))
	}
	args := []any{flag(dry), strconv.Itoa(len(streams))}
	index := map[string]int{} // queue -> position of its index in keys
	c := &call{script: reserveScript, idx: ri}
	for _, st := range streams {
		ip := 0
		if journaled[st] {
			if s.sharded {
				if !dry {
					c.then = append(c.then, &call{script: indexAddScript, keys: []string{s.indexKey(st.Queue)}, args: []any{st.Key()}})
				}
			} else {
				if index[st.Queue] == 0 {
					keys = append(keys, s.indexKey(st.Queue))
					index[st.Queue] = len(keys)
				}
				ip = index[st.Queue]
			}
		}
		args = append(args, strconv.FormatUint(seqstore.NewEpoch(time.Now()), 10), st.Key(), strconv.Itoa(ip))
	}
	args = append(args, strconv.Itoa(len(ri)))
	for _, i := range ri {
		r := reqs[i]
		args = append(args, strconv.Itoa(pos[r.Stream]), strconv.Itoa(r.N), strconv.Itoa(len(r.Journal)))
		for _, b := range r.Journal {
			args = append(args, b)
		}
	}
	c.keys, c.args = keys, args
	return c
}

// Sent implements seqstore.Store. A mark whose journal key holds a foreign
// value is skipped and named in a *seqstore.BatchError (the other marks
// took effect).
func (s *Store) Sent(ctx context.Context, marks []seqstore.SentMark) error {
	if err := seqstore.CheckSent(marks); err != nil {
		return fmt.Errorf("redisstore: sent: %w", err)
	}
	var some []int // the marks with seqs
	for i, m := range marks {
		if len(m.Seqs) > 0 {
			some = append(some, i)
		}
	}
	if len(some) == 0 {
		return nil
	}
	name := callName(len(marks), marks[some[0]].Stream)
	o := &op{}
	for _, part := range s.parts(len(some), func(k int) seqstore.Stream { return marks[some[k]].Stream }) {
		ri := make([]int, len(part))
		for k, j := range part {
			ri[k] = some[j]
		}
		o.calls = append(o.calls, s.sentCall(marks, ri))
	}
	if err := s.do(ctx, o); err != nil {
		return fmt.Errorf("redisstore: sent %s: %w", name, err)
	}
	var errs []error
	for _, c := range o.calls {
		vals, err := c.cmd.Slice()
		if err != nil {
			return fmt.Errorf("redisstore: sent %s: %w", name, mapErr(err))
		}
		if len(vals) != len(c.idx) {
			return fmt.Errorf("redisstore: sent %s: %w: %d statuses for %d marks", name, seqstore.ErrCorrupt, len(vals), len(c.idx))
		}
		for k, i := range c.idx {
			if st, _ := vals[k].(string); st != "" {
				if errs == nil {
					errs = make([]error, len(marks))
				}
				errs[i] = statusErr(vals[k])
			}
		}
	}
	if errs != nil {
		return fmt.Errorf("redisstore: sent %s: %w", name, &seqstore.BatchError{Errs: errs})
	}
	return nil
}

// sentCall builds the sent script call for marks ri.
func (s *Store) sentCall(marks []seqstore.SentMark, ri []int) *call {
	keys := make([]string, 0, len(ri)+1)
	for _, i := range ri {
		keys = append(keys, s.key(marks[i].Stream, "journal"))
	}
	args := []any{strconv.Itoa(len(ri))}
	index := map[string]int{}
	for _, i := range ri {
		m := marks[i]
		ip := 0
		if !s.sharded {
			if index[m.Stream.Queue] == 0 {
				keys = append(keys, s.indexKey(m.Stream.Queue))
				index[m.Stream.Queue] = len(keys)
			}
			ip = index[m.Stream.Queue]
		}
		args = append(args, m.Stream.Key(), strconv.Itoa(ip), strconv.Itoa(len(m.Seqs)))
		for _, q := range m.Seqs {
			args = append(args, strconv.FormatUint(q, 10))
		}
	}
	return &call{script: sentScript, keys: keys, args: args, idx: ri}
}

// Cursors implements seqstore.Store: one script on a single node, one per
// stream on a cluster, in one round trip. A stream whose cursor key holds
// a foreign or malformed value fails alone with seqstore.ErrCorrupt.
func (s *Store) Cursors(ctx context.Context, streams []seqstore.Stream) ([]seqstore.Cursor, error) {
	out := make([]seqstore.Cursor, len(streams))
	var errs []error
	fail := func(i int, err error) {
		if errs == nil {
			errs = make([]error, len(streams))
		}
		errs[i] = err
	}
	var valid []int
	for i, st := range streams {
		if err := st.Validate(); err != nil {
			fail(i, err)
			continue
		}
		valid = append(valid, i)
	}
	if len(valid) > 0 {
		o := &op{}
		for _, part := range s.parts(len(valid), func(k int) seqstore.Stream { return streams[valid[k]] }) {
			c := &call{script: cursorsScript, idx: make([]int, len(part))}
			for k, j := range part {
				c.idx[k] = valid[j]
				c.keys = append(c.keys, s.key(streams[valid[j]], "cursor"))
			}
			o.calls = append(o.calls, c)
		}
		if err := s.do(ctx, o); err != nil {
			return nil, fmt.Errorf("redisstore: cursors: %w", err)
		}
		for _, c := range o.calls {
			vals, err := c.cmd.Slice()
			if err == nil && len(vals) != len(c.idx) {
				err = fmt.Errorf("%w: %d cursors for %d streams", seqstore.ErrCorrupt, len(vals), len(c.idx))
			}
			if err != nil {
				return nil, fmt.Errorf("redisstore: cursors: %w", mapErr(err))
			}
			for k, i := range c.idx {
				raw, ok := vals[k].([]any)
				if !ok {
					fail(i, fmt.Errorf("cursor of %s: %w", streams[i], statusErr(vals[k])))
					continue
				}
				if out[i], err = parseCursor(raw); err != nil {
					fail(i, fmt.Errorf("cursor of %s: %w", streams[i], err))
				}
			}
		}
	}
	if errs != nil {
		return out, fmt.Errorf("redisstore: cursors: %w", &seqstore.BatchError{Errs: errs})
	}
	return out, nil
}

// Advance implements seqstore.Store. On a single node the batch is one
// script, all or nothing. On a cluster a batch of several streams is first
// checked (one dry-run script per stream, in one round trip; a conflict
// there writes nothing), then applied stream by stream: each stream's
// compare-and-set is atomic, the batch is not. If another writer moves one
// of the streams between the check and the writes, the other streams of
// the batch have moved, and the *seqstore.BatchError reports them as nil
// (applied) beside the conflicting ones.
func (s *Store) Advance(ctx context.Context, batch []seqstore.Advance) error {
	if err := seqstore.CheckAdvance(batch); err != nil {
		return fmt.Errorf("redisstore: advance: %w", err)
	}
	if len(batch) == 0 {
		return nil
	}
	parts := s.parts(len(batch), func(i int) seqstore.Stream { return batch[i].Stream })
	if len(parts) > 1 {
		if err := s.check(ctx, parts, len(batch), func(ri []int) *call { return s.advanceCall(batch, ri, true) }); err != nil {
			return fmt.Errorf("redisstore: advance: %w", err)
		}
	}
	o := &op{}
	for _, ri := range parts {
		o.calls = append(o.calls, s.advanceCall(batch, ri, false))
	}
	if err := s.do(ctx, o); err != nil {
		return fmt.Errorf("redisstore: advance: %w", err)
	}
	var more []seqstore.Stream // streams whose passed parks the scripts did not all drop
	errs, err := outcomes(o, len(batch), func(c *call, vals []any) error {
		if len(vals) != len(c.idx) {
			return fmt.Errorf("%w: advance reply of %d values for %d streams", seqstore.ErrCorrupt, len(vals), len(c.idx))
		}
		for k, i := range c.idx {
			if m, _ := vals[k].(int64); m != 0 {
				more = append(more, batch[i].Stream)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("redisstore: advance: %w", err)
	}
	for _, st := range more {
		if err := s.dropPassed(ctx, st); err != nil {
			// The cursors moved: report that. What is left is below the
			// cursor, which Unpark never returns, and the next Advance of
			// the stream or ParkedStreams drops it.
			s.log.WarnContext(ctx, "redisstore: dropping passed parks failed; the next advance or parked-streams scan retries", "stream", st.String(), "err", err)
		}
	}
	if errs != nil {
		return fmt.Errorf("redisstore: advance: %w", &seqstore.BatchError{Errs: errs})
	}
	return nil
}

func (s *Store) advanceCall(batch []seqstore.Advance, ri []int, dry bool) *call {
	c := &call{script: advanceScript, idx: ri, keys: make([]string, 3*len(ri), 3*len(ri)+1), args: make([]any, 1, 1+9*len(ri))}
	c.args[0] = flag(dry)
	f := func(v uint64) string { return strconv.FormatUint(v, 10) }
	var idx indexPositions
	for k, i := range ri {
		a := batch[i]
		name := a.Stream.Key()
		base := s.prefix + "{" + name + "}:"
		c.keys[3*k], c.keys[3*k+1], c.keys[3*k+2] = base+"cursor", base+"park", base+"parkbody"
		c.args = append(c.args, f(a.From.Epoch), f(a.From.Next), f(a.From.Owner),
			f(a.To.Epoch), f(a.To.Next), f(a.To.Owner), seqstore.FormatSkipped(a.To.Skipped))
		if s.sharded {
			// The park index lives on another slot: ParkedStreams prunes it.
			c.args = append(c.args, "0", "")
			continue
		}
		ip := idx.pos(a.Stream.Queue, func() int {
			c.keys = append(c.keys, s.parkIndexKey(a.Stream.Queue))
			return len(c.keys)
		})
		c.args = append(c.args, strconv.Itoa(ip), name)
	}
	return c
}

// indexPositions maps queues to the position of their index key among a
// script's KEYS. A call spans few queues: a slice, and a map beyond 8.
type indexPositions struct {
	queues []string
	at     []int
	m      map[string]int
}

// pos returns the position of queue's index key, calling add (which
// appends the key and returns its position) the first time.
func (p *indexPositions) pos(queue string, add func() int) int {
	if p.m != nil {
		if at, ok := p.m[queue]; ok {
			return at
		}
	} else if i := slices.Index(p.queues, queue); i >= 0 {
		return p.at[i]
	}
	at := add()
	if p.m == nil && len(p.queues) < 8 {
		p.queues, p.at = append(p.queues, queue), append(p.at, at)
		return at
	}
	if p.m == nil {
		p.m = make(map[string]int, 16)
		for i, q := range p.queues {
			p.m[q] = p.at[i]
		}
	}
	p.m[queue] = at
	return at
}

// parts splits the n requests of a call into the groups that one script
// can serve: all of them on a single node; on a cluster, one group per
// stream (its keys share a hash tag), in order of first appearance. Each
// group lists request indexes in ascending order.
func (s *Store) parts(n int, stream func(i int) seqstore.Stream) [][]int {
	all := make([]int, n)
	for i := range all {
		all[i] = i
	}
	if !s.sharded {
		return [][]int{all}
	}
	pos := map[seqstore.Stream]int{}
	var parts [][]int
	for i := range n {
		st := stream(i)
		k, ok := pos[st]
		if !ok {
			k = len(parts)
			pos[st] = k
			parts = append(parts, nil)
		}
		parts[k] = append(parts[k], i)
	}
	return parts
}

// check runs the dry-run calls of a cluster call of n requests split into
// parts, in one round trip: nil when every part would apply, else the
// call's *seqstore.BatchError (nothing was written).
func (s *Store) check(ctx context.Context, parts [][]int, n int, dry func(ri []int) *call) error {
	o := &op{}
	for _, ri := range parts {
		o.calls = append(o.calls, dry(ri))
	}
	if err := s.do(ctx, o); err != nil {
		return err
	}
	errs, err := outcomes(o, n, nil)
	if err != nil {
		return err
	}
	return seqstore.Abort(errs)
}

// outcomes reads the replies of o's scripts, which report {"ok", ...} or
// {"fail", status per request}, into the errors of a call of n requests:
// nil when every script applied (after parse reads an ok reply), else one
// error per request: nil for those of scripts that applied, the status's
// error for the others. An error of a script itself (network, timeout)
// leaves every outcome unknown and is returned as such.
func outcomes(o *op, n int, parse func(c *call, vals []any) error) ([]error, error) {
	var errs []error
	for _, c := range o.calls {
		vals, err := c.cmd.Slice()
		if err != nil {
			return nil, mapErr(err)
		}
		var tag string
		if len(vals) > 0 {
			tag, _ = vals[0].(string)
		}
		switch {
		case tag == "ok" && parse != nil:
			if err := parse(c, vals[1:]); err != nil {
				return nil, err
			}
		case tag == "ok":
		case tag == "fail" && len(vals) == 1+len(c.idx):
			if errs == nil {
				errs = make([]error, n)
			}
			for k, i := range c.idx {
				errs[i] = statusErr(vals[1+k])
			}
		default:
			return nil, fmt.Errorf("%w: unexpected script reply %v", seqstore.ErrCorrupt, vals)
		}
	}
	return errs, nil
}

// followUpsErr returns the first failed follow-up call of o.
func followUpsErr(o *op) error {
	for _, c := range o.calls {
		for _, t := range c.then {
			if t.cmd == nil {
				return errors.New("pending index update not sent")
			}
			if err := t.cmd.Err(); err != nil {
				return fmt.Errorf("pending index update: %w", mapErr(err))
			}
		}
	}
	return nil
}

// statusErr turns a script's status for one request into its error: ""
// means the request was fine but its call failed (seqstore.ErrAborted).
func statusErr(v any) error {
	st, _ := v.(string)
	switch {
	case st == "":
		return seqstore.ErrAborted
	case strings.HasPrefix(st, conflictTag):
		return fmt.Errorf("%w: %s", seqstore.ErrConflict, strings.TrimSpace(strings.TrimPrefix(st, conflictTag)))
	case strings.HasPrefix(st, overflowTag):
		return fmt.Errorf("%w: %s", seqstore.ErrOverflow, strings.TrimSpace(strings.TrimPrefix(st, overflowTag)))
	case strings.HasPrefix(st, corruptTag):
		return fmt.Errorf("%w: %s", seqstore.ErrCorrupt, strings.TrimSpace(strings.TrimPrefix(st, corruptTag)))
	}
	return fmt.Errorf("%w: unexpected script status %v", seqstore.ErrCorrupt, v)
}

func flag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// callName names a call's streams in errors: the stream, or how many and
// the first.
func callName(n int, first seqstore.Stream) string {
	if n == 1 {
		return first.String()
	}
	return fmt.Sprintf("%d streams from %s", n, first)
}

// Pending implements seqstore.Store. It reads the queue's index, then every
// listed stream's journal, in pipelines of a few hundred streams.
func (s *Store) Pending(ctx context.Context, queue string) ([]seqstore.Entry, error) {
	if err := (seqstore.Stream{Queue: queue}).Validate(); err != nil {
		return nil, fmt.Errorf("redisstore: pending: %w", err)
	}
	s.mu.RLock()
	closed := s.closed
	s.mu.RUnlock()
	if closed {
		return nil, fmt.Errorf("redisstore: pending: %w", seqstore.ErrClosed)
	}
	index := s.indexKey(queue)
	streams, err := s.listed(ctx, index, queue)
	if err != nil {
		return nil, fmt.Errorf("redisstore: pending %q: %w", queue, err)
	}
	var out []seqstore.Entry
	var empty []seqstore.Stream
	const chunk = 256
	for lo := 0; lo < len(streams); lo += chunk {
		part := streams[lo:min(lo+chunk, len(streams))]
		pipe := s.client.Pipeline()
		jcmds := make([]*redis.MapStringStringCmd, len(part))
		scmds := make([]*redis.SliceCmd, len(part))
		for i, st := range part {
			jcmds[i] = pipe.HGetAll(ctx, s.key(st, "journal"))
			scmds[i] = pipe.HMGet(ctx, s.key(st, "send"), "epoch", "last")
		}
		_, _ = pipe.Exec(ctx)
		s.roundTrips.Add(1)
		for i, st := range part {
			entries, err := journalEntries(st, jcmds[i], scmds[i])
			if err != nil {
				return nil, fmt.Errorf("redisstore: pending %q: %w", queue, err)
			}
			if len(entries) == 0 {
				empty = append(empty, st)
			}
			out = append(out, entries...)
		}
	}
	if len(empty) > 0 {
		if err := s.prune(ctx, index, empty, "journal"); err != nil {
			// The entries were read; a failed prune only leaves the index
			// larger than needed.
			s.log.WarnContext(ctx, "redisstore: pruning the pending index failed", "queue", queue, "err", err)
		}
	}
	return out, nil
}

// listed reads the streams that index lists, sorted by stream key; every
// member must be a stream of queue.
func (s *Store) listed(ctx context.Context, index, queue string) ([]seqstore.Stream, error) {
	var members []string
	var cursor uint64
	for {
		keys, next, err := s.client.SScan(ctx, index, cursor, "", 1000).Result()
		s.roundTrips.Add(1)
		if err != nil {
			return nil, mapErr(err)
		}
		members = append(members, keys...)
		if cursor = next; cursor == 0 {
			break
		}
	}
	sort.Strings(members)
	members = compactStrings(members)
	streams := make([]seqstore.Stream, len(members))
	for i, m := range members {
		st, err := seqstore.ParseKey(m)
		if err != nil {
			return nil, fmt.Errorf("index member %q: %w", m, err)
		}
		if st.Queue != queue {
			return nil, fmt.Errorf("%w: index lists stream %s of another queue", seqstore.ErrCorrupt, st)
		}
		streams[i] = st
	}
	return streams, nil
}

func compactStrings(s []string) []string {
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}

func journalEntries(st seqstore.Stream, jc *redis.MapStringStringCmd, sc *redis.SliceCmd) ([]seqstore.Entry, error) {
	journal, err := jc.Result()
	if err != nil {
		return nil, fmt.Errorf("journal of %s: %w", st, mapErr(err))
	}
	if len(journal) == 0 {
		return nil, nil
	}
	send, err := sc.Result()
	if err != nil {
		return nil, fmt.Errorf("send state of %s: %w", st, mapErr(err))
	}
	es, _ := send[0].(string)
	ls, _ := send[1].(string)
	epoch, err1 := seqstore.ParseNum(es)
	last, err2 := seqstore.ParseNum(ls)
	if errors.Join(err1, err2) != nil || epoch == 0 {
		return nil, fmt.Errorf("%w: %s has journal entries but send state epoch %q last %q", seqstore.ErrCorrupt, st, es, ls)
	}
	out := make([]seqstore.Entry, 0, len(journal))
	for f, body := range journal {
		seq, err := seqstore.ParseNum(f)
		if err != nil || seq == 0 || seq > last {
			return nil, fmt.Errorf("%w: journal of %s has entry %q outside 1..%d", seqstore.ErrCorrupt, st, f, last)
		}
		out = append(out, seqstore.Entry{Stream: st, Epoch: epoch, Seq: seq, Body: []byte(body)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Seq < out[j].Seq })
	return out, nil
}

// prune removes from index the streams whose key of kind ("journal",
// "park") is gone: Redis deletes an emptied hash or sorted set. On a single
// node one script checks and removes atomically. On a cluster the check and
// the removal are on different slots: remove, re-check, and put the stream
// back if a writer filled its key meanwhile (Reserve and Park write the key
// before they add to the index, so one of the two sees the other).
func (s *Store) prune(ctx context.Context, index string, streams []seqstore.Stream, kind string) error {
	pipe := s.client.Pipeline()
	if !s.sharded {
		cmds := make([]*redis.Cmd, len(streams))
		for i, st := range streams {
			cmds[i] = pruneScript.Eval(ctx, pipe, []string{s.key(st, kind), index}, st.Key())
		}
		_, err := pipe.Exec(ctx)
		s.roundTrips.Add(1)
		return err
	}
	for _, st := range streams {
		pipe.SRem(ctx, index, st.Key())
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return err
	}
	pipe = s.client.Pipeline()
	exists := make([]*redis.IntCmd, len(streams))
	for i, st := range streams {
		exists[i] = pipe.Exists(ctx, s.key(st, kind))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return err
	}
	pipe = s.client.Pipeline()
	readd := 0
	for i, st := range streams {
		if exists[i].Val() > 0 {
			pipe.SAdd(ctx, index, st.Key())
			readd++
		}
	}
	s.roundTrips.Add(2)
	if readd == 0 {
		return nil
	}
	_, err := pipe.Exec(ctx)
	s.roundTrips.Add(1)
	return err
}

func parseCursor(raw []any) (seqstore.Cursor, error) {
	var f [4]string
	present := 0
	for i, v := range raw {
		if v == nil {
			continue
		}
		s, ok := v.(string)
		if !ok {
			return seqstore.Cursor{}, fmt.Errorf("%w: cursor field %d has type %T", seqstore.ErrCorrupt, i, v)
		}
		f[i] = s
		present++
	}
	if present == 0 {
		return seqstore.Cursor{}, nil
	}
	if present != 4 {
		return seqstore.Cursor{}, fmt.Errorf("%w: cursor hash lacks %d of its 4 fields", seqstore.ErrCorrupt, 4-present)
	}
	var c seqstore.Cursor
	var errs [3]error
	c.Epoch, errs[0] = seqstore.ParseNum(f[0])
	c.Next, errs[1] = seqstore.ParseNum(f[1])
	c.Owner, errs[2] = seqstore.ParseNum(f[2])
	if err := errors.Join(errs[:]...); err != nil {
		return seqstore.Cursor{}, fmt.Errorf("cursor hash: %w", err)
	}
	sk, err := seqstore.ParseSkipped(f[3])
	if err != nil {
		return seqstore.Cursor{}, err
	}
	c.Skipped = sk
	return c, nil
}

// mapErr turns Redis's complaints about stored data into seqstore
// sentinels; other errors (network, timeouts) pass unchanged.
func mapErr(err error) error {
	if err != nil && strings.Contains(err.Error(), "WRONGTYPE") {
		return fmt.Errorf("%w: foreign value at a store key: %w", seqstore.ErrCorrupt, err)
	}
	return err
}
