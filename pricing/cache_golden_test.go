package pricing_test

import (
	"testing"
	"time"

	"github.com/llmclient/llmclient/pricing"
)

// milli is an amount in thousandths of a dollar ($6.25 is milli(6250)), micro in
// millionths.
func milli(n int64) pricing.Money { return pricing.Money(n) * pricing.Dollar / 1000 }
func micro(n int64) pricing.Money { return pricing.Money(n) * pricing.Dollar / 1_000_000 }

// TestCachePricesGolden: cache reads and writes cost what each vendor publishes, per rate
// and for one call mixing every kind of token, computed here by hand from the published
// numbers (dollars per million tokens):
//
//   - Anthropic (platform.claude.com/docs/en/about-claude/pricing, "Model pricing"): base
//     input, 5-minute cache writes (1.25×), 1-hour cache writes (2×), cache hits (0.1×),
//     output. Claude Opus 4.7: $5, $6.25, $10, $0.50, $25. Claude Sonnet 4: $3, $3.75, $6,
//     $0.30, $15. Claude Haiku 3: $0.25, $0.30, $0.50, $0.03, $1.25.
//   - OpenAI (platform pricing page, "cached input"): GPT-5 $1.25 input, $0.125 cached
//     input, $10 output; GPT-4o $2.50, $1.25, $10. No cache-write premium.
//   - Google (ai.google.dev Gemini API pricing, "context caching price", as quoted on
//     discuss.ai.google.dev): Gemini 2.5 Pro $1.25 input, $0.125 cached, $10 output for
//     prompts up to 200k tokens; $2.50, $0.25, $15 above. The cache storage fee ($4.50 per
//     million tokens per hour) is not per call and not priced.
func TestCachePricesGolden(t *testing.T) {
	at := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	type rates struct{ in, write, write1h, read, out pricing.Money } // 0: the vendor has none
	cases := []struct {
		provider, model string
		r               rates
		tokens          pricing.Tokens
		want            pricing.Money
	}{
		// 20,000 uncached × $5 + 50,000 read × $0.50 + 20,000 5-minute writes × $6.25 +
		// 10,000 1-hour writes × $10 + 2,000 output × $25 = $0.10 + $0.025 + $0.125 + $0.10
		// + $0.05.
		{"anthropic", "claude-opus-4-7", rates{milli(5000), milli(6250), milli(10000), milli(500), milli(25000)},
			pricing.Tokens{Input: 100_000, CacheRead: 50_000, CacheWrite: 30_000, CacheWrite1h: 10_000, Output: 2_000},
			40 * pricing.Cent},
		// 20,000 × $3 + 50,000 × $0.30 + 20,000 × $3.75 + 10,000 × $6 + 2,000 × $15 =
		// $0.06 + $0.015 + $0.075 + $0.06 + $0.03.
		{"anthropic", "claude-sonnet-4-20250514", rates{milli(3000), milli(3750), milli(6000), milli(300), milli(15000)},
			pricing.Tokens{Input: 100_000, CacheRead: 50_000, CacheWrite: 30_000, CacheWrite1h: 10_000, Output: 2_000},
			24 * pricing.Cent},
		// 20,000 × $0.25 + 50,000 × $0.03 + 20,000 × $0.30 + 10,000 × $0.50 + 2,000 × $1.25 =
		// $0.005 + $0.0015 + $0.006 + $0.005 + $0.0025.
		{"anthropic", "claude-3-haiku-20240307", rates{milli(250), milli(300), milli(500), milli(30), milli(1250)},
			pricing.Tokens{Input: 100_000, CacheRead: 50_000, CacheWrite: 30_000, CacheWrite1h: 10_000, Output: 2_000},
			micro(20000)},
		// 50,000 uncached × $1.25 + 50,000 cached × $0.125 + 2,000 × $10 = $0.0625 +
		// $0.00625 + $0.02.
		{"openai", "gpt-5", rates{in: milli(1250), read: milli(125), out: milli(10000)},
			pricing.Tokens{Input: 100_000, CacheRead: 50_000, Output: 2_000}, micro(88750)},
		// 50,000 × $2.50 + 50,000 × $1.25 + 2,000 × $10 = $0.125 + $0.0625 + $0.02.
		{"openai", "gpt-4o", rates{in: milli(2500), read: milli(1250), out: milli(10000)},
			pricing.Tokens{Input: 100_000, CacheRead: 50_000, Output: 2_000}, micro(207500)},
		// 50,000 × $1.25 + 50,000 × $0.125 + 2,000 × $10, a prompt under 200k tokens.
		{"google", "gemini-2.5-pro", rates{in: milli(1250), read: milli(125), out: milli(10000)},
			pricing.Tokens{Input: 100_000, CacheRead: 50_000, Output: 2_000}, micro(88750)},
		// Above 200k: 150,000 × $2.50 + 150,000 × $0.25 + 2,000 × $15 = $0.375 + $0.0375 + $0.03.
		{"google", "gemini-2.5-pro", rates{},
			pricing.Tokens{Input: 300_000, CacheRead: 150_000, Output: 2_000}, micro(442500)},
	}
	for _, tc := range cases {
		m, ok := pricing.Default().Lookup(tc.provider, tc.model)
		if !ok {
			t.Errorf("%s/%s: no price", tc.provider, tc.model)
			continue
		}
		got, err := m.Cost(tc.tokens, at)
		if err != nil || got != tc.want {
			t.Errorf("%s/%s %+v: cost %v, %v; want %v", tc.provider, tc.model, tc.tokens, got, err, tc.want)
		}
		p, err := m.PriceAt(at)
		if err != nil {
			t.Fatal(err)
		}
		// Each published rate (a Rate is Money per million tokens).
		for _, r := range []struct {
			name string
			rate pricing.Rate
			want pricing.Money
		}{{"input", p.Input, tc.r.in}, {"5m write", p.CacheWrite, tc.r.write}, {"1h write", p.CacheWrite1h, tc.r.write1h},
			{"read", p.CacheRead, tc.r.read}, {"output", p.Output, tc.r.out}} {
			if r.want != 0 && r.rate.At(0) != r.want {
				t.Errorf("%s/%s %s rate %v/MTok, want %v/MTok", tc.provider, tc.model, r.name, r.rate.At(0), r.want)
			}
		}
	}
}

// TestOneHourCacheWriteRules: one-hour writes are part of the cache writes (more is an
// error), and a price without a one-hour rate bills them at the cache-write rate.
func TestOneHourCacheWriteRules(t *testing.T) {
	at := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	m, ok := pricing.Default().Lookup("anthropic", "claude-opus-4-7")
	if !ok {
		t.Fatal("no price for claude-opus-4-7")
	}
	for _, bad := range []pricing.Tokens{
		{Input: 100, CacheWrite: 10, CacheWrite1h: 11},
		{Input: 100, CacheWrite1h: 1},
		{Input: 100, CacheWrite: 10, CacheWrite1h: -1},
	} {
		if _, err := m.Cost(bad, at); err == nil {
			t.Errorf("Cost(%+v) accepted", bad)
		}
	}
	fiveOnly, err := pricing.NewModel(pricing.Spec{Provider: "p", ID: "m", Price: pricing.Price{
		Input: pricing.PerMTok(4 * pricing.Dollar), CacheWrite: pricing.PerMTok(5 * pricing.Dollar), Output: pricing.PerMTok(0)}})
	if err != nil {
		t.Fatal(err)
	}
	// 1,000,000 writes, half of them one-hour: all at $5 without a one-hour rate.
	if got, err := fiveOnly.Cost(pricing.Tokens{Input: 1_000_000, CacheWrite: 1_000_000, CacheWrite1h: 500_000}, at); err != nil || got != 5*pricing.Dollar {
		t.Errorf("one-hour writes without their rate cost %v, %v; want $5", got, err)
	}
	withHour, err := pricing.NewModel(pricing.Spec{Provider: "p", ID: "m", Price: pricing.Price{
		Input: pricing.PerMTok(4 * pricing.Dollar), CacheWrite: pricing.PerMTok(5 * pricing.Dollar),
		CacheWrite1h: pricing.PerMTok(8 * pricing.Dollar), Output: pricing.PerMTok(0)}})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := withHour.Cost(pricing.Tokens{Input: 1_000_000, CacheWrite: 1_000_000, CacheWrite1h: 500_000}, at); err != nil || got != 650*pricing.Cent {
		t.Errorf("half one-hour writes cost %v, %v; want $2.50 + $4", got, err)
	}
	if _, err := pricing.NewModel(pricing.Spec{Provider: "p", ID: "m", Price: pricing.Price{
		Input: pricing.PerMTok(1), CacheWrite1h: pricing.PerMTok(-1)}}); err == nil {
		t.Error("a negative one-hour rate was accepted")
	}
}
