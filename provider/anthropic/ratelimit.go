package anthropic

import (
	"net/http"
	"time"

	"github.com/llmclient/llmclient/internal/adapter"
	"github.com/llmclient/llmclient/internal/headers"
	"github.com/llmclient/llmclient/ratelimit"
)

// ParseRateLimits reads the anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-
// {limit,remaining,reset} headers. Resets are RFC 3339 times, returned relative to now.
// Anthropic rounds *-tokens-remaining to the nearest thousand. It returns nil when no
// dimension is reported. A zero now means the time of the call, read only when a quota
// header is there. ParseRateLimits is safe for concurrent use.
func ParseRateLimits(h http.Header, now time.Time) *ratelimit.Status {
	return parseRateLimits(h, now)
}

func parseRateLimits(h http.Header, now time.Time) *ratelimit.Status {
	if h == nil {
		return nil
	}
	var w [4]headers.Window
	headers.ReadWindows(h, "Anthropic-Ratelimit-", rateNames[:], now, w[:])
	return rateLimitsOf(&w)
}

// rateLimitsOf is parseRateLimits's result for the windows it read.
func rateLimitsOf(w *[4]headers.Window) *ratelimit.Status {
	rl := ratelimit.Status{Requests: adapter.RateWindow(w[0]), Tokens: adapter.RateWindow(w[1]), InputTokens: adapter.RateWindow(w[2]), OutputTokens: adapter.RateWindow(w[3])}
	if !rl.Requests.Known && !rl.Tokens.Known && !rl.InputTokens.Known && !rl.OutputTokens.Known {
		return nil
	}
	out := rl // on the heap only when something was reported
	return &out
}

// rateNames are the canonical header names of each dimension after
// "Anthropic-Ratelimit-": limit, remaining, reset.
var rateNames = [4][3]string{
	{"Requests-Limit", "Requests-Remaining", "Requests-Reset"},
	{"Tokens-Limit", "Tokens-Remaining", "Tokens-Reset"},
	{"Input-Tokens-Limit", "Input-Tokens-Remaining", "Input-Tokens-Reset"},
	{"Output-Tokens-Limit", "Output-Tokens-Remaining", "Output-Tokens-Reset"},
}
