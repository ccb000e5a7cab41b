package redisstore

import (
	"context"
	"math/rand/v2"
	"slices"
	"strconv"

	"github.com/llmclient/llmclient/limitstore"
	"github.com/redis/go-redis/v9"
)

// A budget key's hash in Redis can vanish while its window runs: a restart without
// persistence, a failover to a replica that had not received it, an eviction, a FLUSHALL.
// A new hash would start at zero and let the replicas spend the cap again, so each hash
// carries an incarnation, a random id written when the hash is created, and each ledger
// remembers, per key (keyMemo), the incarnation it last saw, the spend it settled there
// itself in each slice of the window, and the window's totals it last read. A script
// called with the remembered incarnation (while the ledger knows spend in the window)
// changes nothing when the hash holds another, or none, and answers "lost"; a hash rolled
// back (fewer writes of spend than the ledger saw) is replaced by a new incarnation that
// counts what it held. The ledger then restores what it knows into the new hash (its own
// spend in each slice, and the largest total it read: the hash counts the larger of the
// sum of the replicas' own and the largest total any of them read), once per
// incarnation, and calls again. See BUDGETS.md for what survives what.

// maxRestores bounds the restores one call makes before it gives up: a hash that keeps
// changing under it.
const maxRestores = 3

// errRestoring is the error of a call whose key's hash kept changing while the ledger
// restored its spend.
var errRestoring error = &unavailableError{msg: "redisstore: redis unavailable: the budget's hash kept changing while its spend was restored"}

// keyMemo is what a ledger knows of one key's hash in Redis.
type keyMemo struct {
	// inc is the incarnation of the hash last seen, and v the largest count of its
	// writes of spend seen in it (see budgetSettleScript).
	inc string
	v   int64
	// mine is what this ledger settled in Redis itself, by slice, ascending: the spend it
	// restores into a hash that was lost. Slices that left the window are dropped.
	mine []sliceSpend
	// known and used are the window's spend, and spend plus reservations, as last read
	// from Redis, in slice knownAt.
	known, used int64
	knownAt     int64
	// charged is what the FailOpen ledger was charged for used (see chargeLocal), in
	// slice chargedAt.
	charged   int64
	chargedAt int64
	// last is the newest slice the key was seen in.
	last int64
}

type sliceSpend struct{ id, spent int64 }

// memoSweepMin is the smallest number of keys at which memos of keys whose window has
// passed are dropped.
const memoSweepMin = 1024

// run calls a budget script for key in period p: ARGV is the period, the incarnation
// expected and one to write, then args. When the hash was lost it restores the spend
// this ledger knows of and calls again. v is the script's reply, never a "lost" one.
func (l *ledger) run(ctx context.Context, sc *redis.Script, key string, p limitstore.BudgetPeriod, args ...any) (any, error) {
	for try := 0; ; try++ {
		l.mu.Lock()
		expect := l.expect(key, p)
		l.mu.Unlock()
		full := append(append(periodArgs(p), expect, newID()), args...)
		v, err := l.s.run(ctx, sc, l.keys(key), full...)
		if err != nil {
			return nil, err
		}
		cur, lost := lostReply(v)
		if !lost {
			return v, nil
		}
		if try == maxRestores {
			return nil, errRestoring
		}
		if err := l.restore(ctx, key, p, cur); err != nil {
			return nil, err
		}
	}
}

// expect returns the incarnation key's hash must have for a script to run: the one last
// seen while this ledger knows spend in p's window that the hash must hold, else "" (any
// will do). l.mu is held.
func (l *ledger) expect(key string, p limitstore.BudgetPeriod) string {
	m := l.memo[key]
	if m == nil || m.inc == "" {
		return ""
	}
	expect := m.inc + ":" + strconv.FormatInt(m.v, 10)
	if m.known > 0 && m.knownAt >= p.Oldest {
		return expect
	}
	for _, s := range m.mine {
		if s.id >= p.Oldest && s.spent > 0 {
			return expect
		}
	}
	return ""
}

// restore gives key's hash, found lost (now in incarnation cur, "" for none), the spend
// this ledger knows of in p's window.
func (l *ledger) restore(ctx context.Context, key string, p limitstore.BudgetPeriod, cur string) error {
	args := append(periodArgs(p), cur, newID(), l.id)
	l.mu.Lock()
	floor, at := "0", ""
	if m := l.memo[key]; m != nil {
		if m.knownAt >= p.Oldest {
			floor, at = strconv.FormatInt(m.known, 10), strconv.FormatInt(m.knownAt, 10)
		}
		args = append(args, floor, at, len(l.soft))
		args = append(args, l.soft...)
		for _, s := range m.mine {
			if s.id >= p.Oldest && s.spent > 0 {
				args = append(args, strconv.FormatInt(s.id, 10), strconv.FormatInt(s.spent, 10))
			}
		}
	} else {
		args = append(args, floor, at, 0)
	}
	l.mu.Unlock()
	v, err := l.s.run(ctx, budgetRestoreScript, l.keys(key), args...)
	if err != nil {
		return err
	}
	a, ok := v.([]any)
	if !ok || len(a) != 2 {
		return l.s.badReply(v)
	}
	status, _ := a[0].(string)
	inc, _ := a[1].(string)
	switch status {
	case "ok":
		l.mu.Lock()
		if m := l.memo[key]; m != nil {
			m.inc, m.v = inc, 0 // the replies of its calls tell v
		}
		l.mu.Unlock()
		return nil
	case "lost":
		return nil // changed again: the caller tries again
	}
	return l.s.badReply(v)
}

// saw records an answer from key's hash in incarnation inc, whose count of writes of
// spend was v, in period p. l.mu is held.
func (l *ledger) saw(key string, p limitstore.BudgetPeriod, inc string, v int64, res limitstore.BudgetResult) {
	m := l.memoOf(key, p)
	switch {
	case inc == "":
	case inc != m.inc:
		m.inc, m.v = inc, v
	default:
		m.v = max(m.v, v)
	}
	m.known, m.used, m.knownAt = res.Spent, satAdd(res.Spent, res.Reserved), p.Slice
}

// spentHere records spend this ledger settled in Redis in key's slice. l.mu is held.
func (l *ledger) spentHere(key string, slice, spent int64) {
	if spent <= 0 {
		return
	}
	m := l.memo[key]
	if m == nil {
		return // saw made it just before
	}
	i, found := slices.BinarySearchFunc(m.mine, slice, func(s sliceSpend, id int64) int {
		switch {
		case s.id < id:
			return -1
		case s.id > id:
			return 1
		}
		return 0
	})
	if !found {
		m.mine = slices.Insert(m.mine, i, sliceSpend{id: slice})
	}
	m.mine[i].spent = satAdd(m.mine[i].spent, spent)
}

// memoOf returns key's memo brought to period p, made on first use. l.mu is held.
func (l *ledger) memoOf(key string, p limitstore.BudgetPeriod) *keyMemo {
	m := l.memo[key]
	if m == nil {
		if len(l.memo) >= max(l.memoSweepAt, memoSweepMin) {
			for k, o := range l.memo {
				if o.last < p.Oldest {
					delete(l.memo, k)
				}
			}
			l.memoSweepAt = 2 * len(l.memo)
		}
		m = &keyMemo{}
		l.memo[key] = m
	}
	m.last = max(m.last, p.Slice)
	drop := 0
	for drop < len(m.mine) && m.mine[drop].id < p.Oldest {
		drop++
	}
	if drop > 0 {
		m.mine = slices.Delete(m.mine, 0, drop)
	}
	return m
}

// chargeLocal charges the FailOpen ledger, before a reservation there, with its share of
// what key's window had spent and reserved as last read from Redis: the local share then
// applies to what was left of the cap, not to the whole cap. l.mu is held.
func (l *ledger) chargeLocal(ctx context.Context, key string, p limitstore.BudgetPeriod) {
	m := l.memo[key]
	if m == nil {
		return
	}
	if m.chargedAt < p.Oldest {
		m.charged = 0 // its slice left the local window with it
	}
	var target int64
	if m.knownAt >= p.Oldest {
		target = l.s.localShareOf(m.used)
	}
	if target > m.charged {
		_, _ = l.local.Settle(ctx, key, p, p.Slice, 0, target-m.charged) // in memory: no error
		m.charged, m.chargedAt = target, p.Slice
	}
}

// localView turns an answer of the FailOpen ledger into the window's: its spend is what
// Redis last said the window had spent, plus what this process spent locally (the local
// ledger counts its charge instead). l.mu is held.
func (l *ledger) localView(key string, res limitstore.BudgetResult) limitstore.BudgetResult {
	if m := l.memo[key]; m != nil && m.charged > 0 {
		res.Spent = satAdd(m.known, max(res.Spent-m.charged, 0))
	}
	return res
}

// lostReply reports whether v is a script's "lost" answer, and the hash's incarnation.
func lostReply(v any) (string, bool) {
	a, ok := v.([]any)
	if !ok || len(a) != 2 {
		return "", false
	}
	if s, _ := a[0].(string); s != "lost" {
		return "", false
	}
	inc, _ := a[1].(string)
	return inc, true
}

// replyInc returns the incarnation at index i of a script's reply.
func replyInc(v any, i int) string {
	if a, ok := v.([]any); ok && i < len(a) {
		s, _ := a[i].(string)
		return s
	}
	return ""
}

// replyVersion returns the count of writes at index i of a script's reply, 0 if none.
func replyVersion(v any, i int) int64 {
	if a, ok := v.([]any); ok && i < len(a) {
		n, _ := replyInt(a[i])
		return n
	}
	return 0
}

// newID returns a random id: an incarnation, or a ledger's name among replicas.
func newID() string { return strconv.FormatUint(rand.Uint64(), 36) }

// satAdd adds non-negative amounts, saturating at math.MaxInt64.
func satAdd(a, b int64) int64 {
	if a > 1<<63-1-b {
		return 1<<63 - 1
	}
	return a + b
}
