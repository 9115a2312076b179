package redisstore

import (
	"strconv"

	"github.com/redis/go-redis/v9"
)

// dropChunk is the most parked entries one script drops: an Advance drops
// up to dropChunk of a stream's passed entries with its compare-and-set,
// and dropScript the rest, dropChunk per call, so that no script holds the
// server for more than a few milliseconds (200,000 entries in one script
// held it about 0.5 s).
const dropChunk = 1000

var dropChunkLua = strconv.Itoa(dropChunk)

// luaCommon validates stored numbers and increments decimal strings without
// going through Lua's doubles, which lose precision above 2^53.
const luaCommon = `
local function canon(s)
  if type(s) ~= 'string' or #s == 0 or #s > 19 then return false end
  if not string.match(s, '^[0-9]+$') then return false end
  if #s > 1 and string.sub(s, 1, 1) == '0' then return false end
  if #s == 19 and s > '9223372036854775807' then return false end
  return true
end
local function adddec(a, b)
  local out = {}
  local i, j, carry = #a, #b, 0
  while i >= 1 or j >= 1 or carry > 0 do
    local d = carry
    if i >= 1 then d = d + string.byte(a, i) - 48 end
    if j >= 1 then d = d + string.byte(b, j) - 48 end
    out[#out + 1] = string.char(48 + d % 10)
    if d >= 10 then carry = 1 else carry = 0 end
    i = i - 1
    j = j - 1
  end
  return string.reverse(table.concat(out))
end
local function le(a, b)
  if #a ~= #b then return #a < #b end
  return a <= b
end
`

// Statuses the scripts return per request, and tags of errors they raise.
// A status is "" for a request that is fine, or one of these followed by a
// message.
const (
	corruptTag  = "INORDER_CORRUPT"
	overflowTag = "INORDER_OVERFLOW"
	conflictTag = "INORDER_CONFLICT"
)

// luaTypes checks the type of keys before anything is read or written:
// Redis does not roll a script back when a later command fails, and a
// command on a key of the wrong type fails the whole script.
const luaTypes = `
local function typeof(k)
  local t = redis.call('TYPE', k)
  if type(t) == 'table' then return t.ok end
  return t
end
local function badtype(k, want, what)
  local t = typeof(k)
  if t ~= 'none' and t ~= want then
    return '` + corruptTag + ` ' .. what .. ' key holds a ' .. t
  end
  return nil
end
local function fail(status)
  local out = {'fail'}
  for i = 1, #status do out[#out + 1] = status[i] end
  return out
end
`

// reserveScript reserves for several requests over several streams, all or
// nothing.
//
// KEYS: for stream s = 1..S, KEYS[2s-1] its send hash and KEYS[2s] its
// journal; then the pending index keys.
// ARGV: dry ("1": check and plan only), S, then per stream its new epoch
// (used if it has no state), its stream key and the position in KEYS of
// its queue's index (0: none), then R, then per request its stream number,
// n, the number of bodies and the bodies.
//
// Returns {"ok", epoch, last before the request, ...} per request (just
// {"ok"} when dry), or {"fail", status per request} writing nothing.
var reserveScript = redis.NewScript(luaCommon + luaTypes + `
local dry = ARGV[1] == '1'
local S = tonumber(ARGV[2])
local p = 3
local newepoch, names, index = {}, {}, {}
for s = 1, S do
  newepoch[s], names[s], index[s] = ARGV[p], ARGV[p + 1], tonumber(ARGV[p + 2])
  p = p + 3
end
local R = tonumber(ARGV[p])
p = p + 1
local rs, rn, rb, rnb = {}, {}, {}, {}
for r = 1, R do
  rs[r], rn[r], rnb[r] = tonumber(ARGV[p]), ARGV[p + 1], tonumber(ARGV[p + 2])
  rb[r] = p + 3
  p = p + 3 + rnb[r]
end
local epoch, last, bad, created = {}, {}, {}, {}
for s = 1, S do
  bad[s] = badtype(KEYS[2 * s], 'hash', 'journal') or badtype(KEYS[2 * s - 1], 'hash', 'send')
  if not bad[s] and index[s] > 0 then
    bad[s] = badtype(KEYS[index[s]], 'set', 'pending index')
  end
  if not bad[s] then
    local v = redis.call('HMGET', KEYS[2 * s - 1], 'epoch', 'last')
    if not v[1] and not v[2] then
      if redis.call('EXISTS', KEYS[2 * s - 1]) == 1 then
        bad[s] = '` + corruptTag + ` send hash has neither epoch nor last'
      else
        epoch[s], last[s], created[s] = newepoch[s], '0', true
      end
    elseif not canon(v[1]) or not canon(v[2]) or v[1] == '0' then
      bad[s] = '` + corruptTag + ` send hash has a malformed epoch or last'
    else
      epoch[s], last[s] = v[1], v[2]
    end
  end
end
local status, failed, first = {}, false, {}
for r = 1, R do
  local s = rs[r]
  status[r] = ''
  if bad[s] then
    status[r], failed = bad[s], true
  else
    local nl = adddec(last[s], rn[r])
    if not le(nl, '9223372036854775807') then
      status[r], failed = '` + overflowTag + ` reservation of ' .. rn[r] .. ' seqs after ' .. last[s] .. ' would pass MaxSeq', true
    else
      first[r], last[s] = last[s], nl
    end
  end
end
if failed then return fail(status) end
if dry then return {'ok'} end
local out = {'ok'}
for s = 1, S do
  if created[s] then
    redis.call('HSET', KEYS[2 * s - 1], 'epoch', epoch[s], 'last', last[s])
  else
    redis.call('HSET', KEYS[2 * s - 1], 'last', last[s])
  end
end
for r = 1, R do
  local s = rs[r]
  for i = 1, rnb[r] do
    redis.call('HSET', KEYS[2 * s], adddec(first[r], tostring(i)), ARGV[rb[r] + i - 1])
  end
  if rnb[r] > 0 and index[s] > 0 then
    redis.call('SADD', KEYS[index[s]], names[s])
  end
  out[#out + 1] = epoch[s]
  out[#out + 1] = first[r]
end
return out
`)

// sentScript deletes journal entries of several streams.
//
// KEYS: the journals of marks 1..M, then the pending index keys.
// ARGV: M, then per mark its stream key, the position in KEYS of its
// queue's index (0: none), the number of seqs and the seqs.
//
// Returns one status per mark: a mark whose journal key holds a foreign
// value is skipped.
var sentScript = redis.NewScript(luaTypes + `
local p, status = 2, {}
for m = 1, tonumber(ARGV[1]) do
  local name, index, n = ARGV[p], tonumber(ARGV[p + 1]), tonumber(ARGV[p + 2])
  local bad = badtype(KEYS[m], 'hash', 'journal')
  if not bad and index > 0 then bad = badtype(KEYS[index], 'set', 'pending index') end
  status[m] = bad or ''
  if not bad then
    local i = p + 3
    while i < p + 3 + n do
      local j = math.min(i + 999, p + 2 + n)
      redis.call('HDEL', KEYS[m], unpack(ARGV, i, j))
      i = j + 1
    end
    if index > 0 and redis.call('HLEN', KEYS[m]) == 0 then
      redis.call('SREM', KEYS[index], name)
    end
  end
  p = p + 3 + n
end
return status
`)

// cursorsScript reads cursors. KEYS: the cursor hashes. Returns per key its
// raw fields (Go validates them), or a corrupt status for a key of another
// type.
var cursorsScript = redis.NewScript(luaTypes + `
local out = {}
for i = 1, #KEYS do
  out[i] = badtype(KEYS[i], 'hash', 'cursor') or redis.call('HMGET', KEYS[i], 'epoch', 'next', 'owner', 'skipped')
end
return out
`)

// luaCursor reads a stored cursor's epoch, next and owner ('0' each when
// the cursor was never stored), or returns a corrupt status as its fourth
// value. A key of another type makes HMGET fail, caught by pcall before
// anything is written: cheaper than asking TYPE first on Advance's path.
// It needs luaCommon.
const luaCursor = `
local function readcursor(k)
  local v = redis.pcall('HMGET', k, 'epoch', 'next', 'owner')
  if v.err then
    return nil, nil, nil, '` + corruptTag + ` cursor key holds a foreign value: ' .. v.err
  end
  local e, n, o = v[1], v[2], v[3]
  if not e and not n and not o then
    if redis.call('EXISTS', k) == 1 then
      return nil, nil, nil, '` + corruptTag + ` cursor hash has no epoch, next or owner'
    end
    return '0', '0', '0', nil
  end
  if not canon(e) or not canon(n) or not canon(o) then
    return nil, nil, nil, '` + corruptTag + ` cursor hash has a malformed epoch, next or owner'
  end
  return e, n, o, nil
end
`

// luaPark names parked entries and checks a stream's park keys. A member
// of the park sorted set is the epoch and the seq as 19-digit zero-padded
// decimals joined by ':', every score 0, so that the set's lexical order is
// (epoch, seq) order and a cursor bounds a lexical range. It needs
// luaTypes.
const luaPark = `
local function member(epoch, seq)
  return string.rep('0', 19 - #epoch) .. epoch .. ':' .. string.rep('0', 19 - #seq) .. seq
end
-- parkstate checks a stream's park set and, when the set has entries or
-- all is true, its bodies and (index > 0) the queue's park index (once per
-- script). It returns a status, or nil and the number of parks. A stream
-- without parks costs one ZCARD (a foreign type makes it fail, caught by
-- pcall).
local indexok = {}
local function parkstate(set, bodies, index, all)
  local z = redis.pcall('ZCARD', set)
  if type(z) == 'table' then
    return '` + corruptTag + ` park key holds a foreign value: ' .. tostring(z.err), 0
  end
  if z == 0 and not all then return nil, 0 end
  local bad = badtype(bodies, 'hash', 'park bodies')
  if not bad and index > 0 and not indexok[index] then
    bad = badtype(KEYS[index], 'set', 'park index')
    indexok[index] = not bad
  end
  return bad, z
end
-- unpark drops the parked entries of a stream (n of them) that cursor
-- (epoch, next) passed, at most limit of them from the lowest, and
-- unlists the stream (index > 0) when none is left. It returns 1 when
-- passed entries may be left (limit of them were dropped, not all n).
local function unpark(set, bodies, n, index, name, epoch, next, limit)
  local bound = '(' .. member(epoch, next)
  local gone = redis.call('ZRANGEBYLEX', set, '-', bound, 'LIMIT', 0, limit)
  if #gone == 0 then return 0 end
  local i = 1
  while i <= #gone do
    local j = math.min(i + 999, #gone)
    redis.call('HDEL', bodies, unpack(gone, i, j))
    i = j + 1
  end
  -- Members are unique and all score 0: this range is exactly gone.
  redis.call('ZREMRANGEBYLEX', set, '-', '[' .. gone[#gone])
  if #gone == n then
    if index > 0 then redis.call('SREM', KEYS[index], name) end
    return 0
  end
  if #gone == limit then return 1 end
  return 0
end
`

// advanceScript compare-and-sets several cursors, all or nothing, and drops
// the parked entries each new cursor passed, at most dropChunk per stream
// (see dropScript for the rest).
//
// KEYS: per stream i = 1..N, KEYS[3i-2] its cursor hash, KEYS[3i-1] its
// park set and KEYS[3i] its park bodies; then the park index keys. ARGV:
// dry ("1": check only), then 9 per stream: from epoch, next, owner, to
// epoch, next, owner, skipped, the position in KEYS of its queue's park
// index (0: none) and its stream key.
//
// A stream without parks costs one ZCARD beyond the compare-and-set.
// Returns {"ok"} when dry, {"ok", more per stream} when applied (more is 1
// when passed entries of the stream may be left for dropScript), or
// {"fail", status per stream} writing nothing.
var advanceScript = redis.NewScript(luaCommon + luaTypes + luaCursor + luaPark + `
local N = (#ARGV - 1) / 9
local status, parked, failed = {}, {}, false
for i = 1, N do
  local b = 1 + (i - 1) * 9
  local e, n, o, bad = readcursor(KEYS[3 * i - 2])
  status[i], parked[i] = bad or '', 0
  if status[i] == '' then
    bad, parked[i] = parkstate(KEYS[3 * i - 1], KEYS[3 * i], tonumber(ARGV[b + 8]), false)
    status[i] = bad or ''
    if status[i] == '' and (e ~= ARGV[b + 1] or n ~= ARGV[b + 2] or o ~= ARGV[b + 3]) then
      status[i] = '` + conflictTag + ` stored cursor ' .. e .. '/' .. n .. ' owner ' .. o
    end
  end
  if status[i] ~= '' then failed = true end
end
if failed then return fail(status) end
if ARGV[1] == '1' then return {'ok'} end
local out = {'ok'}
for i = 1, N do
  local b = 1 + (i - 1) * 9
  redis.call('HSET', KEYS[3 * i - 2], 'epoch', ARGV[b + 4], 'next', ARGV[b + 5], 'owner', ARGV[b + 6], 'skipped', ARGV[b + 7])
  out[i + 1] = 0
  if parked[i] > 0 then
    out[i + 1] = unpark(KEYS[3 * i - 1], KEYS[3 * i], parked[i], tonumber(ARGV[b + 8]), ARGV[b + 9], ARGV[b + 4], ARGV[b + 5], ` + dropChunkLua + `)
  end
end
return out
`)

// dropScript drops, from the lowest, at most dropChunk parked entries of
// one stream that its stored cursor passed: what an Advance left when it
// passed more than dropChunk (or a crash left between chunks). It reads the
// cursor itself, so it never drops an entry at or above the cursor, however
// far the cursor moved since.
//
// KEYS: the stream's cursor hash, park set and park bodies, then its
// queue's park index (single node only). ARGV: the position of the index
// in KEYS (0: none) and the stream key.
//
// Returns 1 when passed entries may be left, 0 when none is, or a corrupt
// status.
var dropScript = redis.NewScript(luaCommon + luaTypes + luaCursor + luaPark + `
local e, n, _, bad = readcursor(KEYS[1])
if bad then return bad end
local index = tonumber(ARGV[1])
local z
bad, z = parkstate(KEYS[2], KEYS[3], index, false)
if bad then return bad end
if z == 0 then return 0 end
return unpark(KEYS[2], KEYS[3], z, index, ARGV[2], e, n, ` + dropChunkLua + `)
`)

// parkedScript tells ParkedStreams about one stream: KEYS its cursor hash
// and park set. Returns {live, total}: how many parked entries the stored
// cursor has not passed, and how many there are. A foreign or malformed
// cursor counts every entry live (the receiver will meet the corruption
// when it reads the cursor).
var parkedScript = redis.NewScript(luaCommon + luaTypes + luaCursor + luaPark + `
local total = redis.call('ZCARD', KEYS[2])
if total == 0 then return {0, 0} end
local e, n, _, bad = readcursor(KEYS[1])
if bad then return {total, total} end
return {redis.call('ZLEXCOUNT', KEYS[2], '[' .. member(e, n), '+'), total}
`)

// parkScript parks entries of several streams, all or nothing.
//
// KEYS: per stream s = 1..S, KEYS[3s-2] its cursor hash, KEYS[3s-1] its
// park set and KEYS[3s] its park bodies; then the park index keys. ARGV:
// dry ("1": check only), S, then per stream its stream key and the
// position in KEYS of its queue's park index (0: none), then per entry its
// stream number, epoch, seq and stored value (CRC and body).
//
// Returns {"ok"}, or {"fail", status per entry} writing nothing.
var parkScript = redis.NewScript(luaCommon + luaTypes + luaCursor + luaPark + `
local function lt(a, b)
  if #a ~= #b then return #a < #b end
  return a < b
end
local S = tonumber(ARGV[2])
local bad, ce, cn = {}, {}, {}
for s = 1, S do
  local e, n, _, b = readcursor(KEYS[3 * s - 2])
  if not b then b = parkstate(KEYS[3 * s - 1], KEYS[3 * s], tonumber(ARGV[2 + 2 * s]), true) end
  bad[s], ce[s], cn[s] = b, e, n
end
local p0 = 3 + 2 * S
local E = (#ARGV - p0 + 1) / 4
local status, failed = {}, false
for i = 1, E do
  local p = p0 + (i - 1) * 4
  local s, e, q = tonumber(ARGV[p]), ARGV[p + 1], ARGV[p + 2]
  status[i] = ''
  if bad[s] then
    status[i], failed = bad[s], true
  elseif lt(e, ce[s]) or e == ce[s] and lt(q, cn[s]) then
    status[i], failed = '` + conflictTag + ` stored cursor ' .. ce[s] .. '/' .. cn[s] .. ' passed ' .. e .. '/' .. q, true
  end
end
if failed then return fail(status) end
if ARGV[1] == '1' then return {'ok'} end
-- One ZADD and one HSET per stream (in chunks of 1000 entries, within
-- unpack's limits), one SADD per index.
local zadd, hset = {}, {}
local function flush(s)
  if #zadd[s] == 0 then return end
  redis.call('ZADD', KEYS[3 * s - 1], unpack(zadd[s]))
  redis.call('HSET', KEYS[3 * s], unpack(hset[s]))
  zadd[s], hset[s] = {}, {}
end
for s = 1, S do zadd[s], hset[s] = {}, {} end
for i = 1, E do
  local p = p0 + (i - 1) * 4
  local s = tonumber(ARGV[p])
  local m = member(ARGV[p + 1], ARGV[p + 2])
  local z, h = zadd[s], hset[s]
  z[#z + 1], z[#z + 2] = 0, m
  h[#h + 1], h[#h + 2] = m, ARGV[p + 3]
  if #z >= 2000 then flush(s) end
end
local names = {}
for s = 1, S do
  flush(s)
  local index = tonumber(ARGV[2 + 2 * s])
  if index > 0 then
    names[index] = names[index] or {}
    table.insert(names[index], ARGV[1 + 2 * s])
  end
end
for index, list in pairs(names) do
  local i = 1
  while i <= #list do
    local j = math.min(i + 999, #list)
    redis.call('SADD', KEYS[index], unpack(list, i, j))
    i = j + 1
  end
end
return {'ok'}
`)

// unparkScript reads parked entries. KEYS: per query q, KEYS[3q-2] its
// stream's park set, KEYS[3q-1] its park bodies and KEYS[3q] its cursor
// hash. ARGV: per query the lowest member wanted (epoch and From), the
// lexical range's high bound and the most entries. An entry the stored
// cursor passed is never returned (Advance may leave some for dropScript).
// Returns per query {member, value, ...} (Go validates them), or a corrupt
// status.
var unparkScript = redis.NewScript(luaCommon + luaTypes + luaCursor + luaPark + `
local out = {}
for q = 1, #KEYS / 3 do
  local set, bodies = KEYS[3 * q - 2], KEYS[3 * q - 1]
  local bad = badtype(set, 'zset', 'park') or badtype(bodies, 'hash', 'park bodies')
  local e, n, o
  if not bad then e, n, o, bad = readcursor(KEYS[3 * q]) end
  if bad then
    out[q] = bad
  else
    local b = 3 * (q - 1)
    local low = ARGV[b + 1]
    local passed = member(e, n)
    if low < passed then low = passed end
    local ms = redis.call('ZRANGEBYLEX', set, '[' .. low, ARGV[b + 2], 'LIMIT', 0, ARGV[b + 3])
    local r, i = {}, 1
    while i <= #ms do
      local j = math.min(i + 999, #ms)
      local vs = redis.call('HMGET', bodies, unpack(ms, i, j))
      for k = i, j do
        r[2 * k - 1] = ms[k]
        r[2 * k] = vs[k - i + 1]
      end
      i = j + 1
    end
    out[q] = r
  end
end
return out
`)

// indexAddScript: KEYS index; ARGV stream key. A script so that it travels
// the same way (and through the same NOSCRIPT fallback) as the others.
var indexAddScript = redis.NewScript(`
return redis.call('SADD', KEYS[1], ARGV[1])
`)

// pruneScript (single node only): KEYS a stream's journal or park set, an
// index; ARGV stream key. Removes the stream from the index if the key is
// gone (Redis deletes an emptied hash or sorted set).
var pruneScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 0 then
  return redis.call('SREM', KEYS[2], ARGV[1])
end
return 0
`)
