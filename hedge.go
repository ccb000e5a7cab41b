package llmclient

import (
	"context"
	"time"

	"github.com/llmclient/llmclient/event"
	"github.com/llmclient/llmclient/failure"
)

// defaultHedgeDelay is the hedging delay of a Hedge without one when its upstream has
// not seen enough calls for a percentile.
const defaultHedgeDelay = 2 * time.Second

// hedgeDelay reports whether the next attempt is hedged, and after how long: the call
// hedges, has not sent its one hedge, has another upstream in its route and room for two
// more upstream calls under its caps.
func (r *run) hedgeDelay() (time.Duration, bool) {
	h := &r.hedge
	if !h.On || r.hedgeSent || r.pos+1 >= len(r.route) || r.total+2 > r.maxTotal() ||
		r.opts != nil && r.opts.NoFailover {
		return 0, false
	}
	if h.Delay > 0 {
		return h.Delay, true
	}
	stats := &r.route[r.pos].latStats
	if r.keep {
		stats = &r.route[r.pos].ttftStats
	}
	if d, ok := stats.quantile(0.95, time.Now()); ok {
		return d, true
	}
	return defaultHedgeDelay, true
}

// tried is an attempt's outcome, from the goroutine that made it: the chain's error, or
// the value a panic in it carried.
type tried struct {
	a        *attempt
	err      error
	panicked bool
	value    any
}

// try runs the chain for a under ctx and sends the outcome to done.
func (r *run) try(ctx context.Context, a *attempt, done chan<- tried) {
	t := tried{a: a, panicked: true}
	defer func() {
		if t.panicked {
			t.value = recover()
		}
		done <- t
	}()
	t.err = r.chain(ctx, a)
	t.panicked = false
}

// hedged makes the next attempt on route[pos] and, should it not answer within delay, a
// hedge on route[pos+1] beside it. The first to answer wins: its attempt is returned, as
// the chain would return it, and the other is canceled, waited for and recorded as
// canceled, its reservation reconciled with what it used. So is a first failure whose
// decision does not fail over (the request itself is wrong). When the first to end failed
// otherwise, it is settled and recorded with its effects (a key's cooldown), and the
// other's outcome is returned. The route's position moves to the hedge's upstream when the hedge's
// outcome is returned. Both attempts have ended when hedged returns, panics included.
func (r *run) hedged(ctx context.Context, delay time.Duration) (*attempt, error) {
	a1 := r.next() // sets the call's first upstream, which the cost failover prices
	r.primeBill()  // the pair's attempts read the run's estimates side by side
	done := make(chan tried, 2)
	ctx1, cancel1 := context.WithCancel(ctx)
	cancel2 := context.CancelFunc(func() {})
	pending := 1
	defer func() {
		if pending > 0 { // a hook panicked while an attempt was in flight
			cancel1()
			cancel2()
			for ; pending > 0; pending-- {
				(<-done).a.settle(failure.Canceled, nil)
			}
		}
	}()
	go r.try(ctx1, a1, done)
	t := time.NewTimer(delay)
	select {
	case res := <-done:
		pending--
		t.Stop()
		return r.only(res, cancel1)
	case <-t.C:
	}
	a2 := r.hedgeAttempt()
	if a2 == nil {
		res := <-done
		pending--
		return r.only(res, cancel1)
	}
	var ctx2 context.Context
	ctx2, cancel2 = context.WithCancel(ctx)
	pending++
	go r.try(ctx2, a2, done)

	first := <-done
	pending--
	cancelFirst, cancelOther := cancel1, cancel2
	if first.a == a2 {
		cancelFirst, cancelOther = cancel2, cancel1
	}
	first.repanic()
	last, cancelLast := first, cancelFirst
	if first.err == nil || first.a.called && !r.decision(first.a, first.err.(*Error)).Failover {
		// The first answer wins, or the first failure is one no other upstream would
		// change (a bad request): cancel the other attempt and wait for it. A local
		// refusal (a hedge the retry budget refused at the last moment) says nothing of
		// the request: the other attempt goes on.
		r.cur = first.a
		cancelOther()
		other := <-done
		pending--
		other.repanic()
		if e, ok := other.err.(*Error); ok && e.Class != failure.Canceled && !other.a.budgetDenied {
			// It failed on its own before it was canceled: its effects (a key's
			// cooldown or eviction) apply, and the trace says what happened.
			r.aside(ctx, other.a, e)
		} else {
			r.lost(other.a, other.err)
		}
	} else {
		r.aside(ctx, first.a, first.err.(*Error))
		cancelFirst()
		last, cancelLast = <-done, cancelOther
		pending--
		last.repanic()
	}
	if last.a == a2 {
		r.moveTo(r.pos + 1)
	}
	r.cur = last.a
	return last.a, keepCancel(last, cancelLast)
}

// repanic carries a panic of the attempt's goroutine over to the call's, once what the
// attempt holds is given back.
func (t tried) repanic() {
	if t.panicked {
		t.a.settle(failure.Canceled, nil)
		panic(t.value)
	}
}

// only returns the outcome of an attempt that ran alone.
func (r *run) only(res tried, cancel context.CancelFunc) (*attempt, error) {
	if res.panicked {
		cancel()
		res.repanic()
	}
	return res.a, keepCancel(res, cancel)
}

// keepCancel ties cancel, the attempt's own context's, to the attempt: a committed stream
// calls it when it ends; any other outcome calls it now. It returns the attempt's error.
func keepCancel(res tried, cancel context.CancelFunc) error {
	if g := res.a.stream; res.err == nil && g != nil && g.cancel != nil {
		inner := g.cancel
		g.cancel = func(cause error) {
			inner(cause)
			cancel()
		}
		return nil
	}
	cancel()
	return res.err
}

// hedgeAttempt prepares the hedge on route[pos+1], or returns nil when it cannot go now:
// that upstream's breaker refuses or no key of it is usable, or the retry budget of the
// hedged upstream, route[pos], is spent (a hedge multiplies that upstream's calls, as a
// retry would). A hedge never waits for a key or the limiter: it goes only with headroom.
func (r *run) hedgeAttempt() *attempt {
	r.orderRest()
	up, from := r.route[r.pos+1], r.route[r.pos]
	now := time.Now()
	if !r.serves(up, now) || !from.budget.allows(now) {
		return nil
	}
	a := &attempt{}
	r.prepare(a, up)
	a.retry, a.hedge, a.hedged, a.begun, a.avoid = true, true, from, now, nil
	r.hedgeSent = true
	r.observe(Event{Kind: event.Hedge, Upstream: r.route[r.pos].Name, Target: up.Name,
		Attempt: a.number, Hedge: true})
	return a
}

// aside settles and records a failed attempt whose call goes on with another attempt in
// flight: its effects apply as if the call moved on to the next upstream.
func (r *run) aside(ctx context.Context, a *attempt, e *Error) {
	done, counted := r.account(ctx, a, e, true)
	if a.hedge && a.called {
		r.hedgedOn = a.up
	}
	if counted {
		r.conclude(a, e, r.decision(a, e), plan{step: stepNext}, done)
	}
}

// lost settles and records the attempt that lost a hedged call's race. Its outcome (err;
// nil for an answer that came too late) is not the call's: it ends failure.Canceled, and the
// limiter is charged with the usage it reported, if any.
func (r *run) lost(a *attempt, err error) {
	r.countCall(a)
	if a.hedge && a.called {
		r.hedgedOn = a.up // its call counts should the call move there
	}
	if a.called && r.c.needStats.Load() {
		r.noteLatency(a) // at least this long: a lower bound, as for a timeout
	}
	var usage *Usage
	if err == nil {
		if a.resp != nil {
			// An answer under way when the winner canceled it: its usage under the one
			// rule (usageReported), the estimate standing for an implausible report.
			r.c.fillEstimate(r, a.resp)
			usage = &a.resp.Usage
		}
		if g := a.stream; g != nil {
			g.ps.Close()
			g.cancel(context.Canceled)
		}
	}
	// Beaten, but already slower than its upstream's threshold: the breaker's slow-call
	// rule hears of it, or a hung upstream would hide behind every call's hedge.
	a.lostSlow = a.called && a.slowSoFar()
	a.settle(failure.Canceled, usage)
	if a.budgetDenied {
		// Refused by the retry budget before its call: a local refusal in the trace, so
		// that the pair's numbers stay as they were given.
		r.budgetSpent = true
		r.record(a, err.(*Error), nil)
		return
	}
	r.record(a, &Error{Class: failure.Canceled, Upstream: a.up.Name, Model: a.call.Model, Status: a.status,
		Err: context.Canceled, Message: "canceled: the other attempt of the hedged call answered first"}, usage)
}

// moveTo makes route[i] the upstream being tried, counting the call a hedge made there.
func (r *run) moveTo(i int) {
	r.pos, r.onUp = i, 0
	if r.hedgedOn != nil && r.hedgedOn == r.route[i] {
		r.onUp = 1
	}
	if r.bo != nil {
		r.bo.Reset()
	}
}
