package llmclient

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/llmclient/llmclient/event"
)

// Operator controls: what an on-call engineer does to a running Client. Each one acts at
// once on every call that starts afterwards (calls in flight finish as they are), on
// every layer that holds the state it changes (this Client's breaker, pool and key
// limiter, and with WithLimitStore or WithSharedBreakers the store every Client sharing
// it reads), is safe for concurrent use with calls and with each other, and is announced
// by one event.Control carrying its Action and, in Changed, exactly what it changed
// (nothing when there was nothing to change). They return an error, and change nothing,
// for an unknown upstream or key; an error for a layer it could not change (a limit store
// that cannot be reached) comes after the other layers changed, which Changed lists.

// The Actions of event.Control.
const (
	actionBreakerReset  = "breaker_reset"
	actionBreakerOpen   = "breaker_force_open"
	actionBreakerClosed = "breaker_force_closed"
	actionKeyEvict      = "key_evict"
	actionKeyRestore    = "key_restore"
	actionDrain         = "drain"
	actionUndrain       = "undrain"
	actionUpdate        = "update"
)

// errDrained is the cause of a local refusal by a drained upstream.
var errDrained = errors.New("llmclient: the upstream is drained by its operator")

// ForceBreakerOpen opens the named upstream's breaker and holds it open until
// ResetBreaker: its calls are refused locally and fail over, as during an outage.
func (c *Client) ForceBreakerOpen(upstream string) error {
	return c.controlBreaker(upstream, actionBreakerOpen)
}

// ForceBreakerClosed closes the named upstream's breaker and holds it closed until
// ResetBreaker, whatever its calls' outcomes: for an upstream known to be healthy whose
// failures are the callers' doing.
func (c *Client) ForceBreakerClosed(upstream string) error {
	return c.controlBreaker(upstream, actionBreakerClosed)
}

// ResetBreaker ends a forced state and closes the named upstream's breaker with an empty
// window, as after a recovery.
func (c *Client) ResetBreaker(upstream string) error {
	return c.controlBreaker(upstream, actionBreakerReset)
}

func (c *Client) controlBreaker(name, action string) error {
	up, err := c.upstreamNamed(name)
	if err != nil {
		return err
	}
	before := up.breaker.Snapshot()
	switch action {
	case actionBreakerOpen:
		up.breaker.ForceOpen()
	case actionBreakerClosed:
		up.breaker.ForceClosed()
	default:
		up.breaker.Reset()
	}
	after := up.breaker.Snapshot()
	var changed []string
	if before.State != after.State || before.Forced != after.Forced ||
		action == actionBreakerReset && before.Successes+before.Failures+before.Trips > 0 {
		changed = append(changed, "breaker")
	}
	if up.shared != nil {
		// A forced state is this Client's alone; closing the breaker clears a trip it
		// recorded for the Clients that share it (WithSharedBreakers).
		up.shared.pending.Store(pendingNone)
		if action != actionBreakerOpen {
			up.shared.pending.Store(pendingReset)
			changed = append(changed, "shared_breaker")
		}
		up.shared.flush(up.breaker)
	}
	c.observe(Event{Kind: event.Control, Upstream: name, Action: action, Changed: changed})
	return nil
}

// EvictKey takes the key labeled label ("key#2", or "default" for the adapter's own key
// of an upstream without Keys or KeySources) out of the named upstream's pool for
// WithKeyEviction's time, as a revoked key would be: no new call uses it; calls in flight
// on it finish. With WithLimitStore the store evicts it too, for every Client that shares
// the store. RestoreKey ends the eviction.
func (c *Client) EvictKey(upstream, label string) error {
	up, k, err := c.keyNamed(upstream, label)
	if err != nil {
		return err
	}
	now := time.Now()
	d := c.cfg.keys.evictFor
	var changed []string
	wasEvicted := k.blocked(now) && k.evicted.Load()
	if k.block(now, d, true) || !wasEvicted {
		changed = append(changed, "pool_eviction")
	}
	if k.follow(now, k.limiter().evict(d)) {
		changed = append(changed, "store_eviction")
	}
	c.observe(Event{Kind: event.Control, Upstream: up.Name, Key: label, Action: actionKeyEvict,
		Until: now.Add(d), Changed: changed})
	return nil
}

// RestoreKey puts the key labeled label ("key#2", or "default" for the adapter's own
// key) back into the named upstream's pool at once (after a billing top-up, say): it ends
// the key's cooldown or eviction in this Client's pool, the pause its limiter holds after
// a rate limit, and with WithLimitStore the pause and eviction the store holds for every
// Client that shares it, so that no Client evicts the key again from the store on its
// next call. A store whose State cannot lift them early (it has no method
// Unblock(context.Context) error; limitstore's and redisstore's have) or cannot be
// reached keeps them: RestoreKey then still restores the key in this Client and returns
// an error saying so. Restoring a ready key changes nothing.
func (c *Client) RestoreKey(upstream, label string) error {
	up, k, err := c.keyNamed(upstream, label)
	if err != nil {
		return err
	}
	now := time.Now().UnixNano()
	var changed []string
	if until := k.blockedUntil.Swap(0); until > now {
		if k.evicted.Load() {
			changed = append(changed, "pool_eviction")
		} else {
			changed = append(changed, "pool_cooldown")
		}
	}
	k.evicted.Store(false)
	k.sharedAt.Store(0)
	paused := k.pausedUntil.Swap(0) > now
	lifted, err := k.limiter().lift(context.Background())
	if paused || lifted.Paused > 0 {
		changed = append(changed, "limiter_pause")
	}
	if lifted.Evicted > 0 {
		changed = append(changed, "store_eviction")
	}
	c.observe(Event{Kind: event.Control, Upstream: up.Name, Key: label, Action: actionKeyRestore, Changed: changed})
	if err != nil {
		return fmt.Errorf("llmclient: key %s of upstream %s restored in this Client, but its limiter still holds it out: %w",
			strconv.Quote(label), strconv.Quote(upstream), err)
	}
	return nil
}

// Drain stops (on) or resumes (off) new calls to the named upstream: a drained upstream is
// refused locally, as an open breaker is, and its calls fail over; calls in flight, open
// streams included, finish. A call whose route has no other upstream fails with
// failure.Unavailable. Draining is this Client's alone.
func (c *Client) Drain(upstream string, on bool) error {
	up, err := c.upstreamNamed(upstream)
	if err != nil {
		return err
	}
	var changed []string
	if up.drained.Swap(on) != on {
		changed = append(changed, "drain")
	}
	action := actionDrain
	if !on {
		action = actionUndrain
	}
	c.observe(Event{Kind: event.Control, Upstream: upstream, Action: action, Changed: changed})
	return nil
}

// unknownUpstreamError is the error of a control or change that names no upstream of the
// Client. It wraps ErrNoUpstream.
type unknownUpstreamError struct{ name string }

func (e *unknownUpstreamError) Error() string {
	return "llmclient: no upstream named " + strconv.Quote(e.name)
}

func (e *unknownUpstreamError) Unwrap() error { return ErrNoUpstream }

func (c *Client) upstreamNamed(name string) (*upstream, error) {
	up := c.byName[name]
	if up == nil {
		return nil, &unknownUpstreamError{name}
	}
	return up, nil
}

// defaultKeyLabel is what Snapshot and the controls call the adapter's own key.
const defaultKeyLabel = "default"

func (c *Client) keyNamed(upstream, label string) (*upstream, *poolKey, error) {
	up, err := c.upstreamNamed(upstream)
	if err != nil {
		return nil, nil, err
	}
	for _, k := range up.pool().keys {
		if k.label == label && label != "" || k.label == "" && label == defaultKeyLabel {
			return up, k, nil
		}
	}
	return nil, nil, fmt.Errorf("%w: upstream %s has no key labeled %s", ErrNoKey, strconv.Quote(upstream), strconv.Quote(label))
}
