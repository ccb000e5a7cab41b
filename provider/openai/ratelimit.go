package openai

import (
	"net/http"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/internal/headers"
)

// ParseRateLimits reads the quota headers of an OpenAI-style response:
// x-ratelimit-{limit,remaining,reset}-{requests,tokens} (OpenAI, Azure, Groq, DeepSeek and
// others; resets are Go-style durations such as "6m0s", "1s", "12ms"). When the
// per-dimension request headers are absent, the generic x-ratelimit-{limit,remaining,reset}
// trio (OpenRouter; reset as Unix milliseconds) fills Requests. Windows are relative to now.
// It returns nil when the response carries none of these headers. Safe for concurrent use.
func ParseRateLimits(h http.Header, now time.Time) *llmclient.RateLimits {
	if h == nil {
		return nil
	}
	rl := llmclient.RateLimits{ // on the stack until something was reported
		Requests: window(headers.ReadWindow(h, "X-Ratelimit-Limit-Requests", "X-Ratelimit-Remaining-Requests", "X-Ratelimit-Reset-Requests", now)),
		Tokens:   window(headers.ReadWindow(h, "X-Ratelimit-Limit-Tokens", "X-Ratelimit-Remaining-Tokens", "X-Ratelimit-Reset-Tokens", now)),
	}
	if !rl.Requests.Known {
		rl.Requests = window(headers.ReadWindow(h, "X-Ratelimit-Limit", "X-Ratelimit-Remaining", "X-Ratelimit-Reset", now))
	}
	if !rl.Requests.Known && !rl.Tokens.Known && rl.Requests.Reset == 0 && rl.Tokens.Reset == 0 {
		return nil
	}
	return &rl
}

func window(w headers.Window) llmclient.RateWindow {
	return llmclient.RateWindow{Known: w.Known, Limit: w.Limit, Remaining: w.Remaining, Reset: w.Reset}
}
