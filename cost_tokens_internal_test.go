package llmclient

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/llmclient/llmclient/pricing"
)

// TestPlainTokensMatchesClamps checks attemptCost's quick paths for a usage report
// (plainTokens, and counts FlatCost prices: no clamps) against the clamps, for every
// combination of edge counts, valid or not, and that the clamps always give counts that
// price.
func TestPlainTokensMatchesClamps(t *testing.T) {
	m, err := pricing.NewModel(pricing.Spec{ID: "m", Price: pricing.Price{Input: pricing.PerMTok(pricing.Dollar), Output: pricing.PerMTok(pricing.Dollar)}})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	vals := []int{math.MinInt, -1, 0, 1, 2, 5, 1000, math.MaxInt - 1, math.MaxInt}
	quick, flat := 0, 0
	for _, in := range vals {
		for _, cr := range vals {
			for _, cw := range vals {
				for _, out := range vals {
					for _, rs := range vals {
						raw := pricing.Tokens{Input: in, CacheRead: cr, CacheWrite: cw, Output: out, Reasoning: rs}
						u := Usage{InputTokens: in, CachedInputTokens: cr, CacheWriteTokens: cw, OutputTokens: out, ReasoningTokens: rs}
						if usageTokens(&u) != raw {
							t.Fatalf("%+v: counts %+v", u, usageTokens(&u))
						}
						want := clampTokens(raw)
						if plainTokens(raw) {
							quick++
							if want != raw {
								t.Fatalf("%+v: taken as it is, clamped to %+v", u, want)
							}
						}
						if _, ok := m.FlatCost(raw); ok {
							flat++
						}
						if got, ok := m.FlatCost(raw); ok && (!plainTokens(raw) || got != costOf(t, m, want, at)) {
							t.Fatalf("%+v: FlatCost prices counts the clamps would change, or at %v", u, got)
						}
						if _, err := m.Cost(want, at); errors.Is(err, pricing.ErrInvalidTokens) {
							t.Fatalf("%+v: clamped to counts that do not price: %v", u, err)
						}
					}
				}
			}
		}
	}
	if quick == 0 || flat == 0 {
		t.Fatal("no valid report among the cases")
	}
}

func costOf(t *testing.T, m *pricing.Model, tk pricing.Tokens, at time.Time) pricing.Money {
	t.Helper()
	c, err := m.Cost(tk, at)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
