package redisstore

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"slices"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/inorder/inorder/seqstore"
)

var _ seqstore.Parker = (*Store)(nil)

// memberLen is the length of a park set member: two 19-digit decimals and
// a ':' (see luaPark).
const memberLen = 19 + 1 + 19

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// parkCRC is the CRC-32C that guards a parked body: over the stream key, a
// NUL (which no key contains), the epoch and seq big-endian, and the body.
func parkCRC(key string, epoch, seq uint64, body []byte) uint32 {
	var num [17]byte
	binary.BigEndian.PutUint64(num[1:], epoch)
	binary.BigEndian.PutUint64(num[9:], seq)
	crc := crc32.Update(0, castagnoli, []byte(key))
	crc = crc32.Update(crc, castagnoli, num[:])
	return crc32.Update(crc, castagnoli, body)
}

// parkValue is what the park bodies hash stores for p: its CRC, 4 bytes
// big-endian, then the body.
func parkValue(p seqstore.Parked) []byte {
	v := make([]byte, 4+len(p.Body))
	binary.BigEndian.PutUint32(v, parkCRC(p.Stream.Key(), p.Epoch, p.Seq, p.Body))
	copy(v[4:], p.Body)
	return v
}

// Park implements seqstore.Parker. On a single node the call is one script,
// all or nothing, which also lists the streams in their queue's park index.
// On a cluster each stream is one script, with the atomicity Advance
// documents (a check first when the call spans several streams), and the
// index is updated in a second round trip once the parks are written (see
// the package documentation).
func (s *Store) Park(ctx context.Context, entries []seqstore.Parked) error {
	if err := seqstore.CheckPark(entries); err != nil {
		return fmt.Errorf("redisstore: park: %w", err)
	}
	if len(entries) == 0 {
		return nil
	}
	name := callName(len(entries), entries[0].Stream)
	values := make([][]byte, len(entries))
	o := &op{}
	for i, p := range entries {
		values[i] = parkValue(p)
		o.bytes += len(values[i])
	}
	parts := s.parts(len(entries), func(i int) seqstore.Stream { return entries[i].Stream })
	if len(parts) > 1 {
		if err := s.check(ctx, parts, len(entries), func(ri []int) *call { return s.parkCall(entries, values, ri, true) }); err != nil {
			return fmt.Errorf("redisstore: park %s: %w", name, err)
		}
	}
	for _, ri := range parts {
		o.calls = append(o.calls, s.parkCall(entries, values, ri, false))
	}
	if err := s.do(ctx, o); err != nil {
		return fmt.Errorf("redisstore: park %s: %w", name, err)
	}
	errs, err := outcomes(o, len(entries), nil)
	if err == nil && errs == nil {
		err = followUpsErr(o)
	}
	if err != nil {
		return fmt.Errorf("redisstore: park %s: %w", name, err)
	}
	if errs != nil {
		return fmt.Errorf("redisstore: park %s: %w", name, &seqstore.BatchError{Errs: errs})
	}
	return nil
}

// parkCall builds the park script call for entries ri.
func (s *Store) parkCall(entries []seqstore.Parked, values [][]byte, ri []int, dry bool) *call {
	pos := map[seqstore.Stream]int{} // 1-based, in order of first appearance
	var streams []seqstore.Stream
	for _, i := range ri {
		if st := entries[i].Stream; pos[st] == 0 {
			streams = append(streams, st)
			pos[st] = len(streams)
		}
	}
	c := &call{script: parkScript, idx: ri, keys: make([]string, 0, 3*len(streams)+1)}
	for _, st := range streams {
		c.keys = append(c.keys, s.key(st, "cursor"), s.key(st, "park"), s.key(st, "parkbody"))
	}
	c.args = make([]any, 0, 2+2*len(streams)+4*len(ri))
	c.args = append(c.args, flag(dry), strconv.Itoa(len(streams)))
	var idx indexPositions
	for _, st := range streams {
		ip := 0
		switch {
		case s.sharded && !dry:
			// The index lives on another slot: list the stream once its
			// parks are written (prune relies on this order).
			c.then = append(c.then, &call{script: indexAddScript, keys: []string{s.parkIndexKey(st.Queue)}, args: []any{st.Key()}})
		case !s.sharded:
			ip = idx.pos(st.Queue, func() int {
				c.keys = append(c.keys, s.parkIndexKey(st.Queue))
				return len(c.keys)
			})
		}
		c.args = append(c.args, st.Key(), strconv.Itoa(ip))
	}
	for _, i := range ri {
		p := entries[i]
		var v any = values[i]
		if dry {
			v = "" // the check needs no body
		}
		c.args = append(c.args, strconv.Itoa(pos[p.Stream]), strconv.FormatUint(p.Epoch, 10), strconv.FormatUint(p.Seq, 10), v)
	}
	return c
}

// parkMember is the park set member of epoch and seq (see luaPark).
func parkMember(epoch, seq uint64) string {
	return fmt.Sprintf("%019d:%019d", epoch, seq)
}

// Unpark implements seqstore.Parker: one script on a single node, one per
// stream on a cluster, in one round trip. A query whose stored park is
// malformed or fails its CRC fails alone with seqstore.ErrCorrupt in a
// *seqstore.BatchError; the other queries' results are valid.
func (s *Store) Unpark(ctx context.Context, queries []seqstore.ParkQuery) ([][]seqstore.Parked, error) {
	errs := make([]error, len(queries))
	for i, q := range queries {
		errs[i] = q.Check()
	}
	if err := seqstore.Abort(errs); err != nil {
		return nil, fmt.Errorf("redisstore: unpark: %w", err)
	}
	if len(queries) == 0 {
		return nil, nil
	}
	o := &op{}
	for _, ri := range s.parts(len(queries), func(i int) seqstore.Stream { return queries[i].Stream }) {
		c := &call{script: unparkScript, idx: ri, keys: make([]string, 0, 3*len(ri)), args: make([]any, 0, 3*len(ri))}
		for _, i := range ri {
			q := queries[i]
			c.keys = append(c.keys, s.key(q.Stream, "park"), s.key(q.Stream, "parkbody"), s.key(q.Stream, "cursor"))
			c.args = append(c.args, parkMember(q.Epoch, q.From), "("+fmt.Sprintf("%019d;", q.Epoch), strconv.Itoa(q.Max))
		}
		o.calls = append(o.calls, c)
	}
	if err := s.do(ctx, o); err != nil {
		return nil, fmt.Errorf("redisstore: unpark: %w", err)
	}
	out := make([][]seqstore.Parked, len(queries))
	var failed []error
	for _, c := range o.calls {
		vals, err := c.cmd.Slice()
		if err == nil && len(vals) != len(c.idx) {
			err = fmt.Errorf("%w: %d replies for %d queries", seqstore.ErrCorrupt, len(vals), len(c.idx))
		}
		if err != nil {
			return nil, fmt.Errorf("redisstore: unpark: %w", mapErr(err))
		}
		for k, i := range c.idx {
			if out[i], err = parseParks(queries[i], vals[k]); err != nil {
				if failed == nil {
					failed = make([]error, len(queries))
				}
				failed[i] = fmt.Errorf("park of %s: %w", queries[i].Stream, err)
				out[i] = nil
			}
		}
	}
	if failed != nil {
		return out, fmt.Errorf("redisstore: unpark: %w", &seqstore.BatchError{Errs: failed})
	}
	return out, nil
}

// parseParks checks and decodes the unpark script's reply for q: member and
// value pairs in member order.
func parseParks(q seqstore.ParkQuery, v any) ([]seqstore.Parked, error) {
	raw, ok := v.([]any)
	if !ok {
		return nil, statusErr(v)
	}
	if len(raw)%2 != 0 || len(raw)/2 > q.Max {
		return nil, fmt.Errorf("%w: unpark reply of %d values for at most %d entries", seqstore.ErrCorrupt, len(raw), q.Max)
	}
	key := q.Stream.Key()
	var out []seqstore.Parked
	last := uint64(0)
	for i := 0; i < len(raw); i += 2 {
		m, _ := raw[i].(string)
		epoch, seq, ok := parseMember(m)
		if !ok || epoch != q.Epoch || seq < q.From || seq == 0 || len(out) > 0 && seq <= last {
			return nil, fmt.Errorf("%w: park member %q out of place for epoch %d from %d", seqstore.ErrCorrupt, m, q.Epoch, q.From)
		}
		last = seq
		val, ok := raw[i+1].(string)
		if !ok {
			return nil, fmt.Errorf("%w: park member %q has no body", seqstore.ErrCorrupt, m)
		}
		if len(val) < 4 || len(val)-4 > seqstore.MaxParkBody {
			return nil, fmt.Errorf("%w: parked body of %d/%d is %d bytes", seqstore.ErrCorrupt, epoch, seq, len(val))
		}
		body := []byte(val[4:])
		if want := binary.BigEndian.Uint32([]byte(val[:4])); parkCRC(key, epoch, seq, body) != want {
			return nil, fmt.Errorf("%w: parked body of %d/%d fails its CRC", seqstore.ErrCorrupt, epoch, seq)
		}
		out = append(out, seqstore.Parked{Stream: q.Stream, Epoch: epoch, Seq: seq, Body: body})
	}
	return out, nil
}

// parseMember parses a park set member written by parkMember.
func parseMember(m string) (epoch, seq uint64, ok bool) {
	if len(m) != memberLen || m[19] != ':' {
		return 0, 0, false
	}
	for _, c := range []byte(m[:19] + m[20:]) {
		if c < '0' || c > '9' {
			return 0, 0, false
		}
	}
	e, err1 := strconv.ParseUint(m[:19], 10, 63)
	q, err2 := strconv.ParseUint(m[20:], 10, 63)
	if err1 != nil || err2 != nil {
		return 0, 0, false
	}
	return e, q, true
}

// ParkedStreams implements seqstore.Parker. It reads the queue's park index,
// then checks each listed stream's park against its cursor (one small
// script per stream, in pipelines of a few hundred streams), lists those
// with entries the cursor has not passed, drops the passed entries an
// Advance left (see dropPassed), and unlists the streams left without
// parks (on a cluster the index may list streams whose parks Advance
// dropped; on a single node Advance unlists them itself).
func (s *Store) ParkedStreams(ctx context.Context, queue string) ([]seqstore.Stream, error) {
	if err := (seqstore.Stream{Queue: queue}).Validate(); err != nil {
		return nil, fmt.Errorf("redisstore: parked streams: %w", err)
	}
	if s.isClosed() {
		return nil, fmt.Errorf("redisstore: parked streams: %w", seqstore.ErrClosed)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("redisstore: parked streams: %w", err)
	}
	index := s.parkIndexKey(queue)
	streams, err := s.listed(ctx, index, queue)
	if err != nil {
		return nil, fmt.Errorf("redisstore: parked streams %q: %w", queue, err)
	}
	var out, empty, passed []seqstore.Stream
	const chunk = 256
	for lo := 0; lo < len(streams); lo += chunk {
		part := streams[lo:min(lo+chunk, len(streams))]
		calls := make([]*call, len(part))
		for i, st := range part {
			calls[i] = &call{script: parkedScript, keys: []string{s.key(st, "cursor"), s.key(st, "park")}}
		}
		s.run(ctx, calls)
		for i, st := range part {
			live, total, err := parkCounts(calls[i].cmd)
			if err != nil {
				return nil, fmt.Errorf("redisstore: parked streams %q: park of %s: %w", queue, st, err)
			}
			if live > 0 {
				out = append(out, st)
			}
			if total > live {
				passed = append(passed, st)
			}
			if total == 0 {
				empty = append(empty, st)
			}
		}
	}
	for _, st := range passed {
		if err := s.dropPassed(ctx, st); err != nil {
			s.log.WarnContext(ctx, "redisstore: dropping passed parks failed", "stream", st.String(), "err", err)
			continue
		}
		if !slices.Contains(out, st) {
			empty = append(empty, st)
		}
	}
	if len(empty) > 0 {
		if err := s.prune(ctx, index, empty, "park"); err != nil {
			// The parks were read; a failed prune only leaves the index
			// larger than needed.
			s.log.WarnContext(ctx, "redisstore: pruning the park index failed", "queue", queue, "err", err)
		}
	}
	return out, nil
}

// parkCounts reads parkedScript's reply: the entries the cursor has not
// passed, and all entries.
func parkCounts(cmd *redis.Cmd) (live, total int64, err error) {
	vals, err := cmd.Slice()
	if err != nil {
		return 0, 0, mapErr(err)
	}
	if len(vals) == 2 {
		live, ok1 := vals[0].(int64)
		total, ok2 := vals[1].(int64)
		if ok1 && ok2 && 0 <= live && live <= total {
			return live, total, nil
		}
	}
	return 0, 0, fmt.Errorf("%w: unexpected park counts %v", seqstore.ErrCorrupt, vals)
}

// dropPassed drops the parked entries of st that its stored cursor passed,
// dropChunk per script (dropScript), each script its own round trip
// outside the group commit, so that other clients' commands run between
// them. It stops early when ctx ends or the store closes.
func (s *Store) dropPassed(ctx context.Context, st seqstore.Stream) error {
	keys := []string{s.key(st, "cursor"), s.key(st, "park"), s.key(st, "parkbody")}
	index := "0"
	if !s.sharded {
		keys = append(keys, s.parkIndexKey(st.Queue))
		index = "4"
	}
	for {
		if s.isClosed() {
			return seqstore.ErrClosed
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		c := &call{script: dropScript, keys: keys, args: []any{index, st.Key()}}
		s.run(ctx, []*call{c})
		v, err := c.cmd.Result()
		if err != nil {
			return mapErr(err)
		}
		switch v := v.(type) {
		case int64:
			if v == 0 {
				return nil
			}
		case string:
			return statusErr(v)
		default:
			return fmt.Errorf("%w: unexpected drop reply %v", seqstore.ErrCorrupt, v)
		}
	}
}
