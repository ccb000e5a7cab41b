package llmclient

import (
	"context"
	"fmt"

	"github.com/llmclient/llmclient/budget"
	"github.com/llmclient/llmclient/pricing"
)

// costConfig is the configuration of pricing, budgets, cost-aware failover and the
// context-window check.
type costConfig struct {
	on       bool
	table    *pricing.Table
	budgets  []budget.Budget
	failover map[string]budget.Failover
	trim     func(ctx context.Context, req *Request, maxPrompt int) *Request
}

// enabled reports whether anything asks for pricing.
func (c *costConfig) enabled(cfg *config) bool {
	if c.on || len(c.budgets) > 0 || len(c.failover) > 0 || c.trim != nil {
		return true
	}
	for i := range cfg.upstreams {
		if len(cfg.upstreams[i].Prices) > 0 {
			return true
		}
	}
	return false
}

// maxBudgets bounds the budgets of one Client.
const maxBudgets = 64

func (c *config) validateCost() []error {
	var errs []error
	cc := &c.cost
	ups := make(map[string]bool, len(c.upstreams))
	for _, u := range c.upstreams {
		ups[u.Name] = true
		for model, m := range u.Prices {
			if m == nil {
				errs = append(errs, fmt.Errorf("upstream %q: Prices[%q] is nil", u.Name, model))
			}
		}
	}
	if len(cc.budgets) > maxBudgets {
		errs = append(errs, fmt.Errorf("%d budgets, at most %d", len(cc.budgets), maxBudgets))
	}
	names := map[string]bool{}
	for i := range cc.budgets {
		b := &cc.budgets[i]
		if err := b.Validate(); err != nil {
			errs = append(errs, err)
		}
		if b.Name != "" && names[b.Name] {
			errs = append(errs, fmt.Errorf("budget %q added twice", b.Name))
		}
		names[b.Name] = true
		if b.Reroute != "" {
			if _, ok := c.groups[b.Reroute]; !ok {
				errs = append(errs, fmt.Errorf("budget %q reroutes to unknown model group %q", b.Name, b.Reroute))
			}
		}
		if b.Scope.Kind == budget.ScopeUpstream && b.Scope.Name != "" && !ups[b.Scope.Name] {
			errs = append(errs, fmt.Errorf("budget %q counts unknown upstream %q", b.Name, b.Scope.Name))
		}
	}
	for g, f := range cc.failover {
		if _, ok := c.groups[g]; g != "" && !ok {
			errs = append(errs, fmt.Errorf("WithCostFailover names unknown model group %q", g))
		}
		if err := f.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("WithCostFailover(%q): %w", g, err))
		}
	}
	return errs
}

// WithPricing prices every call with the table t; nil means pricing.Default(), the
// embedded snapshot of the genai-prices database, parsed in New (15–20 ms, once per
// process). Each attempt's cost is then on Attempt.Cost and event.Attempt, and the call's
// on Response.Cost, Error.Cost and event.Call (see pricing.Cost for what is known and what
// is estimated). One rule prices every attempt — of Complete, Stream, the transport and
// Embed, and the estimates of budgets and WithCostFailover alike:
//
//  1. the upstream's own prices (Upstream.Prices): the model name the response gave,
//     else the name sent (after Upstream.Models), else the map's default (key ""). An
//     upstream with an own price for the call keeps it whatever name it answers with:
//     OpenAI answers "gpt-4o" as "gpt-4o-2024-08-06", and a negotiated rate or a
//     self-hosted $0 still applies;
//  2. else t under the upstream's provider (Upstream.PriceProvider): the name the
//     response gave, else the name sent.
//
// Before the answer (a budget's reservation, a failover bound) there is no response name
// yet, so the name sent decides. A model neither knows has an unknown cost, never $0.
//
// With pricing on, an attempt whose prompt estimate (plus MaxTokens, when set) exceeds
// its model's known context window by more than a tenth is refused before any call, as a
// local refusal of class context_length wrapping ErrContextWindow, and so goes straight
// to WithContextFallback's upstreams, or returns; within a tenth the upstream decides,
// since the estimate is an estimate (see WithContextTrim to shorten such requests).
//
// Default: no pricing, and every cost is unknown (except an answer a cache served, which
// made no call and costs a known $0). WithBudget, WithCostFailover,
// WithContextTrim and Upstream.Prices turn pricing on with pricing.Default() unless
// WithPricing names another table. The last WithPricing wins.
func WithPricing(t *pricing.Table) Option {
	return optionFunc(func(c *config) { c.cost.on, c.cost.table = true, t })
}

// WithBudget adds a spend cap (see package budget): every attempt it counts reserves its
// estimated cost before the call and is charged its real cost after it; an attempt that
// does not fit is refused before any call with failure.BudgetExceeded and an error wrapping
// budget.ErrExceeded whose AdmitAfter says when the window leaves room, or moves to the
// budget's Reroute group. An attempt whose model has no price is refused with
// failure.Unpriced and budget.ErrNoPrice under the default budget.UnpricedRefuse (see
// Budget.Unpriced). An attempt's cost counts in the window it ends in (see package
// budget for how far spend can pass a cap). Soft thresholds and the first refusal of a window are reported
// as event.Budget. Budgets are kept in the limit store (WithLimitStore) when it implements
// limitstore.BudgetStore — the in-memory store and redisstore's do, so Clients sharing one
// share their budgets — else in memory, private to the Client. Budgets are checked in the
// order they were added; at most 64. It turns pricing on (see WithPricing). Default none.
func WithBudget(b budget.Budget) Option {
	b.Soft = append([]float64(nil), b.Soft...)
	return optionFunc(func(c *config) { c.cost.budgets = append(c.cost.budgets, b) })
}

// WithCostFailover bounds the price of failover for calls of the model group named group
// (WithModelGroup); the empty name sets it for every route without a rule of its own. See
// budget.Failover: a call may move from its first upstream only to upstreams whose price
// for it is at most f.MaxRatio times the first's, or, with f.WhenOpen, to costlier ones
// while the first upstream's breaker is open. Upstreams a call reaches through
// WithContextFallback, WithContentFallback or a budget's Reroute are not bound by it. It
// applies to hedges too. It turns pricing on (see WithPricing). Default: no bound.
func WithCostFailover(group string, f budget.Failover) Option {
	return optionFunc(func(c *config) {
		if c.cost.failover == nil {
			c.cost.failover = map[string]budget.Failover{}
		}
		c.cost.failover[group] = f
	})
}

// WithContextTrim sets a hook that may shorten a request that does not fit its model's
// context window, before the pre-check of WithPricing refuses it: it is called, on the
// calling goroutine and with no lock held, when an attempt's prompt estimate plus its
// MaxTokens exceeds the window, with the prompt tokens that fit (the window less
// MaxTokens), and returns a shorter request for that attempt (for example with the oldest
// turns dropped), or nil to leave it. The request it returns is estimated again and must
// not be modified afterwards; the caller's request is never modified. It is not called
// for a Transport request, whose body is the caller's SDK's and is not rewritten: one
// that does not fit is refused, or goes to the context fallback, at once. It turns
// pricing on (see WithPricing). Default none.
func WithContextTrim(f func(ctx context.Context, req *Request, maxPrompt int) *Request) Option {
	return optionFunc(func(c *config) { c.cost.trim = f })
}
