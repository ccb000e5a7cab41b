package limitstore

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"
)

// OpenBeside opens the scope name of store, as store.Open does, for a quantity metered
// beside the scope of main: a key's input or output tokens beside its requests and total
// tokens. A nil store, or an empty name, makes a state private to the caller. An
// in-memory state made here (a private one, or a scope of NewMemory opened for the first
// time) shares main's lock when main is in memory too, so that a Joint of both reserves
// under one lock; a scope opened before keeps its own. Other stores open the scope as
// Open does.
func OpenBeside(store Store, name string, spec Spec, main State) State {
	if ms, ok := store.(*memoryStore); ok {
		return ms.open(name, spec, main)
	}
	if store != nil {
		return store.Open(name, spec)
	}
	st := newMemState(spec)
	besides(st, main)
	return st
}

// besides makes st, a new in-memory state no one holds yet, take main's lock and clock
// (its epoch) when main is in memory.
func besides(st *memState, main State) {
	if m, ok := main.(*memState); ok {
		st.mu, st.lockSeq, st.epoch = m.mu, m.lockSeq, m.epoch
	}
}

// Joint reserves one request on several states at once: a key's scope and the scopes of
// the quantities metered beside it (OpenBeside), which admit it together or not at all.
// Make it once, with NewJoint, for a fixed list of states; it is safe for concurrent use.
type Joint struct {
	states []State
	// mem are the states when every one is in memory (nil otherwise), and locks their
	// distinct locks in the order every Joint takes them (memState.lockSeq). one: they
	// share one lock and one clock (made beside each other).
	mem   []*memState
	locks []*sync.Mutex
	one   bool
}

// NewJoint returns a Joint of the given states.
func NewJoint(states ...State) *Joint {
	j := &Joint{states: slices.Clone(states)}
	mem := make([]*memState, 0, len(states))
	for _, st := range states {
		m, ok := st.(*memState)
		if !ok {
			return j
		}
		mem = append(mem, m)
	}
	j.mem = mem
	byLock := slices.Clone(mem)
	slices.SortFunc(byLock, func(a, b *memState) int { return cmp.Compare(a.lockSeq, b.lockSeq) })
	j.one = true
	for _, m := range byLock {
		if !slices.Contains(j.locks, m.mu) {
			j.locks = append(j.locks, m.mu)
		}
		j.one = j.one && m.epoch == mem[0].epoch
	}
	j.one = j.one && len(j.locks) == 1
	return j
}

// Share is one state's part of a Joint's reservation, and the grant it received: a
// caller keeps it in place (in the lease of its request) and hands the Joint a pointer,
// so that nothing is copied either way.
type Share struct {
	// Tokens and Estimate are the state's token cost and its estimate, and InFlight and
	// VendorBurst whether its tokens are held in flight until the request ends and the
	// vendor's bucket for them, as a Reservation's.
	Tokens, Estimate int
	InFlight         bool
	VendorBurst      float64
	// Grant receives the state's grant.
	Grant Grant
}

// Reserve reserves r on every state of the Joint, the i-th charged shares[i]'s tokens,
// held in flight as shares[i] says (r.Tokens, r.Estimate, r.InFlight and r.VendorBurst
// are not read), and r.Requests, its grant written to
// shares[i].Grant, and returns the wait until the request may go. States in memory are
// reserved in one step: under their locks (one, when they were made beside each other),
// with the clock read once (r.At, when not zero), at one admission time for all, the
// earliest at which every state's buckets hold its share; every grant's Wait is the wait
// until then. When that wait exceeds r.MaxWait none takes anything, and every grant has
// OK false and that wait. States of other stores are reserved one by one, each at its own
// time, and the request waits the longest of their Waits; when one refuses or fails, or
// the longest wait exceeds r.MaxWait, the others give back what they took (Adjust) and
// every grant has OK false. shares has one entry per state.
func (j *Joint) Reserve(ctx context.Context, r *Reservation, shares []*Share) (time.Duration, error) {
	if !j.one || r.Lane != LaneMain {
		return j.reserve(ctx, r, shares)
	}
	// The main lane of states on one lock: for each state the steps of memState.readyMain
	// and then, unless the wait exceeds r.MaxWait, of memState.grantMain, written out in
	// the loops, which call nothing but to hold a share in flight. A state whose only
	// limit is its token bucket (memState.tokOnly; a quantity's beside a key's, as a rule)
	// takes the token bucket's steps alone.
	mem := j.mem
	shares = shares[:len(mem)]
	s0 := mem[0]
	var now float64
	if r.At.IsZero() {
		now = s0.now()
	} else {
		now = s0.clock(r.At)
	}
	req := count(r.Requests)
	s0.mu.Lock()
	at := now
	for i, s := range mem {
		sh := shares[i]
		tok := count(sh.Tokens)
		m := &s.main
		at = fmax(at, s.pausedUntil)
		b := &m[bTok]
		if s.tokOnly && !sh.InFlight {
			at = fmax(at, b.tat-b.tau+fmin(tok+b.reserve, b.burst)*b.interval)
			continue
		}
		if b.interval != 0 {
			if sh.InFlight {
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
	}
	wait := Duration(at - now)
	if r.MaxWait >= 0 && wait > r.MaxWait {
		s0.mu.Unlock()
		refuse(shares, wait)
		return wait, nil
	}
	for i, s := range mem {
		sh := shares[i]
		tok := count(sh.Tokens)
		m := &s.main
		t := &s.totals
		g := &sh.Grant
		if s.tokOnly && !sh.InFlight {
			b := &m[bTok]
			ct := fmin(tok, b.maxCharge)
			if tok > 0 {
				b.tat = fmax(b.tat, at) + ct*b.interval
			}
			lt := b.burst - fmax(b.tat-at, 0)*b.perNano + b.corrected
			t.Tokens += ct
			t.Estimate += fmin(estimateOf(sh.Estimate, tok), MaxBurst)
			t.Requests += req
			s.mark++
			g.Wait, g.OK, g.Mark, g.Totals = wait, true, s.mark, *t
			g.Levels = Levels{nan, lt, nan, nan}
			continue
		}
		lr, cr := m[bReq].grant(at, req)
		lt, ct := m[bTok].grant(at, tok)
		if sh.InFlight {
			s.hold(tok, sh.VendorBurst)
		}
		t.Tokens += ct
		t.Estimate += fmin(estimateOf(sh.Estimate, tok), MaxBurst)
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
	s0.mu.Unlock()
	return wait, nil
}

// reserve is Reserve but on the main lane of states on one lock.
func (j *Joint) reserve(ctx context.Context, r *Reservation, shares []*Share) (time.Duration, error) {
	if j.mem == nil {
		return j.reserveEach(ctx, r, shares)
	}
	shares = shares[:len(j.mem)]
	req := count(r.Requests)
	if j.one {
		s0 := j.mem[0]
		now := s0.clock(r.At)
		s0.mu.Lock()
		at := readyLocked(r.Lane, j.mem, shares, now, req)
		wait := Duration(at - now)
		if r.MaxWait >= 0 && wait > r.MaxWait {
			s0.mu.Unlock()
			refuse(shares, wait)
			return wait, nil
		}
		grantLocked(r.Lane, j.mem, shares, at, req, wait)
		s0.mu.Unlock()
		return wait, nil
	}
	// States that keep their own clocks: each reads t, and is charged at its reading of
	// it plus the longest wait.
	t := r.At
	if t.IsZero() {
		t = time.Now()
	}
	for _, mu := range j.locks {
		mu.Lock()
	}
	var wait float64
	for i, s := range j.mem {
		now := s.clock(t)
		wait = fmax(wait, readyLocked(r.Lane, j.mem[i:i+1], shares[i:i+1], now, req)-now)
	}
	w := Duration(wait)
	if r.MaxWait >= 0 && w > r.MaxWait {
		for _, mu := range j.locks {
			mu.Unlock()
		}
		refuse(shares, w)
		return w, nil
	}
	for i, s := range j.mem {
		grantLocked(r.Lane, j.mem[i:i+1], shares[i:i+1], s.clock(t)+wait, req, w)
	}
	for _, mu := range j.locks {
		mu.Unlock()
	}
	return w, nil
}

// refuse writes a refusal with wait to every share's grant.
func refuse(shares []*Share, wait time.Duration) {
	for _, sh := range shares {
		sh.Grant = Grant{Wait: wait, Levels: Unknown}
	}
}

// reserveEach is Reserve on states of which one at least is not in memory.
func (j *Joint) reserveEach(ctx context.Context, r *Reservation, shares []*Share) (time.Duration, error) {
	shares = shares[:len(j.states)]
	var wait time.Duration
	for i, st := range j.states {
		ri := *r
		sh := shares[i]
		ri.Tokens, ri.Estimate, ri.InFlight, ri.VendorBurst = sh.Tokens, sh.Estimate, sh.InFlight, sh.VendorBurst
		g, err := st.Reserve(ctx, ri)
		if err == nil && g.OK {
			sh.Grant = g
			wait = max(wait, g.Wait)
			continue
		}
		j.giveBack(r, shares[:i])
		refuse(shares, g.Wait)
		return g.Wait, err
	}
	if r.MaxWait >= 0 && wait > r.MaxWait {
		j.giveBack(r, shares)
		refuse(shares, wait)
	}
	return wait, nil
}

// giveBack gives back the shares of r taken on the Joint's first len(shares) states,
// ending the hold of those held in flight.
func (j *Joint) giveBack(r *Reservation, shares []*Share) {
	ctx := context.Background()
	for i, sh := range shares {
		st := j.states[i]
		if a, ok := st.(InFlightAdjuster); ok && sh.InFlight && r.Lane == LaneMain {
			_ = a.AdjustInFlight(ctx, sh.Grant.Mark, sh.Tokens, -r.Requests, -sh.Tokens)
			continue
		}
		_ = st.Adjust(ctx, r.Lane, -r.Requests, -sh.Tokens)
	}
}
