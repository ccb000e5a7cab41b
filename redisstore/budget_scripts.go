package redisstore

import "github.com/redis/go-redis/v9"

// The budget scripts keep one hash per budget key (budgetKey), each in one atomic step:
//
//	s<id>   what slice id spent
//	r<id>   what attempts in flight hold reserved in slice id
//	c<id>   spend of slice id restored after the hash was lost: the sum of what each
//	        replica that wrote k<replica> knew it had itself spent there
//	m, n    spend restored after the hash was lost: the largest window total a replica
//	        had last read (m), counted in slice n, as far as it exceeds the c<id>
//	i       the hash's incarnation: a random id written when the hash is created; a
//	        hash that vanished (a restart, a failover to an empty replica, an eviction)
//	        comes back with another
//	k<rid>  replica rid restored its spend into this incarnation
//	v       how many settles and restores counted spend in this incarnation: a hash
//	        rolled back (restored from a snapshot, or by a failover to a replica that
//	        lagged) holds fewer than a replica saw
//	e       the epoch the flags below belong to
//	f       the soft thresholds reached in the epoch, one bit each
//	h       1 once a reservation was refused in the epoch
//
// and, beside it in a second hash (KEYS[2], in the same slot), each reservation in
// flight: its Reserve's token -> "<slice>:<amount>", until its Settle (or the cancel of a
// Reserve whose answer was lost). Kept apart, they do not weigh on the HGETALL above.
//
// A window's spend is the sum of its slices' s<id>, plus the restored spend: the larger
// of the sum of its c<id> and m (while slice n is in the window). Every script takes, as
// ARGV[5], "<incarnation>:<v>", the incarnation and the largest v its caller saw while it
// knows spend in the window ("" when it knows none, or nothing yet): when the hash holds
// another incarnation, or none, the script changes nothing and answers {"lost",
// incarnation or ""}; when it holds a smaller v (it was rolled back), the script replaces
// it with a new incarnation whose m is what the old one counted, and answers {"lost",
// new incarnation}. The caller restores what it knows (budgetRestoreScript) and calls
// again. ARGV[6] is the incarnation to write when the hash has none.
//
// Amounts are the caller's int64 money (picodollars), passed and stored as decimal
// strings. A Lua number (a double) holds integers exactly only to 2^53, about $9,007 in
// picodollars, so the scripts never turn an amount into one number: they split it into a
// pair (h, l) = (amount div 1e9, amount mod 1e9), both exact, and add, subtract and
// compare pairs, saturating at math.MaxInt64 (9223372036|854775807) as the memory ledger
// does. Slice ids and epochs are Unix seconds or slice numbers, far below 2^53. Fields
// that are not decimal strings (written by hand, or damaged) count as 0, a field above
// MaxInt64 as MaxInt64: the hash heals on its next write.
//
// The periods come from the caller's clock (budget.Window.PeriodAt): replicas whose
// clocks disagree by more than a slice count a little into the neighbouring slice.
var luaBudgetPrelude = `
local B = 1000000000
local MH, ML = 9223372036, 854775807
local function less(ah, al, bh, bl) return ah < bh or (ah == bh and al < bl) end
local function parse(s)
  if type(s) ~= 'string' or not string.match(s, '^%d+$') then return 0, 0 end
  s = (string.gsub(s, '^0+', ''))
  local n = #s
  if n == 0 then return 0, 0 end
  if n > 19 then return MH, ML end
  if n <= 9 then return 0, tonumber(s) end
  local h, l = tonumber(string.sub(s, 1, n - 9)), tonumber(string.sub(s, n - 8))
  if less(MH, ML, h, l) then return MH, ML end
  return h, l
end
local function add(ah, al, bh, bl)
  local h, l = ah + bh, al + bl
  if l >= B then h, l = h + 1, l - B end
  if less(MH, ML, h, l) then return MH, ML end
  return h, l
end
local function sub(ah, al, bh, bl)
  if less(ah, al, bh, bl) then return 0, 0 end
  local h, l = ah - bh, al - bl
  if l < 0 then h, l = h - 1, l + B end
  return h, l
end
local function str(h, l)
  if h == 0 then return string.format('%.0f', l) end
  return string.format('%.0f', h) .. string.format('%09.0f', l)
end
local key, tokens = KEYS[1], KEYS[2]
local slice, oldest, epoch, ttl = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local all = redis.call('HGETALL', key)
local ids, sp, rs, cc = {}, {}, {}, {}
local e, f, hard = nil, 0, 0
local inc, mS, n, ver = nil, nil, nil, 0
local gone = {}
for i = 1, #all, 2 do
  local k, v = all[i], all[i + 1]
  local c = string.sub(k, 1, 1)
  if k == 'e' then e = tonumber(v)
  elseif k == 'f' then f = tonumber(v) or 0
  elseif k == 'h' then hard = tonumber(v) or 0
  elseif k == 'i' then inc = v
  elseif k == 'm' then mS = v
  elseif k == 'n' then n = tonumber(v)
  elseif k == 'v' then ver = tonumber(v) or 0
  elseif c == 's' or c == 'r' or c == 'c' then
    local id = tonumber(string.sub(k, 2))
    if id == nil or id < oldest then
      gone[#gone + 1] = k
    else
      if sp[id] == nil then ids[#ids + 1] = id; sp[id] = {0, 0}; rs[id] = {0, 0}; cc[id] = {0, 0} end
      local h, l = parse(v)
      if c == 's' then sp[id] = {h, l} elseif c == 'r' then rs[id] = {h, l} else cc[id] = {h, l} end
    end
  end
end
local expInc, expVer = ARGV[5], nil
if expInc ~= '' then
  local ei, ev = string.match(expInc, '^([^:]*):(%d+)$')
  if ei ~= nil then expInc, expVer = ei, tonumber(ev) end
  if inc ~= expInc then return {'lost', inc or ''} end
end
if inc == nil then
  inc = ARGV[6]
  redis.call('HSET', key, 'i', inc)
end
if mS ~= nil and (n == nil or n < oldest) then
  mS, n = nil, nil
  gone[#gone + 1] = 'm'
  gone[#gone + 1] = 'n'
end
if #gone > 0 then redis.call('HDEL', key, unpack(gone)) end
table.sort(ids)
local spH, spL, rsH, rsL, ccH, ccL = 0, 0, 0, 0, 0, 0
for _, id in ipairs(ids) do
  spH, spL = add(spH, spL, sp[id][1], sp[id][2])
  rsH, rsL = add(rsH, rsL, rs[id][1], rs[id][2])
  ccH, ccL = add(ccH, ccL, cc[id][1], cc[id][2])
end
-- the restored spend: the larger of the replicas' own (c) and the largest total one read (m)
local mH, mL = 0, 0
if mS ~= nil then mH, mL = parse(mS) end
local surH, surL = sub(mH, mL, ccH, ccL) -- what m adds to the c<id>, counted in slice n
spH, spL = add(spH, spL, ccH, ccL)
spH, spL = add(spH, spL, surH, surL)
if e == nil or epoch > e then
  e, f, hard = epoch, 0, 0
  redis.call('HSET', key, 'e', string.format('%.0f', e), 'f', '0', 'h', '0')
end
local function keep()
  if redis.call('PTTL', key) < ttl then redis.call('PEXPIRE', key, ttl) end
  if redis.call('PTTL', tokens) < ttl then redis.call('PEXPIRE', tokens, ttl) end
end
local function slot(id)
  if sp[id] == nil then ids[#ids + 1] = id; sp[id] = {0, 0}; rs[id] = {0, 0}; cc[id] = {0, 0} end
end
if expVer ~= nil and ver < expVer then
  -- rolled back (a restart from a snapshot, a failover to a replica that lagged): start a
  -- new incarnation that counts what this one holds as restored spend, for the replicas
  -- to restore their own into
  redis.call('DEL', key)
  redis.call('HSET', key, 'i', ARGV[6], 'm', str(spH, spL), 'n', ARGV[1], 'e', string.format('%.0f', e),
    'f', string.format('%.0f', f), 'h', string.format('%.0f', hard))
  keep()
  return {'lost', ARGV[6]}
end
`

// budgetReserveScript takes a reservation: ARGV = slice, oldest, epoch, TTL (ms), the
// incarnation expected and the one to write, amount, over ("1" admits past the cap), cap,
// token ("" for none); KEYS = the budget key's hash, its tokens' hash. A reservation
// taken is recorded under its token. It returns {ok, spent, reserved, firedHard,
// freeAfter, never, incarnation, v}, the amounts and freeAfter as strings, or {"lost",
// incarnation}.
var budgetReserveScript = redis.NewScript(luaBudgetPrelude + `
local aH, aL = parse(ARGV[7])
local over = ARGV[8] == '1'
local cH, cL = parse(ARGV[9])
local uH, uL = add(spH, spL, rsH, rsL)
local never = less(cH, cL, aH, aL)
local roomH, roomL = sub(cH, cL, aH, aL) -- what the window may hold besides the amount
if not over and (never or less(roomH, roomL, uH, uL)) then
  local firedHard = 0
  if hard == 0 then
    firedHard = 1
    redis.call('HSET', key, 'h', '1')
  end
  local freeAfter = slice
  if not never then
    local needH, needL = sub(uH, uL, roomH, roomL)
    local frH, frL = 0, 0
    if n ~= nil then slot(n); table.sort(ids) end
    for _, id in ipairs(ids) do
      frH, frL = add(frH, frL, sp[id][1], sp[id][2])
      frH, frL = add(frH, frL, rs[id][1], rs[id][2])
      frH, frL = add(frH, frL, cc[id][1], cc[id][2])
      if id == n then frH, frL = add(frH, frL, surH, surL) end
      freeAfter = id
      if not less(frH, frL, needH, needL) then break end
    end
  end
  keep()
  local nv = 0
  if never then nv = 1 end
  return {0, str(spH, spL), str(rsH, rsL), firedHard, string.format('%.0f', freeAfter), nv, inc, ver}
end
slot(slice)
local rH, rL = add(rs[slice][1], rs[slice][2], aH, aL)
redis.call('HSET', key, 'r' .. ARGV[1], str(rH, rL))
if ARGV[10] ~= nil and ARGV[10] ~= '' then
  redis.call('HSET', tokens, ARGV[10], ARGV[1] .. ':' .. ARGV[7])
end
rsH, rsL = add(rsH, rsL, aH, aL)
keep()
return {1, str(spH, spL), str(rsH, rsL), 0, '0', 0, inc, ver}
`)

// budgetSettleScript ends a reservation: ARGV = slice, oldest, epoch, TTL (ms), the
// incarnation expected and the one to write, the reservation's slice, reserved, spent, its
// token ("" for none), the mode, the incarnation the reservation was taken in ("" when
// unknown), then the soft thresholds ascending. Mode "settle" gives reserved back and
// counts spent; mode "cancel" takes back the reservation the token names, if it was taken
// (a Reserve whose answer was lost), and counts nothing; mode "spend" counts spent (a
// spend against the FailOpen ledger) once per token, which it keeps as ":<token>" in the
// tokens' hash. A settle whose token is no longer in the tokens' hash, in the incarnation
// its reservation was taken in, ran already (its answer was lost, and it was sent again):
// it counts nothing. A reservation taken in another incarnation of the hash was lost with
// it: nothing is given back for it, and its spend is counted. It returns {spent,
// reserved, fired, incarnation, counted, v}, the amounts as strings, counted 1 when spent
// was counted (0 for a cancel, a slice that left the window, a spend already counted), or
// {"lost", incarnation}.
var budgetSettleScript = redis.NewScript(luaBudgetPrelude + `
local atS, bS, xS = ARGV[7], ARGV[8], ARGV[9]
local tok = ARGV[10]
local counted = 1
if ARGV[11] == 'cancel' then counted = 0 end
if ARGV[11] == 'spend' then
  bS = '0'
  if tok == '' or redis.call('HSETNX', tokens, ':' .. tok, '1') == 0 then xS, counted = '0', 0 end
elseif tok ~= nil and tok ~= '' then
  local q = redis.call('HGET', tokens, tok)
  if q then redis.call('HDEL', tokens, tok) end
  if ARGV[11] == 'cancel' then
    atS, bS, xS = nil, '0', '0'
    if q then atS, bS = string.match(q, '^(%-?%d+):(%d+)$') end
  elseif not q and ARGV[12] ~= '' and ARGV[12] == inc then
    -- settled already (a settle sent again after its answer was lost): count nothing
    bS, xS, counted = '0', '0', 0
  end
end
if ARGV[12] ~= '' and ARGV[12] ~= inc then bS = '0' end
local at = tonumber(atS)
if at == nil or at < oldest then counted = 0 end
if at ~= nil and at >= oldest then
  local bH, bL = parse(bS)
  local xH, xL = parse(xS)
  slot(at)
  local r, s = rs[at], sp[at]
  if less(r[1], r[2], bH, bL) then bH, bL = r[1], r[2] end
  local rH, rL = sub(r[1], r[2], bH, bL)
  local sH, sL = add(s[1], s[2], xH, xL)
  rsH, rsL = sub(rsH, rsL, bH, bL)
  spH, spL = add(spH, spL, xH, xL)
  redis.call('HSET', key, 'r' .. atS, str(rH, rL), 's' .. atS, str(sH, sL))
end
local fired = 0
local last = #ARGV
if ARGV[11] == 'cancel' then last = 12 end -- a cancel counts no spend: it reaches nothing
for i = 13, last do
  local bit_i = 2 ^ (i - 13)
  local tH, tL = parse(ARGV[i])
  if not less(spH, spL, tH, tL) and math.floor(f / bit_i) % 2 == 0 then
    f = f + bit_i
    fired = fired + bit_i
  end
end
if fired > 0 then redis.call('HSET', key, 'f', string.format('%.0f', f)) end
if counted == 1 then ver = redis.call('HINCRBY', key, 'v', 1) end
keep()
return {str(spH, spL), str(rsH, rsL), fired, inc, counted, ver}
`)

// budgetRestoreScript gives a hash that was lost (see above) the spend a replica knows
// of: ARGV = slice, oldest, epoch, TTL (ms), the incarnation the replica was told ("" for
// none: the hash was gone) and the one to write, the replica's id, the largest window
// total it last read and the slice it read it in, the number of soft thresholds and the
// thresholds, then pairs of a slice and what the replica itself spent there. A replica
// restores into an incarnation once (k<id>): its spend is added to the c<id>, its total
// raises m, and the soft thresholds the window's spend then reaches are marked reached
// (they fired in the lost hash). It returns {"ok", incarnation},
// or {"lost", incarnation} when the hash changed again.
var budgetRestoreScript = redis.NewScript(luaBudgetPrelude + `
if redis.call('HEXISTS', key, 'k' .. ARGV[7]) == 1 then
  keep()
  return {'ok', inc}
end
local nSoft = tonumber(ARGV[10]) or 0
local cH, cL = ccH, ccL
for i = 11 + nSoft, #ARGV - 1, 2 do
  local id = tonumber(ARGV[i])
  if id ~= nil and id >= oldest then
    slot(id)
    local aH, aL = parse(ARGV[i + 1])
    local h, l = add(cc[id][1], cc[id][2], aH, aL)
    cc[id] = {h, l}
    cH, cL = add(cH, cL, aH, aL)
    redis.call('HSET', key, 'c' .. string.format('%.0f', id), str(h, l))
  end
end
local at = tonumber(ARGV[9])
if at ~= nil and at >= oldest then
  local fH, fL = parse(ARGV[8])
  if less(mH, mL, fH, fL) then
    mH, mL = fH, fL
    redis.call('HSET', key, 'm', str(fH, fL))
  end
  if n == nil or n < at then
    redis.call('HSET', key, 'n', string.format('%.0f', at))
  end
end
-- the soft thresholds the restored spend reaches were reached in the lost hash: they
-- fired there
local tH, tL = 0, 0
for _, id in ipairs(ids) do tH, tL = add(tH, tL, sp[id][1], sp[id][2]) end
if less(cH, cL, mH, mL) then tH, tL = add(tH, tL, mH, mL) else tH, tL = add(tH, tL, cH, cL) end
local f0 = f
for j = 1, nSoft do
  local bit_j = 2 ^ (j - 1)
  local sH, sL = parse(ARGV[10 + j])
  if not less(tH, tL, sH, sL) and math.floor(f / bit_j) % 2 == 0 then f = f + bit_j end
end
if f ~= f0 then redis.call('HSET', key, 'f', string.format('%.0f', f)) end
redis.call('HSET', key, 'k' .. ARGV[7], '1')
redis.call('HINCRBY', key, 'v', 1)
keep()
return {'ok', inc}
`)
