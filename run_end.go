package llmclient

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/llmclient/llmclient/event"
	"github.com/llmclient/llmclient/failure"
)

// admitPartition admits the call against its caller partition's limits, if any, before
// any upstream is chosen. The partition's lease covers the whole call, retries included.
func (r *run) admitPartition(ctx context.Context) error {
	if r.c.partitions != nil || r.c.observer != nil {
		r.partitionName = r.c.cfg.limiter.partitionOf(ctx, r.req)
	}
	if r.c.partitions == nil {
		return nil // the run's lease is the zero one: a run starts zeroed
	}
	waited, err := r.c.partitions.acquireInto(ctx, r.partitionName, r.req, r.cost, &r.partition)
	if err != nil {
		var e *Error
		if !errors.As(err, &e) {
			e = &Error{Class: ClassOf(err), Err: err}
		}
		e.Model = r.req.Model
		r.partitionDone = true
		return e
	}
	r.preWait = waited
	return nil
}

// releasePartition gives back the partition's lease once, reconciled to usage when the
// call reached an upstream.
func (r *run) releasePartition(usage *Usage) {
	if r.partitionDone {
		return
	}
	r.partitionDone = true
	r.partition.release(usage.billable(), r.total > 0)
}

// cleanup gives back whatever the run still holds: the attempt in progress and the
// partition's lease. Front doors defer it, so that a panicking hook (an observer, a
// breaker callback, the fallback function) leaves no slot, lease or probe behind.
func (r *run) cleanup() {
	if r.handedOver {
		return // a committed attempt owns what is left
	}
	if a := r.cur; a != nil {
		r.cur = nil
		a.settle(failure.Canceled, nil)
	}
	r.releasePartition(nil)
}

// detachTrace hands the trace over to the response or error that outlives the run. The
// trace never lives in the run's own memory (record allocates it), so this only trims its
// capacity: an attempt recorded later (a hedge's loser) goes to a new array, never into
// the slice the caller holds.
func (r *run) detachTrace() {
	r.trace = r.trace[:len(r.trace):len(r.trace)]
}

// finish gives back what a pooled run still holds (cleanup) and recycles it: one deferred
// call for the one-shot front door. Should cleanup itself panic (a breaker callback), the
// run is left to the garbage collector instead of the pool.
func (r *run) finish() {
	r.cleanup()
	r.recycle()
}

// recycle clears a pooled run and puts it back.
func (r *run) recycle() {
	*r = run{}
	runPool.Put(r)
}

// record appends the attempt to the trace and tells the observer. It runs after the
// attempt is settled. The entry is written in place, field by field: building it aside
// and copying it costs a 280-byte copy per attempt.
func (r *run) record(a *attempt, e *Error, usage *Usage) {
	n := len(r.trace)
	switch {
	case n == 0 && cap(r.trace) == 0:
		// The first entry: a plain allocation costs half of what append's growth does.
		r.trace = make([]Attempt, 1)
	case n == cap(r.trace):
		r.trace = append(r.trace, Attempt{})
	default:
		r.trace = r.trace[:n+1] // every field of the entry is written below
	}
	at := &r.trace[n]
	at.Upstream, at.Model, at.Key, at.Number = a.up.Name, a.call.Model, a.keyLabel(), a.number
	at.Start, at.Latency, at.TimeToFirstToken, at.Waited = a.sent, a.latency, a.ttft, a.waited
	at.EstimatedTokens, at.ChargedTokens, at.Status, at.Local = a.cost, a.lease.Tokens, a.status, !a.called
	at.Notes, at.Hedge, at.Cost = a.call.Notes, a.hedge, a.bill.cost
	if at.Start.IsZero() {
		at.Start = a.begun
	}
	at.Batch = 0
	if usage != nil {
		at.Usage = *usage
	} else {
		at.Usage = Usage{}
	}
	if e != nil {
		at.Class, at.Err, at.RetryAfter = e.Class, e, e.RetryAfter
		if e.Status != 0 {
			at.Status = e.Status
		}
	} else {
		at.Class, at.Err, at.RetryAfter = failure.None, nil, 0
	}
	for i := n; i > 0 && r.trace[i-1].Number > r.trace[i].Number; i-- {
		// A hedged call's attempts can end out of order: the trace stays in attempt order.
		r.trace[i-1], r.trace[i] = r.trace[i], r.trace[i-1]
		at = &r.trace[i-1]
	}
	if a.called {
		a.up.recent.add(a.end, at.recentLatency(), at.Class)
	}
	if r.c.observer != nil {
		r.observeAttempt(a, at)
	}
	if a.bill.events != nil {
		r.emitBudget(a)
	}
}

// setLast remembers e as its upstream's last error, keeping the order upstreams were tried.
func (r *run) setLast(e *Error) {
	for i, l := range r.last {
		if l.Upstream == e.Upstream {
			r.last[i] = e
			return
		}
	}
	r.last = append(r.last, e)
}

// succeed fills in what the caller learns about a successful call.
func (r *run) succeed(a *attempt, resp *Response) *Response {
	resp.Upstream = a.up.Name
	resp.Attempts = r.trace
	resp.Fallback = a.up != r.first
	if r.c.cost != nil {
		resp.Cost = traceCost(r.trace)
	}
	if resp.Model == "" {
		resp.Model = a.call.Model
	}
	a.syncLimits(resp.RateLimits, true)
	return resp
}

// fail builds the call's final error, or the fallback function's response. The run's
// state is settled before the fallback function, a hook, is called.
func (r *run) fail(ctx context.Context, err error) (*Response, error) {
	final := r.final(err)
	if f := r.c.cfg.fallback; f != nil && ctx.Err() == nil && r.c.cfg.decisions[final.Class].Failover {
		resp, ferr := f(ctx, r.orig, final)
		if ferr == nil && resp != nil {
			resp.Degraded, resp.Fallback = true, true
			resp.Attempts = r.trace
			if r.c.cost != nil {
				resp.Cost = traceCost(r.trace)
			}
			r.observe(Event{Kind: event.Fallback, Class: final.Class, Err: final})
			return resp, nil
		}
	}
	return nil, final
}

// final builds the call's final error from the last one: a copy that carries the attempt
// trace and, when several upstreams were tried, each one's last error; when the retry
// budget stopped the call, the cause says so.
func (r *run) final(err error) *Error {
	var e *Error
	if !errors.As(err, &e) {
		e = &Error{Class: ClassOf(err), Err: err}
	}
	final := *e
	final.Attempts = r.trace
	if r.c.cost != nil {
		final.Cost = traceCost(r.trace)
	}
	cause := e.Err
	if r.budgetSpent && !errors.Is(cause, ErrRetryBudget) {
		cause = errors.Join(ErrRetryBudget, cause)
	}
	if len(r.last) > 1 {
		cause = &upstreamErrors{cause: cause, last: r.last}
	}
	final.Err = cause
	return &final
}

// canceled is the error for a call whose context ended during a wait.
func (r *run) canceled(ctx context.Context) *Error {
	class := failure.Canceled
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		class = failure.Timeout
	}
	e := &Error{Class: class, Model: r.orig.Model, Err: ctx.Err()}
	if last := r.lastErr; last != nil {
		e.Upstream, e.Model = last.Upstream, last.Model
		e.Err = errors.Join(ctx.Err(), last)
	}
	r.lastErr = e
	return e
}

// upstreamErrors is the cause of a call that failed on several upstreams: each one's last
// error, after the final error's own cause.
type upstreamErrors struct {
	cause error
	last  []*Error
}

func (u *upstreamErrors) Error() string {
	var b strings.Builder
	if u.cause != nil {
		b.WriteString(strings.TrimPrefix(u.cause.Error(), "llmclient: "))
		b.WriteString("; ")
	}
	b.WriteString("tried ")
	for i, e := range u.last {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(strings.TrimPrefix(e.summary(), "llmclient: "))
	}
	return b.String()
}

func (u *upstreamErrors) Unwrap() []error {
	out := make([]error, 0, len(u.last)+1)
	if u.cause != nil {
		out = append(out, u.cause)
	}
	for _, e := range u.last {
		out = append(out, e)
	}
	return out
}

// events holds the events of one step, emitted once the step's state is settled.
type events struct {
	buf [3]Event
	n   int
}

func (ev *events) add(e Event) {
	if ev.n < len(ev.buf) {
		ev.buf[ev.n] = e
		ev.n++
	}
}

func (ev *events) emit(r *run) {
	for i := 0; i < ev.n; i++ {
		r.observe(ev.buf[i])
	}
}

// ended is called for a call that ended with resp or err (an *Error).
func (r *run) ended(resp *Response, err error, cm *committed) {
	var e *Error
	if err != nil && !errors.As(err, &e) {
		e = &Error{Class: ClassOf(err), Err: err}
	}
	r.called(resp, e, cm)
}

// called tells the observer that the call ended, with resp on success or e on failure.
// For a stream, cm is its committed attempt (nil when the call failed before one).
func (r *run) called(resp *Response, e *Error, cm *committed) {
	if r.c.observer == nil {
		return
	}
	var ev Event // built here and handed to the observer directly: see run.fill
	ev.Kind, ev.Attempt, ev.Start, ev.Latency = event.Call, len(r.trace), r.start, time.Since(r.start)
	if r.c.cost != nil {
		ev.Cost = traceCost(r.trace)
	}
	ev.Time = r.start.Add(ev.Latency)
	if n := len(r.trace); n > 0 {
		ev.Model = r.trace[n-1].Model // what the upstream was sent, as on its attempts
	}
	if resp != nil {
		ev.Upstream, ev.ResponseModel, ev.FinishReason = resp.Upstream, resp.Model, resp.FinishReason
		ev.InputTokens, ev.OutputTokens, ev.Status = resp.Usage.InputTokens, resp.Usage.OutputTokens, resp.Status
		ev.UsageEstimated = resp.Usage.Estimated
	}
	if e != nil {
		ev.Class, ev.Status, ev.Err, ev.Upstream = e.Class, e.Status, e, e.Upstream
		ev.FinishReason = ""
		if p := e.Partial; p != nil {
			ev.InputTokens, ev.OutputTokens, ev.UsageEstimated = p.Usage.InputTokens, p.Usage.OutputTokens, p.Usage.Estimated
		}
	}
	if cm != nil {
		var u *Usage // the whole stream's, a continued one's too (continue.go)
		ev.TimeToFirstToken, ev.Chunks, ev.TimePerChunk, u = cm.callStats(r.start)
		if u != nil {
			ev.InputTokens, ev.OutputTokens, ev.UsageEstimated = u.InputTokens, u.OutputTokens, u.Estimated
		}
		if ev.Upstream == "" {
			ev.Upstream = cm.a.up.Name
		}
	}
	r.fill(&ev)
	r.c.observer(r.ctx, ev)
}
