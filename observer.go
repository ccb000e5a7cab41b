package llmclient

import (
	"context"
	"time"

	"github.com/llmclient/llmclient/breaker"
	"github.com/llmclient/llmclient/budget"
	"github.com/llmclient/llmclient/pricing"
)

// EventKind says what an Event reports. Kinds are added as the Client learns to report
// new decisions (hedging, budgets, caching): an observer must ignore kinds it does not
// know, and String names every kind, known or not.
type EventKind uint8

// The event kinds.
const (
	// EventAttempt: one attempt ended (successfully or not).
	EventAttempt EventKind = iota + 1
	// EventBreaker: an upstream's circuit breaker changed state (From, To).
	EventBreaker
	// EventKeyCooldown: a key was paused until Until after a rate limit.
	EventKeyCooldown
	// EventKeyEvicted: a key was taken out of its pool until Until (auth or quota failure).
	EventKeyEvicted
	// EventAlert: a failure that needs a human: a revoked key, an exhausted quota.
	EventAlert
	// EventFallback: every upstream failed and the fallback function (WithFallback)
	// produced the response.
	EventFallback
	// EventFailover: the call moved from Upstream to the next upstream of its route,
	// Target, after a failure of Class (a local refusal included).
	EventFailover
	// EventCall: a call ended, once per call: Class is its final class (ClassNone on
	// success), Upstream the upstream that served it, Attempt the number of attempts,
	// Latency the call's whole duration (for a stream, to its end or close), Usage its
	// tokens; for a stream, TimeToFirstToken, Chunks and TimePerChunk.
	EventCall
	// EventHedge: a hedged call sent attempt Attempt to Target while its attempt on
	// Upstream was still waiting for an answer (see Hedge).
	EventHedge
	// EventControl: an operator control acted on Upstream (and Key): Action is
	// "breaker_reset", "breaker_force_open", "breaker_force_closed", "key_evict" (Until
	// ends it), "key_restore", "drain" or "undrain" (see Client.Drain and the methods
	// beside it), or "update" for Client.Update (Upstream empty); Changed names what it
	// changed.
	EventControl
	// EventCacheHit: cache middleware answered a call from a stored answer, without an
	// upstream call (Semantic for the semantic cache, with the matched question's
	// Similarity; Age is the answer's age). Cache events come from package cache
	// (cache.ClientEvents), before the call begins: they carry its Model and the cache's
	// Partition, and CallID 0.
	EventCacheHit
	// EventCacheMiss: cache middleware found no usable answer; the call goes on to the
	// upstreams.
	EventCacheMiss
	// EventCacheGuardRejected: the semantic cache found a similar question (Similarity)
	// but a guard rule rejected it; the call goes on to the upstreams.
	EventCacheGuardRejected
	// EventCacheStored: cache middleware stored a call's answer.
	EventCacheStored
	// EventBudget: a budget (WithBudget) reached one of its soft thresholds, or refused
	// an attempt at its cap for the first time in its window (Class budget_exceeded), as
	// Budget describes; Upstream, Model and Attempt name the attempt whose settling or
	// refusal it was.
	EventBudget
	// EventContinuation: a committed stream broke on Upstream (Class, Err) and the call
	// continues it on Target (see WithStreamContinuation); Action is "prefill" when the
	// partial answer was sent as a prefill, "restart" when the new answer is spliced.
	EventContinuation
)

var eventKindNames = [...]string{"", "attempt", "breaker", "key_cooldown", "key_evicted", "alert", "fallback", "failover", "call", "hedge",
	"control", "cache_hit", "cache_miss", "cache_guard_rejected", "cache_stored", "budget", "continuation"}

// String returns the kind's snake_case name.
func (k EventKind) String() string {
	if int(k) < len(eventKindNames) {
		return eventKindNames[k]
	}
	return "event"
}

// Event is what the Client tells its observer. Fields that do not apply to a kind are zero.
// Events never contain API keys: Key is a label such as "key#2". New fields may be added.
type Event struct {
	Kind EventKind
	// Time is when the event happened: for EventAttempt, when the attempt ended; for
	// EventCall, when the call ended.
	Time time.Time
	// Start is when the reported span of time began: for EventAttempt, when the attempt
	// began, after the wait before it (backoff, Retry-After) and before its own waits in
	// the key pool and the limiter; for EventCall, when the call began. With Time it
	// places an attempt or a call on a timeline (a trace span).
	Start time.Time
	// CallID identifies the call an event belongs to, unique within the Client and the
	// same for every event of one call (0 for events of no call, such as EventBreaker).
	CallID uint64
	// Metadata is the request's Metadata and Partition its caller partition (see
	// WithPartitionLimits), for events of a call. Metadata must not be modified.
	Metadata  map[string]string
	Partition string
	Upstream  string
	// Target is the upstream a failover moves to (EventFailover).
	Target string
	// Model is the model name the upstream was sent (its Upstream.Models entry for the
	// requested name, or the requested name itself): for the events of one attempt, that
	// attempt's; for EventCall, the last attempt's (the one that served the call, when it
	// succeeded). Events of a call before any attempt, and the cache's events, carry the
	// requested name, as RequestedModel does.
	Model string
	// RequestedModel is the model name the caller asked for (Request.Model: a model
	// group's name, say), on every event of a call.
	RequestedModel string
	Key            string
	// Attempt is the attempt number within the call, from 1.
	Attempt int
	Class   Class
	Status  int
	// Local marks an attempt that was refused locally, without an upstream call.
	Local bool
	// Hedge marks a hedged attempt (see Hedge), for EventAttempt and EventHedge.
	Hedge bool
	// Retry marks an attempt that retried the upstream of the call's previous upstream
	// call (not the call's first on that upstream).
	Retry bool
	// Latency is an attempt's upstream call (for a committed stream, the whole stream),
	// or a call's whole duration (EventCall).
	Latency time.Duration
	// TimeToFirstToken is, for EventAttempt, a stream attempt's time from its upstream
	// call to its first content token; for EventCall, a stream's time from the call's
	// start to its first content token, the attempts before included: what the caller
	// waited.
	TimeToFirstToken time.Duration
	// Waited is the time an attempt spent waiting before its upstream call: the backoff
	// or Retry-After before it, the caller partition's admission (first attempt), cooling
	// keys and the key's limiter.
	Waited time.Duration
	// LimiterWait is the part of Waited spent in the Client's own admission: the caller
	// partition's limiter (first attempt), every key cooling down, and the key's limiter
	// (RPM, TPM, concurrency). A local refusal reports what it waited before refusing.
	LimiterWait time.Duration
	// EstimatedTokens is the limiter's estimate; InputTokens and OutputTokens the reported usage.
	EstimatedTokens int
	InputTokens     int
	OutputTokens    int
	// FinishReason and ResponseModel are the answer's, for EventCall.
	FinishReason  FinishReason
	ResponseModel string
	// Chunks counts a stream's data chunks and TimePerChunk is the mean time between them
	// after the first, for EventCall; Chunks is 0 for a one-shot call and for a stream that
	// failed before its first token.
	Chunks       int
	TimePerChunk time.Duration
	// From and To are breaker states, for EventBreaker.
	From, To breaker.State
	// Action is what an operator control did, for EventControl.
	Action string
	// Changed names each piece of state an operator control changed, for EventControl, in
	// the order it changed them; empty when there was nothing to change (restoring a key
	// that was ready, draining a drained upstream). The names: "breaker" (this Client's
	// breaker), "shared_breaker" (the trip recorded in the store for every Client that
	// shares it, WithSharedBreakers), "drain", "pool_cooldown" and "pool_eviction" (the
	// key's state in this Client's pool), "limiter_pause" (the pause after a rate limit
	// that holds the key's limiter, in this Client or, with WithLimitStore, in the store
	// for every Client that shares it), "store_eviction" (the key's eviction in the limit
	// store, for every Client that shares it), and for Client.Update "<upstream>.<field>"
	// or "group:<name>" for each setting that took a new value. It must not be modified.
	Changed []string
	// Until ends a cooldown or eviction.
	Until time.Time
	// Embed marks the events of an embedding call (Client.Embed): each of its batches is
	// a call of its own, with its own CallID.
	Embed bool
	// Semantic marks the events of the semantic cache, Similarity is its cosine
	// similarity and Age a cached answer's age, for the EventCache kinds.
	Semantic   bool
	Similarity float64
	Age        time.Duration
	// Err is the attempt's error, or the reason for an alert.
	Err error
	// Cost is what the attempt cost (EventAttempt), or the whole call (EventCall); see
	// WithPricing. Unknown without pricing.
	Cost pricing.Cost
	// Budget is the budget's state, for EventBudget; nil otherwise. It must not be
	// modified.
	Budget *budget.Status
}

// observe calls the observer, if any, for an event of no call. It must be called
// without locks held.
func (c *Client) observe(e Event) {
	if c.observer != nil {
		if e.Time.IsZero() {
			e.Time = time.Now()
		}
		c.observer(context.Background(), e)
	}
}

// observe calls the observer, if any, for an event of the run's call, with the caller's
// context. It must be called without locks held.
func (r *run) observe(e Event) {
	if r.c.observer != nil {
		if e.Time.IsZero() {
			e.Time = time.Now()
		}
		r.fill(&e)
		r.c.observer(r.ctx, e)
	}
}

// fill sets in e what every event of the run's call carries: its call ID, metadata,
// partition, requested model and, when e names none, model.
//
// The Client's two events of every call, EventAttempt and EventCall, are built in a local
// Event, filled and handed to the observer, which copies them once; an Event is some 400
// bytes, and handing it on by value (to observe) or by pointer (dereferenced in the
// call) costs one more copy.
func (r *run) fill(e *Event) {
	e.CallID, e.Metadata, e.Partition, e.Embed = r.id, r.orig.Metadata, r.partitionName, r.emb != nil
	e.RequestedModel = r.orig.Model
	if e.Model == "" {
		e.Model = r.orig.Model
	}
}

// observeAttempt tells the observer, which must be set, that attempt a ended, as recorded
// in at.
func (r *run) observeAttempt(a *attempt, at *Attempt) {
	var e Event // zeroed, not copied from a template as a literal with a constant Kind is
	e.Kind, e.Time, e.Start, e.Upstream, e.Model, e.Key = EventAttempt, a.end, a.begun, at.Upstream, at.Model, at.Key
	e.Attempt, e.Class, e.Status, e.Latency = at.Number, at.Class, at.Status, at.Latency
	e.TimeToFirstToken, e.Waited, e.LimiterWait = at.TimeToFirstToken, at.Waited, a.layerWait
	if a.number == 1 {
		e.LimiterWait += r.preWait
	}
	e.Local, e.Retry, e.Hedge, e.EstimatedTokens = at.Local, a.retry && a.called && !a.hedge, at.Hedge, at.EstimatedTokens
	e.InputTokens, e.OutputTokens, e.Err, e.Cost = at.Usage.InputTokens, at.Usage.OutputTokens, at.Err, at.Cost
	if e.Time.IsZero() { // a local refusal
		e.Time = time.Now()
	}
	r.fill(&e)
	r.c.observer(r.ctx, e)
}
