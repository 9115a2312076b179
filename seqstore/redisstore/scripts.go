package redisstore

import "github.com/redis/go-redis/v9"

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

// Tags of errors raised by the scripts: malformed stored state, and a
// counter that would pass MaxSeq.
const (
	corruptTag  = "INORDER_CORRUPT"
	overflowTag = "INORDER_OVERFLOW"
)

// reserveScript: KEYS send, journal[, index]; ARGV n, new epoch, stream key,
// bodies... Returns {epoch, last before the reservation}.
var reserveScript = redis.NewScript(luaCommon + `
-- Check every key's type before the first write: Redis does not roll a
-- script back when a later command fails.
local function typeof(k)
  local t = redis.call('TYPE', k)
  if type(t) == 'table' then return t.ok end
  return t
end
local jt = typeof(KEYS[2])
if jt ~= 'none' and jt ~= 'hash' then
  return redis.error_reply('` + corruptTag + ` journal key holds a ' .. jt)
end
if KEYS[3] then
  local it = typeof(KEYS[3])
  if it ~= 'none' and it ~= 'set' then
    return redis.error_reply('` + corruptTag + ` pending index key holds a ' .. it)
  end
end
local v = redis.call('HMGET', KEYS[1], 'epoch', 'last')
local epoch, last = v[1], v[2]
if not epoch and not last then
  if redis.call('EXISTS', KEYS[1]) == 1 then
    return redis.error_reply('` + corruptTag + ` send hash has neither epoch nor last')
  end
  epoch = ARGV[2]
  last = '0'
  redis.call('HSET', KEYS[1], 'epoch', epoch, 'last', last)
elseif not canon(epoch) or not canon(last) or epoch == '0' then
  return redis.error_reply('` + corruptTag + ` send hash has a malformed epoch or last')
end
local newlast = adddec(last, ARGV[1])
if not le(newlast, '9223372036854775807') then
  return redis.error_reply('` + overflowTag + ` reservation would pass MaxSeq')
end
redis.call('HSET', KEYS[1], 'last', newlast)
local nb = #ARGV - 3
for i = 1, nb do
  redis.call('HSET', KEYS[2], adddec(last, tostring(i)), ARGV[3 + i])
end
if nb > 0 and KEYS[3] then
  redis.call('SADD', KEYS[3], ARGV[3])
end
return {epoch, last}
`)

// sentScript: KEYS journal[, index]; ARGV stream key, seqs...
var sentScript = redis.NewScript(`
local i = 2
while i <= #ARGV do
  local j = math.min(i + 999, #ARGV)
  redis.call('HDEL', KEYS[1], unpack(ARGV, i, j))
  i = j + 1
end
if KEYS[2] and redis.call('HLEN', KEYS[1]) == 0 then
  redis.call('SREM', KEYS[2], ARGV[1])
end
return 0
`)

// cursorScript: KEYS cursor. Returns the raw fields; Go validates them.
var cursorScript = redis.NewScript(`
return redis.call('HMGET', KEYS[1], 'epoch', 'next', 'owner', 'skipped')
`)

// advanceScript: KEYS cursors...; ARGV 7 per key: from epoch, next, owner,
// to epoch, next, owner, skipped. Returns the 1-based indexes of the
// conflicting keys, empty when all were applied.
var advanceScript = redis.NewScript(luaCommon + `
local conflicts = {}
for i = 1, #KEYS do
  local b = (i - 1) * 7
  local v = redis.call('HMGET', KEYS[i], 'epoch', 'next', 'owner')
  local e, n, o = v[1], v[2], v[3]
  if not e and not n and not o then
    if redis.call('EXISTS', KEYS[i]) == 1 then
      return redis.error_reply('` + corruptTag + ` cursor hash ' .. i .. ' has no epoch, next or owner')
    end
    e, n, o = '0', '0', '0'
  elseif not canon(e) or not canon(n) or not canon(o) then
    return redis.error_reply('` + corruptTag + ` cursor hash ' .. i .. ' has a malformed epoch, next or owner')
  end
  if e ~= ARGV[b + 1] or n ~= ARGV[b + 2] or o ~= ARGV[b + 3] then
    conflicts[#conflicts + 1] = i
  end
end
if #conflicts > 0 then
  return conflicts
end
for i = 1, #KEYS do
  local b = (i - 1) * 7
  redis.call('HSET', KEYS[i], 'epoch', ARGV[b + 4], 'next', ARGV[b + 5], 'owner', ARGV[b + 6], 'skipped', ARGV[b + 7])
end
return {}
`)

// indexAddScript: KEYS index; ARGV stream key. A script so that it travels
// the same way (and through the same NOSCRIPT fallback) as the others.
var indexAddScript = redis.NewScript(`
return redis.call('SADD', KEYS[1], ARGV[1])
`)

// pruneScript (single node only): KEYS journal, index; ARGV stream key.
// Removes the stream from the index if its journal is empty.
var pruneScript = redis.NewScript(`
if redis.call('HLEN', KEYS[1]) == 0 then
  return redis.call('SREM', KEYS[2], ARGV[1])
end
return 0
`)
