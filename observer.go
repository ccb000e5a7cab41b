package llmclient

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/llmclient/llmclient/breaker"
	"github.com/llmclient/llmclient/budget"
	"github.com/llmclient/llmclient/event"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/finish"
	"github.com/llmclient/llmclient/pricing"
)

// callIDs numbers calls across every Client of the process (Event.CallID).
var callIDs atomic.Uint64

// Event is what the Client tells its observer. Fields that do not apply to a kind are zero.
// Events never contain API keys: Key is a label such as "key#2". New fields may be added.
type Event struct {
	Kind event.Kind
	// Time is when the event happened: for event.Attempt, when the attempt ended; for
	// event.Call, when the call ended.
	Time time.Time
	// Start is when the reported span of time began: for event.Attempt, when the attempt
	// began, after the wait before it (backoff, Retry-After) and before its own waits in
	// the key pool and the limiter; for event.Call, when the call began. With Time it
	// places an attempt or a call on a timeline (a trace span).
	Start time.Time
	// CallID identifies the call an event belongs to, unique within the process (across
	// Clients: a fallback function that calls another Client makes a call of its own with
	// its own ID) and the same for every event of one call (0 for events of no call, such
	// as event.Breaker).
	CallID uint64
	// Metadata is the request's Metadata and Partition its caller partition (see
	// WithPartitionLimits), for events of a call. Metadata must not be modified.
	Metadata  map[string]string
	Partition string
	Upstream  string
	// Target is the upstream a failover moves to (event.Failover).
	Target string
	// Model is the model name the upstream was sent (its Upstream.Models entry for the
	// requested name, or the requested name itself): for the events of one attempt, that
	// attempt's; for event.Call, the last attempt's (the one that served the call, when it
	// succeeded). Events of a call before any attempt, and the cache's events, carry the
	// requested name, as RequestedModel does.
	Model string
	// RequestedModel is the model name the caller asked for (Request.Model: a model
	// group's name, say), on every event of a call.
	RequestedModel string
	Key            string
	// Attempt is the attempt number within the call, from 1.
	Attempt int
	Class   failure.Class
	Status  int
	// Local marks an attempt that was refused locally, without an upstream call.
	Local bool
	// Hedge marks a hedged attempt (see Hedge), for event.Attempt and event.Hedge.
	Hedge bool
	// Retry marks an attempt that retried the upstream of the call's previous upstream
	// call (not the call's first on that upstream).
	Retry bool
	// Latency is an attempt's upstream call (for a committed stream, the whole stream),
	// or a call's whole duration (event.Call).
	Latency time.Duration
	// TimeToFirstToken is, for event.Attempt, a stream attempt's time from its upstream
	// call to its first content token; for event.Call, a stream's time from the call's
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
	// UsageEstimated marks InputTokens and OutputTokens as the Client's estimate, not the
	// upstream's report: an answer or a stream that reported no usage (or an implausible
	// one, see Usage.Estimated), a stream cut or closed before its usage.
	UsageEstimated bool
	// FinishReason and ResponseModel are the answer's, for event.Call.
	FinishReason  finish.Reason
	ResponseModel string
	// Chunks counts a stream's data chunks and TimePerChunk is the mean time between them
	// after the first, for event.Call; Chunks is 0 for a one-shot call and for a stream that
	// failed before its first token.
	Chunks       int
	TimePerChunk time.Duration
	// From and To are breaker states, for event.Breaker.
	From, To breaker.State
	// Action is what an operator control did, for event.Control.
	Action string
	// Changed names each piece of state an operator control changed, for event.Control, in
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
	// Cost is what the attempt cost (event.Attempt), or the whole call (event.Call); see
	// WithPricing. Unknown without pricing.
	Cost pricing.Cost
	// Budget is the budget's state, for event.Budget; nil otherwise. It must not be
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
// The Client's two events of every call, event.Attempt and event.Call, are built in a local
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
	e.Kind, e.Time, e.Start, e.Upstream, e.Model, e.Key = event.Attempt, a.end, a.begun, at.Upstream, at.Model, at.Key
	e.Attempt, e.Class, e.Status, e.Latency = at.Number, at.Class, at.Status, at.Latency
	e.TimeToFirstToken, e.Waited, e.LimiterWait = at.TimeToFirstToken, at.Waited, a.layerWait
	if a.number == 1 {
		e.LimiterWait += r.preWait
	}
	e.Local, e.Retry, e.Hedge, e.EstimatedTokens = at.Local, a.retry && a.called && !a.hedge, at.Hedge, at.EstimatedTokens
	e.InputTokens, e.OutputTokens, e.Err, e.Cost = at.Usage.InputTokens, at.Usage.OutputTokens, at.Err, at.Cost
	e.UsageEstimated = at.Usage.Estimated
	if e.Time.IsZero() { // a local refusal
		e.Time = time.Now()
	}
	r.fill(&e)
	r.c.observer(r.ctx, e)
}
