package llmclient

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"
)

// run is one logical call: its route, its attempts and its trace.
type run struct {
	c     *Client
	req   *Request
	cost  int
	trace []Attempt
	// calls counts real upstream calls; every call after the first needs the retry budget.
	calls int
	first *upstream
	// last holds each tried upstream's last error, in the order tried.
	last []*Error
	// start is when the call began.
	start time.Time
	// partition is the caller partition's lease; preWait the time its admission took.
	partition limitLease
	preWait   time.Duration
	// a is the attempt in progress, kept here so a one-shot call allocates it once;
	// traceBuf holds the first attempts of the trace for the same reason.
	a        attempt
	traceBuf [1]Attempt
	// single allows one attempt only, for a transport request whose body cannot be replayed.
	single bool
	// tx is the transport call, handed to every attempt; nil for Complete and Stream.
	tx *txCall
}

// action is what the loop does after a failed attempt.
type action uint8

const (
	actRetry action = iota
	actFailover
	actStop
)

func (c *Client) newRun(req *Request) *run {
	r := &run{}
	c.initRun(r, req)
	return r
}

// initRun prepares a zero run for req.
func (c *Client) initRun(r *run, req *Request) {
	r.c, r.req, r.start = c, req, time.Now()
	r.trace = r.traceBuf[:0]
	if c.needCost {
		r.cost = c.cfg.limiter.cost(req)
	}
}

// complete is the one-shot call path.
func (c *Client) complete(ctx context.Context, req *Request) (*Response, error) {
	if err := checkRequest(req); err != nil {
		return nil, err
	}
	r := runPool.Get().(*run)
	c.initRun(r, req)
	defer r.recycle()
	if err := r.admitPartition(ctx); err != nil {
		return nil, err
	}
	a, err := r.exec(ctx, c.route(req.Model), c.completeChain, false)
	if err != nil {
		r.releasePartition(nil)
		r.detachTrace()
		return r.fail(ctx, err)
	}
	r.releasePartition(&a.resp.Usage)
	r.detachTrace()
	return r.succeed(a, a.resp), nil
}

// runPool recycles the runs of one-shot calls: a run is large, and a call's only other
// allocations are its trace and the adapter's response. Streams and transport calls,
// whose runs outlive the call, allocate their own.
var runPool = sync.Pool{New: func() any { return new(run) }}

// detachTrace moves the trace out of the run's buffer, so that the run can be recycled
// while the response or error keeps its trace.
func (r *run) detachTrace() {
	r.trace = append(make([]Attempt, 0, len(r.trace)), r.trace...)
}

// recycle clears a pooled run and puts it back.
func (r *run) recycle() {
	*r = run{}
	runPool.Put(r)
}

// admitPartition admits the call against its caller partition's limits, if any, before
// any upstream is chosen. The partition's lease covers the whole call, retries included.
func (r *run) admitPartition(ctx context.Context) error {
	lease, waited, err := r.c.partitions.acquire(ctx, r.req, r.cost)
	if err != nil {
		e, ok := err.(*Error)
		if !ok {
			e = &Error{Class: ClassOf(err), Err: err}
		}
		e.Model = r.req.Model
		return e
	}
	r.partition, r.preWait = lease, waited
	return nil
}

// releasePartition gives back the partition's lease, reconciled to usage when the call
// reached an upstream.
func (r *run) releasePartition(usage *Usage) {
	actual := 0
	if usage != nil && !usage.Estimated {
		actual = usage.InputTokens + usage.OutputTokens
	}
	r.partition.release(actual, r.calls > 0)
}

// exec runs attempts along route until one succeeds or the decisions say stop. For
// streams (keep) the successful attempt is returned unsettled: the stream settles it when
// it ends. Every attempt of the call goes through chain.
func (r *run) exec(ctx context.Context, route []*upstream, chain attemptFunc, keep bool) (*attempt, error) {
	c := r.c
	if len(route) == 0 {
		return nil, &Error{Class: ClassNotFound, Model: r.req.Model, Err: ErrNoUpstream,
			Message: "no upstream serves model " + strconv.Quote(r.req.Model)}
	}
	c.budget.first(r.start)
	rc := &c.cfg.retry
	maxAttempts, maxTotal := rc.maxAttempts, rc.maxTotal
	if r.single {
		maxAttempts, maxTotal = 1, 1
	}
	req := r.req
	var (
		lastErr      *Error
		bo           *backoff.ExponentialBackOff
		total        int
		wait         time.Duration
		usedCtxFB    bool
		usedFilterFB bool
		emptyRetried bool
	)
	for i := 0; i < len(route); i++ {
		up := route[i]
		model, ok := up.model(r.req.Model)
		if !ok { // fallback upstreams may not map the group's model: send it unchanged
			model = r.req.Model
		}
		if r.first == nil {
			r.first = up
		}
		wait = 0
		act := actFailover
		for n := 1; n <= maxAttempts && total < maxTotal; n++ {
			if wait > 0 {
				if err := sleep(ctx, wait); err != nil {
					return nil, r.canceled(ctx, lastErr)
				}
			}
			now := r.start
			if total > 0 {
				now = time.Now()
			}
			if r.calls > 0 && !c.budget.tryRetry(now) {
				lastErr = budgetSpent(lastErr)
				return nil, lastErr
			}
			total++
			a := &r.a
			switch {
			case keep:
				a = &attempt{}
			case total > 1:
				*a = attempt{} // the run's attempt is reused; the first one is still zero
			}
			if total == 1 {
				wait += r.preWait
			}
			// Field by field: a whole-struct assignment costs a bulk write barrier per call.
			a.up, a.req, a.number, a.cost, a.waited, a.start = up, req, total, r.cost, wait, now
			a.call.Request, a.call.Model, a.tx = req, model, r.tx
			wait = 0
			err := chain(ctx, a)
			if a.called {
				r.calls++
			}
			if err == nil {
				if !keep {
					r.record(a, nil, &a.resp.Usage)
					a.settle(c, ClassNone, &a.resp.Usage)
				}
				return a, nil
			}
			e := err.(*Error)
			r.record(a, e, nil)
			if ctx.Err() != nil {
				// The caller gave up (canceled or out of time): that says nothing about the
				// upstream's health, so the breaker does not count it.
				a.settle(c, ClassCanceled, nil)
			} else {
				a.settle(c, e.Class, nil)
			}
			lastErr = e
			r.setLast(e)
			if ctx.Err() != nil {
				return nil, e
			}
			d := c.effects(a, e)
			switch {
			case e.Class == ClassContextLength && len(c.ctxFB) > 0 && !usedCtxFB:
				usedCtxFB = true
				route = append(route[:i+1:i+1], c.ctxFB...)
				act = actFailover
			case e.Class == ClassContentFiltered && len(c.contentFB) > 0 && !usedFilterFB:
				usedFilterFB = true
				route = append(route[:i+1:i+1], c.contentFB...)
				act = actFailover
			case e.Class == ClassEmptyOutput && d.Retry:
				// Retried once, with a larger output budget; never with backoff.
				act = actStop
				if d.Failover {
					act = actFailover
				}
				if !emptyRetried {
					emptyRetried = true
					req = enlargeOutput(req)
					act = actRetry
				}
			default:
				wait, act = r.next(ctx, a, e, d, &bo)
			}
			if d.Cooldown && a.called && !d.Evict {
				c.cooldown(a, e, wait, act)
			}
			if act != actRetry {
				break
			}
		}
		if act == actStop {
			return nil, lastErr
		}
		if total >= maxTotal {
			break
		}
	}
	if lastErr == nil {
		lastErr = &Error{Class: ClassUnavailable, Model: r.req.Model, Err: ErrNoUpstream}
	}
	return nil, lastErr
}

// next decides what follows a failed attempt and how long to wait before a retry.
func (r *run) next(ctx context.Context, a *attempt, e *Error, d Decision, bo **backoff.ExponentialBackOff) (time.Duration, action) {
	fail := actStop
	if d.Failover {
		fail = actFailover
	}
	// A failure that belonged to the key moves to another key at once, when one is free.
	if a.called && (d.Cooldown || d.Evict) && a.up.keys.available(time.Now(), a.key) {
		return 0, actRetry
	}
	if !d.Retry || e.Class == ClassAuth || e.Class == ClassQuotaExhausted {
		return 0, fail
	}
	rc := &r.c.cfg.retry
	var w time.Duration
	if e.RetryAfter > 0 {
		if e.RetryAfter > rc.maxRetryAfter {
			return 0, fail
		}
		w = retryAfterWait(e.RetryAfter)
	} else {
		if *bo == nil {
			*bo = rc.newBackOff()
		}
		w = (*bo).NextBackOff()
	}
	if !fits(ctx, w) {
		return 0, fail
	}
	return w, actRetry
}

// effects applies a failure's side effects (key cooldown or eviction, alerts, header sync)
// and returns its decision, with the upstream's x-should-retry applied.
func (c *Client) effects(a *attempt, e *Error) Decision {
	d := c.cfg.decisions[e.Class]
	if e.ShouldRetry != nil && a.called {
		d.Retry = *e.ShouldRetry
	}
	if !a.called || a.key == nil {
		return d
	}
	if e.RateLimits != nil {
		a.key.limiter.observe(e.RateLimits)
	}
	now := time.Now()
	switch {
	case d.Evict:
		until := now.Add(c.cfg.keys.evictFor)
		if a.key.block(until, true) {
			c.observe(Event{Kind: EventKeyEvicted, Time: now, Upstream: a.up.Name, Key: a.keyLabel(), Class: e.Class, Until: until})
		}
	}
	if d.Alert {
		c.observe(Event{Kind: EventAlert, Time: now, Upstream: a.up.Name, Key: a.keyLabel(), Class: e.Class, Status: e.Status, Err: e})
	}
	return d
}

// cooldown pauses the attempt's key for every caller: for the upstream's Retry-After, else
// for the backoff this call waits before retrying the key's upstream, else for the default
// key cooldown.
func (c *Client) cooldown(a *attempt, e *Error, wait time.Duration, act action) {
	d := e.RetryAfter
	if d <= 0 {
		d = c.cfg.keys.cooldown
		if act == actRetry && wait > 0 {
			d = wait
		}
	}
	now := time.Now()
	until := now.Add(d)
	if a.key.block(until, false) {
		a.key.limiter.pause(until)
		c.observe(Event{Kind: EventKeyCooldown, Time: now, Upstream: a.up.Name, Key: a.keyLabel(), Class: e.Class, Until: until})
	}
}

// record appends the attempt to the trace and tells the observer.
func (r *run) record(a *attempt, e *Error, usage *Usage) {
	at := Attempt{
		Upstream: a.up.Name, Model: a.call.Model, Key: a.keyLabel(), Number: a.number,
		Start: a.start, Latency: a.latency, Waited: a.waited, EstimatedTokens: a.cost,
	}
	if usage != nil {
		at.Usage = *usage
	}
	if e != nil {
		at.Class, at.Status, at.Err, at.RetryAfter = e.Class, e.Status, e, e.RetryAfter
	}
	r.trace = append(r.trace, at)
	if r.c.observer != nil {
		r.c.observe(Event{Kind: EventAttempt, Upstream: at.Upstream, Model: at.Model, Key: at.Key,
			Attempt: at.Number, Class: at.Class, Status: at.Status, Latency: at.Latency, Waited: at.Waited,
			EstimatedTokens: at.EstimatedTokens, InputTokens: at.Usage.InputTokens,
			OutputTokens: at.Usage.OutputTokens, Err: at.Err})
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
	if resp.Model == "" {
		resp.Model = a.call.Model
	}
	if resp.RateLimits != nil && a.key != nil {
		a.key.limiter.observe(resp.RateLimits)
	}
	return resp
}

// fail builds the call's final error, or the fallback function's response.
func (r *run) fail(ctx context.Context, err error) (*Response, error) {
	final := r.final(err)
	if f := r.c.cfg.fallback; f != nil && ctx.Err() == nil && r.c.cfg.decisions[final.Class].Failover {
		resp, ferr := f(ctx, r.req, final)
		if ferr == nil && resp != nil {
			resp.Degraded, resp.Fallback = true, true
			resp.Attempts = r.trace
			r.c.observe(Event{Kind: EventFallback, Class: final.Class, Err: final})
			return resp, nil
		}
	}
	return nil, final
}

// final builds the call's final error from the last one: a copy that carries the attempt
// trace and, when several upstreams were tried, each one's last error.
func (r *run) final(err error) *Error {
	e, ok := err.(*Error)
	if !ok {
		e = &Error{Class: ClassOf(err), Err: err}
	}
	final := *e
	final.Attempts = r.trace
	if len(r.last) > 1 {
		final.Err = &upstreamErrors{cause: e.Err, last: r.last}
	}
	return &final
}

// canceled is the error for a call whose context ended during a wait.
func (r *run) canceled(ctx context.Context, last *Error) *Error {
	class := ClassCanceled
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		class = ClassTimeout
	}
	e := &Error{Class: class, Err: ctx.Err()}
	if last != nil {
		e.Upstream, e.Model = last.Upstream, last.Model
		e.Err = errors.Join(ctx.Err(), last)
	}
	return e
}

// budgetSpent marks the last error as final because the retry budget is spent.
func budgetSpent(last *Error) *Error {
	e := *last
	e.Err = errors.Join(ErrRetryBudget, last.Err)
	return &e
}

// enlargeOutput returns a copy of req with twice the output budget (or 4096 when unset),
// for the one retry after an empty output.
func enlargeOutput(req *Request) *Request {
	cp := *req
	if cp.MaxTokens > 0 {
		cp.MaxTokens *= 2
	} else {
		cp.MaxTokens = 4096
	}
	return &cp
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
