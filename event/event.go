// Package event names the kinds of [llmclient.Event] an observer receives.
//
// An observer set with llmclient.WithObserver switches on Event.Kind:
//
//	llmclient.WithObserver(func(e llmclient.Event) {
//		if e.Kind == event.Failover {
//			// ...
//		}
//	})
//
// Kind's String method gives the lower-case name used in logs and metrics
// (for example "key_cooldown").
package event

// Kind says what an Event reports. Kinds are added as the Client learns to report
// new decisions (hedging, budgets, caching): an observer must ignore kinds it does not
// know, and String names every kind, known or not.
type Kind uint8

// The event kinds.
const (
	// Attempt: one attempt ended (successfully or not).
	Attempt Kind = iota + 1
	// Breaker: an upstream's circuit breaker changed state (From, To).
	Breaker
	// KeyCooldown: a key was paused until Until after a rate limit.
	KeyCooldown
	// KeyEvicted: a key was taken out of its pool until Until (auth or quota failure).
	KeyEvicted
	// Alert: a failure that needs a human: a revoked key, an exhausted quota.
	Alert
	// Fallback: every upstream failed and the fallback function (llmclient.WithFallback)
	// produced the response.
	Fallback
	// Failover: the call moved from Upstream to the next upstream of its route,
	// Target, after a failure of Class (a local refusal included).
	Failover
	// Call: a call ended, once per call: Class is its final class (failure.None on
	// success), Upstream the upstream that served it, Attempt the number of attempts,
	// Latency the call's whole duration (for a stream, to its end or close), Usage its
	// tokens; for a stream, TimeToFirstToken, Chunks and TimePerChunk. A call refused
	// before it started (a bad request, a closed Client) ends too, with no Upstream.
	Call
	// Hedge: a hedged call sent attempt Attempt to Target while its attempt on
	// Upstream was still waiting for an answer (see Hedge).
	Hedge
	// Control: an operator control acted on Upstream (and Key): Action is
	// "breaker_reset", "breaker_force_open", "breaker_force_closed", "key_evict" (Until
	// ends it), "key_restore", "drain" or "undrain" (see Client.Drain and the methods
	// beside it), or "update" for Client.Update (Upstream empty); Changed names what it
	// changed.
	Control
	// CacheHit: cache middleware answered a call from a stored answer, without an
	// upstream call (Semantic for the semantic cache, with the matched question's
	// Similarity; Age is the answer's age). Cache events come from package cache
	// (cache.ClientEvents), before the call begins: they carry its Model and the cache's
	// Partition, and CallID 0.
	CacheHit
	// CacheMiss: cache middleware found no usable answer; the call goes on to the
	// upstreams.
	CacheMiss
	// CacheGuardRejected: the semantic cache found a similar question (Similarity)
	// but a guard rule rejected it; the call goes on to the upstreams.
	CacheGuardRejected
	// CacheStored: cache middleware stored a call's answer.
	CacheStored
	// Budget: a budget (llmclient.WithBudget) reached one of its soft thresholds, or refused
	// an attempt at its cap for the first time in its window (Class budget_exceeded), as
	// Budget describes; Upstream, Model and Attempt name the attempt whose settling or
	// refusal it was.
	Budget
	// Continuation: a committed stream broke on Upstream (Class, Err) and the call
	// continues it on Target (see llmclient.WithStreamContinuation); Action is "prefill" when the
	// partial answer was sent as a prefill, "restart" when the new answer is spliced.
	Continuation
)

var eventKindNames = [...]string{"", "attempt", "breaker", "key_cooldown", "key_evicted", "alert", "fallback", "failover", "call", "hedge",
	"control", "cache_hit", "cache_miss", "cache_guard_rejected", "cache_stored", "budget", "continuation"}

// String returns the kind's snake_case name.
func (k Kind) String() string {
	if int(k) < len(eventKindNames) {
		return eventKindNames[k]
	}
	return "event"
}
