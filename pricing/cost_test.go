package pricing_test

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/llmclient/llmclient/pricing"
)

// Prices below are those of the shipped snapshot (genai-prices 0.1.8), quoted per case.

var noon = time.Date(2025, 9, 1, 12, 0, 0, 0, time.UTC)

func TestCostTiers(t *testing.T) {
	// google gemini-2.5-pro: input $1.25/MTok, $2.50 above 200,000 prompt tokens; cache read
	// $0.125 / $0.25; output $10 / $15 (the output rate follows the prompt size too).
	gemini := lookup(t, "google", "gemini-2.5-pro")
	// anthropic claude-sonnet-4-5: input $3 / $6 above 200,000; output $15 / $22.50.
	sonnet := lookup(t, "anthropic", "claude-sonnet-4-5")
	cases := []struct {
		name   string
		model  *pricing.Model
		tokens pricing.Tokens
		want   string
	}{
		{"gemini below", gemini, pricing.Tokens{Input: 199_999, Output: 1000}, "0.25999875"},
		{"gemini at the threshold", gemini, pricing.Tokens{Input: 200_000, Output: 1000}, "0.26"},
		{"gemini above: every token at the tier rate", gemini, pricing.Tokens{Input: 200_001, Output: 1000}, "0.5150025"},
		{"gemini above, cached part", gemini, pricing.Tokens{Input: 300_000, CacheRead: 100_000, Output: 2000}, "0.555"},
		{"gemini cached tokens count for the threshold", gemini, pricing.Tokens{Input: 200_001, CacheRead: 200_001}, "0.05000025"},
		{"sonnet at the threshold", sonnet, pricing.Tokens{Input: 200_000, Output: 100}, "0.6015"},
		{"sonnet above", sonnet, pricing.Tokens{Input: 200_001, Output: 100}, "1.202256"},
	}
	for _, c := range cases {
		got, err := c.model.Cost(c.tokens, noon)
		require.NoError(t, err, c.name)
		assert.Equal(t, usd(c.want), got, "%s: got %v", c.name, got)
	}
}

func TestCostCacheAndReasoning(t *testing.T) {
	cases := []struct {
		name     string
		provider string
		model    string
		tokens   pricing.Tokens
		want     string
	}{
		// claude-sonnet-4-5: input $3, cache read $0.30, cache write $3.75, output $15.
		{"anthropic cache read and write", "anthropic", "claude-sonnet-4-5",
			pricing.Tokens{Input: 10_000, CacheRead: 6000, CacheWrite: 2000, Output: 500}, "0.0228"},
		// gpt-4o-mini: input $0.15, cache read $0.075, output $0.60.
		{"openai cached input", "openai", "gpt-4o-mini",
			pricing.Tokens{Input: 10_000, CacheRead: 8000, Output: 100}, "0.00096"},
		// gpt-4o-mini has no cache-write rate: written tokens bill at the input rate.
		{"no cache-write rate: input rate", "openai", "gpt-4o-mini",
			pricing.Tokens{Input: 10_000, CacheWrite: 10_000}, "0.0015"},
		// ada has no cache-read rate ($0.40 in and out): cached tokens bill as input.
		{"no cache-read rate: input rate", "openai", "ada",
			pricing.Tokens{Input: 1000, CacheRead: 1000}, "0.0004"},
		// perplexity sonar-deep-research: input $2, output $8, reasoning $3.
		{"own reasoning rate", "perplexity", "sonar-deep-research",
			pricing.Tokens{Input: 1000, Output: 5000, Reasoning: 4000}, "0.022"},
		// o3-mini: input $1.10, output $4.40, no reasoning rate: reasoning bills as output.
		{"reasoning at the output rate", "openai", "o3-mini",
			pricing.Tokens{Input: 1000, Output: 5000, Reasoning: 4000}, "0.0231"},
		{"reasoning at the output rate, same as plain output", "openai", "o3-mini",
			pricing.Tokens{Input: 1000, Output: 5000}, "0.0231"},
		// perplexity sonar: input $1, output $1, $12 per thousand requests.
		{"per-request fee", "perplexity", "sonar", pricing.Tokens{Input: 1000, Output: 1000}, "0.014"},
		{"per-request fee without tokens", "perplexity", "sonar", pricing.Tokens{}, "0.012"},
		// text-embedding-3-small: input only ($0.02); output is not charged.
		{"no output rate", "openai", "text-embedding-3-small", pricing.Tokens{Input: 1_000_000, Output: 10}, "0.02"},
		{"empty call", "openai", "gpt-4o-mini", pricing.Tokens{}, "0"},
	}
	for _, c := range cases {
		got, err := lookup(t, c.provider, c.model).Cost(c.tokens, noon)
		require.NoError(t, err, c.name)
		assert.Equal(t, usd(c.want), got, "%s: got %v", c.name, got)
	}
}

func TestCostTimeOfDay(t *testing.T) {
	// deepseek-chat: the default price is DeepSeek's off-peak discount, input $0.135, cache
	// read $0.035, output $0.55; from 00:30 to 16:30 UTC the standard price applies: $0.27,
	// $0.07, $1.10.
	m := lookup(t, "deepseek", "deepseek-chat")
	tokens := pricing.Tokens{Input: 1_000_000, CacheRead: 400_000, Output: 100_000}
	const standard, offPeak = "0.3", "0.15"
	day := time.Date(2025, 3, 4, 0, 0, 0, 0, time.UTC)
	beijing := time.FixedZone("UTC+8", 8*3600)
	cases := []struct {
		at   time.Time
		want string
	}{
		{day, offPeak},
		{day.Add(30*time.Minute - time.Nanosecond), offPeak},
		{day.Add(30 * time.Minute), standard},
		{day.Add(12 * time.Hour), standard},
		{day.Add(16*time.Hour + 30*time.Minute - time.Nanosecond), standard},
		{day.Add(16*time.Hour + 30*time.Minute), offPeak},
		{day.Add(23*time.Hour + 59*time.Minute), offPeak},
		// The window is in UTC whatever the zone of the time: 08:30 in Beijing is 00:30 UTC.
		{time.Date(2025, 3, 4, 8, 29, 59, 0, beijing), offPeak},
		{time.Date(2025, 3, 4, 8, 30, 0, 0, beijing), standard},
		{time.Date(2025, 3, 5, 0, 29, 0, 0, beijing), standard}, // 16:29 UTC the day before
		{time.Date(2025, 3, 5, 0, 30, 0, 0, beijing), offPeak},  // 16:30 UTC
		// Before 1970 too (negative Unix seconds).
		{time.Date(1960, 1, 1, 0, 30, 0, 0, time.UTC), standard},
		{time.Date(1960, 1, 1, 0, 29, 0, 0, time.UTC), offPeak},
	}
	for _, c := range cases {
		got, err := m.Cost(tokens, c.at)
		require.NoError(t, err)
		assert.Equal(t, usd(c.want), got, "at %v (%v UTC): got %v", c.at, c.at.UTC(), got)
	}
}

func TestCostStartDate(t *testing.T) {
	// openai o3: input $10, output $40; from 2025-06-10 (midnight UTC) input $2, output $8.
	o3 := lookup(t, "openai", "o3")
	cut := time.Date(2025, 6, 10, 0, 0, 0, 0, time.UTC)
	tokens := pricing.Tokens{Input: 1000, Output: 1000}
	cases := []struct {
		at   time.Time
		want string
	}{
		{cut.Add(-time.Nanosecond), "0.05"},
		{cut, "0.01"},
		{cut.AddDate(1, 0, 0), "0.01"},
		{time.Date(2025, 6, 9, 17, 0, 0, 0, time.FixedZone("UTC-7", -7*3600)), "0.01"}, // midnight UTC
		{time.Date(2025, 6, 9, 16, 59, 0, 0, time.FixedZone("UTC-7", -7*3600)), "0.05"},
	}
	for _, c := range cases {
		got, err := o3.Cost(tokens, c.at)
		require.NoError(t, err)
		assert.Equal(t, usd(c.want), got, "at %v: got %v", c.at, got)
	}

	// deepseek-v4-flash mixes both kinds: default $0.14/MTok input, $0.22 from 2026-08-17,
	// and $0.44 from 01:00 to 04:00 and 06:00 to 10:00 UTC. The last active price wins, so
	// the windows apply before the start date too.
	flash := lookup(t, "deepseek", "deepseek-v4-flash")
	input := pricing.Tokens{Input: 1_000_000}
	for _, c := range []struct {
		at   time.Time
		want string
	}{
		{time.Date(2026, 1, 1, 5, 0, 0, 0, time.UTC), "0.14"},
		{time.Date(2026, 1, 1, 2, 0, 0, 0, time.UTC), "0.44"},
		{time.Date(2026, 9, 1, 5, 0, 0, 0, time.UTC), "0.22"},
		{time.Date(2026, 9, 1, 7, 0, 0, 0, time.UTC), "0.44"},
		{time.Date(2026, 9, 1, 10, 0, 0, 0, time.UTC), "0.22"},
	} {
		got, err := flash.Cost(input, c.at)
		require.NoError(t, err)
		assert.Equal(t, usd(c.want), got, "at %v: got %v", c.at, got)
	}
}

func TestCostFreeAndUnpriced(t *testing.T) {
	// The data gives ":free" variants and Gemma an empty price: free, a known $0.
	for _, name := range [][2]string{{"openrouter", "deepseek/deepseek-r1:free"}, {"google", "gemma-3"}} {
		got, err := lookup(t, name[0], name[1]).Cost(pricing.Tokens{Input: 1000, Output: 1000}, noon)
		require.NoError(t, err, name)
		assert.Equal(t, pricing.Money(0), got, name)
	}
	// Models priced only in audio hours or document pages: cost unknown, not zero.
	for _, name := range [][2]string{{"openai", "whisper-1"}, {"mistral", "mistral-ocr-latest"}, {"x-ai", "grok-voice-latest"}} {
		m := lookup(t, name[0], name[1])
		got, err := m.Cost(pricing.Tokens{Input: 1000}, noon)
		assert.ErrorIs(t, err, pricing.ErrNotPerToken, name)
		assert.Contains(t, err.Error(), m.String())
		assert.Equal(t, pricing.Money(0), got)
		_, err = m.PriceAt(noon)
		assert.ErrorIs(t, err, pricing.ErrNotPerToken, name)
	}
}

func TestCostInvalidInput(t *testing.T) {
	m := lookup(t, "openai", "gpt-4o-mini")
	bad := []pricing.Tokens{
		{Input: -1},
		{Output: -1},
		{Input: 10, CacheRead: -1},
		{Input: 10, CacheWrite: -1},
		{Output: 10, Reasoning: -1},
		{Input: 10, CacheRead: 11},
		{Input: 10, CacheWrite: 11},
		{Input: 10, CacheRead: 6, CacheWrite: 5},
		{Output: 10, Reasoning: 11},
		{Input: math.MaxInt, CacheRead: math.MaxInt, CacheWrite: math.MaxInt}, // no overflow in the check
		{Input: math.MinInt},
	}
	for _, tk := range bad {
		got, err := m.Cost(tk, noon)
		assert.ErrorIs(t, err, pricing.ErrInvalidTokens, "%+v", tk)
		assert.Equal(t, pricing.Money(0), got)
	}
	_, err := m.Cost(pricing.Tokens{Input: 1}, time.Time{})
	assert.ErrorIs(t, err, pricing.ErrNoTime)
	_, err = m.PriceAt(time.Time{})
	assert.ErrorIs(t, err, pricing.ErrNoTime)
}

func TestCostSaturates(t *testing.T) {
	m := lookup(t, "openai", "gpt-4o-mini")
	for _, tk := range []pricing.Tokens{
		{Input: math.MaxInt},
		{Output: math.MaxInt},
		{Input: math.MaxInt, CacheRead: math.MaxInt / 2, Output: math.MaxInt, Reasoning: math.MaxInt},
	} {
		got, err := m.Cost(tk, noon)
		require.NoError(t, err)
		assert.Equal(t, pricing.MaxMoney, got, "%+v", tk)
	}
	// Large but representable: 10^12 tokens at $0.15/MTok is $150,000, exactly.
	got, err := m.Cost(pricing.Tokens{Input: 1_000_000_000_000}, noon)
	require.NoError(t, err)
	assert.Equal(t, usd("150000"), got)
}

func TestErrorsAreDistinct(t *testing.T) {
	for _, a := range []error{pricing.ErrInvalidTokens, pricing.ErrNoTime, pricing.ErrNotPerToken} {
		for _, b := range []error{pricing.ErrInvalidTokens, pricing.ErrNoTime, pricing.ErrNotPerToken} {
			assert.Equal(t, a == b, errors.Is(a, b))
		}
	}
}
