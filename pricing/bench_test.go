package pricing_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/llmclient/llmclient/pricing"
)

var (
	sinkModel *pricing.Model
	sinkMoney pricing.Money
)

func BenchmarkLookup(b *testing.B) {
	tb := pricing.Default()
	for _, c := range []struct{ name, provider, model string }{
		{"hit", "openai", "gpt-4o-mini-2024-07-18"},
		{"hit-no-provider", "", "claude-sonnet-4-5-20250929"},
		{"miss", "openai", "gpt-nonexistent"},
	} {
		b.Run(c.name, func(b *testing.B) {
			tb.Lookup(c.provider, c.model) // the first lookup fills the cache
			b.ReportAllocs()
			for b.Loop() {
				sinkModel, _ = tb.Lookup(c.provider, c.model)
			}
		})
	}
	// A name seen for the first time walks the match trees (here all 701 OpenRouter models,
	// the worst case) and is stored in the cache.
	b.Run("first-openrouter-miss", func(b *testing.B) {
		names := make([]string, 1<<16) // more than the cache holds, so each is a first lookup
		for i := range names {
			names[i] = "z-ai/glm-nonexistent-" + strconv.Itoa(i)
		}
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			sinkModel, _ = tb.Lookup("openrouter", names[i%len(names)])
			i++
		}
	})
}

func BenchmarkLookupParallel(b *testing.B) {
	tb := pricing.Default()
	tb.Lookup("openai", "gpt-4o-mini")
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			m, _ := tb.Lookup("openai", "gpt-4o-mini")
			if m == nil {
				b.Fatal("miss")
			}
		}
	})
}

func BenchmarkCost(b *testing.B) {
	at := time.Date(2025, 9, 1, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name, provider, model string
		tokens                pricing.Tokens
	}{
		{"flat", "openai", "gpt-4o-mini", pricing.Tokens{Input: 1500, CacheRead: 1000, Output: 500, Reasoning: 100}},
		{"tiered", "google", "gemini-2.5-pro", pricing.Tokens{Input: 250_000, CacheRead: 100_000, Output: 2000}},
		{"time-of-day", "deepseek", "deepseek-chat", pricing.Tokens{Input: 1500, CacheRead: 1000, Output: 500}},
		{"dates-and-windows", "deepseek", "deepseek-v4-flash", pricing.Tokens{Input: 1500, Output: 500}},
	} {
		m, _ := pricing.Default().Lookup(c.provider, c.model)
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				var err error
				if sinkMoney, err = m.Cost(c.tokens, at); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkLookupAndCost is what pricing adds to one call: a cached lookup of the model the
// upstream named, then its cost.
func BenchmarkLookupAndCost(b *testing.B) {
	tb := pricing.Default()
	at := time.Date(2025, 9, 1, 12, 0, 0, 0, time.UTC)
	tokens := pricing.Tokens{Input: 1500, CacheRead: 1000, Output: 500}
	tb.Lookup("anthropic", "claude-sonnet-4-5-20250929")
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			m, ok := tb.Lookup("anthropic", "claude-sonnet-4-5-20250929")
			if !ok {
				b.Fatal("miss")
			}
			if _, err := m.Cost(tokens, at); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkLoadSnapshot is the one-time cost of Default: parsing the embedded snapshot.
func BenchmarkLoadSnapshot(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := pricing.LoadFile("data/prices.json"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkPlan(b *testing.B) {
	mini, _ := pricing.Default().Lookup("openai", "gpt-4o-mini")
	ds, _ := pricing.Default().Lookup("deepseek", "deepseek-chat")
	w := pricing.Workload{
		CallsPerDay: 10_000, PerCall: pricing.Tokens{Input: 1500, Output: 500},
		Mix: []pricing.Share{{Model: mini, Fraction: 0.7}, {Model: ds, Fraction: 0.3}},
		Day: time.Date(2025, 9, 1, 0, 0, 0, 0, time.UTC),
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := pricing.Plan(w); err != nil {
			b.Fatal(err)
		}
	}
}
