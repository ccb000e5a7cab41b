package limitstore

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"
)

// NewMemory returns a Store that keeps its state in this process: what a
// Client uses when WithLimitStore is not given. Scopes opened with the same name share
// their state; idle scopes (full buckets, no slot held, no pause) are dropped once the
// store has grown, so a stream of distinct partition names does not grow it without bound.
// It is safe for concurrent use.
func NewMemory() Store {
	return &memoryStore{scopes: make(map[string]*memState)}
}

type memoryStore struct {
	mu     sync.Mutex
	scopes map[string]*memState
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
// State methods it has Idle() bool (whether it equals a fresh state),
// ScaleRates(factor float64) (set its rates to factor times spec's, keeping its levels)
// and Levels() (requests, tokens float64) (what its main buckets hold now). The States
// of NewMemory have them too.
func NewState(spec Spec) State { return newMemState(spec) }

func (s *memoryStore) Open(name string, spec Spec) State {
	if name == "" {
		return newMemState(spec)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if st, ok := s.scopes[name]; ok {
		return st
	}
	if len(s.scopes) >= max(s.sweepAt, memorySweepMin) {
		for n, st := range s.scopes {
			if st.Idle() {
				delete(s.scopes, n)
			}
		}
		s.sweepAt = 2 * len(s.scopes)
	}
	st := newMemState(spec)
	s.scopes[name] = st
	return st
}

// gcra is one token bucket in the form of the generic cell rate algorithm: tat is the
// time, in nanoseconds since the state's epoch, at which the bucket would be full again.
// The level at time t is burst - (tat-t)/interval, capped at burst; it goes negative when
// reservations are made ahead of time or a request larger than the bucket runs into debt.
type gcra struct {
	interval float64 // nanoseconds per unit; 0 means unlimited
	base     float64 // the configured interval
	burst    float64
	tau      float64 // burst * interval
	tat      float64
}

func newGCRA(r Rate, share float64) gcra {
	if r.PerSecond <= 0 {
		return gcra{}
	}
	b := gcra{interval: 1e9 / (r.PerSecond * share), burst: r.Burst * share}
	b.base = b.interval
	b.tau = b.burst * b.interval
	return b
}

// ready returns the earliest time from now at which the bucket holds cost, or its whole
// burst when cost is larger.
func (b *gcra) ready(now, cost float64) float64 {
	if b.interval == 0 {
		return now
	}
	return max(now, b.tat-b.tau+min(cost, b.burst)*b.interval)
}

// charge takes cost from the bucket at time at.
func (b *gcra) charge(at, cost float64) {
	if b.interval != 0 {
		b.tat = max(b.tat, at) + cost*b.interval
	}
}

// give returns amount to the bucket at time now, up to its burst.
func (b *gcra) give(now, amount float64) {
	if b.interval != 0 && b.tat > now {
		b.tat = max(now, b.tat-amount*b.interval)
	}
}

// lower caps the bucket's level at remaining now.
func (b *gcra) lower(now, remaining float64) {
	if b.interval != 0 && remaining < b.burst {
		b.tat = max(b.tat, now+b.tau-max(remaining, 0)*b.interval)
	}
}

// memState is the in-memory State. One mutex guards it all: every operation is a few
// arithmetic steps.
type memState struct {
	mu          sync.Mutex
	epoch       time.Time
	main, gate  [2]gcra // requests, tokens
	pausedUntil float64

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
	if share <= 0 || share > 1 {
		share = 1
	}
	s := &memState{epoch: time.Now(), maxSlots: spec.MaxConcurrent}
	s.main = [2]gcra{newGCRA(spec.Requests, 1), newGCRA(spec.Tokens, 1)}
	s.gate = [2]gcra{newGCRA(spec.Requests, share), newGCRA(spec.Tokens, share)}
	s.batchSlots = max(1, int(float64(spec.MaxConcurrent)*share))
	return s
}

func (s *memState) now() float64 { return float64(time.Since(s.epoch)) }

func (s *memState) buckets(l Lane) *[2]gcra {
	if l == LaneBatch {
		return &s.gate
	}
	return &s.main
}

func (s *memState) Reserve(_ context.Context, r Reservation) (time.Duration, bool, error) {
	now := s.now()
	req, tok := float64(r.Requests), float64(max(r.Tokens, 0))
	s.mu.Lock()
	b := s.buckets(r.Lane)
	at := now
	if r.Lane == LaneMain {
		at = max(at, s.pausedUntil)
	}
	if req > 0 {
		at = max(at, b[0].ready(now, req))
	}
	at = max(at, b[1].ready(now, tok))
	wait := time.Duration(math.Ceil(at - now))
	if r.MaxWait >= 0 && wait > r.MaxWait {
		s.mu.Unlock()
		return wait, false, nil
	}
	if req > 0 {
		b[0].charge(at, req)
	}
	b[1].charge(at, tok)
	s.mu.Unlock()
	return wait, true, nil
}

func (s *memState) Adjust(_ context.Context, l Lane, requests, tokens int) error {
	now := s.now()
	s.mu.Lock()
	b := s.buckets(l)
	for i, n := range [2]int{requests, tokens} {
		switch {
		case n < 0:
			b[i].give(now, float64(-n))
		case n > 0:
			b[i].charge(now, float64(n))
		}
	}
	s.mu.Unlock()
	return nil
}

func (s *memState) Sync(_ context.Context, requests, tokens int64) error {
	now := s.now()
	s.mu.Lock()
	if requests >= 0 {
		s.main[0].lower(now, float64(requests))
	}
	if tokens >= 0 {
		s.main[1].lower(now, float64(tokens))
	}
	s.mu.Unlock()
	return nil
}

func (s *memState) Pause(_ context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	until := s.now() + float64(d)
	s.mu.Lock()
	s.pausedUntil = max(s.pausedUntil, until)
	s.mu.Unlock()
	return nil
}

func (s *memState) PauseLeft(context.Context) (time.Duration, error) {
	now := s.now()
	s.mu.Lock()
	left := s.pausedUntil - now
	s.mu.Unlock()
	if left <= 0 {
		return 0, nil
	}
	return time.Duration(math.Ceil(left)), nil
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
	if s.maxSlots > 0 {
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
	if batch {
		s.batchInUse--
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
	return s.inUse == 0 && len(s.waiters) == 0 && s.pausedUntil <= now &&
		s.main[0].tat <= now && s.main[1].tat <= now && s.gate[0].tat <= now && s.gate[1].tat <= now
}

// ScaleRates sets the buckets' rates to factor times their configured rates, keeping
// their current levels.
func (s *memState) ScaleRates(factor float64) {
	now := s.now()
	s.mu.Lock()
	for _, b := range []*gcra{&s.main[0], &s.main[1], &s.gate[0], &s.gate[1]} {
		b.scale(now, factor)
	}
	s.mu.Unlock()
}

// scale sets the bucket's rate to factor times its base rate, keeping its level at now.
func (b *gcra) scale(now, factor float64) {
	if b.interval == 0 {
		return
	}
	deficit := max(b.tat-now, 0) / b.interval // tokens below full
	b.interval = b.base / factor
	b.tau = b.burst * b.interval
	b.tat = now + deficit*b.interval
}
