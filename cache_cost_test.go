package llmclient_test

import (
	"context"
	"testing"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/pricing"
	"github.com/llmclient/llmclient/provider/fake"
)

// TestCachePricedThroughClient: a call's cost prices its cache reads and its five-minute
// and one-hour cache writes at Anthropic's published rates for Claude Opus 4.7 ($5 input,
// $6.25 5-minute writes, $10 1-hour writes, $0.50 reads, $25 output per million tokens),
// and an OpenAI call's cached input at GPT-4o's ($2.50, $1.25 cached, $10 output); a
// usage whose one-hour writes exceed its writes is clamped, not refused.
func TestCachePricedThroughClient(t *testing.T) {
	cost := func(provider, model string, u llmclient.Usage) pricing.Cost {
		t.Helper()
		p := fake.New(fake.Reply("hi").ReportUsage(u).Forever())
		c := newClient(t, llmclient.WithUpstream(llmclient.Upstream{Name: provider, Provider: p, PriceProvider: provider}),
			llmclient.WithPricing(nil))
		resp, err := c.Complete(context.Background(), chatReq(model))
		if err != nil {
			t.Fatal(err)
		}
		return resp.Cost
	}
	micro := func(n int64) pricing.Money { return pricing.Money(n) * pricing.Microdollar }
	anthropic := llmclient.Usage{InputTokens: 100_000, CachedInputTokens: 50_000, CacheWriteTokens: 30_000,
		CacheWrite1hTokens: 10_000, OutputTokens: 2_000, TotalTokens: 102_000}
	// 20,000 × $5 + 50,000 × $0.50 + 20,000 × $6.25 + 10,000 × $10 + 2,000 × $25 per MTok.
	if got := cost("anthropic", "claude-opus-4-7", anthropic); !got.Known || got.Amount != micro(400_000) {
		t.Errorf("Opus 4.7 with cache reads and writes: %v, want $0.40", got)
	}
	// Without the one-hour split every write is a five-minute one: 10,000 × ($10 − $6.25) less.
	anthropic.CacheWrite1hTokens = 0
	if got := cost("anthropic", "claude-opus-4-7", anthropic); got.Amount != micro(362_500) {
		t.Errorf("Opus 4.7 with five-minute writes only: %v, want $0.3625", got)
	}
	anthropic.CacheWrite1hTokens = 1 << 40 // more than the writes: all of them
	if got := cost("anthropic", "claude-opus-4-7", anthropic); got.Amount != micro(475_000) {
		t.Errorf("Opus 4.7 with one-hour writes beyond the writes: %v, want $0.475 (all 30,000 at $10)", got)
	}
	openai := llmclient.Usage{InputTokens: 100_000, CachedInputTokens: 50_000, OutputTokens: 2_000, TotalTokens: 102_000}
	// 50,000 × $2.50 + 50,000 × $1.25 + 2,000 × $10 per MTok.
	if got := cost("openai", "gpt-4o", openai); !got.Known || got.Amount != micro(207_500) {
		t.Errorf("GPT-4o with cached input: %v, want $0.2075", got)
	}
}
