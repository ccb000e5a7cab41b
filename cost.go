package llmclient

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/llmclient/llmclient/budget"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/pricing"
)

// costState is a Client's pricing: its price table, the upstreams' own prices and the
// budgets. A Client without pricing has none (nil). It is read-only after New, apart from
// the budgets' period caches, and safe for concurrent use.
type costState struct {
	table   *pricing.Table
	budgets []*budgetRun
	// solo is the Client's budget when it has one, client-wide, in an in-process ledger
	// (budgetRun.quick): reserve and settle take a quick path for it.
	solo     *budgetRun
	failover map[string]budget.Failover
	trim     func(ctx context.Context, req *Request, maxPrompt int) *Request
}

// upstreamPrice is how an upstream's calls are priced: its own prices first, then the
// table under its provider.
type upstreamPrice struct {
	provider string
	own      map[string]*pricing.Model
	fallback *pricing.Model // own[""]
	// first is the upstream's first table lookup, kept: calls of that model (most
	// upstreams serve one) skip the table's cache, a hash of provider and model. It is
	// set once, so calls of several models never allocate to replace it.
	first atomic.Pointer[pricedModel]
}

// pricedModel is a model name and its price in the table (nil: none).
type pricedModel struct {
	name string
	m    *pricing.Model
}

// newCostState builds the Client's pricing, or returns nil when nothing asks for it.
func (c *Client) newCostState() *costState {
	cfg := &c.cfg.cost
	if !cfg.enabled(&c.cfg) {
		return nil
	}
	cs := &costState{table: cfg.table, trim: cfg.trim}
	if cs.table == nil {
		cs.table = pricing.Default() // parsed here, in New, not on a first request
	}
	for _, up := range c.upstreams {
		up.price.provider, up.price.own, up.price.fallback = up.PriceProvider, up.Prices, up.Prices[""]
		if up.price.provider == "" {
			if d, ok := up.Provider.(Dialect); ok {
				up.price.provider, _ = cs.table.ProviderForURL(d.BaseURL())
			}
		}
	}
	cs.budgets = c.newBudgetRuns()
	if len(cs.budgets) == 1 && cs.budgets[0].b.Scope.Kind == budget.ScopeClient && cs.budgets[0].quick != nil {
		cs.solo = cs.budgets[0]
	}
	cs.failover = cfg.failover
	return cs
}

// priceOf returns the price, before any answer, of a call of model on up: priceFor
// with no name answered.
func (cs *costState) priceOf(up *upstream, model string) *pricing.Model {
	return cs.priceFor(up, model, "")
}

// priceFor is the one rule that prices a call on up, the same for Complete, Stream, the
// transport, Embed, budgets and the cost bound on failover. sent is the model the call
// named to the upstream (after Upstream.Models) and answered the model its response
// named ("" before the answer, or when it named none):
//
//  1. the upstream's own prices (Upstream.Prices) first: the name answered, else the
//     name sent, else its own default (the key ""). An upstream with its own price for
//     the call keeps it whatever name it answers with (OpenAI answers "gpt-4o" as
//     "gpt-4o-2024-08-06");
//  2. else the price table under the upstream's provider: the name answered, else the
//     name sent.
//
// It returns nil when neither knows the call: its cost is unknown, never $0.
func (cs *costState) priceFor(up *upstream, sent, answered string) *pricing.Model {
	p := &up.price
	if answered == sent {
		answered = ""
	}
	if p.own != nil {
		if answered != "" {
			if m := p.own[answered]; m != nil {
				return m
			}
		}
		if m := p.own[sent]; m != nil {
			return m
		}
		if p.fallback != nil {
			return p.fallback
		}
	}
	if answered != "" {
		if m := cs.tableLookup(p, answered); m != nil {
			return m
		}
	}
	return cs.tableLookup(p, sent)
}

// tableLookup returns the table's price of model under the upstream's provider, nil for
// none.
func (cs *costState) tableLookup(p *upstreamPrice, model string) *pricing.Model {
	if model == "" {
		return nil
	}
	f := p.first.Load()
	if f != nil && f.name == model {
		return f.m
	}
	m, _ := cs.table.Lookup(p.provider, model)
	if f == nil {
		p.first.CompareAndSwap(nil, &pricedModel{name: model, m: m})
	}
	return m
}

// usageTokens is a usage report's counts, as they are; clampTokens makes them priceable.
func usageTokens(u *Usage) pricing.Tokens {
	return pricing.Tokens{Input: u.InputTokens, CacheRead: u.CachedInputTokens, CacheWrite: u.CacheWriteTokens,
		CacheWrite1h: u.CacheWrite1hTokens, Output: u.OutputTokens, Reasoning: u.ReasoningTokens}
}

// plainTokens reports whether t, a usage report's counts, has no parts and no negative
// count: the common report, which clampTokens would leave unchanged.
func plainTokens(t pricing.Tokens) bool {
	return t.CacheRead|t.CacheWrite|t.CacheWrite1h|t.Reasoning == 0 && t.Input|t.Output >= 0
}

// clampTokens turns a usage report's counts into counts to price, clamped so that the
// report cannot fail the pricing: negative counts (which usageReported keeps from the
// reports the Client takes) are 0, and parts larger than their totals are cut to them
// (cache reads first, then cache writes, of which the one-hour writes; reasoning to the
// output).
func clampTokens(t pricing.Tokens) pricing.Tokens {
	t.Input, t.CacheRead, t.CacheWrite = max(t.Input, 0), max(t.CacheRead, 0), max(t.CacheWrite, 0)
	t.CacheWrite1h = max(t.CacheWrite1h, 0)
	t.Output, t.Reasoning = max(t.Output, 0), max(t.Reasoning, 0)
	t.CacheRead = min(t.CacheRead, t.Input)
	t.CacheWrite = min(t.CacheWrite, t.Input-t.CacheRead)
	t.CacheWrite1h = min(t.CacheWrite1h, t.CacheWrite)
	t.Reasoning = min(t.Reasoning, t.Output)
	return t
}

// estimate returns the tokens the attempt may use: the prompt's estimate (corrected for
// the model's vendor, plus a transport call's token ids; an embedding batch's inputs) and
// the largest output the request allows (MaxTokens, else the reserved output; none for
// calls that generate nothing, embeddings included). It writes r.prompt the first time,
// so attempts that run side by side (a hedged pair) must find it computed (primeBill).
func (r *run) estimate(req *Request) (in, out int) {
	lc := &r.c.cfg.limiter
	if r.prompt == 0 {
		r.prompt, r.cal = lc.promptEstimate(r.req)
		r.prompt++
	}
	in = r.prompt - 1
	if req != r.req { // a shortened request (WithContextTrim)
		in = lc.promptTokens(req)
	}
	out = req.MaxTokens
	if out <= 0 {
		out = lc.reservedOutput
	}
	if r.emb != nil { // an embedding batch: its inputs, no output
		return in, 0
	}
	if x := r.tx; x != nil {
		in = satAdd(in, max(x.call.TokenIDs, 0))
		if x.call.NoOutput {
			out = 0
		}
	}
	return in, out
}

// streaming reports whether the attempt is a stream's (false for an attempt outside a
// run).
func (a *attempt) streaming() bool {
	if a.tx != nil {
		return a.tx.call.Stream
	}
	return a.r != nil && a.r.keep
}

// attemptCost is what an ended attempt cost, from its usage (nil when it reported none):
//
//   - no upstream call was made (a local refusal): a known $0;
//   - a usage report, or the Client's estimate of one: priced by priceFor, from the
//     model sent and the model the response named; estimated usage gives an estimated
//     cost;
//   - an error response (status 400 and above): a known $0, vendors do not bill them;
//   - a timeout or cancellation after the request was sent: the upstream may have gone on
//     generating, and bills it, so the estimate is the prompt plus, for a one-shot call,
//     the largest output the request allowed (a stream stops generating when its
//     connection closes: its prompt only);
//   - any other failure without an answer (a refused or reset connection): an estimated $0.
//
// An unknown price gives an unknown cost.
func (cs *costState) attemptCost(a *attempt, class failure.Class, usage *Usage) pricing.Cost {
	if !a.called {
		return pricing.Cost{Known: true}
	}
	b := &a.bill
	if usage == nil {
		usage = b.partial
	}
	model := b.model
	if a.resp != nil && a.resp.Model != "" {
		model = a.resp.Model
	}
	var m *pricing.Model
	switch {
	case model != "" && model != a.call.Model:
		m = cs.priceFor(a.up, a.call.Model, model)
	case b.looked:
		m = b.price // priceFor(a.up, a.call.Model, ""), looked up at admission
	default:
		m = cs.priceOf(a.up, a.call.Model)
	}
	if usage == nil && b.status >= http.StatusBadRequest {
		return pricing.Cost{Known: true, Model: m} // priced or not: vendors do not bill them
	}
	if m == nil {
		return pricing.Cost{}
	}
	var t pricing.Tokens
	estimated := false
	switch {
	case usage != nil:
		t, estimated = usageTokens(usage), usage.Estimated // clamped below unless FlatCost prices it
	case class == failure.None || class == failure.Timeout || class == failure.Canceled:
		in, out := a.r.estimate(a.req)
		if a.streaming() {
			out = 0
		}
		t, estimated = pricing.Tokens{Input: in, Output: out}, true
	default:
		return pricing.Cost{Known: true, Estimated: true, Model: m}
	}
	// Cost's answer at any time, inlined; counts it prices are valid and without parts,
	// which the clamps would leave unchanged (plainTokens).
	amount, ok := m.FlatCost(t)
	if !ok {
		if usage != nil && !plainTokens(t) {
			t = clampTokens(t)
		}
		at := a.sent
		if at.IsZero() {
			at = time.Now()
		}
		var err error
		if amount, err = m.Cost(t, at); err != nil { // not priced per token: unknown, never $0
			return pricing.Cost{}
		}
	}
	return pricing.Cost{Amount: amount, Known: true, Estimated: estimated, Model: m}
}

// noteError keeps what a failed attempt's error says about its cost: the status of an
// error response, the usage of a filtered or empty answer.
func (b *attemptBill) noteError(err error) {
	var e *Error
	if !errors.As(err, &e) {
		return
	}
	b.status = e.Status
	if p := e.Partial; p != nil {
		if u := p.Usage; usageReported(&u) {
			p.Usage, b.partial = u, &u
		} else {
			p.Usage = Usage{} // none the Client takes: the caller is not handed the counts
		}
		if p.Model != "" {
			b.model = p.Model
		}
	}
}

// traceCost is the cost of every attempt of the trace together.
func traceCost(trace []Attempt) pricing.Cost {
	if len(trace) == 1 { // what the sum below gives for one attempt
		if c := trace[0].Cost; c.Amount >= 0 && (c.Known || c.Model == nil) {
			return c
		}
	}
	total := pricing.Cost{Known: true}
	for i := range trace {
		total = total.Plus(trace[i].Cost)
	}
	return total
}

// primeBill computes, before a hedged pair starts, what the pair's attempts would
// otherwise compute lazily in the run: the prompt's estimate and the call's estimate on
// its first upstream. Both attempts then only read the run.
func (r *run) primeBill() {
	cs := r.c.cost
	if cs == nil {
		return
	}
	r.estimate(r.req)
	if len(cs.failover) > 0 {
		r.firstEstimate(cs, time.Now())
	}
}
