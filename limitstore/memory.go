package limitstore

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"
	"weak"
)

// NewMemory returns a Store that keeps its state in this process: what a
// Client uses when WithLimitStore is not given. Scopes opened with the same name share
// their state; idle scopes (full buckets, no slot held, no pause or eviction) are dropped
// once the store has grown, so a stream of distinct partition names does not grow it
// without bound, but a dropped scope that a caller still holds is the one a later Open of
// its name returns: every caller of a name shares one state for as long as any holds it.
// It is safe for concurrent use.
func NewMemory() Store {
	return &memoryStore{scopes: make(map[string]*memState)}
}

type memoryStore struct {
	mu     sync.Mutex
	scopes map[string]*memState
	// dropped are the idle scopes a sweep dropped, which callers may still hold: Open
	// hands such a state out again. Entries whose state was collected go at the next
	// sweep.
	dropped map[string]weak.Pointer[memState]
	// sweepAt is the size at which idle scopes are next dropped.
	sweepAt int
	// breakers is the breaker state the store shares (see Breakers).
	breakers memoryBreakers
	// budgets are the ledgers of OpenBudget (budget_memory.go), guarded by mu.
	budgets map[string]*memLedger
}

// memorySweepMin is the smallest store size at which idle scopes are dropped.
const memorySweepMin = 1024

// NewState returns a new in-memory State for spec, private to its caller. Besides the
// State methods it has Idle() bool (whether it equals a fresh state) and Levels()
// (requests, tokens float64) (what its main buckets hold now). The States of NewMemory
// have them too.
func NewState(spec Spec) State { return newMemState(spec) }

func (s *memoryStore) Open(name string, spec Spec) State { return s.open(name, spec, nil) }

// open is Open, for a quantity metered beside main's when main is not nil (see
// OpenBeside): a state it makes shares main's lock when main is in memory too.
func (s *memoryStore) open(name string, spec Spec, main State) State {
	if name == "" {
		st := newMemState(spec)
		besides(st, main)
		return st
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if st, ok := s.scopes[name]; ok {
		return st
	}
	if wp, ok := s.dropped[name]; ok {
		delete(s.dropped, name)
		if st := wp.Value(); st != nil { // still held by a caller: shared again
			s.scopes[name] = st
			return st
		}
	}
	if len(s.scopes) >= max(s.sweepAt, memorySweepMin) {
		for n, wp := range s.dropped {
			if wp.Value() == nil {
				delete(s.dropped, n)
			}
		}
		for n, st := range s.scopes {
			if st.Idle() {
				delete(s.scopes, n)
				if s.dropped == nil {
					s.dropped = make(map[string]weak.Pointer[memState])
				}
				s.dropped[n] = weak.Make(st)
			}
		}
		s.sweepAt = 2 * len(s.scopes)
	}
	st := newMemState(spec)
	besides(st, main)
	s.scopes[name] = st
	return st
}

// minPerSecond is the slowest refill a limited bucket has: one unit in 30 days. Slower
// rates are raised to it, so that no interval is infinite.
const minPerSecond = 1.0 / (30 * 24 * 3600)

// debtNanos is DebtHorizon in the buckets' unit of time.
const debtNanos = float64(DebtHorizon)

// gcra is one token bucket in the form of the generic cell rate algorithm: tat is the
// time, in nanoseconds since the state's epoch, at which the bucket would be full again.
// The level at time t is burst - (tat-t)/interval, capped at burst; it goes negative when
// reservations are made ahead of time or a request larger than the bucket runs into debt.
type gcra struct {
	interval  float64 // nanoseconds per unit; 0 means unlimited
	perNano   float64 // 1/interval
	burst     float64
	tau       float64 // burst * interval
	maxCharge float64 // the most one charge takes (Rate.MaxCharge, times the share)
	tat       float64
	// corrected is the bucket's correction count: the sum of the level changes Sync,
	// Retune and Adjust made (positive: lowered).
	corrected float64
	// reserve is what a reservation leaves in the bucket beyond its cost.
	reserve float64
	// lowered is the net change Sync made to the bucket (positive: lowered); Sync gives
	// back at most that. residual is the part of the last applied report's error that a
	// cap kept it from correcting: the next report sees it again, not anew. For the
	// bucket the fit reads, it is that of the last report that made an observation (or
	// the first), less the changes later reports made (see Fit).
	lowered, residual float64
}

func newGCRA(r Rate, share float64) gcra {
	if !r.Limited() {
		return gcra{}
	}
	ps := max(r.PerSecond, minPerSecond) * share
	b := gcra{interval: 1e9 / ps, perNano: ps / 1e9, burst: r.Size() * share}
	b.tau = b.burst * b.interval
	b.maxCharge = b.burst + min(ps*ChargeHorizon.Seconds(), MaxBurst)
	return b
}

// ready returns the earliest time from now at which the bucket holds cost plus its
// reserve, or its whole burst when that is more.
func (b *gcra) ready(now, cost float64) float64 {
	if b.interval == 0 {
		return now
	}
	return fmax(now, b.tat-b.tau+fmin(cost+b.reserve, b.burst)*b.interval)
}

// fmax and fmin are max and min of two times or counts, which are never NaN: cheaper than
// the builtins, which order NaNs and signed zeros.
func fmax(a, b float64) float64 {
	if a > b {
		return a
	}
	return b
}

func fmin(a, b float64) float64 {
	if a < b {
		return a
	}
	return b
}

// charge takes cost, at most maxCharge, from the bucket at time at.
func (b *gcra) charge(at, cost float64) {
	if b.interval != 0 {
		b.tat = fmax(b.tat, at) + fmin(cost, b.maxCharge)*b.interval
	}
}

// cap is what a charge of amount takes: amount, at most maxCharge (a bucket without
// limit takes it all).
func (b *gcra) cap(amount float64) float64 {
	if b.interval == 0 {
		return amount
	}
	return fmin(amount, b.maxCharge)
}

// take charges amount after the fact: at most maxCharge, and never past a debt of
// DebtHorizon beyond an empty bucket (a debt that reservations already hold is kept).
func (b *gcra) take(now, amount float64) {
	if b.interval == 0 {
		return
	}
	limit := now + b.tau + debtNanos
	b.tat = max(b.tat, min(max(b.tat, now)+min(amount, b.maxCharge)*b.interval, limit))
}

// give returns amount to the bucket at time now, up to its burst.
func (b *gcra) give(now, amount float64) {
	if b.interval != 0 && b.tat > now {
		b.tat = max(now, b.tat-amount*b.interval)
	}
}

// level is what the bucket holds at now; negative for a debt.
func (b *gcra) level(now float64) float64 {
	return b.burst - fmax(b.tat-now, 0)*b.perNano
}

// correct takes d from the bucket at now (gives it back when negative), as Adjust does.
func (b *gcra) correct(now, d float64) {
	switch {
	case d > 0:
		b.take(now, d)
	case d < 0:
		b.give(now, -d)
	}
}

// retune returns the bucket for r and share, as far below its new burst as b is below
// its own at now: what was charged stays charged. The change of level counts as a
// correction.
func (b *gcra) retune(now float64, r Rate, share float64) gcra {
	nb := newGCRA(r, share)
	if nb.interval != 0 && b.interval != 0 {
		deficit := max(b.tat-now, 0) * b.perNano
		nb.tat = now + deficit*nb.interval
		nb.corrected = b.corrected + b.level(now) - nb.level(now)
		nb.reserve = min(b.reserve, nb.burst)
		nb.lowered, nb.residual = b.lowered, b.residual
	}
	return nb
}

// Bucket indexes of memState.main.
const (
	bReq = iota
	bTok
	bDayReq
	bDayTok
)

// memState is the in-memory State. One mutex guards it all: every operation is a few
// arithmetic steps. mu is its own lock, or that of the state it was made beside (see
// OpenBeside), so that a Joint of both takes one lock.
type memState struct {
	mu    *sync.Mutex
	lock  sync.Mutex
	epoch time.Time
	// lockSeq numbers mu: the states in the order they were made, each its own lock's
	// number, which a state made beside another takes with its lock. A Joint takes the
	// locks of states that do not share one in that order.
	lockSeq uint64
	share   float64
	// main holds the requests, tokens, daily requests and daily tokens buckets; gate the
	// batch lane's requests and tokens buckets.
	main [4]gcra
	gate [2]gcra
	// daily is set while a daily bucket limits (Reserve skips them otherwise); tokOnly
	// while the per-minute token bucket is the main lane's only limit (no request or
	// daily bucket), as a quantity's state beside a key's is, as a rule.
	daily, tokOnly bool
	// held is the tokens of InFlight reservations not yet ended (see Reservation.InFlight),
	// room how much larger than the token bucket the vendor's is (VendorBurst).
	held, room                float64
	pausedUntil, evictedUntil float64
	// mark is the last Grant.Mark handed out; synced the mark of the latest request a
	// report was applied for, and syncedTotals the totals of that report.
	mark, synced int64
	totals       Totals
	syncedTotals Totals
	// fitTotals are the totals of the latest report the fit took an observation from (or
	// the first applied report): the next observation covers the charges since.
	fitTotals Totals
	fit       Fit

	maxSlots, batchSlots int
	inUse, batchInUse    int
	waiters              []*slotWaiter
	nextID               uint64
}

type slotWaiter struct {
	ready   chan struct{} // closed when the slot is granted
	batch   bool
	granted bool
	id      uint64
}

func newMemState(spec Spec) *memState {
	share := spec.BatchShare
	if !(share > 0 && share <= 1) {
		share = 1
	}
	s := &memState{epoch: time.Now(), share: share, maxSlots: max(spec.MaxConcurrent, 0), lockSeq: stateSeq.Add(1)}
	s.mu = &s.lock
	s.main = [4]gcra{newGCRA(spec.Requests, 1), newGCRA(spec.Tokens, 1),
		newGCRA(spec.DailyRequests, 1), newGCRA(spec.DailyTokens, 1)}
	s.gate = [2]gcra{newGCRA(spec.Requests, share), newGCRA(spec.Tokens, share)}
	s.setDaily()
	s.batchSlots = max(1, int(float64(s.maxSlots)*share))
	return s
}

// setDaily records which of the main lane's buckets limit (daily, tokOnly).
func (s *memState) setDaily() {
	m := &s.main
	s.daily = m[bDayReq].interval != 0 || m[bDayTok].interval != 0
	s.tokOnly = !s.daily && m[bReq].interval == 0 && m[bTok].interval != 0
}

// stateSeq numbers the in-memory states (memState.seq).
var stateSeq atomic.Uint64

func (s *memState) now() float64 { return float64(time.Since(s.epoch)) }

// buckets returns the lane's buckets: requests at even indexes, tokens at odd ones.
func (s *memState) buckets(l Lane) []gcra {
	if l == LaneBatch {
		return s.gate[:]
	}
	return s.main[:]
}

// count turns a count to take into a float: negative counts are 0.
func count(n int) float64 { return float64(max(n, 0)) }

func (s *memState) Reserve(ctx context.Context, r Reservation) (Grant, error) {
	var g Grant
	err := s.ReserveTo(ctx, &r, &g)
	return g, err
}

// ReserveTo implements Reserver: Reserve into *g. It never fails. It is a Joint's
// Reserve for one state, under the state's lock: on LaneMain the steps of readyMain and
// grantMain (which a Joint's Reserve writes out for each of its states on one lock), on
// LaneBatch the same readyBatch and grantBatch.
func (s *memState) ReserveTo(_ context.Context, r *Reservation, g *Grant) error {
	if r.Lane == LaneBatch {
		s.reserveBatch(r, g)
		return nil
	}
	now := s.clock(r.At)
	req, tok := count(r.Requests), count(r.Tokens)
	s.mu.Lock()
	at := s.readyMain(now, now, req, tok, r.InFlight)
	wait := Duration(at - now)
	if r.MaxWait >= 0 && wait > r.MaxWait {
		s.mu.Unlock()
		*g = Grant{Wait: wait, Levels: Unknown}
		return nil
	}
	s.grantMain(at, req, tok, estimateOf(r.Estimate, tok), r.InFlight, r.VendorBurst, wait, g)
	s.mu.Unlock()
	return nil
}

// reserveBatch is ReserveTo on LaneBatch.
func (s *memState) reserveBatch(r *Reservation, g *Grant) {
	now := s.clock(r.At)
	req, tok := count(r.Requests), count(r.Tokens)
	s.mu.Lock()
	at := s.readyBatch(now, req, tok)
	wait := Duration(at - now)
	if r.MaxWait >= 0 && wait > r.MaxWait {
		s.mu.Unlock()
		*g = Grant{Wait: wait, Levels: Unknown}
		return
	}
	s.grantBatch(at, req, tok, wait, g)
	s.mu.Unlock()
}

// clock is the state's time for the caller's reading t: t itself, unless it is zero or
// from before the state began, then the state's own reading.
func (s *memState) clock(t time.Time) float64 {
	if !t.IsZero() {
		if d := t.Sub(s.epoch); d >= 0 {
			return float64(d)
		}
	}
	return s.now()
}

// readyLocked returns the earliest time from now at which the lane's buckets of every
// state of mem hold req requests and the tokens of its share (see gcra.ready) and, on
// LaneMain, no state is paused. For a share held in flight (Share.InFlight), the state's
// token bucket is first brought to now as the vendor keeps its own (settleHeld). Every
// token bucket is consulted, so that even a request that costs no tokens waits for a
// token debt to clear. The states' locks are held.
func readyLocked(l Lane, mem []*memState, shares []*Share, now, req float64) float64 {
	shares = shares[:len(mem)]
	at := now
	for i, s := range mem {
		sh := shares[i]
		if l == LaneBatch {
			at = fmax(at, s.readyBatch(now, req, count(sh.Tokens)))
		} else {
			at = s.readyMain(at, now, req, count(sh.Tokens), sh.InFlight)
		}
	}
	return at
}

// readyMain is readyLocked on LaneMain for s, a share of tok tokens (held in flight when
// inFlight): at, or the later time s's buckets need.
func (s *memState) readyMain(at, now, req, tok float64, inFlight bool) float64 {
	m := &s.main
	at = fmax(at, s.pausedUntil)
	if b := &m[bTok]; b.interval != 0 {
		if inFlight {
			s.settleHeld(now)
		}
		at = fmax(at, b.tat-b.tau+fmin(tok+b.reserve, b.burst)*b.interval)
	}
	if b := &m[bReq]; b.interval != 0 && req > 0 {
		at = fmax(at, b.tat-b.tau+fmin(req+b.reserve, b.burst)*b.interval)
	}
	if s.daily {
		at = fmax(at, m[bDayTok].ready(now, tok))
		if req > 0 {
			at = fmax(at, m[bDayReq].ready(now, req))
		}
	}
	return at
}

// grantLocked charges the lane's buckets of every state of mem req requests and the
// tokens of its share at the admission time at, and writes the share's grant, with the
// wait: on LaneMain its mark, the totals (the share's estimate added, Share.Estimate or
// its tokens) and the predicted levels, and for a share held in flight the tokens held,
// the vendor's bucket its VendorBurst (see Reservation.InFlight); on LaneBatch none of
// them. Each bucket's charge, capped charge and level at at are taken in one step
// (gcra.grant). The states' locks are held.
func grantLocked(l Lane, mem []*memState, shares []*Share, at, req float64, wait time.Duration) {
	shares = shares[:len(mem)]
	for i, s := range mem {
		sh := shares[i]
		tok := count(sh.Tokens)
		if l == LaneBatch {
			s.grantBatch(at, req, tok, wait, &sh.Grant)
		} else {
			s.grantMain(at, req, tok, estimateOf(sh.Estimate, tok), sh.InFlight, sh.VendorBurst, wait, &sh.Grant)
		}
	}
}

// estimateOf is a share's estimate for the totals (see Reservation.counts): its estimate
// when positive, else its tokens tok.
func estimateOf(estimate int, tok float64) float64 {
	if estimate > 0 {
		return float64(estimate)
	}
	return tok
}

// grantMain is grantLocked on LaneMain for s: a share of tok tokens, its estimate est,
// held in flight when inFlight (the vendor's bucket vendorBurst), its grant written to *g.
func (s *memState) grantMain(at, req, tok, est float64, inFlight bool, vendorBurst float64, wait time.Duration, g *Grant) {
	m := &s.main
	t := &s.totals
	lr, cr := m[bReq].grant(at, req)
	lt, ct := m[bTok].grant(at, tok)
	if inFlight {
		s.hold(tok, vendorBurst)
	}
	t.Tokens += ct
	t.Estimate += fmin(est, MaxBurst)
	t.Requests += cr
	s.mark++
	ld, ldt := nan, nan
	if s.daily {
		ld, _ = m[bDayReq].grant(at, req)
		ldt, _ = m[bDayTok].grant(at, tok)
	}
	g.Wait, g.OK, g.Mark, g.Totals = wait, true, s.mark, *t
	g.Levels = Levels{lr, lt, ld, ldt}
}

// readyBatch is readyLocked on LaneBatch for s: the batch lane's buckets only.
func (s *memState) readyBatch(now, req, tok float64) float64 {
	b := &s.gate
	at := fmax(now, b[1].ready(now, tok))
	if req > 0 {
		at = fmax(at, b[0].ready(now, req))
	}
	return at
}

// grantBatch is grantLocked on LaneBatch for s: it charges the batch lane's buckets and
// writes a grant with no mark, totals or levels to *g.
func (s *memState) grantBatch(at, req, tok float64, wait time.Duration, g *Grant) {
	b := &s.gate
	if req > 0 {
		b[0].charge(at, req)
	}
	if tok > 0 {
		b[1].charge(at, tok)
	}
	*g = Grant{OK: true, Wait: wait, Levels: Unknown}
}

// nan is math.NaN(), the level of a bucket without a limit.
var nan = math.NaN()

// grant charges n (when positive) at the admission time at, and returns the bucket's
// predicted level right after (see predict) and what the charge took (see cap).
func (b *gcra) grant(at, n float64) (level, taken float64) {
	if b.interval == 0 {
		return nan, n
	}
	taken = fmin(n, b.maxCharge)
	if n > 0 {
		b.tat = fmax(b.tat, at) + taken*b.interval
	}
	return b.burst - fmax(b.tat-at, 0)*b.perNano + b.corrected, taken
}

// ReserveTo is st.Reserve(ctx, *r) with the grant written to *g, which the in-memory
// states do without copying either.
func ReserveTo(ctx context.Context, st State, r *Reservation, g *Grant) error {
	return ReserverOf(st).ReserveTo(ctx, r, g)
}

// Reserver is a State's Reserve made in place: ReserveTo is Reserve(ctx, *r) with the
// grant written to *g.
type Reserver interface {
	ReserveTo(ctx context.Context, r *Reservation, g *Grant) error
}

// ReserverOf returns a Reserver of st: what the Client's limiter keeps for every
// admission, so that an in-memory state is reserved in without a type check or a copy
// of the reservation or the grant (the state itself); other states' Reserve is called
// with copies.
func ReserverOf(st State) Reserver {
	if m, ok := st.(*memState); ok {
		return m
	}
	return copying{st}
}

// copying is the Reserver of a State without a ReserveTo of its own.
type copying struct{ st State }

func (c copying) ReserveTo(ctx context.Context, r *Reservation, g *Grant) error {
	var err error
	*g, err = c.st.Reserve(ctx, *r)
	return err
}

// predict is the bucket's level at at plus its correction count, what a Grant carries;
// NaN for a bucket without a limit.
func (b *gcra) predict(at float64) float64 {
	if b.interval == 0 {
		return math.NaN()
	}
	return b.level(at) + b.corrected
}

// settleHeld brings the token bucket to now as a vendor that counts the held tokens at
// their end keeps its own: it gets no refill while its level plus what is held is the
// vendor's burst (the bucket's plus room). s.mu is held.
func (s *memState) settleHeld(now float64) {
	if b := &s.main[bTok]; s.held > s.room && b.interval != 0 {
		b.tat = fmax(b.tat, now+(s.held-s.room)*b.interval)
	}
}

// hold holds tok tokens of an InFlight reservation, its vendor's bucket vendorBurst (0:
// the token bucket's burst). s.mu is held.
func (s *memState) hold(tok, vendorBurst float64) {
	s.held += s.main[bTok].cap(tok)
	if finite(vendorBurst) {
		s.room = max(vendorBurst-s.main[bTok].burst, 0)
	}
}

// AdjustInFlight implements InFlightAdjuster: it ends held tokens of the sum held, whatever
// the mark.
func (s *memState) AdjustInFlight(_ context.Context, _ int64, held, requests, tokens int) error {
	s.adjust(LaneMain, requests, tokens, count(held))
	return nil
}

func (s *memState) Adjust(_ context.Context, l Lane, requests, tokens int) error {
	s.adjust(l, requests, tokens, 0)
	return nil
}

// adjust is Adjust, ending the hold of held tokens first on LaneMain.
func (s *memState) adjust(l Lane, requests, tokens int, held float64) {
	now := s.now()
	amounts := [2]int{requests, tokens}
	s.mu.Lock()
	if l == LaneMain {
		s.settleHeld(now)
		s.held = max(s.held-held, 0)
		s.adjustTotals(float64(requests), float64(tokens))
	}
	b := s.buckets(l)
	for i := range b {
		before := b[i].level(now)
		switch n := amounts[i%2]; {
		case n < 0:
			b[i].give(now, -float64(n))
		case n > 0:
			b[i].take(now, float64(n))
		}
		if b[i].interval != 0 {
			b[i].corrected += before - b[i].level(now)
		}
	}
	s.mu.Unlock()
}

// adjustTotals enters an Adjust of LaneMain in the totals (see Totals).
func (s *memState) adjustTotals(requests, tokens float64) {
	t := &s.totals
	if requests < 0 { // a reservation given back
		back := min(max(-tokens, 0), t.Tokens)
		if t.Tokens > 0 {
			t.Estimate -= back * t.Estimate / t.Tokens
		}
		t.Tokens -= back
		t.Requests = max(t.Requests+requests, 0)
		return
	}
	if tokens > 0 {
		t.Tokens += s.main[bTok].cap(tokens)
	} else {
		t.Tokens = max(t.Tokens+tokens, 0)
	}
	t.Requests += s.main[bReq].cap(requests)
}

// finite reports whether x is a known count: neither NaN nor infinite.
func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

func (s *memState) Sync(_ context.Context, r Report) (Correction, error) {
	now := s.now()
	p, t := r.Predicted, r.Target
	c := Correction{Made: Unknown}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settleHeld(now)
	c.Pending = s.totals.Sub(r.Totals)
	if r.Mark <= s.synced {
		c.Fit = s.fit
		return c, nil // a later request's report already corrected this one's error
	}
	first := s.synced == 0
	s.synced = r.Mark
	c.Covered = r.Totals.Sub(s.syncedTotals)
	s.syncedTotals = r.Totals
	gain := r.Gain
	if !(gain > 0 && gain <= 1) {
		gain = 1
	}
	for i, x := range [4]float64{r.Reserve.Requests, r.Reserve.Tokens, r.Reserve.DailyRequests, r.Reserve.DailyTokens} {
		if x >= 0 && !math.IsInf(x, 1) {
			s.main[i].reserve = min(x, s.main[i].burst)
		}
	}
	fitted := false
	for i, x := range [4]struct{ p, t float64 }{{p.Requests, t.Requests}, {p.Tokens, t.Tokens},
		{p.DailyRequests, t.DailyRequests}, {p.DailyTokens, t.DailyTokens}} {
		b := &s.main[i]
		e := x.p - b.corrected - x.t
		d := e * gain
		if b.interval == 0 || !finite(d) {
			continue
		}
		observed := true // the bucket's error is seen anew from this report on
		if i%2 == 1 && !fitted {
			fitted = true
			fresh := e - b.residual // what the charges covered got wrong
			cov := r.Totals.Sub(s.fitTotals)
			if first {
				// The baseline of the observations: what the upstream had consumed
				// before the scope started (it was not full). More left than predicted
				// is never that, but requests admitted before this one that the
				// upstream had not counted yet: the baseline stays the scope's start.
				observed = !(e < 0)
			} else {
				observed = s.fit.add(cov.Tokens+fresh, cov.Estimate, fresh < 0 && x.t > 0.9*b.burst)
			}
			if observed {
				s.fitTotals = r.Totals
			}
		}
		if d < 0 {
			d = max(d, -max(b.lowered, 0)) // never above the bucket's own accounting
		}
		before := b.level(now)
		b.correct(now, d)
		change := before - b.level(now)
		b.corrected += change
		b.lowered += change
		if observed {
			b.residual = e - change/gain
		} else {
			b.residual -= change / gain
		}
		*[4]*float64{&c.Made.Requests, &c.Made.Tokens, &c.Made.DailyRequests, &c.Made.DailyTokens}[i] = change
	}
	c.Fit = s.fit
	return c, nil
}

// add enters one observation in the fit (see Fit) and reports whether it did. A
// censored one, an upper bound of what the upstream counted, counts FitProbe times the
// bound where the fit's multiplier would have counted more, else what the multiplier
// counts, and leaves the noise as it is; before any observation it is none.
func (f *Fit) add(counted, estimated float64, censored bool) bool {
	if !(estimated > 0) || !finite(counted) || !finite(estimated) {
		return false
	}
	if censored {
		if !(f.Reports >= 1 && f.Estimated > 0) {
			return false
		}
		counted = min(counted*FitProbe, estimated*f.Counted/f.Estimated)
	} else if f.Estimated > 0 && f.Reports >= 1 {
		dev := counted - estimated*f.Counted/f.Estimated
		v := dev * dev / estimated
		if f.Reports >= FitMinReports && f.Noise > 0 {
			v = min(v, 9*f.Noise)
		}
		f.Noise += (v - f.Noise) * max(1-FitForget, 1/(f.Reports+1))
	}
	f.Counted = FitForget*f.Counted + counted
	f.Estimated = FitForget*f.Estimated + estimated
	f.Reports++
	return true
}

func (s *memState) Retune(_ context.Context, spec Spec) error {
	now := s.now()
	s.mu.Lock()
	s.settleHeld(now)
	for i, r := range [4]Rate{spec.Requests, spec.Tokens, spec.DailyRequests, spec.DailyTokens} {
		s.main[i] = s.main[i].retune(now, r, 1)
	}
	for i, r := range [2]Rate{spec.Requests, spec.Tokens} {
		s.gate[i] = s.gate[i].retune(now, r, s.share)
	}
	s.setDaily()
	s.mu.Unlock()
	return nil
}

// until returns the end of a block of d from now, or false when d is not positive.
func (s *memState) until(d time.Duration) (float64, bool) {
	if d <= 0 {
		return 0, false
	}
	return s.now() + float64(d), true
}

func (s *memState) Pause(_ context.Context, d time.Duration) error {
	if until, ok := s.until(d); ok {
		s.mu.Lock()
		s.pausedUntil = max(s.pausedUntil, until)
		s.mu.Unlock()
	}
	return nil
}

func (s *memState) Evict(_ context.Context, d time.Duration) error {
	if until, ok := s.until(d); ok {
		s.mu.Lock()
		s.evictedUntil = max(s.evictedUntil, until)
		s.mu.Unlock()
	}
	return nil
}

// Unblock ends the scope's pause and eviction at once (an operator restored the key).
func (s *memState) Unblock(context.Context) error {
	s.mu.Lock()
	s.pausedUntil, s.evictedUntil = 0, 0
	s.mu.Unlock()
	return nil
}

func (s *memState) Blocked(context.Context) (Block, error) {
	now := s.now()
	s.mu.Lock()
	b := Block{Paused: Duration(s.pausedUntil - now), Evicted: Duration(s.evictedUntil - now)}
	s.mu.Unlock()
	return b, nil
}

// errNoSlot is returned when no concurrency slot came free in time.
var errNoSlot = fmt.Errorf("%w: no concurrency slot free", ErrRefused)

func (s *memState) AcquireSlot(ctx context.Context, batch bool, maxWait time.Duration) (SlotLease, time.Duration, error) {
	s.mu.Lock()
	if s.maxSlots <= 0 {
		s.mu.Unlock()
		return SlotLease{}, 0, nil
	}
	// Waiters still queued cannot take a slot now (grants are made eagerly), so a caller
	// that can take one overtakes nobody who could.
	if s.canTake(batch) {
		lease := s.take(batch)
		s.mu.Unlock()
		return lease, 0, nil
	}
	if maxWait == 0 {
		s.mu.Unlock()
		return SlotLease{}, 0, errNoSlot
	}
	if err := ctx.Err(); err != nil {
		s.mu.Unlock()
		return SlotLease{}, 0, err
	}
	w := &slotWaiter{ready: make(chan struct{}), batch: batch}
	s.waiters = append(s.waiters, w)
	s.mu.Unlock()

	start := time.Now()
	var expired <-chan time.Time
	if maxWait > 0 {
		t := time.NewTimer(maxWait)
		defer t.Stop()
		expired = t.C
	}
	var err error
	select {
	case <-w.ready:
		return SlotLease{ID: w.id, Batch: batch}, time.Since(start), nil
	case <-ctx.Done():
		err = ctx.Err()
	case <-expired:
		err = errNoSlot
	}
	s.mu.Lock()
	if w.granted { // granted while giving up: hand the slot on
		s.free(batch)
	} else {
		for i, x := range s.waiters {
			if x == w {
				s.waiters = append(s.waiters[:i], s.waiters[i+1:]...)
				break
			}
		}
	}
	s.mu.Unlock()
	return SlotLease{}, time.Since(start), err
}

func (s *memState) ReleaseSlot(lease SlotLease) {
	s.mu.Lock()
	if s.maxSlots > 0 && s.inUse > 0 {
		s.free(lease.Batch)
	}
	s.mu.Unlock()
}

func (s *memState) canTake(batch bool) bool {
	return s.inUse < s.maxSlots && (!batch || s.batchInUse < s.batchSlots)
}

func (s *memState) take(batch bool) SlotLease {
	s.inUse++
	if batch {
		s.batchInUse++
	}
	s.nextID++
	return SlotLease{ID: s.nextID, Batch: batch}
}

// free gives a slot back and grants it, and any other that is now free, to the first
// waiters in arrival order that may take one.
func (s *memState) free(batch bool) {
	s.inUse--
	if batch && s.batchInUse > 0 {
		s.batchInUse--
	}
	if len(s.waiters) == 0 {
		return
	}
	kept := s.waiters[:0]
	for _, w := range s.waiters {
		if s.canTake(w.batch) {
			w.id = s.take(w.batch).ID
			w.granted = true
			close(w.ready)
			continue
		}
		kept = append(kept, w)
	}
	clear(s.waiters[len(kept):])
	s.waiters = kept
}

// Idle reports whether the state equals a fresh one: it can be dropped and re-created
// without changing what it admits.
func (s *memState) Idle() bool {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inUse != 0 || len(s.waiters) != 0 || s.pausedUntil > now || s.evictedUntil > now || s.held > 0 {
		return false
	}
	for i := range s.main {
		if s.main[i].tat > now {
			return false
		}
	}
	return s.gate[0].tat <= now && s.gate[1].tat <= now
}
