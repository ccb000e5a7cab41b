package anthropic

import (
	"net/http"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/internal/headers"
)

// ParseRateLimits reads the anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-
// {limit,remaining,reset} headers. Resets are RFC 3339 times, returned relative to now.
// Anthropic rounds *-tokens-remaining to the nearest thousand. It returns nil when no
// dimension is reported. ParseRateLimits is safe for concurrent use.
func ParseRateLimits(h http.Header, now time.Time) *llmclient.RateLimits {
	return parseRateLimits(h, now)
}

func parseRateLimits(h http.Header, now time.Time) *llmclient.RateLimits {
	if h == nil {
		return nil
	}
	rl := &llmclient.RateLimits{
		Requests:     window(h, &rateKeys[0], now),
		Tokens:       window(h, &rateKeys[1], now),
		InputTokens:  window(h, &rateKeys[2], now),
		OutputTokens: window(h, &rateKeys[3], now),
	}
	if !rl.Requests.Known && !rl.Tokens.Known && !rl.InputTokens.Known && !rl.OutputTokens.Known {
		return nil
	}
	return rl
}

// rateKeys are the canonical header names of each dimension: limit, remaining, reset.
var rateKeys = [4][3]string{
	{"Anthropic-Ratelimit-Requests-Limit", "Anthropic-Ratelimit-Requests-Remaining", "Anthropic-Ratelimit-Requests-Reset"},
	{"Anthropic-Ratelimit-Tokens-Limit", "Anthropic-Ratelimit-Tokens-Remaining", "Anthropic-Ratelimit-Tokens-Reset"},
	{"Anthropic-Ratelimit-Input-Tokens-Limit", "Anthropic-Ratelimit-Input-Tokens-Remaining", "Anthropic-Ratelimit-Input-Tokens-Reset"},
	{"Anthropic-Ratelimit-Output-Tokens-Limit", "Anthropic-Ratelimit-Output-Tokens-Remaining", "Anthropic-Ratelimit-Output-Tokens-Reset"},
}

func window(h http.Header, k *[3]string, now time.Time) llmclient.RateWindow {
	w := headers.ReadWindow(h, k[0], k[1], k[2], now)
	return llmclient.RateWindow{Known: w.Known, Limit: w.Limit, Remaining: w.Remaining, Reset: w.Reset}
}
