package otel_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/budget"
	"github.com/llmclient/llmclient/pricing"
	"github.com/llmclient/llmclient/provider/fake"
)

// What calls cost is counted in dollars, by the call's attributes; budget events are
// counted by budget and whether the hard cap refused.
func TestCostAndBudgetMetrics(t *testing.T) {
	r := newRig(t)
	m, err := pricing.NewModel(pricing.Spec{ID: "m", Price: pricing.Price{Input: pricing.PerMTok(pricing.Dollar)}})
	require.NoError(t, err)
	p := fake.New(fake.Reply("ok").Usage(250_000, 0).Forever())
	c := r.client(t, llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: p, Prices: map[string]*pricing.Model{"": m}}),
		llmclient.WithBudget(budget.Budget{Name: "daily", Cap: pricing.Dollar / 2, Soft: []float64{0.5}}))
	req := chatReq("m")
	req.MaxTokens = 1
	for range 3 {
		_, _ = c.Complete(context.Background(), req)
	}
	ms := r.collect(t)
	cost, ok := ms["llmclient.client.cost"].Data.(metricdata.Sum[float64])
	require.True(t, ok, "llmclient.client.cost is a float sum")
	total := 0.0
	for _, dp := range cost.DataPoints {
		total += dp.Value
		assert.Equal(t, "a", setAttrs(dp.Attributes)["llmclient.upstream"])
	}
	assert.InDelta(t, 0.5, total, 1e-12, "two calls of 250k tokens at $1/MTok; the third was refused at the cap")
	assert.Equal(t, "USD", ms["llmclient.client.cost"].Unit)
	events := map[bool]int64{}
	for _, dp := range sumI(t, ms, "llmclient.budget.events") {
		a := setAttrs(dp.Attributes)
		assert.Equal(t, "daily", a["llmclient.budget"])
		events[a["llmclient.budget.hard"].(bool)] += dp.Value
	}
	assert.Equal(t, map[bool]int64{false: 1, true: 1}, events)
}

// An attempt a budget refuses is counted among the refusals with llmclient.reason
// "budget", whichever budget rule refused it (error.type tells which): a cap, or a model
// without a price under UnpricedRefuse. It used to be counted as "other".
func TestBudgetRefusalReason(t *testing.T) {
	m, err := pricing.NewModel(pricing.Spec{ID: "m", Price: pricing.Price{Input: pricing.PerMTok(pricing.Dollar)}})
	require.NoError(t, err)
	for name, tc := range map[string]struct {
		prices    map[string]*pricing.Model
		errorType string
	}{
		"cap":      {prices: map[string]*pricing.Model{"": m}, errorType: "budget_exceeded"},
		"unpriced": {prices: nil, errorType: "unpriced"},
	} {
		t.Run(name, func(t *testing.T) {
			r := newRig(t)
			p := fake.New(fake.Reply("ok").Usage(600_000, 0).Forever())
			c := r.client(t, llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: p, Prices: tc.prices}),
				llmclient.WithPricing(nil), llmclient.WithBudget(budget.Budget{Name: "daily", Cap: pricing.Dollar / 2}))
			req := chatReq("unlisted-model-x")
			req.MaxTokens = 1
			refused := 0
			for range 2 {
				if _, err := c.Complete(context.Background(), req); err != nil {
					refused++
				}
			}
			require.Positive(t, refused, "the budget refused no call")
			ref := sumI(t, r.collect(t), "llmclient.client.refusals")
			require.Len(t, ref, 1)
			assert.Equal(t, map[string]any{"llmclient.upstream": "a", "error.type": tc.errorType, "llmclient.reason": "budget"},
				setAttrs(ref[0].Attributes))
			assert.Equal(t, int64(refused), ref[0].Value)
		})
	}
}
