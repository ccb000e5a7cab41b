package llmclient

import (
	"context"
	"errors"
	"time"

	"github.com/llmclient/llmclient/ratelimit"
)

// The failover layer: where a call goes after an attempt fails. A call's route is its
// model group's chain (WithModelGroup), its fallback groups' members appended
// (WithGroupFallback), or every upstream that serves its model. After each failed attempt
// the run asks decide, which follows the Decision table (decision.go) and answers with a
// plan: the same upstream again after a wait, the next upstream of the route, or the end.
// Whether the call could move at all — another upstream of its route can serve it now —
// is one question, answered by run.elsewhere (serve.go) for every rule that depends on it:
// the wait threshold, the attempt's share of the time left, retry or fail over first, and
// the recovery ramp.

// within is the wait threshold of the call's priority when the call has somewhere else to
// go (elsewhere), else -1: no cap of its own.
func (r *run) within(now time.Time) time.Duration {
	if !r.elsewhere(now) {
		return -1
	}
	return r.c.cfg.waitThreshold[priorityIndex(r.req.Priority)]
}

// advance moves the call to the next upstream of its route, reporting false when none
// is left.
func (r *run) advance() bool {
	for {
		if r.pos+1 >= len(r.route) || r.total >= r.maxTotal() || r.outOfTime() {
			return false
		}
		r.moveTo(r.pos + 1)
		if _, ok := r.modelOn(r.route[r.pos]); !ok {
			continue // a fallback that serves none of the call's model names
		}
		if r.onUp < r.maxAttempts() { // a hedge may have used up the upstream's cap
			return true
		}
	}
}

// maxAttempts and maxTotal are the caps on upstream calls, per upstream and per call.
func (r *run) maxAttempts() int {
	switch {
	case r.single:
		return 1
	case r.opts != nil && r.opts.MaxAttempts > 0:
		return r.opts.MaxAttempts
	}
	return r.c.cfg.retry.maxAttempts
}

func (r *run) maxTotal() int {
	switch {
	case r.single:
		return 1
	case r.opts != nil && r.opts.MaxTotalAttempts > 0:
		return r.opts.MaxTotalAttempts
	}
	return r.c.cfg.retry.maxTotal
}

// decide applies the decision's steps in their documented order (see Decision).
func (r *run) decide(ctx context.Context, a *attempt, e *Error, d Decision) plan {
	if !a.called {
		if errors.Is(e.Err, ErrUnsupported) {
			return plan{step: stepNext} // another vendor may take the request
		}
		if p, ok := r.rerouteLocal(a, e, d); ok { // budget_run.go
			return p
		}
		return r.giveUp(d)
	}
	if d.GrowOutput && !r.grown {
		r.grown = true
		r.req = enlargeOutput(r.req)
		return r.again(d, 0)
	}
	if k := d.reroute(&r.rerouted); k >= 0 && r.extendRoute(r.c.reroutes[k]) {
		r.rerouted[k] = true
		return plan{step: stepNext}
	}
	if d.NextKey && a.key != nil && a.up.pool().available(time.Now(), a.key) {
		r.avoid = a.key
		return r.again(d, 0)
	}
	if d.Retry && !(d.FailoverFirst && d.Failover && r.elsewhere(time.Now())) {
		if d.NoBackoff {
			return r.again(d, 0)
		}
		if w, ok := r.retryWait(ctx, e); ok {
			return r.again(d, w)
		}
	}
	return r.giveUp(d)
}

// again plans another attempt on the same upstream after wait, when the caps and the
// upstream's retry budget allow it; otherwise the upstream gives up.
func (r *run) again(d Decision, wait time.Duration) plan {
	if r.onUp >= r.maxAttempts() || r.total >= r.maxTotal() {
		return r.giveUp(d)
	}
	if !r.route[r.pos].budget.allows(time.Now()) {
		r.budgetSpent = true
		return r.giveUp(d)
	}
	return plan{step: stepSame, wait: wait}
}

// giveUp is what follows when the upstream gives up: the next upstream, or the end.
func (r *run) giveUp(d Decision) plan {
	if d.Failover && (r.opts == nil || !r.opts.NoFailover) {
		return plan{step: stepNext}
	}
	return plan{step: stepStop}
}

// retryWait is the wait before retrying the same upstream after e: the upstream's
// Retry-After with jitter, or the backoff. ok is false when the wait is longer than
// WithMaxRetryAfter or would not end before the context's deadline.
//
// With another upstream to go to, a wait beyond the wait threshold (WithWaitThreshold)
// does not fit either; a Retry-After is held against the threshold as the upstream said
// it, before its jitter (a Retry-After of 2 s fits the default threshold of 2 s).
func (r *run) retryWait(ctx context.Context, e *Error) (time.Duration, bool) {
	rc := &r.c.cfg.retry
	var w, asked time.Duration
	if e.RetryAfter > 0 {
		if e.RetryAfter > rc.maxRetryAfter {
			return 0, false
		}
		asked, w = e.RetryAfter, retryAfterWait(e.RetryAfter)
	} else {
		if r.bo == nil {
			r.bo = rc.newBackOff()
		}
		w = r.bo.NextBackOff()
		asked = w
	}
	if within := r.within(time.Now()); within >= 0 && asked > within {
		return 0, false
	}
	return w, fits(ctx, w)
}

// buildRoutes resolves the model groups and the fallback lists to upstreams.
func (c *Client) buildRoutes() {
	cfg := &c.cfg
	c.groups.Store(c.resolveGroups(cfg.groups))
	c.reroutes[rerouteContext] = c.lookup(cfg.contextFallback)
	c.reroutes[rerouteContent] = c.lookup(cfg.contentFallback)
}

// resolveGroups returns the chain of each of groups, its fallback groups' members
// appended, with the group's routing policy.
func (c *Client) resolveGroups(groups map[string][]string) *map[string]*groupRoute {
	out := make(map[string]*groupRoute, len(groups))
	for g, names := range groups {
		chain := c.lookup(names)
		for _, fb := range c.cfg.groupFallbacks[g] {
			chain = append(chain, c.lookup(groups[fb])...)
		}
		out[g] = &groupRoute{ups: dedupe(chain), policy: c.cfg.policyFor(g)}
	}
	return &out
}

// group returns the chain of the named model group, nil for none.
func (c *Client) group(name string) []*upstream {
	if g := (*c.groups.Load())[name]; g != nil {
		return g.ups
	}
	return nil
}

// route returns the upstream chain for a model: its group, else every upstream serving it.
func (c *Client) route(model string) []*upstream {
	route, _ := c.routeWith(model)
	return route
}

// routeWith returns the upstream chain for a model, as route does, with its policy.
func (c *Client) routeWith(model string) ([]*upstream, *routePolicy) {
	if groups := *c.groups.Load(); len(groups) > 0 {
		if g, ok := groups[model]; ok {
			return g.ups, &g.policy
		}
	}
	return c.ungrouped(model), &c.basePolicy
}

// ungrouped returns the chain of a model without a group: every upstream serving it.
func (c *Client) ungrouped(model string) []*upstream {
	if len(c.upstreams) == 1 && c.upstreams[0].Models == nil {
		return c.upstreams // one upstream serving every model: the common case needs no lookup
	}
	if r, ok := c.routes.Load(model); ok {
		return r.([]*upstream)
	}
	var chain []*upstream
	for _, up := range c.upstreams {
		if _, ok := up.model(model); ok {
			chain = append(chain, up)
		}
	}
	if len(chain) > 0 && c.routeCount.Add(1) <= maxCachedRoutes {
		c.routes.Store(model, chain)
	}
	return chain
}

func (c *Client) lookup(names []string) []*upstream {
	out := make([]*upstream, 0, len(names))
	for _, n := range names {
		out = append(out, c.byName[n])
	}
	return out
}

func dedupe(chain []*upstream) []*upstream {
	out := chain[:0:0]
	seen := make(map[*upstream]bool, len(chain))
	for _, u := range chain {
		if !seen[u] {
			seen[u] = true
			out = append(out, u)
		}
	}
	return out
}

// maxCachedRoutes bounds the route cache, whatever model names callers send.
const maxCachedRoutes = 1024

// WithModelGroup names an ordered failover chain of upstreams for requests whose Model is
// name. Without a group, a request goes to every upstream that serves its model, in
// registration order. New refuses a name given twice, and a group none of whose
// upstreams serves name (each needs Models nil or a Models entry for name). Default: no
// groups.
func WithModelGroup(name string, upstreams ...string) Option {
	return optionFunc(func(c *config) {
		if c.groups == nil {
			c.groups = map[string][]string{}
		}
		if _, dup := c.groups[name]; dup {
			c.dupGroups = append(c.dupGroups, name)
		}
		c.groups[name] = append([]string(nil), upstreams...)
	})
}

// WithGroupFallback appends the chains of other model groups after group's own chain, for
// when every upstream of the group has failed, within the same deadline and attempt caps.
// The response's Upstream and Model say which one answered. Default: none.
func WithGroupFallback(group string, fallbackGroups ...string) Option {
	return optionFunc(func(c *config) {
		if c.groupFallbacks == nil {
			c.groupFallbacks = map[string][]string{}
		}
		c.groupFallbacks[group] = append([]string(nil), fallbackGroups...)
	})
}

// WithContextFallback names upstreams with a larger context window, tried in order only when
// an attempt fails with failure.ContextLength, within the same deadline and attempt caps as the
// rest of the call. Default: none, so such errors are returned.
func WithContextFallback(upstreams ...string) Option {
	return optionFunc(func(c *config) { c.contextFallback = append([]string(nil), upstreams...) })
}

// WithContentFallback names upstreams tried in order only when an attempt fails with
// failure.ContentFiltered, within the same deadline and attempt caps as the rest of the call.
// Default: none.
func WithContentFallback(upstreams ...string) Option {
	return optionFunc(func(c *config) { c.contentFallback = append([]string(nil), upstreams...) })
}

// WithWaitThreshold sets, for requests of priority p, the longest wait a call accepts on
// an upstream while a later upstream of its route could serve it: a Retry-After or
// backoff before a retry, a key cooling down, the limiter's queue. A longer wait moves
// the call on at once (the upstream gives up, see Decision.Failover); a call whose route
// has nowhere else to go waits as long as its deadline, WithMaxWait and
// WithMaxRetryAfter allow. d must not be negative; 0 never waits while another upstream
// is left. Default 2s for every priority.
func WithWaitThreshold(p ratelimit.Priority, d time.Duration) Option {
	return optionFunc(func(c *config) {
		if p < numPriorities {
			c.waitThreshold[p] = d
		} else {
			c.badPriority = true
		}
	})
}

// modelOn returns the model name the call asks of up, and false when up serves none of the
// call's names. An upstream of the call's own chain maps the requested model (a group
// name, or a model); one that a fallback brought in — a fallback group, a budget's Reroute
// group, a context or content fallback — may map only its own group's name or model, and
// is asked for that (fallbackModel), never for a name it does not serve.
func (r *run) modelOn(up *upstream) (string, bool) {
	return r.c.modelOn(up, r.orig.Model)
}

// modelOn returns the model name a call for model asks of up, by run.modelOn's rule: up's
// mapping of model, else fallbackModel. The Transport asks it too, to tell the upstreams
// that can take a call.
func (c *Client) modelOn(up *upstream, model string) (string, bool) {
	if m, ok := up.model(model); ok {
		return m, true
	}
	return c.fallbackModel(up, model)
}

// fallbackModel is the model that up, which does not map model, is asked for when a
// fallback brings it into a call for model: its mapping of the first of model's fallback
// groups (WithGroupFallback) it maps, else of a budget's Reroute group, else the one model
// it serves when its Models maps a single upstream model. ok is false when none applies:
// the upstream is passed over rather than sent a name it does not serve.
func (c *Client) fallbackModel(up *upstream, model string) (string, bool) {
	for _, g := range c.cfg.groupFallbacks[model] {
		if m, ok := up.model(g); ok {
			return m, true
		}
	}
	if c.cost != nil {
		for _, br := range c.cost.budgets {
			if g := br.b.Reroute; g != "" {
				if m, ok := up.model(g); ok {
					return m, true
				}
			}
		}
	}
	only := ""
	for _, m := range up.Models {
		if only != "" && m != only {
			return "", false
		}
		only = m
	}
	return only, only != ""
}

// defaultCallBudget is WithCallBudget's default: the longest that vendors themselves let a
// request run.
const defaultCallBudget = 10 * time.Minute

// maxCallBudget bounds WithCallBudget.
const maxCallBudget = 24 * time.Hour

// WithCallBudget bounds a call whose context has no deadline (an HTTP handler's
// r.Context(), context.Background()) as if its context had one d after the call starts:
// its waits, retries and failovers end by then, and each attempt gets a share of the time
// left as under a deadline (half of it while another upstream of the route could serve).
// For a stream it bounds the time to its first token: a committed stream is never cut by
// it, and the continuation of a broken stream (WithStreamContinuation) gets it anew. A
// call whose context has a deadline is bounded by that deadline alone. d must be within
// [0, 24h]; 0 turns the budget off, leaving such calls bounded only by the attempt caps
// and the per-attempt bounds (WithAttemptTimeout, WithFirstTokenTimeout). Default 10m.
// Two waits are not under it: a partition's (WithPartitionLimits), which comes before
// the call's attempts and waits on the caller's context alone, and Embed's, whose
// batches each get the budget (a call of many batches at low concurrency may take
// several budgets).
func WithCallBudget(d time.Duration) Option {
	return optionFunc(func(c *config) { c.callBudget = d })
}

// renewBudget gives a call without a context deadline its time budget anew from now: a
// broken stream's continuation is a new way to a first token, however long the stream
// ran before it broke.
func (r *run) renewBudget() {
	if !r.budgetEnd.IsZero() {
		r.budgetEnd = time.Now().Add(r.c.cfg.callBudget)
	}
}

// outOfTime reports whether the call's time budget (WithCallBudget) has ended: no
// further attempt starts then. Without a budget it is false.
func (r *run) outOfTime() bool {
	return !r.budgetEnd.IsZero() && !time.Now().Before(r.budgetEnd.Add(-budgetMargin))
}

// budgetCtx is the context a call's attempts see while its time budget (WithCallBudget)
// stands in for a deadline its own context lacks: it reports the budget's end as its
// deadline, so that every wait (Retry-After, backoff, a cooling key, the limiter) is sized
// to end before it and every attempt gets its share of the time left, and it is done only
// when the caller's context is. Nothing cancels at the budget's end: attempt.limit bounds
// each attempt by a timer of its own (ending budgetMargin early), a committed stream
// runs on, and code that waits on ctx.Done for a deadline gets enforcedDeadline's.
type budgetCtx struct {
	context.Context
	end time.Time
}

func (c *budgetCtx) Deadline() (time.Time, bool) { return c.end, true }

// enforcedDeadline returns ctx with its deadline enforced by a timer, for code that
// waits on ctx.Done (a key source): a budgetCtx reports the budget's end as its deadline
// but is not done at it. The result is done when ctx is or when the deadline passes;
// cancel releases its timer. Without a deadline it is ctx.
func enforcedDeadline(ctx context.Context) (context.Context, context.CancelFunc) {
	d, ok := ctx.Deadline()
	if !ok {
		return ctx, func() {}
	}
	inner, cancel := context.WithDeadline(context.WithoutCancel(ctx), d)
	stop := context.AfterFunc(ctx, cancel)
	return inner, func() { stop(); cancel() }
}

// budgetMargin is how much earlier than the budget's end an attempt's own timer ends: a
// timer asked for at or after a parent's deadline is not started (context.WithDeadline
// relies on the parent), and the budget's end is a deadline that no timer enforces.
const budgetMargin = 100 * time.Millisecond
