package llmclient

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/llmclient/llmclient/breaker"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/finish"
	"github.com/llmclient/llmclient/ratelimit"
)

// attemptFunc is one layer's view of an attempt. Layers are composed once, in New, outer to
// inner: Breaker → Keys → Limiter → (AttemptTimeout | StreamGuard) → Classify → adapter.
// Each layer stores what it acquired in the attempt; attempt.settle gives it all back once
// the outcome is known (at once for Complete, at the end for a stream). Every error a
// chain returns is an *Error.
type attemptFunc func(ctx context.Context, a *attempt) error

// attempt is the state of one try against one upstream.
type attempt struct {
	r      *run
	up     *upstream
	req    *Request
	call   Call
	number int
	cost   int
	// reads is the prefix hash of a request to a vendor whose cache reads are free, and
	// readsEst its prompt estimate, for the cache reads the next calls predict
	// (limiter_reads.go); 0 for other requests.
	reads    uint64
	readsEst int
	// retry is set for every call on the upstream after the call's first one: it needs
	// the upstream's retry budget.
	retry bool
	// avoid is a key to pass over when another one is usable.
	avoid *poolKey
	// within caps the waits in the layers when the call has somewhere else to go (the
	// wait threshold); negative: no cap of its own.
	within time.Duration
	// waited is the time spent before the upstream call: the run's Retry-After or
	// backoff, the partition's admission (first attempt), a cooling key, the limiter.
	waited time.Duration
	// layerWait is the part of waited spent in the layers, after begun.
	layerWait time.Duration
	// begun is when the attempt started, after the run's wait; sent when the upstream
	// call began; end when it ended (for a stream: its end or close).
	begun, sent, end time.Time
	// latency is the upstream call's duration (for a committed stream, the whole
	// stream), ttft a stream's time to its first content token.
	latency, ttft time.Duration
	status        int

	key       *poolKey
	permit    breaker.Permit
	hasPermit bool
	lease     limitLease
	hasLease  bool
	// called is true once an upstream call was made; false for a local refusal.
	called bool
	// hedge marks a hedged attempt (see Hedge); hedged is the upstream it hedges, whose
	// retry budget it spends.
	hedge  bool
	hedged *upstream
	// budgetDenied: the retry budget refused the call at the last moment.
	budgetDenied bool
	// lostSlow: the losing attempt of a hedged call, canceled after running longer than
	// its upstream's slow threshold; the breaker counts it slow.
	lostSlow bool
	// shareBound: the attempt's time bound is the Client's share of the call's time left
	// (limit), shorter than any bound of the upstream's own, or its stream was cut by the
	// throughput floor (holdFloor): a timeout then is the Client's choice, not the
	// upstream's failure (the breaker counts it slow).
	shareBound bool
	settled    bool

	resp   *Response
	stream *guard
	// opened is the quota a stream's headers reported as it opened (RateLimitedStream),
	// fed to the limiter then; the stream's Response carries it.
	opened *ratelimit.Status
	// embed is an embedding attempt's answer (Client.Embed); resp then carries its usage.
	embed *EmbedResponse
	// tx is the transport call this attempt belongs to; nil for Complete and Stream.
	tx *txCall
	// callerKey: the transport sent the caller's own credential (see secret).
	callerKey bool
	// bill is the attempt's pricing and budget reservations (budget_run.go).
	bill attemptBill
}

// chain composes the attempt layers around inner.
func (c *Client) chain(inner attemptFunc, guard func(attemptFunc) attemptFunc) attemptFunc {
	keys := c.keyLayer(c.limiterLayer(guard(c.classifyLayer(inner))))
	if c.cost != nil {
		keys = c.costLayer(keys) // pricing, context window, budgets (budget_run.go)
	}
	return c.breakerLayer(keys)
}

// keyLayer picks the least-in-flight usable key of the upstream's pool. When every key is
// cooling down it waits for the first to come back, as the limiter waits for capacity
// (within the deadline and WithMaxWait, never in fail-fast mode); otherwise it refuses.
func (c *Client) keyLayer(next attemptFunc) attemptFunc {
	return func(ctx context.Context, a *attempt) error {
		now := a.begun
		var srcErr error // the last key source that failed
		for repicks := 0; ; {
			k, soonest := a.up.pool().pickFor(now, a.avoid, a.r.affinity)
			if k != nil {
				secret, err := k.credential(ctx, now)
				if err != nil {
					k.inFlight.Add(-1)
					if ctx.Err() != nil {
						return c.asError(ctx, ctx.Err(), a)
					}
					// Its source failed with no valid credential left: the key sits out
					// for a second (no event), and another key of the pool is tried.
					k.block(now, keySourceRetry, false)
					srcErr = err
					continue
				}
				a.key = k
				a.call.APIKey = secret
				err = next(ctx, a)
				if err != errKeyBlocked || repicks >= len(a.up.pool().keys) {
					return err
				}
				// The key was cooled down or evicted while the request waited in its
				// limiter: pick again rather than call with it.
				repicks++
				k.inFlight.Add(-1)
				a.key, a.call.APIKey = nil, ""
				now = time.Now()
				continue
			}
			if srcErr != nil {
				return &Error{Class: failure.Unavailable, Upstream: a.up.Name, Model: a.call.Model,
					Err: fmt.Errorf("%w: %w", ErrNoKey, srcErr)}
			}
			if soonest.IsZero() {
				return &Error{Class: failure.Unavailable, Upstream: a.up.Name, Model: a.call.Model,
					AdmitAfter: a.up.pool().back(now), Err: fmt.Errorf("%w: every key is evicted", ErrNoKey)}
			}
			wait := soonest.Sub(now)
			lim, err := c.cfg.limiter.waitLimit(ctx, a.layerWait, a.within)
			if err != nil {
				return c.asError(ctx, err, a)
			}
			if lim >= 0 && wait > lim {
				return &Error{Class: failure.Unavailable, Upstream: a.up.Name, Model: a.call.Model, AdmitAfter: wait,
					Message: "every key is cooling down for another " + wait.Round(time.Millisecond).String(),
					Err:     fmt.Errorf("%w: every key is cooling down", ErrNoKey)}
			}
			if err := sleepFor(ctx, wait); err != nil {
				return c.asError(ctx, err, a)
			}
			a.waited += wait
			a.layerWait += wait
			now = time.Now()
		}
	}
}

// limiterLayer waits for the key's RPM, TPM and concurrency limits, configured or
// learned from the upstream's headers; with a shared store, it first moves off a key
// another replica paused or evicted (adoptSharedBlock).
func (c *Client) limiterLayer(next attemptFunc) attemptFunc {
	return func(ctx context.Context, a *attempt) error {
		if err := c.adoptSharedBlock(ctx, a); err != nil {
			return err
		}
		if !a.key.limiter().limited.Load() {
			return next(ctx, a)
		}
		multi := len(a.up.pool().keys) > 1
		var adm admission
		c.admission(&adm, a, multi)
		waited, err := a.key.limiter().acquireInto(ctx, &adm, &a.lease)
		for errors.Is(err, errRetired) {
			// Update replaced the key's limiter while the request waited for a slot.
			c.admission(&adm, a, multi)
			adm.now = time.Time{}
			var w time.Duration
			w, err = a.key.limiter().acquireInto(ctx, &adm, &a.lease)
			waited += w
		}
		for tries := 1; err != nil && tries <= len(a.up.pool().keys); tries++ {
			// A pause that another replica put on the key through a shared store: cool the
			// key here too, and move to another one when the pool has one; when none is
			// left (or this is the last try), wait for this key's pause in its limiter, as
			// a later call that finds every key cooling here does.
			var paused *keyPausedError
			if !errors.As(err, &paused) {
				break
			}
			now := time.Now()
			a.key.adopt(now, paused.left, false)
			switchable := tries < len(a.up.pool().keys)
			if switchable {
				if k, _ := a.up.pool().pick(now, nil); k == nil {
					switchable = false
				} else if secret, cerr := k.credential(ctx, now); cerr != nil {
					k.inFlight.Add(-1)
					switchable = false
				} else {
					a.key.inFlight.Add(-1)
					a.key, a.call.APIKey = k, secret
				}
			}
			c.admission(&adm, a, switchable)
			if waited != 0 {
				adm.now = time.Time{} // the paused key's slot was waited for
			}
			var w time.Duration
			w, err = a.key.limiter().acquireInto(ctx, &adm, &a.lease)
			waited += w
		}
		a.waited += waited
		a.layerWait += waited
		if err != nil {
			var paused *keyPausedError
			if errors.As(err, &paused) {
				return &Error{Class: failure.Unavailable, Upstream: a.up.Name, Model: a.call.Model,
					AdmitAfter: paused.left, Err: fmt.Errorf("%w: every key is paused after a rate limit", ErrNoKey)}
			}
			return c.asError(ctx, err, a)
		}
		if waited > 0 && a.key.blocked(time.Now()) {
			a.lease.release(0, false)
			return errKeyBlocked
		}
		a.hasLease = true
		return next(ctx, a)
	}
}

// errKeyBlocked tells the key layer that the key it picked was blocked while the request
// waited in the key's limiter.
var errKeyBlocked = &Error{Class: failure.Unavailable, Err: ErrNoKey, Message: "the key was blocked while waiting"}

// timeoutLayer bounds a one-shot attempt by the upstream's timeout.
func (c *Client) timeoutLayer(next attemptFunc) attemptFunc {
	return func(ctx context.Context, a *attempt) error {
		limit := a.limit(ctx, a.timeout())
		if limit <= 0 {
			return next(ctx, a) // no bound, or the caller's deadline comes first
		}
		actx, cancel := context.WithTimeoutCause(ctx, limit, ErrAttemptTimeout)
		err := next(actx, a)
		cancel()
		if err != nil && ctx.Err() == nil && errors.Is(context.Cause(actx), ErrAttemptTimeout) {
			e := err.(*Error)
			e.Class, e.Err = failure.Timeout, ErrAttemptTimeout
		}
		return err
	}
}

// timeout is the one-shot attempt's own bound: the call's AttemptTimeout, else the
// upstream's Timeout (which defaults to WithAttemptTimeout).
func (a *attempt) timeout() time.Duration {
	if o := a.r.opts; o != nil && o.AttemptTimeout > 0 {
		return o.AttemptTimeout
	}
	return time.Duration(a.up.timeout.Load())
}

// limit is how long the attempt's upstream call may take: at most own (0: no bound of its
// own), and, when the call has a deadline — its context's, else its time budget
// (WithCallBudget, budgetCtx) — and another upstream of the route could serve, at most half
// of the time left, so the rest of the route stays reachable. It is 0 when the context's
// deadline bounds the call first; the time budget, which no context enforces, bounds it
// here, budgetMargin before its end.
func (a *attempt) limit(ctx context.Context, own time.Duration) time.Duration {
	return a.limitAt(ctx, own, time.Time{})
}

// limitAt is limit with the clock read at now; a zero now reads it when a deadline needs it.
func (a *attempt) limitAt(ctx context.Context, own time.Duration, now time.Time) time.Duration {
	dl, ok := ctx.Deadline()
	if !ok {
		return own
	}
	budget := !a.r.budgetEnd.IsZero() && dl.Equal(a.r.budgetEnd)
	var left time.Duration
	if now.IsZero() {
		left = time.Until(dl)
	} else {
		left = dl.Sub(now)
	}
	if budget {
		left -= budgetMargin
	}
	if a.within >= 0 { // somewhere else to go: this upstream gets half
		if share := left / 2; own <= 0 || share < own {
			own = share
			a.shareBound = share < left
		}
	}
	switch {
	case own > 0 && own < left:
		return own
	case !budget:
		return 0
	}
	return max(left, time.Nanosecond)
}

// classifyLayer makes the upstream call: it spends the upstream's retry budget, times the
// call and turns every failure into an *Error with its class; it also turns a successful
// response that is filtered or empty into the matching error. No layer above it parses
// vendor errors again.
func (c *Client) classifyLayer(next attemptFunc) attemptFunc {
	return func(ctx context.Context, a *attempt) error {
		if err := ctx.Err(); err != nil {
			// Done before the call (the caller gave up, or a hedged call's other attempt
			// won): no call is made, nothing is spent.
			return c.asError(ctx, err, a)
		}
		if a.retry {
			if !a.budget().tryRetry(a.begun) {
				a.budgetDenied = true
				return &Error{Class: failure.Unavailable, Upstream: a.up.Name, Model: a.call.Model, Err: ErrRetryBudget}
			}
		} else {
			a.up.budget.first(a.begun)
		}
		a.called = true
		a.sent = a.begun
		if a.layerWait != 0 {
			a.sent = a.begun.Add(a.layerWait)
		}
		err := next(ctx, a)
		// time.Since reads only the monotonic clock; end derived from it keeps a wall time
		// for the breaker without a second full clock read.
		a.latency = time.Since(a.sent)
		a.end = a.sent.Add(a.latency)
		if err != nil {
			e := c.asError(ctx, err, a)
			if e.Status == 0 {
				e.Status = a.status // a stream that began with a status, and then broke
			}
			if e.Class == failure.BadRequest && errors.Is(e.Err, ErrUnsupported) {
				a.called = false // the adapter refused before sending anything
			}
			return e
		}
		if a.resp != nil {
			if a.status = a.resp.Status; a.status == 0 {
				a.status = http.StatusOK
			}
			if e := checkOutput(a.resp); e != nil {
				e.Upstream, e.Model, e.Status = a.up.Name, a.call.Model, a.status
				return e
			}
		}
		return nil
	}
}

// callComplete is the innermost one-shot step: the adapter itself.
func (c *Client) callComplete(ctx context.Context, a *attempt) error {
	resp, err := a.up.Provider.Complete(ctx, &a.call)
	if err == nil && resp == nil {
		err = &Error{Class: failure.Unknown, Message: "provider returned neither a response nor an error"}
	}
	a.resp = resp
	return err
}

// asError returns err as a fresh *Error of this attempt, classified, with the key redacted.
func (c *Client) asError(ctx context.Context, err error, a *attempt) *Error {
	var e *Error
	if errors.As(err, &e) {
		cp := *e
		e = &cp
		if e.Class == failure.None {
			e.Class = classifyCause(e.Err)
		}
	} else {
		e = &Error{Class: classifyCause(err), Err: err}
	}
	if ctx.Err() != nil && errors.Is(ctx.Err(), context.Canceled) && e.Class != failure.Canceled {
		// The caller gave up: whatever the transport said, the class is canceled.
		e.Class = failure.Canceled
	}
	if e.Upstream == "" {
		e.Upstream = a.up.Name
	}
	if e.Model == "" {
		e.Model = a.call.Model
	}
	e.Redact(a.secret())
	return e
}

// checkOutput classifies a successful response whose content was filtered or is empty.
func checkOutput(r *Response) *Error {
	switch {
	case r.FinishReason == finish.ContentFilter || r.FinishReason == finish.Refusal ||
		(r.Refusal != "" && r.Text == "" && len(r.ToolCalls) == 0):
		msg := "response blocked by the vendor's content policy"
		if r.Refusal != "" {
			msg = "model refused: " + r.Refusal
		}
		return &Error{Class: failure.ContentFiltered, Code: r.RawFinishReason, Message: msg, Partial: r}
	case r.Text == "" && len(r.ToolCalls) == 0 &&
		(r.Reasoning != "" || r.Usage.ReasoningTokens > 0 || r.FinishReason == finish.Length):
		return &Error{Class: failure.EmptyOutput, Code: r.RawFinishReason,
			Message: "the model spent its output budget on reasoning and returned no content", Partial: r}
	}
	return nil
}

// settle gives back what the layers acquired and tells the breaker the outcome, once.
// usage is the reported usage of a successful or interrupted attempt, or nil. It changes
// only the Client's own state and calls no hook but the breaker's, after its lock.
func (a *attempt) settle(class failure.Class, usage *Usage) {
	if a.settled {
		return
	}
	a.settled = true
	if a.hasLease {
		a.hasLease = false
		used := a.called && (class == failure.None || class == failure.StreamInterrupted ||
			class == failure.ContentFiltered || class == failure.EmptyOutput || class == failure.Canceled)
		a.lease.releaseUsage(usage, used)
	}
	a.up.pool().service.observe(a, class, usage)
	if a.reads != 0 && usage != nil {
		a.r.c.cfg.limiter.scopes.reads.record(a.reads, a.readsEst, usage, time.Now())
	}
	if a.req == a.r.req {
		a.r.cal.learn(usage) // the model family's calibration
	}
	if a.key != nil {
		a.key.inFlight.Add(-1)
	}
	if a.hasPermit {
		a.doneBreaker(class)
	}
	if cs := a.r.c.cost; cs != nil {
		cs.settle(a, class, usage) // the attempt's cost, and the budgets reconciled
	}
}

// budget is the retry budget a retry spends: its upstream's, or for a hedge the budget
// of the upstream it hedges, whose calls it multiplies.
func (a *attempt) budget() *retryBudget {
	if a.hedged != nil {
		return a.hedged.budget
	}
	return a.up.budget
}

// keyLabel is the attempt's key label for traces; never the key itself.
func (a *attempt) keyLabel() string {
	if a.key == nil {
		return ""
	}
	return a.key.label
}
