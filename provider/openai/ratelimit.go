package openai

import (
	"net/http"
	"time"

	"github.com/llmclient/llmclient/internal/adapter"
	"github.com/llmclient/llmclient/internal/headers"
	"github.com/llmclient/llmclient/ratelimit"
)

// ParseRateLimits reads the quota headers of an OpenAI-style response:
// x-ratelimit-{limit,remaining,reset}-{requests,tokens} (OpenAI, Azure, Groq, DeepSeek and
// others; resets are Go-style durations such as "6m0s", "1s", "12ms"). When the
// per-dimension request headers are absent, the generic x-ratelimit-{limit,remaining,reset}
// trio (OpenRouter; reset as Unix milliseconds) fills Requests. Windows are relative to now.
// It returns nil when the response carries none of these headers. A zero now means the
// time of the call, read only when a quota header is there. Safe for concurrent use.
func ParseRateLimits(h http.Header, now time.Time) *ratelimit.Status {
	if h == nil {
		return nil
	}
	var w [3]headers.Window
	headers.ReadWindows(h, rateLimitPrefix, rateNames[:], now, w[:])
	return rateLimitsOf(&w)
}

// rateLimitsOf is ParseRateLimits's result for the windows it read.
func rateLimitsOf(w *[3]headers.Window) *ratelimit.Status {
	rl := ratelimit.Status{Requests: adapter.RateWindow(w[0]), Tokens: adapter.RateWindow(w[1])}
	if !rl.Requests.Known {
		rl.Requests = adapter.RateWindow(w[2])
	}
	if !rl.Requests.Known && !rl.Tokens.Known && rl.Requests.Reset == 0 && rl.Tokens.Reset == 0 {
		return nil
	}
	out := rl // on the heap only when something was reported
	return &out
}

// rateLimitPrefix is what the quota headers' canonical names start with.
const rateLimitPrefix = "X-Ratelimit-"

// rateNames are the canonical header names after rateLimitPrefix: requests, tokens, and
// the generic trio.
var rateNames = [3][3]string{
	{"Limit-Requests", "Remaining-Requests", "Reset-Requests"},
	{"Limit-Tokens", "Remaining-Tokens", "Reset-Tokens"},
	{"Limit", "Remaining", "Reset"},
}
