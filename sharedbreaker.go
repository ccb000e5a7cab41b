package llmclient

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/llmclient/llmclient/breaker"
	"github.com/llmclient/llmclient/limitstore"
)

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
// frees the upstream everywhere within about a second. When the store cannot be reached the
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
		if left := b.Snapshot().OpenRemaining; left > 0 {
			_ = s.store.TripBreaker(context.Background(), s.name, left) // fail open
		}
	case pendingReset:
		s.openUntil.Store(0)
		_ = s.store.ResetBreaker(context.Background(), s.name)
	}
}

// seenOpen reports whether this Client saw a recorded open period still in force at now.
func (s *sharedBreaker) seenOpen(now time.Time) bool {
	return s != nil && s.openUntil.Load() > now.UnixNano()
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

// errSharedOpen is the cause of a refusal by a breaker that another Client opened.
var errSharedOpen = fmt.Errorf("%w (opened by a Client sharing the store)", breaker.ErrOpen)
