package llmclient

import "time"

// FinishReason says why the model stopped, normalized across vendors.
type FinishReason string

// The normalized finish reasons. Response.RawFinishReason keeps the vendor's own word.
const (
	FinishNone          FinishReason = ""
	FinishStop          FinishReason = "stop"
	FinishLength        FinishReason = "length"
	FinishToolCalls     FinishReason = "tool_calls"
	FinishContentFilter FinishReason = "content_filter"
	FinishRefusal       FinishReason = "refusal"
	FinishOther         FinishReason = "other"
)

// Usage counts tokens for one response.
//
// InputTokens is the whole prompt, whatever the vendor calls it: it includes the tokens
// read from the vendor's prompt cache (CachedInputTokens) and those written to it
// (CacheWriteTokens). Anthropic reports those apart from its input_tokens, so its adapter
// adds them; OpenAI's prompt_tokens and Gemini's promptTokenCount already include them.
type Usage struct {
	InputTokens  int
	OutputTokens int
	TotalTokens  int
	// CachedInputTokens is the part of InputTokens read from the vendor's prompt cache
	// (OpenAI cached_tokens, Anthropic cache_read_input_tokens, Gemini
	// cachedContentTokenCount, DeepSeek prompt_cache_hit_tokens).
	CachedInputTokens int
	// CacheWriteTokens is the part of InputTokens written to the vendor's prompt cache on
	// this request (Anthropic cache_creation_input_tokens); 0 for vendors that do not
	// charge cache writes apart.
	CacheWriteTokens int
	// ReasoningTokens is the part of OutputTokens spent on hidden reasoning.
	ReasoningTokens int
	// Estimated is true when the vendor reported no usage and the numbers are the Client's
	// own estimate.
	Estimated bool
}

// Response is the result of a successful call.
type Response struct {
	ID    string
	Model string // the model that answered, as the upstream names it
	Text  string
	// Reasoning is the visible reasoning or thinking text, where the vendor returns it.
	Reasoning       string
	ToolCalls       []ToolCall
	FinishReason    FinishReason
	RawFinishReason string
	// Refusal is the model's refusal message, where the vendor reports one separately.
	Refusal string
	Usage   Usage
	// RateLimits is the upstream's view of the key's quota, read from response headers.
	RateLimits *RateLimits

	// Upstream names the upstream that served the response.
	Upstream string
	// Attempts is the trace of every attempt the call made, the successful one last.
	Attempts []Attempt
	// Fallback is true when the response came from an upstream other than the first one
	// tried, or from the final fallback function.
	Fallback bool
	// Degraded is true when the final fallback function produced the response.
	Degraded bool
}

// Attempt records one try of a call against one upstream.
type Attempt struct {
	Upstream string
	Model    string
	// Key labels the API key used ("key#1" for the first of the upstream's keys); never the key.
	Key string
	// Number counts attempts of the call from 1, across upstreams.
	Number int
	// Class is ClassNone for the successful attempt.
	Class  Class
	Status int
	// Err is the attempt's error, nil on success.
	Err   error
	Start time.Time
	// Latency is the time spent in the upstream call.
	Latency time.Duration
	// Waited is the time spent waiting before the call: backoff, Retry-After and limiter.
	Waited time.Duration
	// RetryAfter is the wait the upstream asked for, 0 when none.
	RetryAfter time.Duration
	// EstimatedTokens is the limiter's token cost estimate (prompt + reserved output).
	EstimatedTokens int
	// Usage is the reported usage, when the attempt succeeded.
	Usage Usage
	// Notes says how the adapter translated the request for this upstream: a clamped
	// temperature, a dropped stop sequence, remapped tool-call ids, content moved to
	// another message. Nil when the request went out as it was.
	Notes []string
}

// RateWindow is one quota dimension reported by an upstream.
type RateWindow struct {
	// Known is false when the upstream sent nothing for this dimension.
	Known     bool
	Limit     int64
	Remaining int64
	// Reset is how long until the window is replenished, relative to when the response was read.
	Reset time.Duration
}

// RateLimits is the quota state an upstream reported in its response headers
// (x-ratelimit-* for OpenAI, anthropic-ratelimit-* for Anthropic).
type RateLimits struct {
	Requests     RateWindow
	Tokens       RateWindow
	InputTokens  RateWindow
	OutputTokens RateWindow
}
