package redisstore

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/llmclient/llmclient/limitstore"
)

// OpenBudget returns the ledger of the budget called name, kept in Redis: every Store on
// the same Redis and prefix that opens the name shares its spend, so Clients on several
// replicas share llmclient's budgets (llmclient.WithBudget). Each Reserve and Settle is
// one server-side script, atomic across replicas: together they overspend a cap only by
// what attempts in flight cost beyond their reservations. Amounts are exact up to
// math.MaxInt64 and saturate there. OpenBudget does not call Redis. All replicas must
// open a name with the same spec.
//
// Each key of the ledger (a partition of a budget that counts each apart, else the empty
// key) is one Redis hash, which expires once its window has passed.
//
// While Redis cannot be reached (or answers what the store cannot use), under FailClosed
// Reserve and Settle return an error wrapping ErrUnavailable (a Client then refuses the
// attempt, class unavailable); under FailOpen Reserve admits against a ledger in this
// process whose cap and soft thresholds are the budget's times WithLocalShare, charged
// with that share of what the window had spent and reserved when Redis last answered: the
// share applies to what was left of the cap. The Settle of such a reservation is counted
// there, and in Redis: at once when it answers by then (reporting the soft thresholds
// either reached), else later, once. A Settle of a reservation taken in Redis that cannot
// reach it, and the Redis side of a local one, are kept (at most MaxPendingSettles per
// ledger; the oldest beyond are dropped) and sent again before the ledger's next call to
// Redis. A Reserve whose answer is lost (a timeout, an unusable reply) may still have run
// in Redis: the ledger takes back the reservation it may have taken there, if it did, in
// the same way. A process that stops with attempts in flight leaves their reservations in
// Redis until their slice leaves the window (for a calendar window, its end).
//
// A key's hash that Redis loses while its window runs (a restart without persistence, a
// failover to a replica that never had it, an eviction, a flush) or rolls back (a restart
// from a snapshot, a failover to a replica that lagged) is detected by each ledger that
// knows spend in the window (and, for a rollback, saw a later write), at its next call
// for the key: before
// that call runs, the ledger restores its own spend in each slice of the window and the
// window's total it last read (the hash counts the larger of the sum of the replicas' own
// spend and the largest total restored). Each ledger keeps, per key in use, the slices of
// the window it spent in. BUDGETS.md states what survives each fault, and the overspend
// bound in each case.
func (s *Store) OpenBudget(name string, spec limitstore.BudgetSpec) limitstore.Ledger {
	spec.Cap = max(spec.Cap, 0)
	soft := make([]any, 0, len(spec.Soft))
	for _, t := range spec.Soft {
		soft = append(soft, strconv.FormatInt(max(t, 0), 10))
	}
	if len(soft) > maxBudgetSoft {
		soft = soft[:maxBudgetSoft]
	}
	localSoft := make([]int64, len(spec.Soft))
	for i, t := range spec.Soft {
		localSoft[i] = max(s.localShareOf(max(t, 0)), 1)
	}
	return &ledger{
		s:      s,
		prefix: "{" + s.cfg.prefix + ":budget:" + strconv.Itoa(len(name)) + ":" + name + "}:",
		tokens: "{" + s.cfg.prefix + ":budget:" + strconv.Itoa(len(name)) + ":" + name + "}q:",
		cap:    strconv.FormatInt(spec.Cap, 10),
		soft:   soft,
		local:  limitstore.NewLedger(limitstore.BudgetSpec{Cap: s.localShareOf(spec.Cap), Soft: localSoft}),
		held:   make(map[heldKey]int),
		taken:  make(map[heldKey][]takenRes),
		id:     newID(),
		memo:   make(map[string]*keyMemo),
	}
}

// localShareOf returns the FailOpen ledger's share of a non-negative amount: amount
// times WithLocalShare, rounded down (the whole amount for a share of 1).
func (s *Store) localShareOf(amount int64) int64 {
	if f := float64(amount) * s.cfg.localShare; f < float64(amount) {
		return int64(f) // below amount ≤ MaxInt64: in range
	}
	return amount
}

var _ limitstore.BudgetStore = (*Store)(nil)

// MaxPendingSettles bounds the settles (and take-backs of lost reservations) a ledger
// keeps for Redis to come back.
const MaxPendingSettles = 10_000

// maxBudgetSoft is the most soft thresholds a ledger reports (limitstore.BudgetSpec).
const maxBudgetSoft = 16

// ledger is one budget's limitstore.Ledger in Redis.
type ledger struct {
	s      *Store
	prefix string // the keys' prefix; a key's hash is prefix + key
	tokens string // the prefix of the hashes of the keys' reservations in flight
	cap    string
	soft   []any
	// local is the FailOpen fallback.
	local limitstore.Ledger

	mu sync.Mutex
	// held counts the reservations taken in local, by key, slice and amount: their Settle
	// goes there. A Settle names no reservation, only its key, slice and amount, so one
	// whose amount no local reservation has is one taken in Redis, whatever the local
	// reservations add up to.
	held map[heldKey]int
	// taken are the tokens of the reservations taken in Redis and not yet settled, by key,
	// slice and amount: a Settle ends one of them (of the same amount, any one will do).
	taken map[heldKey][]takenRes
	// pending are settles of Redis reservations that could not reach it, spends against
	// local reservations not yet counted there, and cancels of
	// Reserves whose answer was lost.
	pending []pendingSettle

	// id names this ledger among the replicas that restore a lost hash (see restore).
	id string
	// memo is what the ledger knows of each key's hash in Redis (see keyMemo).
	memo        map[string]*keyMemo
	memoSweepAt int
}

// takenRes is a reservation taken in Redis: its token, and the incarnation of the key's
// hash it was taken in.
type takenRes struct{ token, inc string }

type heldKey struct {
	key           string
	slice, amount int64
}

type pendingSettle struct {
	key                    string
	p                      limitstore.BudgetPeriod
	slice, reserved, spent int64
	// token names the reservation in Redis ("" for none), taken in incarnation inc of the
	// key's hash ("" when unknown), or the spend of modeSpend; mode is the settle
	// script's.
	token, inc, mode string
}

// periodArgs returns the script arguments of period p: slice, oldest, epoch, TTL in ms.
func periodArgs(p limitstore.BudgetPeriod) []any {
	ttl := min(max(p.TTL, 0), math.MaxInt64-budgetTTLMargin) + budgetTTLMargin // saturating
	ms := ttl.Milliseconds()
	return []any{strconv.FormatInt(p.Slice, 10), strconv.FormatInt(p.Oldest, 10),
		strconv.FormatInt(p.Epoch, 10), strconv.FormatInt(ms, 10)}
}

// Reserve takes amount in Redis, or under FailOpen in the local ledger while Redis is
// away; see OpenBudget.
func (l *ledger) Reserve(ctx context.Context, key string, p limitstore.BudgetPeriod, amount int64, over bool) (limitstore.BudgetResult, error) {
	amount = max(amount, 0)
	l.flush(ctx, flushPerCall)
	o := "0"
	if over {
		o = "1"
	}
	token := "" // a reservation of nothing (a read of the budget) is not recorded
	if amount > 0 {
		token = strconv.FormatUint(rand.Uint64(), 36)
	}
	sent := ctx.Err() == nil // else run returns at once, without calling Redis
	v, err := l.run(ctx, budgetReserveScript, key, p, strconv.FormatInt(amount, 10), o, l.cap, token)
	res, ok := reserveResult(v)
	if err == nil && !ok {
		err = l.s.badReply(v) // an answer the store cannot use is a failure of Redis
	}
	if err != nil {
		if sent && err != errDown && token != "" {
			// The script may have run (or may yet run): take its reservation back, if
			// it took one, once Redis answers.
			l.keep(pendingSettle{key: key, p: p, token: token, mode: modeCancel})
		}
		return l.reserveLocally(ctx, key, p, amount, over, err)
	}
	inc := replyInc(v, 6)
	l.mu.Lock()
	l.saw(key, p, inc, replyVersion(v, 7), res)
	if res.OK && token != "" {
		k := heldKey{key, p.Slice, amount}
		l.taken[k] = append(l.taken[k], takenRes{token, inc})
	}
	l.mu.Unlock()
	return res, nil
}

// takeToken returns the token of a reservation of reserved taken in Redis in key's
// slice, and the incarnation it was taken in, and forgets it; zero when none is known.
func (l *ledger) takeToken(key string, slice, reserved int64) takenRes {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := heldKey{key, slice, reserved}
	ts := l.taken[k]
	if len(ts) == 0 {
		return takenRes{}
	}
	t := ts[len(ts)-1]
	if len(ts) == 1 {
		delete(l.taken, k)
	} else {
		l.taken[k] = ts[:len(ts)-1]
	}
	return t
}

// reserveResult reads the reserve script's reply; ok is false for a reply it does not
// return.
func reserveResult(v any) (res limitstore.BudgetResult, ok bool) {
	a, ok := v.([]any)
	if !ok || len(a) != 8 {
		return res, false
	}
	okN, e1 := replyInt(a[0])
	spent, e2 := replyInt(a[1])
	reserved, e3 := replyInt(a[2])
	hard, e4 := replyInt(a[3])
	free, e5 := replyInt(a[4])
	never, e6 := replyInt(a[5])
	if errors.Join(e1, e2, e3, e4, e5, e6) != nil {
		return res, false
	}
	res.OK, res.Spent, res.Reserved, res.FiredHard = okN == 1, spent, reserved, hard == 1
	if !res.OK {
		res.Never = never == 1
		if !res.Never {
			res.FreeAfter = free
		}
	}
	return res, true
}

// reserveLocally is Reserve while Redis cannot be reached (err).
func (l *ledger) reserveLocally(ctx context.Context, key string, p limitstore.BudgetPeriod, amount int64, over bool, err error) (limitstore.BudgetResult, error) {
	if l.s.cfg.mode == FailClosed || ctx.Err() != nil {
		return limitstore.BudgetResult{}, err
	}
	l.mu.Lock()
	l.chargeLocal(ctx, key, p)
	l.mu.Unlock()
	res, lerr := l.local.Reserve(ctx, key, p, amount, over)
	l.mu.Lock()
	res = l.localView(key, res)
	l.mu.Unlock()
	if lerr != nil || !res.OK {
		return res, lerr
	}
	if amount > 0 { // a reservation of nothing holds nothing to give back
		l.mu.Lock()
		l.held[heldKey{key, p.Slice, amount}]++
		l.mu.Unlock()
	}
	return res, nil
}

// Settle ends a reservation where it was taken; see OpenBudget.
func (l *ledger) Settle(ctx context.Context, key string, p limitstore.BudgetPeriod, slice, reserved, spent int64) (limitstore.BudgetResult, error) {
	reserved, spent = max(reserved, 0), max(spent, 0)
	if l.takeLocal(key, slice, reserved) {
		res, err := l.local.Settle(ctx, key, p, slice, reserved, spent)
		l.mu.Lock()
		res = l.localView(key, res)
		l.mu.Unlock()
		if spent > 0 { // the shared spend, when Redis answers again by now
			// Sent once: the script counts a spend of a token once, however often it
			// comes (a lost answer may hide one that ran).
			tr := takenRes{token: newID()}
			shared, rerr := l.settle(ctx, key, p, slice, 0, spent, tr, modeSpend)
			if rerr == nil {
				// The thresholds the shared window reached with it are this settle's to
				// report (Redis marked them reached), and so are the local ledger's.
				shared.Fired |= res.Fired
				return shared, err
			}
			if !errors.Is(rerr, errBadBudgetReply) && ctx.Err() == nil {
				l.keep(pendingSettle{key: key, p: p, slice: slice, spent: spent, token: tr.token, mode: modeSpend})
			}
		}
		return res, err
	}
	tr := l.takeToken(key, slice, reserved)
	l.flush(ctx, flushPerCall)
	res, err := l.settle(ctx, key, p, slice, reserved, spent, tr, modeSettle)
	if err != nil && !errors.Is(err, errBadBudgetReply) && ctx.Err() == nil {
		l.keep(pendingSettle{key: key, p: p, slice: slice, reserved: reserved, spent: spent, token: tr.token, inc: tr.inc,
			mode: modeSettle})
		if lres, ok := l.spendLocally(ctx, key, p, slice, spent-reserved); ok {
			return lres, nil
		}
	}
	return res, err
}

// spendLocally charges the FailOpen ledger with extra, the part of a settle's spend that
// Redis, away, has not counted and that no reservation it last reported covers (all of
// a spend-only settle, which a call ending in a later slice than it reserved in makes):
// the local reservations that follow during the outage count it, as they count the spend
// of local reservations. The settle itself is queued for Redis. ok is false, and nothing
// is charged, under FailClosed or when extra is not positive.
func (l *ledger) spendLocally(ctx context.Context, key string, p limitstore.BudgetPeriod, slice, extra int64) (limitstore.BudgetResult, bool) {
	if l.s.cfg.mode != FailOpen || extra <= 0 {
		return limitstore.BudgetResult{}, false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.chargeLocal(ctx, key, p)
	res, _ := l.local.Settle(ctx, key, p, slice, 0, extra) // in memory: no error
	return l.localView(key, res), true
}

// takeLocal reports whether a reservation of reserved in key's slice was taken locally,
// and forgets it if so. Of reservations of the same amount taken in both places, it
// settles the local ones first; either way the same amount is given back.
func (l *ledger) takeLocal(key string, slice, reserved int64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.held) == 0 {
		return false
	}
	k := heldKey{key, slice, reserved}
	switch n := l.held[k]; n {
	case 0:
		return false
	case 1:
		delete(l.held, k)
	default:
		l.held[k] = n - 1
	}
	return true
}

var errBadBudgetReply = errors.New("redisstore: unexpected budget reply")

// The settle script's modes.
const (
	// modeSettle ends the reservation a token names (or one of the amount, without one).
	modeSettle = "settle"
	// modeCancel takes back the reservation a Reserve whose answer was lost may have made.
	modeCancel = "cancel"
	// modeSpend counts a spend made against the FailOpen ledger, once per token.
	modeSpend = "spend"
)

// settle runs the settle script in mode for the reservation tr names (or none).
func (l *ledger) settle(ctx context.Context, key string, p limitstore.BudgetPeriod, slice, reserved, spent int64,
	tr takenRes, mode string) (limitstore.BudgetResult, error) {
	args := append([]any{strconv.FormatInt(slice, 10), strconv.FormatInt(reserved, 10), strconv.FormatInt(spent, 10),
		tr.token, mode, tr.inc}, l.soft...)
	v, err := l.run(ctx, budgetSettleScript, key, p, args...)
	if err != nil {
		return limitstore.BudgetResult{}, err
	}
	res, ok := settleResult(v)
	if !ok {
		return limitstore.BudgetResult{}, errors.Join(errBadBudgetReply, l.s.badReply(v))
	}
	l.mu.Lock()
	l.saw(key, p, replyInc(v, 3), replyVersion(v, 5), res)
	if a := v.([]any); a[4] == int64(1) { // settleResult checked the shape
		l.spentHere(key, slice, spent)
	}
	l.mu.Unlock()
	return res, nil
}

// settleResult reads the settle script's reply; ok is false for a reply it does not
// return.
func settleResult(v any) (limitstore.BudgetResult, bool) {
	a, ok := v.([]any)
	if !ok || len(a) != 6 {
		return limitstore.BudgetResult{}, false
	}
	sp, e1 := replyInt(a[0])
	rs, e2 := replyInt(a[1])
	fired, e3 := replyInt(a[2])
	if e1 != nil || e2 != nil || e3 != nil || fired < 0 || fired > math.MaxUint32 {
		return limitstore.BudgetResult{}, false
	}
	return limitstore.BudgetResult{OK: true, Spent: sp, Reserved: rs, Fired: uint32(fired)}, true
}

// keep queues a settle that could not reach Redis, dropping the oldest beyond the bound.
func (l *ledger) keep(ps pendingSettle) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.pending) >= MaxPendingSettles {
		l.pending = append(l.pending[:0], l.pending[1:]...)
	}
	l.pending = append(l.pending, ps)
}

// flushPerCall is how many queued settles a ledger call sends before its own: after an
// outage the queue drains over the calls that follow, each delayed by a few round trips
// at most, rather than all of it by the first.
const flushPerCall = 32

// flush sends up to most queued settles again (all of them when most is negative), oldest
// first, while Redis answers. Their soft thresholds are not reported: the attempts they
// end were reported.
func (l *ledger) flush(ctx context.Context, most int) {
	l.mu.Lock()
	if len(l.pending) == 0 {
		l.mu.Unlock()
		return
	}
	todo := l.pending
	l.pending = nil
	if most >= 0 && len(todo) > most {
		todo, l.pending = todo[:most:most], append([]pendingSettle(nil), todo[most:]...)
	}
	l.mu.Unlock()
	for i, ps := range todo {
		if _, err := l.settle(ctx, ps.key, ps.p, ps.slice, ps.reserved, ps.spent, takenRes{ps.token, ps.inc}, ps.mode); err != nil {
			if errors.Is(err, errBadBudgetReply) {
				continue
			}
			l.mu.Lock()
			l.pending = append(todo[i:], l.pending...)
			if len(l.pending) > MaxPendingSettles {
				l.pending = l.pending[len(l.pending)-MaxPendingSettles:]
			}
			l.mu.Unlock()
			return
		}
	}
}

// keys returns the Redis keys of a budget key: its hash, and the hash of the tokens of
// its reservations in flight. Both share the budget's hash tag, and the second differs
// from every key's hash at the character after the tag ('q', not ':').
func (l *ledger) keys(key string) []string {
	return []string{l.prefix + key, l.tokens + key}
}

// replyInt reads an integer of a script's reply: a Lua number (int64) or a decimal
// string.
func replyInt(v any) (int64, error) {
	switch x := v.(type) {
	case int64:
		return x, nil
	case string:
		return strconv.ParseInt(x, 10, 64)
	}
	return 0, errBadBudgetReply
}

// budgetTTLMargin is added to a key's expiry, for the clocks of replicas.
const budgetTTLMargin = 2 * time.Second
