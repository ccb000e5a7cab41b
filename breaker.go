package llmclient

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/llmclient/llmclient/breaker"
	"github.com/llmclient/llmclient/event"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/limitstore"
	"golang.org/x/time/rate"
)

// The Client's breaker layer: one circuit breaker per upstream (the state machine is
// package breaker), and what the Client adds around it — the operator's forced states
// (control.go), the trips that replicas share through the limit store
// (WithSharedBreakers), and the recovery ramp after a breaker closes (WithRecoveryRamp).
// Acquire: breakerLayer takes a permit before anything else of an attempt, or refuses it
// locally. Release: attempt.doneBreaker reports the attempt's outcome on the permit when
// the attempt settles — only what the upstream did counts against it.

// newBreaker builds up's breaker, its link to the shared store and its recovery ramp.
func (c *Client) newBreaker(up *upstream) error {
	cfg := &c.cfg
	up.ramp = newRecoveryRamp(cfg.recoveryRamp)
	bc := cfg.breaker
	name, userHook := up.Name, cfg.breaker.OnStateChange
	ramp := up.ramp
	if cfg.sharesBreaker(up.Name) {
		up.shared = &sharedBreaker{store: cfg.limiter.store.(limitstore.Breakers), name: up.Name}
	}
	shared := up.shared
	bc.OnStateChange = func(from, to breaker.State) {
		if shared != nil {
			shared.changed(to)
		}
		if to == breaker.Closed {
			ramp.begin(time.Now())
		}
		c.observe(Event{Kind: event.Breaker, Upstream: name, From: from, To: to})
		if userHook != nil {
			userHook(from, to)
		}
	}
	b, err := breaker.New(bc)
	if err != nil {
		return fmt.Errorf("upstream %q: %w", name, err)
	}
	up.breaker = b
	bcfg := b.Config()
	up.slowCall, up.slowFirstToken = bcfg.SlowCall, bcfg.SlowFirstToken
	return nil
}

// breakerLayer takes a breaker permit, or refuses without a call.
func (c *Client) breakerLayer(next attemptFunc) attemptFunc {
	return func(ctx context.Context, a *attempt) error {
		if a.up.drained.Load() {
			return &Error{Class: failure.Unavailable, Upstream: a.up.Name, Model: a.call.Model, Err: errDrained}
		}
		p, err := a.up.breaker.Allow()
		if err != nil && a.up.followSharedClear(a.begun) {
			p, err = a.up.breaker.Allow()
		}
		if err == nil && a.up.sharedOpen(ctx, a.begun) {
			p.Done(breaker.Ignore)
			err = errSharedOpen
		}
		if err == nil && a.up.ramp != nil && a.within >= 0 && !a.up.ramp.allow(a.begun) {
			p.Done(breaker.Ignore)
			err = errRamping
		}
		if err != nil {
			return &Error{Class: failure.Unavailable, Upstream: a.up.Name, Model: a.call.Model, Err: err}
		}
		a.permit, a.hasPermit = p, true
		return next(ctx, a)
	}
}

// slow reports whether a successful attempt was slower than its upstream's breaker
// threshold: its time to first token for a stream, its latency for a one-shot call.
func (a *attempt) slow() bool {
	if a.ttft > 0 || a.stream != nil || a.tx != nil && a.tx.call.Stream {
		return a.ttft > a.up.slowFirstToken
	}
	return a.latency > a.up.slowCall
}

// slowSoFar reports whether an attempt that was cut short had already run longer than its
// upstream's slow threshold: a stream still without a first token by the time it waited
// for one, any other as slow judges it.
func (a *attempt) slowSoFar() bool {
	if a.ttft == 0 && (a.stream != nil || a.streaming()) {
		return a.latency > a.up.slowFirstToken
	}
	return a.slow()
}

// WithSharedBreakers shares the circuit breakers of the named upstreams (every upstream
// when none is named) with the other Clients that use the same limit store — replicas
// sharing a redisstore.Store, or Clients of one process sharing a limitstore.NewMemory.
// The store set by WithLimitStore must implement limitstore.Breakers; New fails
// otherwise. Default: breakers are the Client's own.
//
// When a shared upstream's breaker opens, the Client records the open period in the
// store; every Client that shares it then refuses that upstream (ErrCircuitOpen,
// unavailable, and fails over) until the period ends or the breaker that opened closes
// again. Each attempt on a shared upstream whose breaker is closed asks the store first,
// so a trip on one replica holds on another from its next attempt on, one store round
// trip later, and a replica started later sees it too. A replica that saw a trip asks
// again at most once a second while it lasts, so a breaker that closed on another replica
// frees the upstream everywhere within about a second; the replica that recorded the trip
// asks too, and closes its own breaker when the record was cleared elsewhere (ResetBreaker
// or ForceBreakerClosed on another replica) or lost (a store that restarted empty). When the store cannot be reached the
// local breaker alone decides (fail open, whatever the store's FailClosed setting: a
// store outage is no upstream outage); a trip that could not be recorded is not retried.
func WithSharedBreakers(upstreams ...string) Option {
	return optionFunc(func(c *config) {
		c.sharedBreakers = true
		c.sharedBreakerNames = append(c.sharedBreakerNames, upstreams...)
	})
}

// validateSharedBreakers checks WithSharedBreakers against the store and the upstreams.
func (c *config) validateSharedBreakers() []error {
	if !c.sharedBreakers {
		return nil
	}
	var errs []error
	if _, ok := c.limiter.store.(limitstore.Breakers); !ok {
		errs = append(errs, errors.New("WithSharedBreakers needs a WithLimitStore store that implements limitstore.Breakers"))
	}
	for _, n := range c.sharedBreakerNames {
		found := false
		for _, u := range c.upstreams {
			found = found || u.Name == n
		}
		if !found {
			errs = append(errs, fmt.Errorf("WithSharedBreakers names unknown upstream %q", n))
		}
	}
	return errs
}

// sharesBreaker reports whether the named upstream's breaker is shared.
func (c *config) sharesBreaker(name string) bool {
	if !c.sharedBreakers {
		return false
	}
	if len(c.sharedBreakerNames) == 0 {
		return true
	}
	for _, n := range c.sharedBreakerNames {
		if n == name {
			return true
		}
	}
	return false
}

// sharedBreaker links an upstream's breaker to the store's record of it.
type sharedBreaker struct {
	store limitstore.Breakers
	name  string
	// openUntil is the unix-nano end of a recorded open period this Client saw, and
	// checkedAt when it last asked the store.
	openUntil, checkedAt atomic.Int64
	// pending is a state change of the local breaker to record: pendingTrip or
	// pendingReset. The breaker's hook sets it; the attempt that caused it records it.
	pending atomic.Int32
	// ownAt is when this Client's own trip was recorded in the store or last found there
	// (unix nanoseconds); 0 when the store holds no trip of this Client's. ownUntil is
	// when that record ends by itself.
	ownAt, ownUntil atomic.Int64
}

const (
	pendingNone int32 = iota
	pendingTrip
	pendingReset
)

// changed notes a state change of the local breaker, from its OnStateChange hook (which
// runs under the breaker's lock: no store call there).
func (s *sharedBreaker) changed(to breaker.State) {
	switch to {
	case breaker.Open:
		s.pending.Store(pendingTrip)
	case breaker.Closed:
		s.pending.Store(pendingReset)
	}
}

// flush records a pending state change of the local breaker b in the store.
func (s *sharedBreaker) flush(b *breaker.Breaker) {
	if s == nil {
		return
	}
	switch s.pending.Swap(pendingNone) {
	case pendingTrip:
		if left := min(b.Snapshot().OpenRemaining, maxSharedTrip); left > 0 &&
			s.store.TripBreaker(context.Background(), s.name, left) == nil { // fail open
			now := time.Now().UnixNano()
			s.ownUntil.Store(addNanos(now, left))
			s.ownAt.Store(now)
		}
	case pendingReset:
		s.ownAt.Store(0)
		s.openUntil.Store(0)
		_ = s.store.ResetBreaker(context.Background(), s.name)
	}
}

// ownTripCleared reports whether the trip this Client recorded for its open breaker is
// gone from the store before its end: cleared by ResetBreaker or ForceBreakerClosed on
// another Client, or lost by a store that restarted empty. It asks the store at most
// once per sharedRecheck, by one caller, and only while such a trip is recorded and a
// second or more from its end (a record that ends by itself is no clearing); a store that
// cannot answer leaves the trip. The caller then closes its breaker, as the other Clients
// already stopped refusing: the store's record is the one every Client follows.
func (s *sharedBreaker) ownTripCleared(now time.Time) bool {
	if s == nil {
		return false
	}
	n := now.UnixNano()
	at := s.ownAt.Load()
	if at == 0 || n-at < int64(sharedRecheck) || !s.ownAt.CompareAndSwap(at, n) {
		return false
	}
	if n >= s.ownUntil.Load()-int64(sharedRecheck) {
		s.ownAt.CompareAndSwap(n, 0)
		return false
	}
	left, err := s.store.BreakerOpen(context.Background(), s.name)
	if err != nil || left > 0 {
		return false
	}
	return s.ownAt.CompareAndSwap(n, 0)
}

// followSharedClear closes up's breaker when the trip it recorded in the shared store was
// cleared there before its end (ownTripCleared), and reports whether it did. A forced
// state and a breaker that is not open stay as they are.
func (up *upstream) followSharedClear(now time.Time) bool {
	if up.shared == nil || up.shared.ownAt.Load() == 0 {
		return false
	}
	if up.breaker.State() != breaker.Open || up.breaker.AdmissionAt(now).Forced || !up.shared.ownTripCleared(now) {
		return false
	}
	up.breaker.Reset()
	return true
}

// seenOpen reports whether this Client saw a recorded open period still in force at now.
// A sighting older than sharedRecheck is checked again with the store by one caller (the
// others keep the sighting meanwhile), so that a trip cleared on another Client frees the
// upstream here within about sharedRecheck whatever the routing strategy, and not only on
// routes whose attempts reach it (open): a strategy that avoids an upstream that cannot
// serve would otherwise never ask again while the recorded period lasts. A store that
// cannot answer leaves the sighting as it was.
func (s *sharedBreaker) seenOpen(now time.Time) bool {
	if s == nil {
		return false
	}
	n := now.UnixNano()
	until := s.openUntil.Load()
	if until <= n {
		return false
	}
	checked := s.checkedAt.Load()
	if n-checked < int64(sharedRecheck) || !s.checkedAt.CompareAndSwap(checked, n) {
		return true
	}
	left, err := s.store.BreakerOpen(context.Background(), s.name)
	switch {
	case err != nil:
		return true
	case left <= 0:
		s.openUntil.CompareAndSwap(until, 0)
		return false
	}
	s.openUntil.Store(addNanos(n, left))
	return true
}

// open returns how long the upstream stays open by a recorded trip. A trip this Client
// saw holds without a store call, except that once per sharedRecheck the store is asked
// again, so that a breaker closed on another Client frees the upstream here too. A store
// that cannot answer leaves what this Client saw: nothing, or the trip it saw.
func (s *sharedBreaker) open(ctx context.Context, now time.Time) time.Duration {
	n := now.UnixNano()
	until := s.openUntil.Load()
	if until > n && n-s.checkedAt.Load() < int64(sharedRecheck) {
		return time.Duration(until - n)
	}
	left, err := s.store.BreakerOpen(ctx, s.name)
	if err != nil {
		return time.Duration(max(until-n, 0))
	}
	s.checkedAt.Store(n)
	if left <= 0 {
		s.openUntil.CompareAndSwap(until, 0)
		return 0
	}
	s.openUntil.Store(addNanos(n, left))
	return left
}

// sharedRecheck is how often a Client that saw a trip asks the store whether it still
// holds.
const sharedRecheck = time.Second

// maxSharedTrip bounds the open period recorded in a store, whatever the store, so that a
// breaker configured to stay open for days does not lock the other Clients out of an
// upstream for longer than a day after the Client that tripped it is gone.
const maxSharedTrip = 24 * time.Hour

// errSharedOpen is the cause of a refusal by a breaker that another Client opened.
var errSharedOpen = fmt.Errorf("%w (opened by a Client sharing the store)", breaker.ErrOpen)

// The recovery ramp's shape: it starts at rampStart calls a second and doubles the rate
// rampSteps times over its span, ending near a thousand a second.
const (
	rampStart = 1.0
	rampSteps = 10
)

// maxRecoveryRamp bounds WithRecoveryRamp.
const maxRecoveryRamp = time.Hour

// WithRecoveryRamp makes an upstream whose breaker has just closed take its traffic back
// over d instead of all at once: for d after the breaker closes, its calls are paced by a
// rate that starts at one a second and doubles ten times (d/10 apart), so that an upstream
// still fragile after its half-open probes is not flooded by every waiting caller. A call
// the ramp does not admit goes to the next upstream of its route, as when the breaker is
// open (a local refusal in the trace, wrapping ErrCircuitOpen); a call with nowhere else to
// go is always admitted. Hedges follow the same pacing. It needs no deadline. d must be
// within [0, 1h]. Default 0: off — the project has no measurement yet that a ramp helps
// LLM upstreams more than the breaker's probes do.
func WithRecoveryRamp(d time.Duration) Option {
	return optionFunc(func(c *config) { c.recoveryRamp = d })
}

// recoveryRamp paces an upstream's calls for a while after its breaker closed. It is safe
// for concurrent use; outside a ramp, allow costs one atomic load.
type recoveryRamp struct {
	span   time.Duration
	active atomic.Bool

	mu    sync.Mutex
	start time.Time
	lim   *rate.Limiter
}

func newRecoveryRamp(span time.Duration) *recoveryRamp {
	if span <= 0 {
		return nil
	}
	return &recoveryRamp{span: span, lim: rate.NewLimiter(rampStart, 1)}
}

// begin starts a ramp at now.
func (r *recoveryRamp) begin(now time.Time) {
	if r == nil {
		return
	}
	r.mu.Lock()
	r.start = now
	r.lim = rate.NewLimiter(rampStart, 1)
	r.mu.Unlock()
	r.active.Store(true)
}

// allow reports whether the ramp admits a call at now.
func (r *recoveryRamp) allow(now time.Time) bool {
	if r == nil || !r.active.Load() {
		return true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	elapsed := now.Sub(r.start)
	if elapsed >= r.span {
		r.active.Store(false)
		return true
	}
	perSec := rampStart * math.Exp2(rampSteps*float64(elapsed)/float64(r.span))
	r.lim.SetLimitAt(now, rate.Limit(perSec))
	r.lim.SetBurstAt(now, max(1, int(perSec)))
	return r.lim.AllowN(now, 1)
}

// errRamping is the cause of a call the recovery ramp passed to the next upstream.
var errRamping = fmt.Errorf("%w: the upstream is taking its traffic back after recovering", ErrCircuitOpen)

// doneBreaker reports a settled attempt's outcome on its breaker permit. Only what the
// upstream did counts against it: a failure whose decision counts for the breaker
// (Decision.Breaker) is a failure, unless the caller's context had ended (a deadline or a
// cancellation, mid-stream too: not counted at all) or the attempt was cut by the
// Client's own share of the call's time (see attempt.limit: counted as slow, for the
// slow-call rule). A success slower than the upstream's slow threshold counts as slow.
func (a *attempt) doneBreaker(class failure.Class) {
	a.hasPermit = false
	now := a.end
	if now.IsZero() {
		now = time.Now()
	}
	outcome := breaker.Ignore
	switch {
	case class == failure.None && a.slow():
		outcome = breaker.Slow
	case class == failure.None:
		outcome = breaker.Success
		if a.up.cutStreak.Load() != 0 {
			a.up.cutStreak.Store(0)
		}
	case class == failure.Canceled && a.lostSlow:
		outcome = breaker.Slow
	case !a.called || !a.r.c.cfg.decisions[class].Breaker:
	case a.r.ctx != nil && a.r.ctx.Err() != nil:
		// The caller's deadline or cancellation ended it, mid-stream too: not the
		// upstream's doing.
	case class == failure.Timeout && a.shareBound:
		// Cut by the Client's share of the call's time: the upstream was slower than the
		// share, which the slow-call rule (breaker.Config.SlowCallRatio) weighs; it did
		// not fail.
		outcome = breaker.Slow
		a.up.noteCut(now)
	default:
		outcome = breaker.Failure
	}
	a.permit.DoneAt(outcome, now)
	if a.up.shared != nil {
		a.up.shared.flush(a.up.breaker)
	}
}
