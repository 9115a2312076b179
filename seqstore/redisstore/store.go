package redisstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/inorder/inorder/seqstore"
)

// DefaultPrefix is the key prefix used when Options.Prefix is empty.
const DefaultPrefix = "inorder:"

const (
	defaultFlushers = 4
	maxBatchCalls   = 256
	maxPrefixLen    = 64
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
	// Calls is the number of script calls sent (Reserve, Sent, Cursor,
	// Advance each count one; a cluster Advance counts one per stream).
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

	mu     sync.RWMutex // guards closed and sending on queue
	closed bool
	queue  chan *op
	wg     sync.WaitGroup

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
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
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
		queue:   make(chan *op, maxBatchCalls*o.Flushers),
	}
	s.wg.Add(o.Flushers)
	for range o.Flushers {
		go s.flusher()
	}
	return s, nil
}

// Stats returns the counters since New.
func (s *Store) Stats() Stats {
	return Stats{Calls: s.calls.Load(), RoundTrips: s.roundTrips.Load()}
}

// Close stops the flushers after they have sent every queued call. It does
// not close the client. Later calls return seqstore.ErrClosed.
func (s *Store) Close() error {
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		close(s.queue)
	}
	s.mu.Unlock()
	s.wg.Wait()
	return nil
}

func (s *Store) key(st seqstore.Stream, kind string) string {
	return s.prefix + "{" + st.Key() + "}:" + kind
}

func (s *Store) indexKey(queue string) string {
	return s.prefix + "pending:{" + strings.TrimSuffix(seqstore.Stream{Queue: queue}.Key(), "/") + "}"
}

// Reserve implements seqstore.Store.
func (s *Store) Reserve(ctx context.Context, st seqstore.Stream, n int, journal [][]byte) (seqstore.Reservation, error) {
	if err := st.Validate(); err != nil {
		return seqstore.Reservation{}, fmt.Errorf("redisstore: reserve: %w", err)
	}
	if n < 1 {
		return seqstore.Reservation{}, fmt.Errorf("redisstore: reserve %s: %w: n must be at least 1, got %d", st, seqstore.ErrInvalidArgument, n)
	}
	if journal != nil && len(journal) != n {
		return seqstore.Reservation{}, fmt.Errorf("redisstore: reserve %s: %w: journal holds %d bodies for n=%d", st, seqstore.ErrInvalidArgument, len(journal), n)
	}
	keys := []string{s.key(st, "send"), s.key(st, "journal")}
	if journal != nil && !s.sharded {
		keys = append(keys, s.indexKey(st.Queue))
	}
	args := make([]any, 3, 3+len(journal))
	args[0] = strconv.Itoa(n)
	args[1] = strconv.FormatUint(seqstore.NewEpoch(time.Now()), 10)
	args[2] = st.Key()
	for _, b := range journal {
		args = append(args, b)
	}
	o := &op{calls: []*call{{script: reserveScript, keys: keys, args: args}}}
	if journal != nil && s.sharded {
		o.then = []*call{{script: indexAddScript, keys: []string{s.indexKey(st.Queue)}, args: []any{st.Key()}}}
	}
	if err := s.do(ctx, o); err != nil {
		return seqstore.Reservation{}, fmt.Errorf("redisstore: reserve %s: %w", st, err)
	}
	if err := o.err(); err != nil {
		return seqstore.Reservation{}, fmt.Errorf("redisstore: reserve %s: %w", st, err)
	}
	vals, err := o.calls[0].cmd.StringSlice()
	if err != nil || len(vals) != 2 {
		return seqstore.Reservation{}, fmt.Errorf("redisstore: reserve %s: %w: unexpected reply %v", st, seqstore.ErrCorrupt, o.calls[0].cmd.Val())
	}
	epoch, err1 := seqstore.ParseNum(vals[0])
	last, err2 := seqstore.ParseNum(vals[1])
	if err := errors.Join(err1, err2); err != nil || epoch == 0 {
		return seqstore.Reservation{}, fmt.Errorf("redisstore: reserve %s: %w: send state epoch %q last %q", st, seqstore.ErrCorrupt, vals[0], vals[1])
	}
	return seqstore.Reservation{Epoch: epoch, First: last + 1}, nil
}

// Sent implements seqstore.Store.
func (s *Store) Sent(ctx context.Context, st seqstore.Stream, seqs []uint64) error {
	if err := st.Validate(); err != nil {
		return fmt.Errorf("redisstore: sent: %w", err)
	}
	if len(seqs) == 0 {
		return nil
	}
	keys := []string{s.key(st, "journal")}
	if !s.sharded {
		keys = append(keys, s.indexKey(st.Queue))
	}
	args := make([]any, 1, 1+len(seqs))
	args[0] = st.Key()
	for _, q := range seqs {
		args = append(args, strconv.FormatUint(q, 10))
	}
	o := &op{calls: []*call{{script: sentScript, keys: keys, args: args}}}
	if err := s.do(ctx, o); err != nil {
		return fmt.Errorf("redisstore: sent %s: %w", st, err)
	}
	if err := o.err(); err != nil {
		return fmt.Errorf("redisstore: sent %s: %w", st, err)
	}
	return nil
}

// Cursor implements seqstore.Store.
func (s *Store) Cursor(ctx context.Context, st seqstore.Stream) (seqstore.Cursor, error) {
	if err := st.Validate(); err != nil {
		return seqstore.Cursor{}, fmt.Errorf("redisstore: cursor: %w", err)
	}
	o := &op{calls: []*call{{script: cursorScript, keys: []string{s.key(st, "cursor")}}}}
	if err := s.do(ctx, o); err != nil {
		return seqstore.Cursor{}, fmt.Errorf("redisstore: cursor %s: %w", st, err)
	}
	if err := o.err(); err != nil {
		return seqstore.Cursor{}, fmt.Errorf("redisstore: cursor %s: %w", st, err)
	}
	raw, err := o.calls[0].cmd.Slice()
	if err != nil || len(raw) != 4 {
		return seqstore.Cursor{}, fmt.Errorf("redisstore: cursor %s: %w: unexpected reply", st, seqstore.ErrCorrupt)
	}
	c, err := parseCursor(raw)
	if err != nil {
		return seqstore.Cursor{}, fmt.Errorf("redisstore: cursor %s: %w", st, err)
	}
	return c, nil
}

// Advance implements seqstore.Store. See the package documentation for the
// weaker guarantee with a cluster client.
func (s *Store) Advance(ctx context.Context, batch []seqstore.Advance) error {
	if len(batch) == 0 {
		return nil
	}
	seen := make(map[seqstore.Stream]struct{}, len(batch))
	for _, a := range batch {
		if err := a.Check(); err != nil {
			return fmt.Errorf("redisstore: advance: %w", err)
		}
		if _, dup := seen[a.Stream]; dup {
			return fmt.Errorf("redisstore: advance: %w: stream %s appears twice in one batch", seqstore.ErrInvalidArgument, a.Stream)
		}
		seen[a.Stream] = struct{}{}
	}
	o := &op{}
	if s.sharded && len(batch) > 1 {
		// Check every cursor first, so that a batch that conflicts at rest
		// writes nothing; only a race between this check and the writes
		// can leave a batch half applied.
		if err := s.precheck(ctx, batch); err != nil {
			return err
		}
	}
	if s.sharded {
		for _, a := range batch {
			o.calls = append(o.calls, &call{script: advanceScript, keys: []string{s.key(a.Stream, "cursor")}, args: advanceArgs(nil, a)})
		}
	} else {
		c := &call{script: advanceScript, keys: make([]string, 0, len(batch)), args: make([]any, 0, 7*len(batch))}
		for _, a := range batch {
			c.keys = append(c.keys, s.key(a.Stream, "cursor"))
			c.args = advanceArgs(c.args, a)
		}
		o.calls = []*call{c}
	}
	if err := s.do(ctx, o); err != nil {
		return fmt.Errorf("redisstore: advance: %w", err)
	}
	var conflicts []seqstore.Stream
	var errs []error
	for ci, c := range o.calls {
		res, err := c.cmd.Slice()
		if err != nil {
			errs = append(errs, mapErr(err))
			continue
		}
		for _, v := range res {
			i, ok := v.(int64)
			if !ok || i < 1 || int(i) > len(c.keys) {
				errs = append(errs, fmt.Errorf("%w: unexpected advance reply %v", seqstore.ErrCorrupt, v))
				continue
			}
			if s.sharded {
				conflicts = append(conflicts, batch[ci].Stream)
			} else {
				conflicts = append(conflicts, batch[i-1].Stream)
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("redisstore: advance: %w", err)
	}
	if len(conflicts) > 0 {
		return &seqstore.ConflictError{Streams: conflicts}
	}
	return nil
}

// precheck reads the cursors of batch in one round trip and returns a
// *seqstore.ConflictError naming those that differ from their From.
func (s *Store) precheck(ctx context.Context, batch []seqstore.Advance) error {
	o := &op{}
	for _, a := range batch {
		o.calls = append(o.calls, &call{script: cursorScript, keys: []string{s.key(a.Stream, "cursor")}})
	}
	if err := s.do(ctx, o); err != nil {
		return fmt.Errorf("redisstore: advance: %w", err)
	}
	var conflicts []seqstore.Stream
	for i, c := range o.calls {
		raw, err := c.cmd.Slice()
		if err != nil {
			return fmt.Errorf("redisstore: advance: cursor of %s: %w", batch[i].Stream, mapErr(err))
		}
		cur, err := parseCursor(raw)
		if err != nil {
			return fmt.Errorf("redisstore: advance: cursor of %s: %w", batch[i].Stream, err)
		}
		if !cur.Same(batch[i].From) {
			conflicts = append(conflicts, batch[i].Stream)
		}
	}
	if len(conflicts) > 0 {
		return &seqstore.ConflictError{Streams: conflicts}
	}
	return nil
}

func advanceArgs(args []any, a seqstore.Advance) []any {
	f := func(v uint64) string { return strconv.FormatUint(v, 10) }
	return append(args, f(a.From.Epoch), f(a.From.Next), f(a.From.Owner),
		f(a.To.Epoch), f(a.To.Next), f(a.To.Owner), seqstore.FormatSkipped(a.To.Skipped))
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
	var members []string
	var cursor uint64
	for {
		keys, next, err := s.client.SScan(ctx, index, cursor, "", 1000).Result()
		s.roundTrips.Add(1)
		if err != nil {
			return nil, fmt.Errorf("redisstore: pending %q: %w", queue, mapErr(err))
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
			return nil, fmt.Errorf("redisstore: pending %q: index member %q: %w", queue, m, err)
		}
		if st.Queue != queue {
			return nil, fmt.Errorf("redisstore: pending %q: %w: index lists stream %s of another queue", queue, seqstore.ErrCorrupt, st)
		}
		streams[i] = st
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
		if err := s.prune(ctx, index, empty); err != nil {
			// The entries were read; a failed prune only leaves the index
			// larger than needed.
			s.log.WarnContext(ctx, "redisstore: pruning the pending index failed", "queue", queue, "err", err)
		}
	}
	return out, nil
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

// prune removes streams with an empty journal from the index. On a single
// node one script checks and removes atomically. On a cluster the check and
// the removal are on different slots: remove, re-check, and put the stream
// back if a Reserve journaled it meanwhile (Reserve writes the journal before
// it adds to the index, so one of the two sees the other).
func (s *Store) prune(ctx context.Context, index string, streams []seqstore.Stream) error {
	pipe := s.client.Pipeline()
	if !s.sharded {
		cmds := make([]*redis.Cmd, len(streams))
		for i, st := range streams {
			cmds[i] = pruneScript.Eval(ctx, pipe, []string{s.key(st, "journal"), index}, st.Key())
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
	lens := make([]*redis.IntCmd, len(streams))
	for i, st := range streams {
		lens[i] = pipe.HLen(ctx, s.key(st, "journal"))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return err
	}
	pipe = s.client.Pipeline()
	readd := 0
	for i, st := range streams {
		if lens[i].Val() > 0 {
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

// mapErr turns the scripts' and Redis's own complaints about stored data
// into seqstore sentinels; other errors (network, timeouts) pass unchanged.
func mapErr(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	switch {
	case strings.Contains(msg, corruptTag):
		return fmt.Errorf("%w: %w", seqstore.ErrCorrupt, err)
	case strings.Contains(msg, "WRONGTYPE"):
		return fmt.Errorf("%w: foreign value at a store key: %w", seqstore.ErrCorrupt, err)
	case strings.Contains(msg, overflowTag):
		return fmt.Errorf("%w: %w", seqstore.ErrOverflow, err)
	}
	return err
}
