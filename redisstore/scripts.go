package redisstore

import (
	"strconv"

	"github.com/llmclient/llmclient/limitstore"
	"github.com/redis/go-redis/v9"
)

// fitForget is limitstore.FitForget as Lua source.
var fitForget = strconv.FormatFloat(limitstore.FitForget, 'g', -1, 64)

// fitProbe is limitstore.FitProbe as Lua source.
var fitProbe = strconv.FormatFloat(limitstore.FitProbe, 'g', -1, 64)

// The scripts run on the Redis server, each in one atomic step, and read the time from
// the server (TIME), so replicas with skewed clocks agree. Times are microseconds since
// the Unix epoch, which a Lua number (a double) holds to a fraction of a microsecond, and
// no time a script writes lies more than twice WaitHorizon ahead of the server's clock.
// The bucket scripts are a port of limitstore's in-memory state (limitstore/memory.go):
// the same generic cell rate algorithm, the same bounds, the same Sync.
//
// A scope's state lives in one hash, KEYS[1] = "{prefix:scope}:g":
//
//	mr, mt, dr, dt      the main lane's request, token, daily request and daily token
//	                    buckets' theoretical arrival times (GCRA); br, bt the batch gate's
//	<bucket>c, v, l, e  a main bucket's correction count, reserve, net Sync lowering and
//	                    residual (limitstore.State.Sync)
//	<bucket>i, b        the spec the scope enforces: each main bucket's interval in µs per
//	                    unit (absent: no limit) and burst; sh the batch share; sp is set
//	                    once a spec is stored (the first caller's, until Retune)
//	p, x                the ends of the scope's pause and eviction
//	mk, sy, fi          the last reservation's mark, the mark of the latest report applied,
//	                    and whether one was
//	T1-T3, S1-S3        the totals (tokens, estimates, requests) and the last applied
//	                    report's; F1-F4 the charge fit (counted, estimated, noise, reports);
//	U1-U2               the totals (tokens, estimates) of the report the fit last took an
//	                    observation from (or the first applied report)
//	mh, mo              the tokens held by InFlight reservations, and how much larger
//	                    than mt's burst the vendor's bucket is (limitstore.Reservation)
//
// The hash expires an hour after its last time has passed (a scope idle that long starts
// afresh, as the in-memory store drops idle scopes). Marks start at the server's clock in
// µs, so the marks of a scope started afresh are above every earlier one's, and a report
// about an earlier one's reservation changes nothing.
//
// Holds. mh is the sum of the holds of InFlight reservations, each kept under a lease in
// KEYS[2] = "{prefix:scope}:hz", a sorted set whose members are "<mark>:<tokens>" (the
// reservation's mark and the tokens it holds) scored by the end of the hold's lease (µs,
// on the scripts' clock). The reservation takes a lease of the store's lease TTL and
// returns its member; the process that made it renews the lease every third of that
// (holdRenewScript) until it ends the hold (adjustScript, by member). Every bucket script
// first ends the holds whose lease has passed (at most 1,000 a call; the rest in the next
// calls): a process that died, was killed or lost Redis for longer than the lease keeps
// the others' buckets short of its holds for at most the lease, never for the hour the
// hash outlives it. A renewal that finds a hold missing while its call is still in flight
// (Redis lost its data, or the lease passed while the process could not reach Redis)
// makes it again, member and tokens, with a fresh lease, and sets mh to the sum of hz; in
// a scope started afresh the hash then holds mh alone, which the bucket scripts read as a
// scope without a spec, mark or levels yet, holding mh. A hold ends once: ending a member
// that is not in hz (ended before, its lease passed, or Redis lost its data) ends
// nothing, so mh never goes below 0 and never loses another reservation's hold; mh is 0
// whenever hz is empty (hz lost on its own heals mh). A hold made again after its call
// ended (the end reached Redis between the renewal's start and its run) is ended again
// by the renewing process, or else ends with its lease, as nothing renews it.
//
// A scope's concurrency slots are four sorted sets sharing the same hash tag: s holds the
// leases (member: "m" or "b" for main or batch, then the lease id; score: expiry), sb the
// batch leases again, w the waiters in arrival order, wx the waiters' expiries.

// luaPrelude defines what every script shares: H, C, P are WaitHorizon, ChargeHorizon
// (and DebtHorizon) and MaxPause in µs (clamp.go), MB limitstore.MaxBurst; num reads a
// number, anything else (a missing field, NaN, an infinity) counting as 0; known reads
// a number, nil when it is not a finite one.
var luaPrelude = `
local H, C, P, MB = ` + strconv.FormatInt(horizonMicros, 10) + `, ` + strconv.FormatInt(chargeMicros, 10) + `, ` +
	strconv.FormatInt(pauseMicros, 10) + `, ` + strconv.FormatInt(limitstore.MaxBurst, 10) + `
local INF = math.huge
local CLOCK
local function now_us()
  if CLOCK then return CLOCK end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local function known(x)
  x = tonumber(x)
  if x == nil or x ~= x or x == INF or x == -INF then return nil end
  return x
end
local function num(x) return known(x) or 0 end
local function fmt(x) return string.format('%.17g', x) end
local function kfmt(x)
  if x == nil or x ~= x or x == INF or x == -INF then return '' end
  return fmt(x)
end
`

// luaClock takes the bucket scripts' first argument off ARGV: "" to compute with the
// server's clock (TIME), which is what a Store sends, or a time in µs within [2^50, 2^53)
// (2005 to 2255) to compute with instead (a test's virtual clock); anything else is "".
// The indexes in the scripts' descriptions are those after it.
const luaClock = `
CLOCK = known(table.remove(ARGV, 1))
if CLOCK and not (CLOCK >= 2 ^ 50 and CLOCK < 2 ^ 53) then CLOCK = nil end
if CLOCK then CLOCK = math.floor(CLOCK) end
`

// luaScope reads the scope's hash into f (bringing any time beyond twice the horizon back
// to it, so that a hash written by hand heals) and its buckets B from the stored spec, or
// from ARGV[1..9] (interval and burst of mr, mt, dr, dt, then the batch share) when none
// is stored yet, and defines:
//
//	set(k, x)       sets field k (written by save);
//	save()          writes the fields set and the hash's expiry;
//	level(k, at)    what bucket k holds at at (negative: a debt);
//	ready(k, n)     the earliest time from now at which bucket k holds n plus its reserve,
//	                or its whole burst when that is less;
//	charge(k, at, n), take(k, n), give(k, n), cap(k, n)  as limitstore's memory gcra.
var luaScope = luaPrelude + luaClock + `
local h = KEYS[1]
local now = now_us()
local raw = redis.call('HGETALL', h)
local f, dirty = {}, {}
for i = 1, #raw, 2 do f[raw[i]] = raw[i + 1] end
local function g(k) return num(f[k]) end
local function set(k, x) f[k] = x; dirty[k] = true end
for _, k in ipairs({'mr', 'mt', 'dr', 'dt', 'br', 'bt', 'p', 'x'}) do
  local x = g(k)
  if x > now + 2 * H then x = now + 2 * H end
  f[k] = x
end
local MAIN = {'mr', 'mt', 'dr', 'dt'}
local function mkbucket(i, b, share)
  i, b = num(i), num(b)
  if not (i > 0) then return nil end
  if not (b >= 1) then b = 1 end
  if b > MB then b = MB end
  i, b = i / share, b * share
  if i > H then i = H end
  if b > H / i then b = H / i end
  return {i = i, b = b, tau = b * i, c = b + math.min(C / i, MB)}
end
local function spec_from(a, o)
  local share = num(a[o + 9])
  if not (share > 0 and share <= 1) then share = 1 end
  local s = {sh = share}
  for n, k in ipairs(MAIN) do s[k] = mkbucket(a[o + 2 * n - 1], a[o + 2 * n], 1) end
  s.br = s.mr and mkbucket(a[o + 1], a[o + 2], share)
  s.bt = s.mt and mkbucket(a[o + 3], a[o + 4], share)
  return s
end
local function store_spec(a, o)
  for n, k in ipairs(MAIN) do
    local b = mkbucket(a[o + 2 * n - 1], a[o + 2 * n], 1)
    if b then set(k .. 'i', fmt(b.i)); set(k .. 'b', fmt(b.b)) else set(k .. 'i', '0'); set(k .. 'b', '0') end
  end
  local share = num(a[o + 9])
  if not (share > 0 and share <= 1) then share = 1 end
  set('sh', fmt(share))
  set('sp', '1')
end
local B
if f.sp then
  B = spec_from({f.mri, f.mrb, f.mti, f.mtb, f.dri, f.drb, f.dti, f.dtb, f.sh}, 0)
else
  B = spec_from(ARGV, 0)
  store_spec(ARGV, 0)
end
local function level(k, at)
  local b = B[k]
  return b.b - math.max(f[k] - at, 0) / b.i
end
local function ready(k, n)
  local b = B[k]
  if not b then return now end
  return math.max(now, f[k] - b.tau + math.min(n + g(k .. 'v'), b.b) * b.i)
end
local function charge(k, at, n)
  local b = B[k]
  if b then set(k, math.min(math.max(f[k], at) + math.min(n, b.c) * b.i, now + 2 * H)) end
end
local function cap(k, n)
  local b = B[k]
  if not b then return n end
  return math.min(n, b.c)
end
local function take(k, n)
  local b = B[k]
  if not b then return end
  local limit = now + b.tau + C
  set(k, math.max(f[k], math.min(math.max(f[k], now) + math.min(n, b.c) * b.i, limit)))
end
local function give(k, n)
  local b = B[k]
  if b and f[k] > now then set(k, math.max(now, f[k] - n * b.i)) end
end
-- The holds whose lease has passed end (see Holds above); mh is 0 when none is left.
local HZ = KEYS[2]
local function heldby(m) return num(string.match(m, ':(.*)$')) end
if HZ and g('mh') > 0 then
  local mh = g('mh')
  local first = redis.call('ZRANGE', HZ, 0, 0, 'WITHSCORES')
  if #first == 0 then
    mh = 0
  elseif num(first[2]) <= now then
    local gone = redis.call('ZRANGEBYSCORE', HZ, '-inf', now, 'LIMIT', 0, 1000)
    for i = 1, #gone do mh = mh - heldby(gone[i]) end
    redis.call('ZREM', HZ, unpack(gone))
    if mh <= 0 or redis.call('ZCARD', HZ) == 0 then mh = 0 end
  end
  if mh ~= g('mh') then set('mh', mh) end
end
local function save()
  local a = {}
  for k in pairs(dirty) do
    local x = f[k]
    if type(x) == 'number' then x = fmt(x) end
    a[#a + 1] = k; a[#a + 1] = x
  end
  if #a > 0 then redis.call('HSET', h, unpack(a)) end
  local last = now
  for _, k in ipairs({'mr', 'mt', 'dr', 'dt', 'br', 'bt', 'p', 'x'}) do
    if f[k] > last then last = f[k] end
  end
  redis.call('PEXPIRE', h, math.ceil((last - now) / 1000) + 3600000)
end
-- The token bucket refills as a vendor's that counts the held tokens (mh, of InFlight
-- reservations) at their end: none while its level plus what is held is the vendor's
-- bucket, the bucket's burst plus mo (limitstore.Reservation.InFlight).
if B.mt and g('mh') > g('mo') then
  local t = math.min(now + (g('mh') - g('mo')) * B.mt.i, now + 2 * H)
  if t > f.mt then set('mt', t) end
end
`

// The scripts' arguments: ARGV[1..9] the caller's spec (specArgs), then their own.
// Amounts arrive clamped to ±MaxBurst and are clamped again.
const luaAmount = `
local function amount(x)
  x = num(x)
  if x > MB then return MB end
  if x < -MB then return -MB end
  return x
end
`

// reserveScript: ARGV[10] lane ("m" or "b"), requests, tokens, estimate (0: tokens), max
// wait in µs (negative: no bound but the horizon), "1" when the tokens are held in
// flight (limitstore.Reservation.InFlight, main lane only), the vendor's burst ("":
// unknown) and the hold's lease in µs (within [1 ms, the horizon]). Returns {admitted (1
// or 0), wait in µs} and, for an admitted reservation on the main lane, its mark, the
// predicted levels of mr, mt, dr, dt ("" for a bucket without a limit), the totals
// (tokens, estimates, requests) and, when it holds tokens in flight, the hold's member in
// hz (see Holds). The wait is at most the horizon.
var reserveScript = redis.NewScript(luaScope + luaAmount + `
local req, tok = math.max(amount(ARGV[11]), 0), math.max(amount(ARGV[12]), 0)
local est = math.max(amount(ARGV[13]), 0)
if est == 0 then est = tok end
local maxw = num(ARGV[14])
if maxw < 0 or maxw > H then maxw = H end
if ARGV[10] == 'b' then
  local at = math.max(now, ready('bt', tok))
  if req > 0 then at = math.max(at, ready('br', req)) end
  local wait = math.ceil(at - now)
  if wait > maxw then return {0, math.min(wait, H)} end
  if req > 0 then charge('br', at, req) end
  if tok > 0 then charge('bt', at, tok) end
  save()
  return {1, wait}
end
local at = math.max(now, f.p, ready('mt', tok), ready('dt', tok))
if req > 0 then at = math.max(at, ready('mr', req), ready('dr', req)) end
local wait = math.ceil(at - now)
if wait > maxw then return {0, math.min(wait, H)} end
if req > 0 then charge('mr', at, req); charge('dr', at, req) end
if tok > 0 then charge('mt', at, tok); charge('dt', at, tok) end
if not f.mk then set('sy', fmt(now - 1)) end
local mark = math.max(g('mk') + 1, now)
set('mk', fmt(mark))
local member
if ARGV[15] == '1' and B.mt and HZ then
  local held = cap('mt', tok)
  set('mh', g('mh') + held)
  local vb = known(ARGV[16])
  if vb then set('mo', math.max(vb - B.mt.b, 0)) end
  local lease = math.min(math.max(num(ARGV[17]), 1000), H)
  member = fmt(mark) .. ':' .. fmt(held)
  redis.call('ZADD', HZ, now + lease, member)
  redis.call('PEXPIRE', HZ, math.ceil(lease / 1000) + 3600000)
end
local t1, t2, t3 = g('T1') + cap('mt', tok), g('T2') + math.min(est, MB), g('T3') + cap('mr', req)
set('T1', t1); set('T2', t2); set('T3', t3)
local r = {1, wait, fmt(mark)}
for _, k in ipairs(MAIN) do
  if B[k] then r[#r + 1] = fmt(level(k, at) + g(k .. 'c')) else r[#r + 1] = '' end
end
r[#r + 1] = fmt(t1); r[#r + 1] = fmt(t2); r[#r + 1] = fmt(t3)
if member then r[#r + 1] = member end
save()
return r
`)

// adjustScript: ARGV[10] lane, requests, tokens (negative: give back), and on the main
// lane the member in hz of the hold that ends first ("": none): the hold ends if it has
// not (see Holds). A request amount applies to the request buckets, a token amount to
// the token buckets; on the main lane the totals follow (limitstore.Totals) and each
// bucket's correction count takes the change of its level.
var adjustScript = redis.NewScript(luaScope + luaAmount + `
local req, tok = amount(ARGV[11]), amount(ARGV[12])
local hm = ARGV[13]
if ARGV[10] ~= 'b' and hm and hm ~= '' and HZ and redis.call('ZREM', HZ, hm) == 1 then
  set('mh', math.max(g('mh') - heldby(hm), 0))
end
local function shift(k, n, counted)
  if not B[k] then return end
  local before = level(k, now)
  if n < 0 then give(k, -n) elseif n > 0 then take(k, n) end
  if counted then set(k .. 'c', g(k .. 'c') + before - level(k, now)) end
end
if ARGV[10] == 'b' then
  shift('br', req, false); shift('bt', tok, false)
else
  local t1, t2, t3 = g('T1'), g('T2'), g('T3')
  if req < 0 then
    local back = math.min(math.max(-tok, 0), t1)
    if t1 > 0 then t2 = t2 - back * t2 / t1 end
    t1 = t1 - back
    t3 = math.max(t3 + req, 0)
  else
    if tok > 0 then t1 = t1 + cap('mt', tok) else t1 = math.max(t1 + tok, 0) end
    t3 = t3 + cap('mr', req)
  end
  set('T1', t1); set('T2', t2); set('T3', t3)
  shift('mr', req, true); shift('mt', tok, true); shift('dr', req, true); shift('dt', tok, true)
end
save()
return 1
`)

// syncScript: ARGV[10] the report's mark, [11-14] predicted, [15-18] target, [19-22]
// reserve (each mr, mt, dr, dt; "" unknown), [23-25] totals, [26] gain. It does what
// limitstore's in-memory Sync does and returns {applied (1 or 0), made (4), covered (3),
// pending (3), fit (4)}, every count but the first as a string ("" unknown).
var syncScript = redis.NewScript(luaScope + `
local function fitr() return {g('F1'), g('F2'), g('F3'), g('F4')} end
local function reply(applied, made, cov, fit)
  local r = {applied}
  for i = 1, 4 do r[#r + 1] = kfmt(made[i]) end
  for i = 1, 3 do r[#r + 1] = fmt(cov[i]) end
  r[#r + 1] = fmt(g('T1') - num(ARGV[23])); r[#r + 1] = fmt(g('T2') - num(ARGV[24]))
  r[#r + 1] = fmt(g('T3') - num(ARGV[25]))
  for i = 1, 4 do r[#r + 1] = fmt(fit[i]) end
  return r
end
local mark = num(ARGV[10])
if not f.mk or mark <= g('sy') then
  return reply(0, {}, {0, 0, 0}, fitr())
end
local first = not f.fi
set('sy', fmt(mark)); set('fi', '1')
local tot = {num(ARGV[23]), num(ARGV[24]), num(ARGV[25])}
local cov = {tot[1] - g('S1'), tot[2] - g('S2'), tot[3] - g('S3')}
set('S1', tot[1]); set('S2', tot[2]); set('S3', tot[3])
local gain = num(ARGV[26])
if not (gain > 0 and gain <= 1) then gain = 1 end
for n, k in ipairs(MAIN) do
  local x = known(ARGV[18 + n])
  if B[k] and x and x >= 0 then set(k .. 'v', math.min(x, B[k].b)) end
end
local fit = fitr()
local function add(counted, estimated, censored)
  if not (estimated > 0) or not known(counted) or not known(estimated) then return false end
  if censored then
    if not (fit[4] >= 1 and fit[2] > 0) then return false end
    counted = math.min(counted * ` + fitProbe + `, estimated * fit[1] / fit[2])
  elseif fit[2] > 0 and fit[4] >= 1 then
    local dev = counted - estimated * fit[1] / fit[2]
    local v = dev * dev / estimated
    if not known(v) then return end
    if fit[4] >= ` + strconv.Itoa(limitstore.FitMinReports) + ` and fit[3] > 0 then v = math.min(v, 9 * fit[3]) end
    fit[3] = fit[3] + (v - fit[3]) * math.max(1 - ` + fitForget + `, 1 / (fit[4] + 1))
  end
  fit[1] = ` + fitForget + ` * fit[1] + counted
  fit[2] = ` + fitForget + ` * fit[2] + estimated
  fit[4] = fit[4] + 1
  set('F1', fit[1]); set('F2', fit[2]); set('F3', fit[3]); set('F4', fit[4])
  return true
end
local made, fitted = {}, false
for n, k in ipairs(MAIN) do
  local p, t = known(ARGV[10 + n]), known(ARGV[14 + n])
  local b = B[k]
  if b and p and t then
    local e = p - g(k .. 'c') - t
    local d = e * gain
    if known(d) then
      local observed = true
      if n % 2 == 0 and not fitted then
        fitted = true
        local fresh = e - g(k .. 'e')
        if first then
          observed = not (e < 0)
        else
          observed = add(tot[1] - g('U1') + fresh, tot[2] - g('U2'), fresh < 0 and t > 0.9 * b.b)
        end
        if observed then set('U1', tot[1]); set('U2', tot[2]) end
      end
      if d < 0 then d = math.max(d, -math.max(g(k .. 'l'), 0)) end
      local before = level(k, now)
      if d > 0 then take(k, d) elseif d < 0 then give(k, -d) end
      local change = before - level(k, now)
      set(k .. 'c', g(k .. 'c') + change)
      set(k .. 'l', g(k .. 'l') + change)
      if observed then set(k .. 'e', e - change / gain) else set(k .. 'e', g(k .. 'e') - change / gain) end
      made[n] = change
    end
  end
end
save()
return reply(1, made, cov, fit)
`)

// retuneScript: ARGV[10..18] the new spec, as ARGV[1..9]. Each bucket keeps what it owes,
// as limitstore's in-memory Retune: it stays as far below its new burst as it was below
// its old one, the change of level counting as a correction, and keeps its reserve (at
// most the new burst), net lowering and residual. A bucket that had no limit starts full;
// one that has none any more is dropped.
var retuneScript = redis.NewScript(luaScope + `
local old = B
local nb = spec_from(ARGV, 9)
local function retune(k, counted)
  local o, n = old[k], nb[k]
  if o and n then
    local deficit = math.max(f[k] - now, 0) / o.i
    local before = o.b - deficit
    set(k, math.min(now + deficit * n.i, now + 2 * H))
    if counted then
      set(k .. 'c', g(k .. 'c') + before - (n.b - deficit))
      set(k .. 'v', math.min(g(k .. 'v'), n.b))
    end
  else
    set(k, 0)
    if counted then
      for _, x in ipairs({'c', 'v', 'l', 'e'}) do set(k .. x, 0) end
    end
  end
end
for _, k in ipairs(MAIN) do retune(k, true) end
retune('br', false); retune('bt', false)
store_spec(ARGV, 9)
B = nb
save()
return 1
`)

// blockScript: ARGV[1] "p" (pause) or "x" (evict), the block in µs (at most MaxPause for
// a pause, WaitHorizon for an eviction). A longer block already in force is kept.
var blockScript = redis.NewScript(luaPrelude + luaClock + `
local h = KEYS[1]
local now = now_us()
local k = ARGV[1]
if k ~= 'x' then k = 'p' end
local d = num(ARGV[2])
if d < 0 then d = 0 end
if k == 'p' and d > P then d = P end
if d > H then d = H end
local cur = num(redis.call('HGET', h, k))
if cur > now + 2 * H then cur = now + 2 * H end
if now + d > cur then
  redis.call('HSET', h, k, fmt(now + d))
  local keep = math.ceil(d / 1000) + 3600000
  if redis.call('PTTL', h) < keep then redis.call('PEXPIRE', h, keep) end
end
return 1
`)

// blockedScript returns {µs left of the pause, µs left of the eviction}, each 0 when there
// is none and at most the horizon.
var blockedScript = redis.NewScript(luaPrelude + luaClock + `
local now = now_us()
local v = redis.call('HMGET', KEYS[1], 'p', 'x')
local r = {}
for i = 1, 2 do
  local left = num(v[i]) - now
  if left <= 0 then r[i] = 0 else r[i] = math.ceil(math.min(left, H)) end
end
return r
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

// holdRenewScript: KEYS the scope's hash, hz (see Holds); ARGV the clock (as luaClock),
// the lease in µs (within [1 ms, the horizon]), then the members of the holds this
// process has not ended. It extends the leases of those still held, makes again those
// that are not (their lease passed, or Redis lost them) with a fresh lease, as the calls
// that hold them are still in flight, and extends the keys' expiry (the scope's hash too,
// so that it does not start afresh under a call that holds longer than it is kept idle).
// When it made any again, mh becomes the sum of the holds in hz, which heals an mh that
// was lost with the hash or kept when hz was lost. Returns the members it made again: a
// hold whose call ended while the renewal was on its way must then be ended again
// (ending it is safe either way: a hold ends once).
var holdRenewScript = redis.NewScript(luaPrelude + luaClock + `
local now = now_us()
local lease = math.min(math.max(num(ARGV[1]), 1000), H)
local h, hz = KEYS[1], KEYS[2]
local function heldby(m) return math.max(num(string.match(m, ':(.*)$')), 0) end
local made = {}
for i = 2, #ARGV do
  local m = ARGV[i]
  if redis.call('ZADD', hz, 'XX', 'CH', now + lease, m) == 0 and not redis.call('ZSCORE', hz, m) then
    local tok = known(string.match(m, '^[^:]+:(.*)$'))
    if tok and tok >= 0 and tok <= 2 * MB then
      redis.call('ZADD', hz, now + lease, m)
      made[#made + 1] = m
    end
  end
end
if #made > 0 then
  local sum = 0
  for _, m in ipairs(redis.call('ZRANGE', hz, 0, -1)) do sum = sum + heldby(m) end
  redis.call('HSET', h, 'mh', fmt(sum))
end
local keep = math.ceil(lease / 1000) + 3600000
for i = 1, 2 do
  local ttl = redis.call('PTTL', KEYS[i])
  if (ttl >= 0 or (ttl == -1 and #made > 0)) and ttl < keep then redis.call('PEXPIRE', KEYS[i], keep) end
end
return made
`)

// renewScript: KEYS s, sb; ARGV lease TTL in ms (within [1ms, 1h]), then the members held.
// It extends the leases that still exist and takes again, with a fresh lease, those that
// do not (their lease passed, or Redis lost them), even beyond the scope's limits, as the
// calls that hold them are still running. Returns the members it took again: a slot
// released while the renewal was on its way must then be released again.
var renewScript = redis.NewScript(luaPrelude + `
local s, sb = KEYS[1], KEYS[2]
local now = now_us()
local ttl = math.min(math.max(math.floor(num(ARGV[1])), 1), 3600000)
local exp = now + ttl * 1000
redis.call('ZREMRANGEBYSCORE', s, '-inf', now)
redis.call('ZREMRANGEBYSCORE', sb, '-inf', now)
local made = {}
for i = 2, #ARGV do
  local x = ARGV[i]
  local held = redis.call('ZSCORE', s, x)
  if held or string.match(x, '^[mb][0-9a-z]+$') then
    redis.call('ZADD', s, exp, x)
    if string.sub(x, 1, 1) == 'b' then redis.call('ZADD', sb, exp, x) end
    if not held then made[#made + 1] = x end
  end
end
local keep = 4 * ttl
redis.call('PEXPIRE', s, keep)
redis.call('PEXPIRE', sb, keep)
return made
`)
