package redisstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/inorder/inorder/seqstore"
)

var _ seqstore.Lister = (*Store)(nil)

// listChunk bounds the streams, and the length commands, of one pipeline of
// Streams and State.
const listChunk = 256

// Streams implements seqstore.Lister. No index lists every stream (a
// stream with only a sender counter or a cursor is in none), so it SCANs
// the key space for the keys of queue's streams, on every master of a
// cluster or shard of a ring: its cost grows with the whole database, not
// the queue. It then reads each stream's hashes, park members and the
// lengths of the bodies (HSTRLEN), in pipelines; nothing is written.
func (s *Store) Streams(ctx context.Context, queue string) ([]seqstore.StreamState, error) {
	if err := (seqstore.Stream{Queue: queue}).Validate(); err != nil {
		return nil, fmt.Errorf("redisstore: streams: %w", err)
	}
	if s.isClosed() {
		return nil, fmt.Errorf("redisstore: streams %q: %w", queue, seqstore.ErrClosed)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("redisstore: streams %q: %w", queue, err)
	}
	streams, err := s.scanStreams(ctx, queue)
	if err != nil {
		return nil, fmt.Errorf("redisstore: streams %q: %w", queue, err)
	}
	states, err := s.states(ctx, streams)
	if err != nil {
		return nil, fmt.Errorf("redisstore: streams %q: %w", queue, err)
	}
	return slices.DeleteFunc(states, seqstore.StreamState.Empty), nil
}

// State implements seqstore.Lister, as Streams does for one stream, without
// the SCAN.
func (s *Store) State(ctx context.Context, st seqstore.Stream) (seqstore.StreamState, error) {
	if err := st.Validate(); err != nil {
		return seqstore.StreamState{}, fmt.Errorf("redisstore: state: %w", err)
	}
	if s.isClosed() {
		return seqstore.StreamState{}, fmt.Errorf("redisstore: state of %s: %w", st, seqstore.ErrClosed)
	}
	if err := ctx.Err(); err != nil {
		return seqstore.StreamState{}, fmt.Errorf("redisstore: state of %s: %w", st, err)
	}
	states, err := s.states(ctx, []seqstore.Stream{st})
	if err != nil {
		return seqstore.StreamState{}, fmt.Errorf("redisstore: state of %s: %w", st, err)
	}
	return states[0], nil
}

// scanStreams returns the streams of queue that have any key, sorted by
// stream key.
func (s *Store) scanStreams(ctx context.Context, queue string) ([]seqstore.Stream, error) {
	// Neither the prefix nor a stream key holds a glob character.
	start := s.prefix + "{"
	pattern := start + queueKey(queue) + "/*"
	var mu sync.Mutex
	found := make(map[string]bool)
	scan := func(ctx context.Context, c redis.Cmdable) error {
		var cursor uint64
		for {
			keys, next, err := c.Scan(ctx, cursor, pattern, 1000).Result()
			s.roundTrips.Add(1)
			if err != nil {
				return err
			}
			mu.Lock()
			for _, k := range keys {
				if name, _, ok := strings.Cut(strings.TrimPrefix(k, start), "}:"); ok {
					found[name] = true
				}
			}
			mu.Unlock()
			if cursor = next; cursor == 0 {
				return nil
			}
		}
	}
	var err error
	switch c := s.client.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error { return scan(ctx, node) })
	case *redis.Ring:
		err = c.ForEachShard(ctx, func(ctx context.Context, shard *redis.Client) error { return scan(ctx, shard) })
	default:
		err = scan(ctx, s.client)
	}
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(found))
	for name := range found {
		names = append(names, name)
	}
	slices.Sort(names)
	streams := make([]seqstore.Stream, 0, len(names))
	for _, name := range names {
		st, err := seqstore.ParseKey(name)
		if err != nil {
			return nil, fmt.Errorf("key of stream %q: %w", name, err)
		}
		if st.Queue == queue {
			streams = append(streams, st)
		}
	}
	return streams, nil
}

// states reads the state of streams, in order.
func (s *Store) states(ctx context.Context, streams []seqstore.Stream) ([]seqstore.StreamState, error) {
	out := make([]seqstore.StreamState, len(streams))
	for lo := 0; lo < len(streams); lo += listChunk {
		part := streams[lo:min(lo+listChunk, len(streams))]
		pipe := s.client.Pipeline()
		send := make([]*redis.SliceCmd, len(part))
		cursor := make([]*redis.SliceCmd, len(part))
		journal := make([]*redis.StringSliceCmd, len(part))
		parks := make([]*redis.StringSliceCmd, len(part))
		for i, st := range part {
			send[i] = pipe.HMGet(ctx, s.key(st, "send"), "epoch", "last")
			cursor[i] = pipe.HMGet(ctx, s.key(st, "cursor"), "epoch", "next", "owner", "skipped")
			journal[i] = pipe.HKeys(ctx, s.key(st, "journal"))
			parks[i] = pipe.ZRange(ctx, s.key(st, "park"), 0, -1)
		}
		_, _ = pipe.Exec(ctx)
		s.roundTrips.Add(1)
		// The lengths of the bodies: (key, field) pairs, asked for in
		// pipelines of their own once the fields are known.
		var lens []lenQuery
		for i, st := range part {
			ss, err := s.partState(st, send[i], cursor[i], journal[i], parks[i], &lens, lo+i)
			if err != nil {
				return nil, err
			}
			out[lo+i] = ss
		}
		if err := s.bodyLengths(ctx, lens, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// lenQuery asks for the length of one body: HSTRLEN key field, for entry
// entry of the journal (or of the park) of stream state.
type lenQuery struct {
	key, field string
	state      int
	park       bool
	entry      int
}

// partState builds the state of st from its replies, but the sizes of its
// bodies: it appends their queries to lens.
func (s *Store) partState(st seqstore.Stream, send, cursor *redis.SliceCmd, journal, parks *redis.StringSliceCmd, lens *[]lenQuery, state int) (seqstore.StreamState, error) {
	out := seqstore.StreamState{Stream: st}
	vals, err := send.Result()
	if err != nil {
		return out, fmt.Errorf("send state of %s: %w", st, mapErr(err))
	}
	if vals[0] != nil || vals[1] != nil {
		es, _ := vals[0].(string)
		ls, _ := vals[1].(string)
		epoch, err1 := seqstore.ParseNum(es)
		last, err2 := seqstore.ParseNum(ls)
		if errors.Join(err1, err2) != nil || epoch == 0 {
			return out, fmt.Errorf("%w: send state of %s has epoch %q last %q", seqstore.ErrCorrupt, st, es, ls)
		}
		out.SendEpoch, out.LastSeq = epoch, last
	}
	if vals, err = cursor.Result(); err != nil {
		return out, fmt.Errorf("cursor of %s: %w", st, mapErr(err))
	}
	if out.Cursor, err = parseCursor(vals); err != nil {
		return out, fmt.Errorf("cursor of %s: %w", st, err)
	}
	fields, err := journal.Result()
	if err != nil {
		return out, fmt.Errorf("journal of %s: %w", st, mapErr(err))
	}
	if len(fields) > 0 && out.SendEpoch == 0 {
		return out, fmt.Errorf("%w: %s has journal entries but no send state", seqstore.ErrCorrupt, st)
	}
	for _, f := range fields {
		seq, err := seqstore.ParseNum(f)
		if err != nil || seq == 0 || seq > out.LastSeq {
			return out, fmt.Errorf("%w: journal of %s has entry %q outside 1..%d", seqstore.ErrCorrupt, st, f, out.LastSeq)
		}
		out.Journal = append(out.Journal, seqstore.EntryInfo{Epoch: out.SendEpoch, Seq: seq})
	}
	slices.SortFunc(out.Journal, func(a, b seqstore.EntryInfo) int { return cmp.Compare(a.Seq, b.Seq) })
	for i, e := range out.Journal {
		*lens = append(*lens, lenQuery{key: s.key(st, "journal"), field: fmt.Sprint(e.Seq), state: state, entry: i})
	}
	members, err := parks.Result()
	if err != nil {
		return out, fmt.Errorf("park of %s: %w", st, mapErr(err))
	}
	for _, m := range members {
		epoch, seq, ok := parseMember(m)
		if !ok {
			return out, fmt.Errorf("%w: park of %s has member %q", seqstore.ErrCorrupt, st, m)
		}
		// Entries the cursor passed that no write dropped yet are not
		// shown, as Unpark does not return them.
		if out.Cursor.Below(epoch, seq) {
			continue
		}
		*lens = append(*lens, lenQuery{key: s.key(st, "parkbody"), field: m, state: state, park: true, entry: len(out.Parked)})
		out.Parked = append(out.Parked, seqstore.EntryInfo{Epoch: epoch, Seq: seq})
	}
	return out, nil
}

// bodyLengths asks for the lengths lens name and sets them in states.
func (s *Store) bodyLengths(ctx context.Context, lens []lenQuery, states []seqstore.StreamState) error {
	const chunk = 1000
	for lo := 0; lo < len(lens); lo += chunk {
		part := lens[lo:min(lo+chunk, len(lens))]
		pipe := s.client.Pipeline()
		cmds := make([]*redis.IntCmd, len(part))
		for i, q := range part {
			cmds[i] = pipe.HStrLen(ctx, q.key, q.field)
		}
		_, _ = pipe.Exec(ctx)
		s.roundTrips.Add(1)
		for i, q := range part {
			n, err := cmds[i].Result()
			if err != nil {
				return fmt.Errorf("length of %s %s: %w", q.key, q.field, mapErr(err))
			}
			st := &states[q.state]
			if !q.park {
				st.Journal[q.entry].Size = int(n)
				continue
			}
			// A park value is a 4-byte CRC-32C, then the body.
			if n < 4 {
				return fmt.Errorf("%w: parked %s %s has a value of %d bytes", seqstore.ErrCorrupt, st.Stream, q.field, n)
			}
			st.Parked[q.entry].Size = int(n - 4)
		}
	}
	return nil
}
