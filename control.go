package llmclient

import (
	"errors"
	"fmt"
	"strconv"
	"time"
)

// Operator controls: what an on-call engineer does to a running Client. Each one acts at
// once on every call that starts afterwards (calls in flight finish as they are), is safe
// for concurrent use with calls and with each other, and is announced by an EventControl
// carrying Action. They return an error, and change nothing, for an unknown upstream or
// key.

// The Actions of EventControl.
const (
	actionBreakerReset  = "breaker_reset"
	actionBreakerOpen   = "breaker_force_open"
	actionBreakerClosed = "breaker_force_closed"
	actionKeyEvict      = "key_evict"
	actionKeyRestore    = "key_restore"
	actionDrain         = "drain"
	actionUndrain       = "undrain"
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
	switch action {
	case actionBreakerOpen:
		up.breaker.ForceOpen()
	case actionBreakerClosed:
		up.breaker.ForceClosed()
	default:
		up.breaker.Reset()
	}
	c.observe(Event{Kind: EventControl, Upstream: name, Action: action})
	return nil
}

// EvictKey takes the key labeled label ("key#2") out of the named upstream's pool for
// WithKeyEviction's time, as a revoked key would be: no new call uses it; calls in flight
// on it finish.
func (c *Client) EvictKey(upstream, label string) error {
	up, k, err := c.keyNamed(upstream, label)
	if err != nil {
		return err
	}
	now := time.Now()
	k.block(now, c.cfg.keys.evictFor, true)
	c.observe(Event{Kind: EventControl, Upstream: up.Name, Key: label, Action: actionKeyEvict,
		Until: now.Add(c.cfg.keys.evictFor)})
	return nil
}

// RestoreKey puts the key labeled label back into the named upstream's pool at once,
// ending its eviction or cooldown in this Client (after a billing top-up, say). A pause a
// shared limit store holds for the key ends at its own time.
func (c *Client) RestoreKey(upstream, label string) error {
	up, k, err := c.keyNamed(upstream, label)
	if err != nil {
		return err
	}
	k.blockedUntil.Store(0)
	k.evicted.Store(false)
	c.observe(Event{Kind: EventControl, Upstream: up.Name, Key: label, Action: actionKeyRestore})
	return nil
}

// Drain stops (on) or resumes (off) new calls to the named upstream: a drained upstream is
// refused locally, as an open breaker is, and its calls fail over; calls in flight, open
// streams included, finish. A call whose route has no other upstream fails with
// ClassUnavailable.
func (c *Client) Drain(upstream string, on bool) error {
	up, err := c.upstreamNamed(upstream)
	if err != nil {
		return err
	}
	up.drained.Store(on)
	action := actionDrain
	if !on {
		action = actionUndrain
	}
	c.observe(Event{Kind: EventControl, Upstream: upstream, Action: action})
	return nil
}

func (c *Client) upstreamNamed(name string) (*upstream, error) {
	up := c.byName[name]
	if up == nil {
		return nil, fmt.Errorf("%w: no upstream named %s", ErrNoUpstream, strconv.Quote(name))
	}
	return up, nil
}

func (c *Client) keyNamed(upstream, label string) (*upstream, *poolKey, error) {
	up, err := c.upstreamNamed(upstream)
	if err != nil {
		return nil, nil, err
	}
	for _, k := range up.keys.keys {
		if k.label == label && label != "" {
			return up, k, nil
		}
	}
	return nil, nil, fmt.Errorf("%w: upstream %s has no key labeled %s", ErrNoKey, strconv.Quote(upstream), strconv.Quote(label))
}
