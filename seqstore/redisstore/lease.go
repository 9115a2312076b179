package redisstore

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/inorder/inorder/seqstore"
)

// The lease capability keeps a namespace's keys under one hash tag,
// <prefix>lease:{<ns>}:..., so that each call is one script on one node,
// on a cluster too:
//
//	token        the token counter (INCR; no TTL)
//	lease:<n>    shard n's lease: a hash of owner and token, PEXPIREd
//	shards       the set of shards that had a lease (for Leases)
//	members      a sorted set of incarnations scored by the expiry of
//	             their heartbeat, in ms of the server's TIME
//	memberinfo   incarnation -> "<weight>:<name>"
//	view         the view version (INCR on a join, leave, update or sweep)
//	topology     the topology, JSON (SET NX)
//	wake         not a key: the Pub/Sub channel of the namespace's
//	             wake-ups (watch.go), PUBLISHed by the scripts of
//	             Release, Leave and a Heartbeat that changed the view
//
// Lease keys expire by the server's clock; heartbeats are compared with
// the server's TIME. Scripts name lease:<n> keys they build from ARGV[1],
// always under the namespace's hash tag.

var _ seqstore.Leaser = (*Store)(nil)

// Key positions in every lease script's KEYS.
const (
	keyToken = iota
	keyShards
	keyMembers
	keyMemberInfo
	keyView
	keyTopology
)

// leaseKeys returns ns's keys in the order of the key positions, and the
// start of its lease keys.
func (s *Store) leaseKeys(ns string) (keys []string, leaseBase string) {
	base := s.prefix + "lease:{" + queueKey(ns) + "}:"
	return []string{base + "token", base + "shards", base + "members", base + "memberinfo", base + "view", base + "topology"}, base + "lease:"
}

const luaNow = `
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
`

// acquireScript: ARGV = base, owner, ttl ms, shards...; returns shard,
// token pairs of the leases taken.
var acquireScript = redis.NewScript(`
local out = {}
for i = 4, #ARGV do
  local k = ARGV[1] .. ARGV[i]
  if redis.call('EXISTS', k) == 0 then
    local tok = redis.call('INCR', KEYS[1])
    redis.call('HSET', k, 'owner', ARGV[2], 'token', tok)
    redis.call('PEXPIRE', k, ARGV[3])
    redis.call('SADD', KEYS[2], ARGV[i])
    out[#out + 1] = ARGV[i]
    out[#out + 1] = tostring(tok)
  end
end
return out
`)

// renewScript: ARGV = base, ttl ms, then shard, token, owner per lease;
// returns the positions (from 0) of the leases lost.
var renewScript = redis.NewScript(`
local lost = {}
for i = 3, #ARGV, 3 do
  local k = ARGV[1] .. ARGV[i]
  local v = redis.call('HMGET', k, 'owner', 'token')
  if v[1] == ARGV[i + 2] and v[2] == ARGV[i + 1] then
    redis.call('PEXPIRE', k, ARGV[2])
  else
    lost[#lost + 1] = tostring((i - 3) / 3)
  end
end
return lost
`)

// releaseScript: ARGV = base, wake channel, then shard, token, owner per
// lease.
var releaseScript = redis.NewScript(`
local released = false
for i = 3, #ARGV, 3 do
  local k = ARGV[1] .. ARGV[i]
  local v = redis.call('HMGET', k, 'owner', 'token')
  if v[1] == ARGV[i + 2] and v[2] == ARGV[i + 1] then
    redis.call('DEL', k)
    redis.call('SREM', KEYS[2], ARGV[i])
    released = true
  end
end
if released then
  redis.call('PUBLISH', ARGV[2], 'release')
end
return {}
`)

// leasesScript: ARGV = base; returns shard, token, owner triples of the
// live leases, and forgets the shards whose lease expired.
var leasesScript = redis.NewScript(`
local out = {}
for _, shard in ipairs(redis.call('SMEMBERS', KEYS[2])) do
  local v = redis.call('HMGET', ARGV[1] .. shard, 'owner', 'token')
  if v[1] then
    out[#out + 1] = shard
    out[#out + 1] = v[2]
    out[#out + 1] = v[1]
  else
    redis.call('SREM', KEYS[2], shard)
  end
end
return out
`)

// heartbeatScript: ARGV = base, wake channel, incarnation,
// "<weight>:<name>", ttl ms; returns the view version, then incarnation,
// info pairs.
var heartbeatScript = redis.NewScript(luaNow + `
local now = now_ms()
local changed = false
local dead = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now)
if #dead > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
  redis.call('HDEL', KEYS[4], unpack(dead))
  redis.call('INCR', KEYS[5])
  changed = true
end
if not redis.call('ZSCORE', KEYS[3], ARGV[3]) or redis.call('HGET', KEYS[4], ARGV[3]) ~= ARGV[4] then
  redis.call('INCR', KEYS[5])
  changed = true
end
redis.call('ZADD', KEYS[3], now + tonumber(ARGV[5]), ARGV[3])
redis.call('HSET', KEYS[4], ARGV[3], ARGV[4])
if changed then
  redis.call('PUBLISH', ARGV[2], 'view')
end
local out = {redis.call('GET', KEYS[5])}
for _, inc in ipairs(redis.call('ZRANGE', KEYS[3], 0, -1)) do
  out[#out + 1] = inc
  out[#out + 1] = redis.call('HGET', KEYS[4], inc) or ''
end
return out
`)

// leaveScript: ARGV = base, wake channel, incarnation.
var leaveScript = redis.NewScript(`
if redis.call('ZREM', KEYS[3], ARGV[3]) == 1 then
  redis.call('HDEL', KEYS[4], ARGV[3])
  redis.call('INCR', KEYS[5])
  redis.call('PUBLISH', ARGV[2], 'leave')
end
return {}
`)

// Topology implements seqstore.Leaser: SET NX, then a comparison with what
// is stored (a stored topology never changes).
func (s *Store) Topology(ctx context.Context, ns string, t seqstore.Topology) error {
	if err := seqstore.CheckLease(ns, t.Check()); err != nil {
		return fmt.Errorf("redisstore: topology: %w", err)
	}
	if err := s.leaseReady(ctx); err != nil {
		return fmt.Errorf("redisstore: topology: %w", err)
	}
	want, err := json.Marshal(t)
	if err != nil {
		return fmt.Errorf("redisstore: topology: %w", err)
	}
	keys, _ := s.leaseKeys(ns)
	set, err := s.client.SetNX(ctx, keys[keyTopology], want, 0).Result()
	if err != nil {
		return fmt.Errorf("redisstore: topology of %q: %w", ns, mapErr(err))
	}
	if set {
		return nil
	}
	stored, err := s.client.Get(ctx, keys[keyTopology]).Bytes()
	if err != nil {
		return fmt.Errorf("redisstore: topology of %q: %w", ns, mapErr(err))
	}
	var got seqstore.Topology
	if err := json.Unmarshal(stored, &got); err != nil {
		return fmt.Errorf("redisstore: topology of %q: %w: stored topology: %v", ns, seqstore.ErrCorrupt, err)
	}
	if !got.Equal(t) {
		return fmt.Errorf("redisstore: topology of %q: %w: stored %+v, given %+v", ns, seqstore.ErrTopology, got, t)
	}
	return nil
}

// Heartbeat implements seqstore.Leaser, in one script.
func (s *Store) Heartbeat(ctx context.Context, ns string, m seqstore.Member, ttl time.Duration) (seqstore.View, error) {
	if err := seqstore.CheckLease(ns, seqstore.CheckMember(m), seqstore.CheckTTL(ttl)); err != nil {
		return seqstore.View{}, fmt.Errorf("redisstore: heartbeat: %w", err)
	}
	vals, err := s.runLease(ctx, heartbeatScript, ns, s.wakeChannel(ns), m.Incarnation, strconv.Itoa(m.Weight)+":"+m.Name, ttl.Milliseconds())
	if err != nil {
		return seqstore.View{}, fmt.Errorf("redisstore: heartbeat of %q in %q: %w", m.Incarnation, ns, err)
	}
	v, err := parseView(vals)
	if err != nil {
		return seqstore.View{}, fmt.Errorf("redisstore: heartbeat of %q in %q: %w", m.Incarnation, ns, err)
	}
	return v, nil
}

func parseView(vals []string) (seqstore.View, error) {
	if len(vals)%2 != 1 {
		return seqstore.View{}, fmt.Errorf("%w: view of %d values", seqstore.ErrCorrupt, len(vals))
	}
	var v seqstore.View
	var err error
	if v.Version, err = strconv.ParseUint(vals[0], 10, 64); err != nil {
		return seqstore.View{}, fmt.Errorf("%w: view version %q", seqstore.ErrCorrupt, vals[0])
	}
	for i := 1; i < len(vals); i += 2 {
		w, name, ok := strings.Cut(vals[i+1], ":")
		weight, err := strconv.Atoi(w)
		m := seqstore.Member{Name: name, Incarnation: vals[i], Weight: weight}
		if !ok || err != nil || seqstore.CheckMember(m) != nil {
			return seqstore.View{}, fmt.Errorf("%w: member %q: %q", seqstore.ErrCorrupt, vals[i], vals[i+1])
		}
		v.Members = append(v.Members, m)
	}
	seqstore.SortMembers(v.Members)
	return v, nil
}

// Acquire implements seqstore.Leaser, in one script.
func (s *Store) Acquire(ctx context.Context, ns string, shards []int, owner string, ttl time.Duration) ([]seqstore.Lease, error) {
	if err := seqstore.CheckLease(ns, seqstore.CheckShards(shards), seqstore.CheckOwner(owner), seqstore.CheckTTL(ttl)); err != nil {
		return nil, fmt.Errorf("redisstore: acquire: %w", err)
	}
	args := []any{owner, ttl.Milliseconds()}
	for _, sh := range slices.Sorted(slices.Values(shards)) {
		args = append(args, sh)
	}
	vals, err := s.runLease(ctx, acquireScript, ns, args...)
	if err != nil {
		return nil, fmt.Errorf("redisstore: acquire for %q in %q: %w", owner, ns, err)
	}
	var out []seqstore.Lease
	for i := 0; i+1 < len(vals); i += 2 {
		l, err := parseLease(vals[i], vals[i+1], owner)
		if err != nil {
			return nil, fmt.Errorf("redisstore: acquire for %q in %q: %w", owner, ns, err)
		}
		out = append(out, l)
	}
	return out, nil
}

func parseLease(shard, token, owner string) (seqstore.Lease, error) {
	sh, err1 := strconv.Atoi(shard)
	tok, err2 := strconv.ParseUint(token, 10, 64)
	if err1 != nil || err2 != nil || tok == 0 {
		return seqstore.Lease{}, fmt.Errorf("%w: lease of shard %q with token %q", seqstore.ErrCorrupt, shard, token)
	}
	return seqstore.Lease{Shard: sh, Token: tok, Owner: owner}, nil
}

// Renew implements seqstore.Leaser, in one script.
func (s *Store) Renew(ctx context.Context, ns string, held []seqstore.Lease, ttl time.Duration) ([]seqstore.Lease, error) {
	if err := seqstore.CheckLease(ns, seqstore.CheckLeases(held), seqstore.CheckTTL(ttl)); err != nil {
		return nil, fmt.Errorf("redisstore: renew: %w", err)
	}
	args := append([]any{ttl.Milliseconds()}, leaseArgs(held)...)
	vals, err := s.runLease(ctx, renewScript, ns, args...)
	if err != nil {
		return nil, fmt.Errorf("redisstore: renew in %q: %w", ns, err)
	}
	var lost []seqstore.Lease
	for _, v := range vals {
		i, err := strconv.Atoi(v)
		if err != nil || i < 0 || i >= len(held) {
			return nil, fmt.Errorf("redisstore: renew in %q: %w: lost lease %q", ns, seqstore.ErrCorrupt, v)
		}
		lost = append(lost, held[i])
	}
	return lost, nil
}

func leaseArgs(held []seqstore.Lease) []any {
	args := make([]any, 0, 3*len(held))
	for _, h := range held {
		args = append(args, h.Shard, strconv.FormatUint(h.Token, 10), h.Owner)
	}
	return args
}

// Release implements seqstore.Leaser, in one script; the token counter is a
// key of its own.
func (s *Store) Release(ctx context.Context, ns string, held []seqstore.Lease) error {
	if err := seqstore.CheckLease(ns, seqstore.CheckLeases(held)); err != nil {
		return fmt.Errorf("redisstore: release: %w", err)
	}
	if _, err := s.runLease(ctx, releaseScript, ns, append([]any{s.wakeChannel(ns)}, leaseArgs(held)...)...); err != nil {
		return fmt.Errorf("redisstore: release in %q: %w", ns, err)
	}
	return nil
}

// Leave implements seqstore.Leaser, in one script.
func (s *Store) Leave(ctx context.Context, ns string, incarnation string) error {
	if err := seqstore.CheckLease(ns, seqstore.CheckOwner(incarnation)); err != nil {
		return fmt.Errorf("redisstore: leave: %w", err)
	}
	if _, err := s.runLease(ctx, leaveScript, ns, s.wakeChannel(ns), incarnation); err != nil {
		return fmt.Errorf("redisstore: leave of %q from %q: %w", incarnation, ns, err)
	}
	return nil
}

// Leases implements seqstore.Leaser, in one script.
func (s *Store) Leases(ctx context.Context, ns string) ([]seqstore.Lease, error) {
	if err := seqstore.CheckLease(ns); err != nil {
		return nil, fmt.Errorf("redisstore: leases: %w", err)
	}
	vals, err := s.runLease(ctx, leasesScript, ns)
	if err != nil {
		return nil, fmt.Errorf("redisstore: leases of %q: %w", ns, err)
	}
	var out []seqstore.Lease
	for i := 0; i+2 < len(vals); i += 3 {
		l, err := parseLease(vals[i], vals[i+1], vals[i+2])
		if err != nil {
			return nil, fmt.Errorf("redisstore: leases of %q: %w", ns, err)
		}
		out = append(out, l)
	}
	slices.SortFunc(out, func(a, b seqstore.Lease) int { return cmp.Compare(a.Shard, b.Shard) })
	return out, nil
}

// runLease runs script with ns's keys and the start of its lease keys
// before args, and returns its reply as strings.
func (s *Store) runLease(ctx context.Context, script *redis.Script, ns string, args ...any) ([]string, error) {
	if err := s.leaseReady(ctx); err != nil {
		return nil, err
	}
	keys, base := s.leaseKeys(ns)
	s.calls.Add(1)
	s.roundTrips.Add(1)
	res, err := script.Run(ctx, s.client, keys, append([]any{base}, args...)...).StringSlice()
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, mapErr(err)
	}
	return res, nil
}

// leaseReady fails a lease call on a closed store or an ended context.
func (s *Store) leaseReady(ctx context.Context) error {
	if s.isClosed() {
		return seqstore.ErrClosed
	}
	return ctx.Err()
}
