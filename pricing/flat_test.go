package pricing

import (
	"math/rand/v2"
	"testing"
	"time"
)

// TestFlatCostMatchesCost checks Model.Cost's quick path for small token counts of a flat
// price against price.cost, the long way, for every price of the shipped table and for
// hand-built prices at and near the bounds the quick path relies on; and that the quick
// path is taken at all.
func TestFlatCostMatchesCost(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	counts := []int{0, 1, 2, 999, 12_345, 128_000, smallTokens - 2, smallTokens - 1}
	tokens := func() Tokens {
		if rng.IntN(2) == 0 {
			return Tokens{Input: counts[rng.IntN(len(counts))], Output: counts[rng.IntN(len(counts))]}
		}
		return Tokens{Input: rng.IntN(smallTokens), Output: rng.IntN(smallTokens)}
	}
	at := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	check := func(name string, p *price) {
		t.Helper()
		for range 40 {
			tk := tokens()
			if !tk.small() || !tk.valid() {
				t.Fatalf("%s: %+v: small %v, valid %v", name, tk, tk.small(), tk.valid())
			}
			if got, want := p.flatCost(tk), p.cost(tk); got != want {
				t.Fatalf("%s: %+v: flat cost %d, cost %d", name, tk, got, want)
			}
		}
	}
	flat := 0
	for _, pv := range Default().providers {
		for _, e := range pv.models {
			for i := range e.model.prices {
				if p := &e.model.prices[i].price; p.flat {
					flat++
					check(e.model.String(), p)
				}
			}
		}
	}
	if flat < 100 {
		t.Fatalf("only %d flat prices in the shipped table: the quick path is hardly taken", flat)
	}
	edge := []Money{0, 1, 7, maxFlatRate - 1, maxFlatRate}
	for _, in := range edge {
		for _, out := range edge {
			for _, fee := range []Money{0, 1, maxFlatFee} {
				m, err := NewModel(Spec{ID: "m", Price: Price{Input: PerMTok(in * perMillion),
					Output: PerMTok(out * perMillion), PerRequest: fee}})
				if err != nil {
					t.Fatal(err)
				}
				p := &m.prices[0].price
				if !p.flat {
					t.Fatalf("in %d, out %d, fee %d: not flat", in, out, fee)
				}
				check(m.String(), p)
				big := Tokens{Input: smallTokens - 1, Output: smallTokens - 1}
				if got, _ := m.Cost(big, at); got != p.cost(big) || got == MaxMoney {
					t.Fatalf("in %d, out %d, fee %d: %d at the bound, cost %d", in, out, fee, got, p.cost(big))
				}
			}
		}
	}
	// Prices and counts the quick path must leave to the long way.
	tiered, err := NewModel(Spec{ID: "t", Price: Price{Input: Tiered(Dollar, Tier{Above: 10, PerMTok: 2 * Dollar}), Output: PerMTok(Dollar)}})
	if err != nil {
		t.Fatal(err)
	}
	if tiered.prices[0].price.flat {
		t.Fatal("a tiered input rate is flat")
	}
	if got, _ := tiered.Cost(Tokens{Input: 11, Output: 1}, at); got != 11*2*Dollar/perMillion+Dollar/perMillion {
		t.Fatalf("tiered: %d", got)
	}
	for _, tk := range []Tokens{{Input: -1}, {Output: -1}, {Input: smallTokens}, {Output: smallTokens},
		{Input: 5, CacheRead: 1}, {Input: 5, CacheWrite: 1}, {Output: 5, Reasoning: 1}} {
		if tk.small() {
			t.Fatalf("%+v is small", tk)
		}
	}
	if _, err := tiered.Cost(Tokens{Input: -1}, at); err == nil {
		t.Fatal("negative input priced")
	}
}
