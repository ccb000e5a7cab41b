package llmclient

import "github.com/llmclient/llmclient/failure"

// Decision is what the Client does after an attempt fails with a given class: every rule
// the retry and failover loop follows is one of these fields, so WithDecision can change
// any of it. DefaultDecision gives the built-in table.
//
// After a failed attempt the loop takes the first step that applies, in this order:
//
//  1. GrowOutput: the same upstream again at once, with twice the output budget (once per call).
//  2. ContextFallback, ContentFallback: the rest of the route is replaced by the upstreams
//     of WithContextFallback or WithContentFallback (each once per call).
//  3. NextKey: the same upstream again at once, on another of its keys, when one is usable.
//  4. Retry: the same upstream again after its Retry-After, or a jittered backoff (none
//     with NoBackoff), when the upstream's attempts, the retry budget and the context's
//     deadline allow it — but with FailoverFirst only when no other upstream of the route
//     could serve.
//  5. Otherwise the upstream gives up: Failover moves on to the next upstream of the
//     route; without it the call ends with this error.
//
// A local refusal — no upstream call was made because the upstream's breaker is open,
// every key is cooling down or evicted, the limiter cannot admit the request in time, or
// the adapter cannot express the request for its vendor (an error wrapping ErrUnsupported)
// — never retries the same upstream and never waits for a Retry-After: only step 5
// applies to it (an adapter's refusal always moves on, since another vendor may take the
// request). Local refusals are recorded in the trace (Attempt.Local) but count against
// neither the attempt caps nor the retry budget.
type Decision struct {
	// Retry tries the same upstream again, after the upstream's Retry-After (when it fits
	// WithMaxRetryAfter and the deadline) or else the backoff.
	Retry bool
	// FailoverFirst moves on to the next upstream rather than retry this one while another
	// upstream of the route could serve (its breaker admits, calls are left); the same
	// upstream is retried only when it is the last.
	FailoverFirst bool
	// NoBackoff retries without waiting: the failure says nothing about load (a stall,
	// a hang), so waiting does not help.
	NoBackoff bool
	// NextKey tries the same upstream again at once on another key of its pool, when one
	// is usable: the failure belonged to the key (a rate limit, a revoked key, a spent
	// quota), not to the upstream.
	NextKey bool
	// Failover moves the call to the next upstream of its route once this upstream gives
	// up: no retry applies, its attempts are used up, the retry budget is spent, or a wait
	// would not fit. Without it the call ends there.
	Failover bool
	// ContextFallback continues the call on the upstreams of WithContextFallback (larger
	// context windows) in place of the rest of its route, once per call.
	ContextFallback bool
	// ContentFallback continues the call on the upstreams of WithContentFallback in place
	// of the rest of its route, once per call.
	ContentFallback bool
	// GrowOutput retries once, at once, on the same upstream, with twice the request's
	// MaxTokens (4096 when it is unset): a reasoning model that spent its whole output
	// budget thinking.
	GrowOutput bool
	// Breaker counts the failure toward the upstream's circuit breaker.
	Breaker bool
	// Cooldown pauses the key for every caller until the upstream's Retry-After (capped
	// at the key eviction time), else for the retry's own backoff, else for the key
	// cooldown (WithKeyCooldown).
	Cooldown bool
	// Evict takes the key out of its pool for the key eviction time (WithKeyEviction).
	Evict bool
	// Alert emits an event.Alert to the observer.
	Alert bool
}

// The fallback lists a Decision may continue a call on.
const (
	rerouteContext = iota
	rerouteContent
	numReroutes
)

// reroute returns the first fallback list d names that is not used yet, or -1.
func (d *Decision) reroute(used *[numReroutes]bool) int {
	switch {
	case d.ContextFallback && !used[rerouteContext]:
		return rerouteContext
	case d.ContentFallback && !used[rerouteContent]:
		return rerouteContent
	}
	return -1
}

// DefaultDecision returns the built-in decision for class c, the table in the README:
//
//	class              retry  next key  failover  breaker  key       other
//	rate_limited       yes    yes       yes       no       cooldown
//	quota_exhausted    no     yes       yes       no       evict     alert
//	overloaded         yes    no        yes       yes
//	server_error       yes    no        yes       yes
//	timeout            last   no        first     yes                failover first, no backoff
//	network            last   no        first     yes                failover first
//	bad_request        no     no        no        no
//	context_length     no     no        no        no                 WithContextFallback
//	content_filtered   no     no        no        no                 WithContentFallback
//	auth               no     yes       no        no       evict     alert
//	permission         no     no        no        no
//	not_found          no     no        no        no
//	empty_output       no     no        no        no                 grow output, once
//	canceled           no     no        no        no
//	stream_interrupted last   no        first     yes                continues a committed stream
//	unavailable        no     no        yes       no
//	budget_exceeded    no     no        yes       no                 a budget's Reroute group
//	unpriced           no     no        yes       no
//	unknown            no     no        no        no
func DefaultDecision(c failure.Class) Decision {
	switch c {
	case failure.RateLimited:
		return Decision{Retry: true, NextKey: true, Failover: true, Cooldown: true}
	case failure.QuotaExhausted:
		return Decision{NextKey: true, Failover: true, Evict: true, Alert: true}
	case failure.Timeout:
		// A hang or a stall is not overload: move on at once, and retry only the last.
		return Decision{Retry: true, FailoverFirst: true, NoBackoff: true, Failover: true, Breaker: true}
	case failure.Network:
		// A reset or refused connection: move to a peer that can serve at once rather
		// than back off on a failing upstream; retry (with backoff) only the last.
		return Decision{Retry: true, FailoverFirst: true, Failover: true, Breaker: true}
	case failure.Overloaded, failure.ServerError:
		return Decision{Retry: true, Failover: true, Breaker: true}
	case failure.ContextLength:
		return Decision{ContextFallback: true}
	case failure.ContentFiltered:
		return Decision{ContentFallback: true}
	case failure.Auth:
		return Decision{NextKey: true, Evict: true, Alert: true}
	case failure.EmptyOutput:
		return Decision{GrowOutput: true}
	case failure.StreamInterrupted:
		// A committed stream continues (WithStreamContinuation): elsewhere first, at once.
		return Decision{Retry: true, FailoverFirst: true, NoBackoff: true, Failover: true, Breaker: true}
	case failure.Unavailable, failure.BudgetExceeded, failure.Unpriced:
		// A budget refusal may fit on a cheaper upstream, or one outside the budget's
		// scope; an unpriced model may have a price on another upstream.
		return Decision{Failover: true}
	}
	return Decision{}
}

// decisionTable is the per-class decisions a Client uses, built once in New.
type decisionTable [numClasses]Decision

func defaultDecisionTable() decisionTable {
	var t decisionTable
	for c := failure.Class(0); c < numClasses; c++ {
		t[c] = DefaultDecision(c)
	}
	return t
}
