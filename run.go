package llmclient

import (
	"context"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/llmclient/llmclient/event"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/routing"
)

// run is one logical call: its route, its attempts and its trace. The loop in exec takes
// four small steps per attempt — pick the upstream, attempt it through the layers, decide
// from the Decision table what follows, wait — until an attempt succeeds or a decision
// ends the call. A run is used by one goroutine at a time.
type run struct {
	c   *Client
	ctx context.Context // the caller's, for the observer
	id  uint64          // the call's ID
	// partitionName is the caller partition the call belongs to, "" for none.
	partitionName string
	req           *Request // as sent: a copy with a larger output budget after GrowOutput
	orig          *Request // the caller's request
	cost          int
	// prompt is 1 + the prompt's estimate once computed (0: not yet); cal what its
	// usage teaches the estimate of its model family.
	prompt int
	cal    calibration
	// chain is the attempt layers of the run's front door; keep leaves a successful
	// attempt unsettled, for a stream to settle when it ends.
	chain attemptFunc
	keep  bool

	route []*upstream
	pos   int // the upstream being tried: route[pos]
	onUp  int // upstream calls made on route[pos]
	total int // upstream calls made by the whole call
	// number counts the trace's entries, local refusals included.
	number int
	first  *upstream
	bo     *backoff.ExponentialBackOff
	grown  bool
	// rerouted marks the reroute lists already used.
	rerouted [numReroutes]bool
	// avoid is a key the next pick passes over when another is usable (NextKey).
	avoid *poolKey
	// waited is the time slept before the next attempt (Retry-After or backoff).
	waited time.Duration
	// budgetSpent: the last retry was refused by the retry budget.
	budgetSpent bool

	trace []Attempt
	// last holds each tried upstream's last error, in the order tried.
	last    []*Error
	lastErr *Error
	start   time.Time
	// partition is the caller partition's lease; preWait the time its admission took.
	partition     limitLease
	preWait       time.Duration
	partitionDone bool
	// cur is the attempt in progress, settled by cleanup should a hook panic;
	// handedOver is set once a committed attempt owns the rest of the run.
	cur        *attempt
	handedOver bool
	// opts are the call's CallOptions, nil for none.
	opts *CallOptions
	// hedge is the call's hedging; hedgeSent is set once it sent its one hedge, and
	// hedgedOn is the upstream a hedge that failed aside called, which counts against
	// that upstream's cap should the call move there.
	hedge     routing.Hedge
	hedgeSent bool
	hedgedOn  *upstream

	// a is the attempt of a one-shot call, kept here so that it allocates once; routeBuf
	// holds a reordered route, for the same reason.
	a        attempt
	routeBuf [4]*upstream
	// routeOwned: route is the call's own copy, which routing may reorder. restBy is the
	// strategy that has yet to order the route after its first upstream (orderRest);
	// routing.Default for none.
	routeOwned bool
	restBy     routing.Policy
	// affinity is the call's prompt-cache affinity hash (affinity.go); 0: none.
	affinity uint64
	// single allows one upstream call only: a transport request whose body cannot be
	// replayed.
	single bool
	// tx is the transport call, handed to every attempt; nil for Complete and Stream.
	tx *txCall
	// bill is the call's pricing state across attempts (budget_run.go).
	bill runBill
	// budgetEnd is the end of the call's time budget when its context has no deadline
	// (WithCallBudget); zero otherwise. Its attempts then see a budgetCtx.
	budgetEnd time.Time
	// emb is the embedding batch of a Client.Embed call (embed_run.go), handed to every
	// attempt; nil for other calls.
	emb *embedBatch
}

// step is where the loop goes after a failed attempt.
type step uint8

const (
	stepStop step = iota // the call ends with the attempt's error
	stepSame             // the same upstream again, after plan.wait
	stepNext             // the next upstream of the route
)

// plan is what a decision leaves the loop to do.
type plan struct {
	step step
	wait time.Duration
}

// runPool recycles the runs of one-shot calls: a run is large, and a call's only other
// allocations are its trace and the adapter's response. Streams and transport calls,
// whose runs outlive the call, allocate their own.
var runPool = sync.Pool{New: func() any { return new(run) }}

// begin prepares r for req on route, the one way every front door starts a call: it
// checks the request, estimates its cost once and admits it against its caller
// partition's limits. On error nothing stays held.
//
// A transport call (r.tx set) carries a raw HTTP request instead: its shape is not checked
// and its cost is set by the transport beforehand; so is an embedding batch's (r.emb set),
// whose Request only names its model, metadata and priority.
//
// A call that begin refuses has ended: the observer hears of it (event.Call).
func (c *Client) begin(ctx context.Context, r *run, req *Request, route []*upstream, pol *routePolicy, chain attemptFunc, keep bool) error {
	err := c.start(ctx, r, req, route, pol, chain, keep)
	if err != nil && r.orig != nil {
		r.ended(nil, err, nil)
	}
	return err
}

// refused readies r for begin to report a call refused before it started (event.Call),
// when an observer listens and there is a request to report.
func (r *run) refused(c *Client, ctx context.Context, req *Request) {
	if c.observer != nil && req != nil {
		r.c, r.req, r.orig, r.start, r.ctx, r.id = c, req, req, time.Now(), ctx, callIDs.Add(1)
	}
}

func (c *Client) start(ctx context.Context, r *run, req *Request, route []*upstream, pol *routePolicy, chain attemptFunc, keep bool) error {
	if c.closed.Load() && (r.emb == nil || !r.emb.job.begun) { // an Embed's later batches belong to a call in flight
		r.refused(c, ctx, req)
		return closedError(req)
	}
	if r.tx == nil && r.emb == nil {
		if err := checkRequest(req); err != nil {
			r.refused(c, ctx, req)
			return err
		}
		if c.needCost.Load() {
			r.prompt, r.cal = c.cfg.limiter.promptEstimate(req)
			r.prompt++
			r.cost = c.cfg.limiter.costWith(req, r.prompt-1)
		}
	}
	r.c, r.req, r.orig, r.start, r.ctx = c, req, req, time.Now(), ctx
	if b := c.cfg.callBudget; b > 0 {
		if _, ok := ctx.Deadline(); !ok {
			r.budgetEnd = r.start.Add(b)
		}
	}
	if c.observer != nil {
		r.id = callIDs.Add(1)
	}
	r.route, r.chain, r.keep = route, chain, keep
	r.trace = nil
	if o := callOptions(ctx); o != nil {
		if err := o.check(); err != nil {
			return err
		}
		r.applyCallOptions(o)
	}
	if n := c.cfg.affinity; n > 0 && r.emb == nil {
		r.affinity = affinityOf(req, n)
	}
	if len(r.route) > 1 {
		if pol == nil {
			pol = c.policyOf(req.Model)
		}
		if r.tx == nil {
			r.hedge = pol.hedging(r.opts)
		}
		s := pol.strategy(r.opts)
		if r.opts != nil && len(r.opts.Pin) > 1 && r.opts.Routing == routing.Default {
			s = routing.Ordered // the caller's Pin order is the order
		}
		switch {
		case s > routing.Ordered && r.affinity != 0 && r.affine(s):
			// the call starts where its prompt's prefix is cached (affinity.go)
		case s > routing.Ordered:
			r.order(s, keep && r.tx == nil)
		case r.route[0].demoted(r.start):
			r.demoteSlow()
		}
	}
	if len(r.route) == 0 {
		return c.noRouteError(req.Model, r.opts)
	}
	return r.admitPartition(ctx)
}

// exec runs attempts along the route until one succeeds or a decision ends the call. The
// successful attempt is returned settled for a one-shot call and unsettled (keep) for a
// stream, which settles it when it ends. Every error it returns is an *Error.
func (r *run) exec(ctx context.Context) (*attempt, error) {
	if !r.budgetEnd.IsZero() {
		// Its own allocation: timers and streams that outlive a pooled run refer to it.
		ctx = &budgetCtx{Context: ctx, end: r.budgetEnd}
	}
	for {
		var a *attempt
		var err error
		if delay, ok := r.hedgeDelay(); ok {
			a, err = r.hedged(ctx, delay)
		} else {
			a = r.next()
			err = r.chain(ctx, a)
		}
		if err == nil {
			r.succeeded(a)
			return a, nil
		}
		e := err.(*Error)
		p := r.failed(ctx, a, e)
		switch p.step {
		case stepStop:
			return nil, r.lastErr
		case stepNext:
			if !r.advance() {
				return nil, r.lastErr
			}
			// Announced once the call has moved: advance passes over an upstream whose
			// attempts a hedge used up, and may find nothing left.
			r.observe(Event{Kind: event.Failover, Upstream: a.up.Name, Target: r.route[r.pos].Name,
				Model: a.call.Model, Class: e.Class, Err: e})
		case stepSame:
			if r.outOfTime() {
				return nil, r.lastErr
			}
			if err := sleep(ctx, p.wait); err != nil {
				return nil, r.canceled(ctx)
			}
			r.waited = p.wait
		}
	}
}

// next returns the attempt to make now, on route[pos].
func (r *run) next() *attempt {
	a := &r.a
	switch {
	case r.keep && r.number > 0:
		a = &attempt{} // a stream's earlier attempt may still be referenced
	case r.number > 0:
		*a = attempt{} // the run's attempt is reused; the first one is still zero
	}
	if r.first == nil {
		r.first = r.route[r.pos]
	}
	r.prepare(a, r.route[r.pos])
	a.retry = r.onUp > 0
	a.waited = r.waited
	if r.number == 1 {
		// The run's clock reading serves the first attempt: one fewer per call.
		a.waited += r.preWait
		a.begun = r.start
		if r.preWait != 0 {
			a.begun = r.start.Add(r.preWait)
		}
	} else {
		a.begun = time.Now()
	}
	a.within = r.within(a.begun)
	r.waited, r.avoid, r.cur = 0, nil, a
	return a
}

// prepare numbers a and fills in what every attempt of the call on up shares.
func (r *run) prepare(a *attempt, up *upstream) {
	model, ok := r.modelOn(up)
	if !ok { // the first upstream of a route that serves none of the call's names
		model = r.orig.Model
	}
	r.number++
	// Field by field: a whole-struct assignment costs a bulk write barrier per call.
	a.r, a.up, a.req, a.number, a.cost, a.avoid = r, up, r.req, r.number, r.cost, r.avoid
	a.call.Request, a.call.Model, a.tx = r.req, model, r.tx
	if r.opts != nil {
		a.call.Headers = r.opts.Headers
	}
}

// succeeded accounts a successful attempt: settled now for a one-shot call.
func (r *run) succeeded(a *attempt) {
	r.countCall(a)
	if a.ttft > 0 && r.c.cfg.learnFirstToken {
		a.up.learned.record(a.call.Model, a.ttft)
	}
	if r.c.needStats.Load() {
		r.noteLatency(a)
	}
	if r.keep {
		return
	}
	r.c.fillEstimate(r, a.resp)
	a.settle(failure.None, &a.resp.Usage)
	r.cur = nil
	r.releasePartition(&a.resp.Usage)
	if cap(r.trace) == 0 && r.tx == nil && r.emb == nil {
		// The first attempt served the call: its trace lives in the response it returns
		// (record trims nothing, and any later entry, a hedge's loser, goes elsewhere).
		r.trace = a.resp.firstTry[:0:1]
	}
	r.record(a, nil, &a.resp.Usage)
}

// countCall counts a's upstream call, if it made one: for the call, and for the upstream
// being tried when a is its attempt (a hedge that did not win is not).
func (r *run) countCall(a *attempt) {
	if a.called {
		if a.up == r.route[r.pos] {
			r.onUp++
		}
		r.total++
	}
}

// failed settles a failed attempt, records it and decides what follows. The Client's
// state (leases, key blocks, the breaker) is settled before any hook runs.
func (r *run) failed(ctx context.Context, a *attempt, e *Error) plan {
	r.orderRest()
	done, counted := r.account(ctx, a, e, false)
	if !counted {
		return r.giveUp(r.decision(a, r.lastErr))
	}
	d := r.decision(a, e)
	p := plan{}
	if !done {
		p = r.decide(ctx, a, e, d)
	}
	r.conclude(a, e, d, p, done)
	return p
}

// account settles a failed attempt and counts it; done reports that the caller's context
// ended. counted is false for an attempt the retry budget refused just before the call:
// it leaves no trace entry, unless keep or a later attempt has its number already (a
// hedged pair), when it is recorded here as a local refusal.
func (r *run) account(ctx context.Context, a *attempt, e *Error, keep bool) (done, counted bool) {
	r.countCall(a)
	if r.c.needStats.Load() && e.Class == failure.Timeout && a.called {
		r.noteLatency(a) // a timeout is a latency too: the upstream took at least this long
	}
	done = ctx.Err() != nil
	if done {
		// The caller gave up (canceled or out of time): that says nothing about the
		// upstream's health, so the breaker does not count it.
		a.settle(failure.Canceled, nil)
	} else {
		a.settle(e.Class, nil)
	}
	if r.cur == a {
		r.cur = nil
	}
	if a.budgetDenied {
		r.budgetSpent = true
		if keep || a.number != r.number {
			// Later numbers are given (a hedged pair): it stays in the trace as the
			// local refusal it was, so that numbers have no gap.
			r.record(a, e, nil)
		} else {
			r.number--
		}
		if r.lastErr == nil {
			// Nothing failed before (a hedge refused at the last moment): the refusal is
			// the call's error should it end here.
			r.lastErr = e
		}
		return done, false
	}
	r.lastErr = e
	r.setLast(e)
	return done, true
}

// conclude applies a failed attempt's effects on its key (cooldown, eviction, alert),
// records it and emits the events, once the Client's state is settled.
func (r *run) conclude(a *attempt, e *Error, d Decision, p plan, done bool) {
	var evs events
	if a.called && !done {
		evs = r.c.effects(a, e, d, p)
	}
	r.record(a, e, nil)
	evs.emit(r)
}

// decision returns the table's decision for e, with the upstream's x-should-retry applied
// when it made the call.
func (r *run) decision(a *attempt, e *Error) Decision {
	if e == nil {
		return Decision{}
	}
	d := r.c.cfg.decisions[e.Class]
	if e.ShouldRetry != nil && a.called {
		d.Retry = *e.ShouldRetry
		if !d.Retry && e.Class == failure.RateLimited {
			// The upstream says this request must not be sent again as it is (OpenAI's
			// "Request too large" 429): the request's failure, not the key's. No other key
			// is tried with it and none cools down for every caller.
			d.NextKey, d.Cooldown = false, false
		}
	}
	return d
}

// enlargeOutput returns a copy of req with twice the output budget (4096 when unset),
// for the one retry after an empty output.
func enlargeOutput(req *Request) *Request {
	cp := *req
	switch {
	case cp.MaxTokens <= 0:
		cp.MaxTokens = 4096
	case cp.MaxTokens > maxInt/2:
		cp.MaxTokens = maxInt
	default:
		cp.MaxTokens *= 2
	}
	return &cp
}

const maxInt = int(^uint(0) >> 1)
