package pricing

import (
	"math/rand/v2"
	"testing"
	"time"
)

// TestFlatCostMatchesCost checks Model.Cost's quick path for small token counts of a flat
// price against price.cost, the long way, and Model.FlatCost against Cost at several
// times, for every price and model of the shipped table and for hand-built prices at and
// near the bounds the quick path relies on; and that the quick paths are taken at all.
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
	flat, flatModels := 0, 0
	times := []time.Time{at, time.Date(2023, 1, 1, 3, 0, 0, 0, time.UTC), time.Date(2030, 12, 31, 23, 59, 59, 0, time.UTC)}
	for _, pv := range Default().providers {
		for _, e := range pv.models {
			m := e.model
			if (m.flat != nil) != (len(m.prices) == 1 && m.prices[0].price.flat) {
				t.Fatalf("%s: FlatCost's price %p, prices %d", m, m.flat, len(m.prices))
			}
			for range 20 { // FlatCost is Cost at any time, or declines
				tk := tokens()
				if rng.IntN(4) == 0 {
					tk.CacheRead = min(tk.Input, 1+rng.IntN(10))
				}
				got, ok := m.FlatCost(tk)
				if ok != (m.flat != nil && tk.small()) {
					t.Fatalf("%s: %+v: FlatCost ok %v", m, tk, ok)
				}
				if !ok {
					continue
				}
				flatModels++
				for _, when := range times {
					if want, err := m.Cost(tk, when); err != nil || got != want {
						t.Fatalf("%s: %+v: FlatCost %d, Cost at %v %d, %v", m, tk, got, when, want, err)
					}
				}
			}
			for i := range e.model.prices {
				if p := &e.model.prices[i].price; p.flat {
					flat++
					check(e.model.String(), p)
				}
			}
		}
	}
	if flat < 100 || flatModels < 100 {
		t.Fatalf("only %d flat prices and %d flat models in the shipped table: the quick path is hardly taken", flat, flatModels)
	}
	if m, _ := Default().Lookup("openai", "gpt-4o-mini"); m == nil || m.flat == nil {
		t.Fatalf("gpt-4o-mini (%v) is not priced by FlatCost", m)
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
				if m.flat != p {
					t.Fatalf("in %d, out %d, fee %d: FlatCost does not price", in, out, fee)
				}
				big := Tokens{Input: smallTokens - 1, Output: smallTokens - 1}
				if got, ok := m.FlatCost(big); !ok || got != p.cost(big) || got == MaxMoney {
					t.Fatalf("in %d, out %d, fee %d: FlatCost %d at the bound, cost %d", in, out, fee, got, p.cost(big))
				}
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
	if tiered.prices[0].price.flat || tiered.flat != nil {
		t.Fatal("a tiered input rate is flat")
	}
	if _, ok := tiered.FlatCost(Tokens{Input: 1}); ok {
		t.Fatal("FlatCost priced a tiered rate")
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
