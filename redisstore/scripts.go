package redisstore

import (
	"strconv"

	"github.com/redis/go-redis/v9"
)

// The scripts run on the Redis server, each in one atomic step, and read the time from
// the server (TIME), so replicas with skewed clocks agree. Times are microseconds since
// the Unix epoch, which a Lua number (a double) holds to a fraction of a microsecond, and
// no time a script writes lies more than twice WaitHorizon ahead of the server's clock.
//
// A scope's buckets live in one hash, KEYS[1] = "{prefix:scope}:g", with one field per
// bucket holding its theoretical arrival time (GCRA): mr, mt for the main lane's request
// and token buckets, br, bt for the batch lane's, and p for the end of a pause. A bucket
// whose time has passed is full, so the hash expires once every time has passed.
//
// A scope's concurrency slots are four sorted sets sharing the same hash tag: s holds the
// leases (member: "m" or "b" for main or batch, then the lease id; score: expiry), sb the
// batch leases again, w the waiters in arrival order, wx the waiters' expiries.

// luaPrelude defines what every script shares: H, C and P are WaitHorizon, MaxCharge and
// MaxPause in µs (clamp.go); num reads a number, anything else (a missing field, NaN)
// counting as 0.
var luaPrelude = `
local H, C, P = ` + strconv.FormatInt(horizonMicros, 10) + `, ` + strconv.FormatInt(chargeMicros, 10) + `, ` +
	strconv.FormatInt(pauseMicros, 10) + `
local function now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local function num(x)
  x = tonumber(x)
  if x == nil or x ~= x then return 0 end
  return x
end
local function fmt(x) return string.format('%.17g', x) end
`

// luaBuckets reads the scope's hash into f, bringing any time beyond twice the horizon
// back to it (a hash written by hand or by an older version heals), and defines:
//
//	save(fields...)  writes the fields back and sets the hash to expire once every time
//	                 has passed (at most twice WaitHorizon and a second away);
//	bucket(i, b)     returns a bucket's interval, burst and largest charge, clamped as
//	                 newBucket clamps them in Go;
//	bound(n, c)      returns the number n within [-c, c].
var luaBuckets = luaPrelude + `
local h = KEYS[1]
local now = now_us()
local v = redis.call('HMGET', h, 'mr', 'mt', 'br', 'bt', 'p')
local f = {mr = num(v[1]), mt = num(v[2]), br = num(v[3]), bt = num(v[4]), p = num(v[5])}
for k, x in pairs(f) do if x > now + 2 * H then f[k] = now + 2 * H end end
local function save(...)
  local a = {}
  for _, k in ipairs({...}) do a[#a + 1] = k; a[#a + 1] = fmt(f[k]) end
  redis.call('HSET', h, unpack(a))
  local last = now
  for _, x in pairs(f) do if x > last then last = x end end
  redis.call('PEXPIRE', h, math.ceil((last - now) / 1000) + 1000)
end
local function bucket(i, b)
  i, b = num(i), num(b)
  if not (i > 0) then return 0, 0, 0 end
  if i > H then i = H end
  if not (b > 0) then b = 0 end
  if b > H / i then b = H / i end
  local c = C / i
  if b > c then c = b end
  return i, b, c
end
local function bound(n, c)
  n = num(n)
  if n > c then return c end
  if n < -c then return -c end
  return n
end
local lane = ARGV[1]
if lane ~= 'b' then lane = 'm' end
`

// reserveScript: ARGV lane ("m" or "b"), requests, tokens, max wait in µs (negative: no
// bound but the horizon), request interval in µs, request burst, token interval in µs,
// token burst. Returns {admitted (1 or 0), wait in µs}; the wait is at most the horizon.
var reserveScript = redis.NewScript(luaBuckets + `
local ri, rb, rc = bucket(ARGV[5], ARGV[6])
local ti, tb, tc = bucket(ARGV[7], ARGV[8])
local req, tok = math.max(bound(ARGV[2], rc), 0), math.max(bound(ARGV[3], tc), 0)
local maxw = num(ARGV[4])
if maxw < 0 or maxw > H then maxw = H end
local rk, tk = lane .. 'r', lane .. 't'
local at = now
if lane == 'm' and f.p > at then at = f.p end
if ri > 0 and req > 0 then at = math.max(at, f[rk] - rb * ri + math.min(req, rb) * ri) end
if ti > 0 then at = math.max(at, f[tk] - tb * ti + math.min(tok, tb) * ti) end
local wait = math.ceil(at - now)
if wait > maxw then return {0, math.min(wait, H)} end
if ri > 0 and req > 0 then f[rk] = math.min(math.max(f[rk], at) + req * ri, now + 2 * H) end
if ti > 0 then f[tk] = math.min(math.max(f[tk], at) + tok * ti, now + 2 * H) end
save(rk, tk)
return {1, wait}
`)

// adjustScript: ARGV lane, requests, tokens (negative: give back), request interval,
// request burst, token interval, token burst. A bucket given back never holds more than
// its burst; one charged never goes beyond twice the horizon.
var adjustScript = redis.NewScript(luaBuckets + `
local function shift(k, n, i, c)
  if i <= 0 then return end
  n = bound(n, c)
  if n < 0 then
    if f[k] > now then f[k] = math.max(now, f[k] + n * i) end
  elseif n > 0 then
    f[k] = math.min(math.max(f[k], now) + n * i, now + 2 * H)
  end
end
local ri, rb, rc = bucket(ARGV[4], ARGV[5])
local ti, tb, tc = bucket(ARGV[6], ARGV[7])
shift(lane .. 'r', ARGV[2], ri, rc)
shift(lane .. 't', ARGV[3], ti, tc)
save(lane .. 'r', lane .. 't')
return 1
`)

// syncScript: ARGV ignored lane, remaining requests, remaining tokens (negative: unknown),
// then the main lane's request interval, request burst, token interval, token burst. It
// lowers the main buckets to the remaining amounts and never raises them.
var syncScript = redis.NewScript(luaBuckets + `
local function lower(k, rem, i, b)
  rem = num(rem)
  if i > 0 and rem >= 0 and rem < b then f[k] = math.max(f[k], now + (b - rem) * i) end
end
local ri, rb = bucket(ARGV[4], ARGV[5])
local ti, tb = bucket(ARGV[6], ARGV[7])
lower('mr', ARGV[2], ri, rb)
lower('mt', ARGV[3], ti, tb)
save('mr', 'mt')
return 1
`)

// pauseScript: ARGV ignored lane, pause in µs (at most MaxPause). A longer pause already
// in force is kept.
var pauseScript = redis.NewScript(luaBuckets + `
local d = num(ARGV[2])
if d < 0 then d = 0 end
if d > P then d = P end
f.p = math.max(f.p, now + d)
save('p')
return 1
`)

// pauseLeftScript returns the µs left of the scope's pause, 0 when there is none, at most
// the horizon.
var pauseLeftScript = redis.NewScript(luaPrelude + `
local left = num(redis.call('HGET', KEYS[1], 'p')) - now_us()
if left <= 0 then return 0 end
return math.ceil(math.min(left, H))
`)

// slotScript: KEYS s, sb, w, wx; ARGV op, member, max slots, max batch slots, lease TTL
// in ms, waiter TTL in ms (each TTL within [1ms, 1h], as the options allow). Every call first drops expired leases and waiters and grants
// free slots to the queued waiters in arrival order, as the in-memory store does when a
// slot is freed; a waiter granted that way holds its slot for the waiter TTL until it
// polls and claims it (so a dead waiter's grant soon comes back). Then by op:
//
//	try:     take a slot if one is free; returns 1 when taken (or already granted).
//	wait:    as try, else join the queue or stay in it; returns 1 once granted.
//	release: give the member's slot back, or leave the queue, handing on a slot granted
//	         meanwhile; returns 0.
var slotScript = redis.NewScript(luaPrelude + `
local s, sb, w, wx = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local op, m = ARGV[1], ARGV[2]
local function ttl(x) return math.min(math.max(math.floor(num(x)), 1), 3600000) end
local max, bmax = num(ARGV[3]), num(ARGV[4])
local lttl, wttl = ttl(ARGV[5]) * 1000, ttl(ARGV[6]) * 1000
local now = now_us()
redis.call('ZREMRANGEBYSCORE', s, '-inf', now)
redis.call('ZREMRANGEBYSCORE', sb, '-inf', now)
for _, x in ipairs(redis.call('ZRANGEBYSCORE', wx, '-inf', now)) do
  redis.call('ZREM', w, x)
  redis.call('ZREM', wx, x)
end
local inuse, binuse = redis.call('ZCARD', s), redis.call('ZCARD', sb)
local function isbatch(x) return string.sub(x, 1, 1) == 'b' end
local function can(x) return inuse < max and (not isbatch(x) or binuse < bmax) end
local function take(x, ttl)
  redis.call('ZADD', s, now + ttl, x)
  inuse = inuse + 1
  if isbatch(x) then
    redis.call('ZADD', sb, now + ttl, x)
    binuse = binuse + 1
  end
end
local function grant()
  if inuse >= max then return end
  for _, x in ipairs(redis.call('ZRANGE', w, 0, -1)) do
    if inuse >= max then break end
    if can(x) then
      take(x, wttl)
      redis.call('ZREM', w, x)
      redis.call('ZREM', wx, x)
    end
  end
end
local function free(x)
  if redis.call('ZREM', s, x) == 1 then
    inuse = inuse - 1
    if redis.call('ZREM', sb, x) == 1 then binuse = binuse - 1 end
  end
end
grant()
local r = 0
if op == 'release' then
  redis.call('ZREM', w, m)
  redis.call('ZREM', wx, m)
  free(m)
  grant()
elseif redis.call('ZSCORE', s, m) then
  redis.call('ZADD', s, now + lttl, m)
  if isbatch(m) then redis.call('ZADD', sb, now + lttl, m) end
  r = 1
elseif redis.call('ZSCORE', w, m) then
  redis.call('ZADD', wx, now + wttl, m)
elseif can(m) then
  take(m, lttl)
  r = 1
elseif op == 'wait' then
  redis.call('ZADD', w, now, m)
  redis.call('ZADD', wx, now + wttl, m)
end
local keep = 2 * (lttl + wttl) / 1000
for _, k in ipairs(KEYS) do redis.call('PEXPIRE', k, keep) end
return r
`)

// renewScript: KEYS s, sb; ARGV lease TTL in ms (within [1ms, 1h]), then the members held. It extends the
// leases that still exist and returns how many had already expired.
var renewScript = redis.NewScript(luaPrelude + `
local s, sb = KEYS[1], KEYS[2]
local now = now_us()
local ttl = math.min(math.max(math.floor(num(ARGV[1])), 1), 3600000)
local exp = now + ttl * 1000
redis.call('ZREMRANGEBYSCORE', s, '-inf', now)
redis.call('ZREMRANGEBYSCORE', sb, '-inf', now)
local lost = 0
for i = 2, #ARGV do
  local x = ARGV[i]
  if redis.call('ZSCORE', s, x) then
    redis.call('ZADD', s, exp, x)
    if string.sub(x, 1, 1) == 'b' then redis.call('ZADD', sb, exp, x) end
  else
    lost = lost + 1
  end
end
local keep = 4 * ttl
redis.call('PEXPIRE', s, keep)
redis.call('PEXPIRE', sb, keep)
return lost
`)
