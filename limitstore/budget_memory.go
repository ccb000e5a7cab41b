package limitstore

import (
	"context"
	"math"
	"slices"
	"sync"
)

// OpenBudget returns the in-memory ledger of the budget called name: the budget
// capability of the Store of NewMemory (see BudgetStore). Ledgers live as long as the
// store; a ledger forgets a key once every slice it counted has left the window with
// nothing reserved (checked when keys are added, by the periods callers pass: the ledger
// reads no clock).
func (s *memoryStore) OpenBudget(name string, spec BudgetSpec) Ledger {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l, ok := s.budgets[name]; ok {
		return l
	}
	l := newMemLedger(spec)
	if s.budgets == nil {
		s.budgets = make(map[string]*memLedger)
	}
	s.budgets[name] = l
	return l
}

var (
	_ BudgetStore = (*memoryStore)(nil)
	_ QuickLedger = (*memLedger)(nil)
)

// NewLedger returns an in-memory Ledger for spec, private to its caller: what a Client
// uses for its budgets when its limit store is no BudgetStore. It is safe for concurrent
// use.
func NewLedger(spec BudgetSpec) Ledger { return newMemLedger(spec) }

func newMemLedger(spec BudgetSpec) *memLedger {
	soft := slices.Clone(spec.Soft[:min(len(spec.Soft), maxSoft)])
	l := &memLedger{cap: max(spec.Cap, 0), soft: soft, keys: make(map[string]*budgetCounters), lowest: math.MaxInt64}
	for _, t := range soft {
		l.lowest = min(l.lowest, t)
	}
	return l
}

// memLedger is a Ledger in memory: one mutex over every key's counters.
type memLedger struct {
	cap  int64
	soft []int64 // at most maxSoft
	// lowest is the lowest soft threshold (math.MaxInt64 for none): a spend below it
	// reaches none.
	lowest int64

	mu   sync.Mutex
	keys map[string]*budgetCounters
	// empty is keys[""], the key of every budget that does not count partitions apart,
	// looked up without hashing; nil until first used or once swept.
	empty *budgetCounters
	// sweepAt is the number of keys at which expired ones are next dropped.
	sweepAt int
}

// budgetCounters are one key's slices, their totals and the epoch's flags.
type budgetCounters struct {
	slices          []sliceTotals // ascending by id
	spent, reserved int64         // over slices
	epoch           int64
	epochSet        bool
	fired           uint32 // soft thresholds reached in the epoch
	hard            bool   // a reservation was refused in the epoch
	last            int64  // the newest slice the key was brought to; forgotten once it leaves
	// oldest is the p.Oldest the key was last brought to: while callers pass it and the
	// epoch, and no slice older than it was added, there is nothing to drop or clear.
	oldest int64
}

type sliceTotals struct{ id, spent, reserved int64 }

// maxSoft is the most soft thresholds a ledger tracks (BudgetSpec.Soft).
const maxSoft = 16

// ledgerSweepMin is the smallest number of keys at which expired ones are dropped.
const ledgerSweepMin = 1024

func (l *memLedger) Reserve(_ context.Context, key string, p BudgetPeriod, amount int64, over bool) (BudgetResult, error) {
	amount = max(amount, 0)
	l.mu.Lock()
	return l.reserve(l.counters(key, p), p, amount, over), nil
}

// ReserveQuick is Reserve for the key "" when it takes the reservation (see QuickLedger).
func (l *memLedger) ReserveQuick(p BudgetPeriod, amount int64, over bool) bool {
	if amount < 0 {
		amount = 0
	}
	l.mu.Lock()
	c := l.empty
	if !c.broughtTo(p) {
		c = l.bring("", p)
	}
	if !over && (amount > l.cap || satAdd(c.spent, c.reserved) > l.cap-amount) {
		l.mu.Unlock()
		return false
	}
	var s *sliceTotals
	if n := len(c.slices); n > 0 && c.slices[n-1].id == p.Slice {
		s = &c.slices[n-1]
	} else {
		s = c.slice(p.Slice)
	}
	s.reserved = satAdd(s.reserved, amount)
	c.reserved = satAdd(c.reserved, amount)
	l.mu.Unlock()
	return true
}

// reserve is Reserve on key's counters c. l.mu is held, and released on return.
func (l *memLedger) reserve(c *budgetCounters, p BudgetPeriod, amount int64, over bool) BudgetResult {
	used := satAdd(c.spent, c.reserved)
	if !over && (amount > l.cap || used > l.cap-amount) {
		res := l.refuse(c, used, amount)
		l.mu.Unlock()
		return res
	}
	s := c.slice(p.Slice)
	s.reserved = satAdd(s.reserved, amount)
	c.reserved = satAdd(c.reserved, amount)
	res := BudgetResult{OK: true, Spent: c.spent, Reserved: c.reserved}
	l.mu.Unlock()
	return res
}

// refuse is Reserve's answer for an amount that does not fit. l.mu is held.
func (l *memLedger) refuse(c *budgetCounters, used, amount int64) BudgetResult {
	res := BudgetResult{Spent: c.spent, Reserved: c.reserved, Never: amount > l.cap}
	if !res.Never {
		need := used - (l.cap - amount) // > 0, at most used
		var freed int64
		for _, s := range c.slices {
			freed = satAdd(freed, satAdd(s.spent, s.reserved))
			res.FreeAfter = s.id
			if freed >= need {
				break
			}
		}
	}
	if !c.hard {
		c.hard, res.FiredHard = true, true
	}
	return res
}

func (l *memLedger) Settle(_ context.Context, key string, p BudgetPeriod, slice, reserved, spent int64) (BudgetResult, error) {
	l.mu.Lock()
	return l.settle(l.counters(key, p), p, slice, reserved, spent), nil
}

// SettleQuick is Settle for the key "" (see QuickLedger).
func (l *memLedger) SettleQuick(p BudgetPeriod, slice, reserved, spent int64) BudgetResult {
	if reserved|spent < 0 { // either is negative
		reserved, spent = max(reserved, 0), max(spent, 0)
	}
	l.mu.Lock()
	c := l.empty
	if !c.broughtTo(p) {
		c = l.bring("", p)
	}
	if n := len(c.slices); n > 0 && c.slices[n-1].id == slice {
		s := &c.slices[n-1] // the current slice, as settle finds it
		back := min(reserved, s.reserved)
		s.reserved -= back
		c.reserved -= back
		s.spent = satAdd(s.spent, spent)
		c.spent = satAdd(c.spent, spent)
		if total, held := c.spent, c.reserved; total < l.lowest {
			l.mu.Unlock()
			return BudgetResult{OK: true, Spent: total, Reserved: held} // built after the unlock: fewer spills
		}
		spent, reserved = 0, 0 // counted: settle only reports, and fires the thresholds
	}
	return l.settle(c, p, slice, reserved, spent)
}

// settle is Settle on key's counters c. l.mu is held, and released on return.
func (l *memLedger) settle(c *budgetCounters, p BudgetPeriod, slice, reserved, spent int64) BudgetResult {
	reserved, spent = max(reserved, 0), max(spent, 0)
	if slice >= p.Oldest {
		s := c.slice(slice)
		back := min(reserved, s.reserved)
		s.reserved -= back
		c.reserved -= back
		s.spent = satAdd(s.spent, spent)
		c.spent = satAdd(c.spent, spent)
	}
	res := BudgetResult{OK: true, Spent: c.spent, Reserved: c.reserved}
	if c.spent >= l.lowest {
		for i, t := range l.soft {
			if bit := uint32(1) << i; c.spent >= t && c.fired&bit == 0 {
				c.fired |= bit
				res.Fired |= bit
			}
		}
	}
	l.mu.Unlock()
	return res
}

// counters returns key's counters brought to period p: slices that left the window
// dropped, the epoch's flags cleared when a new epoch began. l.mu is held.
func (l *memLedger) counters(key string, p BudgetPeriod) *budgetCounters {
	if key == "" && l.empty.broughtTo(p) {
		return l.empty // the common case of a budget without partitions
	}
	return l.bring(key, p)
}

// broughtTo reports whether c (nil: none) was brought to period p already: no slice to
// drop, no epoch to start, p.Slice seen.
func (c *budgetCounters) broughtTo(p BudgetPeriod) bool {
	return c != nil && p.Oldest == c.oldest && p.Epoch == c.epoch && p.Slice <= c.last
}

// bring is counters for a key not yet brought to p. l.mu is held.
func (l *memLedger) bring(key string, p BudgetPeriod) *budgetCounters {
	var c *budgetCounters
	ok := false
	if key == "" && l.empty != nil {
		c, ok = l.empty, true
	} else {
		c, ok = l.keys[key]
	}
	if !ok {
		if len(l.keys) >= max(l.sweepAt, ledgerSweepMin) {
			l.sweep(p.Oldest)
		}
		c = &budgetCounters{}
		l.keys[key] = c
		if key == "" {
			l.empty = c
		}
	}
	drop := 0
	for drop < len(c.slices) && c.slices[drop].id < p.Oldest {
		drop++
	}
	if drop > 0 {
		// Recounted rather than subtracted: a saturated total cannot be taken apart.
		c.slices = slices.Delete(c.slices, 0, drop)
		c.spent, c.reserved = 0, 0
		for _, s := range c.slices {
			c.spent, c.reserved = satAdd(c.spent, s.spent), satAdd(c.reserved, s.reserved)
		}
	}
	if !c.epochSet || p.Epoch > c.epoch {
		c.epoch, c.epochSet, c.fired, c.hard = p.Epoch, true, 0, false
	}
	c.last = max(c.last, p.Slice)
	c.oldest = p.Oldest
	if len(c.slices) > 0 {
		c.oldest = min(c.oldest, c.slices[0].id) // a slice older than p.Oldest cannot be left
	}
	return c
}

// slice returns the totals of slice id, adding it in order if need be.
func (c *budgetCounters) slice(id int64) *sliceTotals {
	if n := len(c.slices); n > 0 && c.slices[n-1].id == id {
		return &c.slices[n-1] // the current slice
	}
	c.oldest = min(c.oldest, id) // an older slice: the next caller drops it if need be
	i := len(c.slices)
	for i > 0 && c.slices[i-1].id > id {
		i--
	}
	if i > 0 && c.slices[i-1].id == id {
		return &c.slices[i-1]
	}
	c.slices = slices.Insert(c.slices, i, sliceTotals{id: id})
	return &c.slices[i]
}

// sweep drops the keys whose every slice is older than oldest, with nothing reserved.
// l.mu is held.
func (l *memLedger) sweep(oldest int64) {
	for k, c := range l.keys {
		if c.last < oldest && c.reserved == 0 {
			delete(l.keys, k)
			if k == "" {
				l.empty = nil
			}
		}
	}
	l.sweepAt = 2 * len(l.keys)
}

// Keys returns how many keys the ledger holds, for tests of its bound.
func (l *memLedger) Keys() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.keys)
}

// satAdd adds non-negative amounts, saturating at math.MaxInt64.
func satAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}
