package pricing_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/llmclient/llmclient/pricing"
)

func TestNewModelSelfHostedAtZero(t *testing.T) {
	m, err := pricing.NewModel(pricing.Spec{
		ID:    "llama-3.1-8b-local",
		Price: pricing.Price{Input: pricing.PerMTok(0), Output: pricing.PerMTok(0)},
	})
	require.NoError(t, err)
	got, err := m.Cost(pricing.Tokens{Input: 5000, CacheRead: 1000, Output: 800, Reasoning: 100}, noon)
	require.NoError(t, err, "zero is a known price, not an unknown one")
	assert.Equal(t, pricing.Money(0), got)
	assert.Equal(t, "llama-3.1-8b-local", m.String())
	assert.Equal(t, "", m.Provider())
	assert.Equal(t, 0, m.ContextWindow())
}

func TestNegotiatedRate(t *testing.T) {
	list := lookup(t, "anthropic", "claude-sonnet-4-5")
	// 20% off the list input and output rates; the cache rates are left unset, so cached
	// tokens bill at the negotiated input rate.
	m, err := list.WithPrice(pricing.Price{
		Input:  pricing.PerMTok(240 * pricing.Cent),
		Output: pricing.PerMTok(12 * pricing.Dollar),
	})
	require.NoError(t, err)
	assert.Equal(t, "anthropic/claude-sonnet-4-5", m.String())
	assert.Equal(t, list.ContextWindow(), m.ContextWindow())
	assert.Equal(t, list.Name(), m.Name())
	got, err := m.Cost(pricing.Tokens{Input: 10_000, CacheRead: 5000, Output: 1000}, noon)
	require.NoError(t, err)
	assert.Equal(t, usd("0.036"), got) // 10,000 × $2.40 + 1,000 × $12
	listCost, _ := list.Cost(pricing.Tokens{Input: 10_000, CacheRead: 5000, Output: 1000}, noon)
	assert.Equal(t, usd("0.0315"), listCost, "the snapshot's model is unchanged")
}

func TestNewModelTiersAndFee(t *testing.T) {
	m, err := pricing.NewModel(pricing.Spec{
		Provider: "acme", ID: "acme-1", Name: "Acme One", ContextWindow: 32_000,
		Price: pricing.Price{
			Input:      pricing.Tiered(pricing.Dollar, pricing.Tier{Above: 2000, PerMTok: 3 * pricing.Dollar}, pricing.Tier{Above: 1000, PerMTok: 2 * pricing.Dollar}),
			CacheRead:  pricing.PerMTok(10 * pricing.Cent),
			Output:     pricing.PerMTok(4 * pricing.Dollar),
			Reasoning:  pricing.PerMTok(2 * pricing.Dollar),
			PerRequest: 5 * pricing.Microdollar,
		},
	})
	require.NoError(t, err)
	assert.Equal(t, "acme/acme-1", m.String())
	assert.Equal(t, 32_000, m.ContextWindow())
	p, err := m.PriceAt(noon)
	require.NoError(t, err)
	assert.Equal(t, []pricing.Tier{{Above: 1000, PerMTok: 2 * pricing.Dollar}, {Above: 2000, PerMTok: 3 * pricing.Dollar}}, p.Input.Tiers(), "sorted")
	assert.Equal(t, pricing.Dollar, p.Input.At(1000))
	assert.Equal(t, 2*pricing.Dollar, p.Input.At(1001))
	assert.Equal(t, 3*pricing.Dollar, p.Input.At(math.MaxInt))
	assert.False(t, p.CacheWrite.IsSet())
	assert.Nil(t, p.Output.Tiers())
	assert.Equal(t, 5*pricing.Microdollar, p.PerRequest)

	got, err := m.Cost(pricing.Tokens{Input: 1500, CacheRead: 500, Output: 100, Reasoning: 50}, noon)
	require.NoError(t, err)
	// 1,000 × $2 + 500 × $0.10 + 50 × $2 + 50 × $4 (per MTok) + $0.000005
	assert.Equal(t, usd("0.002355"), got)

	// The Price returned is a copy: changing its tiers does not change the model.
	tiers := p.Input.Tiers()
	tiers[0].PerMTok = 0
	again, _ := m.Cost(pricing.Tokens{Input: 1500, CacheRead: 500, Output: 100, Reasoning: 50}, noon)
	assert.Equal(t, got, again)
}

func TestNewModelRejects(t *testing.T) {
	ok := pricing.Price{Input: pricing.PerMTok(pricing.Dollar)}
	cases := []struct {
		name string
		spec pricing.Spec
		want string
	}{
		{"no id", pricing.Spec{Price: ok}, "Spec.ID is empty"},
		{"negative context window", pricing.Spec{ID: "m", ContextWindow: -1, Price: ok}, "ContextWindow -1"},
		{"no rate: a forgotten price is not free", pricing.Spec{ID: "m"}, "sets no rate"},
		{"negative rate", pricing.Spec{ID: "m", Price: pricing.Price{Output: pricing.PerMTok(-1)}}, "Price.Output"},
		{"MinInt64 rate", pricing.Spec{ID: "m", Price: pricing.Price{Output: pricing.PerMTok(math.MinInt64)}}, "Price.Output"},
		{"huge rate", pricing.Spec{ID: "m", Price: pricing.Price{Input: pricing.PerMTok(pricing.MaxMoney)}}, "Price.Input"},
		{"finer than a picodollar per token", pricing.Spec{ID: "m", Price: pricing.Price{Input: pricing.PerMTok(pricing.Dollar / 12)}}, "finer than one picodollar"},
		{"negative tier", pricing.Spec{ID: "m", Price: pricing.Price{Input: pricing.Tiered(0, pricing.Tier{Above: -1, PerMTok: 0})}}, "Above -1"},
		{"bad tier rate", pricing.Spec{ID: "m", Price: pricing.Price{CacheRead: pricing.Tiered(0, pricing.Tier{Above: 5, PerMTok: -pricing.Dollar})}}, "Price.CacheRead: tier 0"},
		{"negative fee", pricing.Spec{ID: "m", Price: pricing.Price{Input: pricing.PerMTok(0), PerRequest: -1}}, "PerRequest"},
		{"huge fee", pricing.Spec{ID: "m", Price: pricing.Price{PerRequest: pricing.MaxMoney}}, "PerRequest"},
	}
	for _, c := range cases {
		m, err := pricing.NewModel(c.spec)
		assert.ErrorContains(t, err, c.want, c.name)
		assert.Nil(t, m, c.name)
	}
	_, err := lookup(t, "openai", "gpt-4o").WithPrice(pricing.Price{})
	assert.ErrorContains(t, err, "sets no rate")
}

func TestPriceAtUnsetRate(t *testing.T) {
	var r pricing.Rate
	assert.False(t, r.IsSet())
	assert.Equal(t, pricing.Money(0), r.At(100))
	assert.True(t, pricing.PerMTok(0).IsSet())
}

// A price tiered at or above the listed context window prices a longer context the
// request opts into (Anthropic's 1M-token beta for Sonnet 4.5, listed at 200,000): the
// listed window is no limit of the model, and ContextWindow reports it unknown. A tier
// below the window leaves it.
func TestLongContextTierLeavesTheWindowUnknown(t *testing.T) {
	for _, tc := range []struct {
		window, above, want int
	}{
		{200_000, 200_000, 0},
		{200_000, 250_000, 0},
		{1_000_000, 200_000, 1_000_000},
		{0, 200_000, 0},
	} {
		m, err := pricing.NewModel(pricing.Spec{ID: "m", ContextWindow: tc.window, Price: pricing.Price{
			Input:  pricing.Tiered(3*pricing.Dollar, pricing.Tier{Above: tc.above, PerMTok: 6 * pricing.Dollar}),
			Output: pricing.PerMTok(15 * pricing.Dollar)}})
		if err != nil {
			t.Fatal(err)
		}
		if got := m.ContextWindow(); got != tc.want {
			t.Errorf("window %d, tier above %d: ContextWindow %d, want %d", tc.window, tc.above, got, tc.want)
		}
	}
}
