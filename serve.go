package llmclient

import (
	"context"
	"time"
)

// This file answers one question for every layer that needs it: can this upstream serve a
// call now — and if not, why, and until when? Routing (which upstream a call starts on),
// the wait-or-move decision (failover.go), hedging, the recovery ramp, the cost-aware
// failover rule and Snapshot all ask availability; none derives the answer from a part of
// the state on its own.

// refusal says why an upstream cannot serve a call now; refusalNone means it can.
type refusal uint8

// The reasons an upstream cannot serve, in the order availability checks them.
const (
	// refusalNone: the upstream can serve now.
	refusalNone refusal = iota
	// refusedDrained: the operator drained the upstream (Client.Drain).
	refusedDrained
	// refusedForcedOpen: the operator holds its breaker open (Client.ForceBreakerOpen).
	refusedForcedOpen
	// refusedBreaker: its breaker is open, or half-open with every probe out.
	refusedBreaker
	// refusedSharedTrip: another Client sharing the limit store tripped its breaker
	// (WithSharedBreakers).
	refusedSharedTrip
	// refusedKeys: every key of its pool is cooling down, evicted, or paused after a
	// rate limit.
	refusedKeys
	// refusedSlow: its last attempts were all cut by the Client's share of their calls'
	// time (see demoteAfter): calls start elsewhere for a while. Only the order of a
	// route changes; the upstream still serves a call that reaches it.
	refusedSlow
	numRefusals
)

var refusalNames = [numRefusals]string{"", "drained", "forced_open", "breaker_open", "shared_trip", "no_key", "slow"}

// String returns the refusal's name as Snapshot shows it (health.Upstream.Refusal): "drained",
// "forced_open", "breaker_open", "shared_trip", "no_key", and "" for refusalNone.
func (w refusal) String() string {
	if w < numRefusals {
		return refusalNames[w]
	}
	return "unknown"
}

// availability is the answer for one upstream at one moment.
type availability struct {
	why refusal
	// until is when the refusal ends at the earliest; zero when it is not known (a drain,
	// a forced state, a half-open breaker with every probe out) or when the upstream
	// serves.
	until time.Time
}

// serves reports whether the upstream can serve now.
func (v availability) serves() bool { return v.why == refusalNone }

// availability answers for up at now. A closed breaker, a shared breaker seen closed and a
// free key cost a few atomic loads: routing and the wait-or-move decision ask on every
// call. It calls the shared store at most once a second per upstream, and only while a
// trip on another Client is seen: that trip is seen from the last time an attempt asked
// the store (sharedBreaker.open), which every attempt on a shared upstream does, and is
// checked again once it is a second old (sharedBreaker.seenOpen).
func (up *upstream) availability(now time.Time) availability {
	if up.drained.Load() {
		return availability{why: refusedDrained}
	}
	adm := up.breaker.AdmissionAt(now)
	if !adm.Admits && !adm.Forced && up.followSharedClear(now) {
		adm = up.breaker.AdmissionAt(now)
	}
	if !adm.Admits {
		if adm.Forced {
			return availability{why: refusedForcedOpen}
		}
		return availability{why: refusedBreaker, until: adm.Until}
	}
	if !adm.Forced && up.shared.seenOpen(now) {
		return availability{why: refusedSharedTrip, until: time.Unix(0, up.shared.openUntil.Load())}
	}
	if ok, soonest := up.pool().free(now); !ok {
		return availability{why: refusedKeys, until: soonest}
	}
	if d := up.demotedUntil.Load(); d > now.UnixNano() {
		return availability{why: refusedSlow, until: time.Unix(0, d)}
	}
	return availability{}
}

// free reports whether a key of the pool can be used at now — not cooling down, evicted or
// paused after a rate limit — and otherwise when the first one comes back (zero when every
// key is evicted for good or the pool is empty).
func (p *keyPool) free(now time.Time) (bool, time.Time) {
	var soonest time.Time
	for _, k := range p.keys {
		until, evicted := k.outUntil(now) // the key's own answer, as Snapshot shows it
		if !until.IsZero() && k.recheck(now) {
			until, evicted = k.outUntil(now)
		}
		if until.IsZero() {
			return true, time.Time{}
		}
		if !evicted && (soonest.IsZero() || until.Before(soonest)) {
			soonest = until
		}
	}
	return false, soonest
}

// healthy reports whether the upstream can serve now (availability).
func (up *upstream) healthy(now time.Time) bool { return up.availability(now).serves() }

// elsewhere reports whether the call has somewhere else to go: it may fail over
// (no CallOptions.NoFailover), calls are left under its caps, and an upstream after the
// current one on its route can serve it now. Every rule that treats a call differently
// when it could move — the wait threshold, the attempt's share of the time left, retry or
// fail over first, the recovery ramp — asks this, and only this.
func (r *run) elsewhere(now time.Time) bool {
	if r.opts != nil && r.opts.NoFailover {
		return false
	}
	if r.pos+1 >= len(r.route) || r.total >= r.maxTotal() {
		return false
	}
	for _, up := range r.route[r.pos+1:] {
		if r.serves(up, now) {
			return true
		}
	}
	return false
}

// serves reports whether up can serve this call now: it can serve (availability), it
// maps the call's model, and the call may still make an attempt there.
func (r *run) serves(up *upstream, now time.Time) bool {
	if _, ok := r.modelOn(up); !ok {
		return false
	}
	return up.availability(now).serves()
}

// sharedOpen asks the shared store, through the upstream's link, whether another Client
// holds its breaker open: the breaker layer's check before every attempt on a shared
// upstream. An operator's ForceBreakerClosed holds here too: the forced Client sends.
func (up *upstream) sharedOpen(ctx context.Context, now time.Time) bool {
	return up.shared != nil && !up.breaker.HeldClosed() && up.shared.open(ctx, now) > 0
}

// An upstream whose attempts keep being cut by the Client's share of their calls' time
// (attempt.limit: half the time left, while another upstream could serve) is slower than
// its calls can afford. The breaker does not count such a cut as a failure — the Client
// chose the bound — but after demoteAfter cuts in a row, with no success between, calls
// start on another upstream of their route for demoteFor; then the next call tries it
// first again, and one more cut demotes it again. A success ends the run of cuts.
const (
	demoteAfter = 5
	demoteFor   = 30 * time.Second
)

// noteCut counts an attempt on up cut by the Client's share at now.
func (up *upstream) noteCut(now time.Time) {
	if up.cutStreak.Add(1) >= demoteAfter {
		up.cutStreak.Store(demoteAfter - 1)
		up.demotedUntil.Store(addNanos(now.UnixNano(), demoteFor))
	}
}

// demoted reports whether calls start elsewhere than up at now (noteCut).
func (up *upstream) demoted(now time.Time) bool { return up.demotedUntil.Load() > now.UnixNano() }
