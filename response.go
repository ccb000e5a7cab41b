package llmclient

import (
	"time"

	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/finish"
	"github.com/llmclient/llmclient/pricing"
	"github.com/llmclient/llmclient/ratelimit"
)

// Usage counts tokens for one response.
//
// InputTokens is the whole prompt, whatever the vendor calls it: it includes the tokens
// read from the vendor's prompt cache (CachedInputTokens) and those written to it
// (CacheWriteTokens). Anthropic reports those apart from its input_tokens, so its adapter
// adds them; OpenAI's prompt_tokens and Gemini's promptTokenCount already include them.
//
// A provider's adapter reads a count as stated, a fraction truncated (5.7 is 5), and a
// count that cannot be one (not a number, beyond int64, a negative fraction) as -1. The
// Client does not take a report with a negative count, or with an input, output or total
// above 2^30 tokens: its estimate stands for it (Estimated), so the usage a Client returns
// is never negative.
type Usage struct {
	InputTokens  int
	OutputTokens int
	TotalTokens  int
	// CachedInputTokens is the part of InputTokens read from the vendor's prompt cache
	// (OpenAI cached_tokens, Anthropic cache_read_input_tokens, Gemini
	// cachedContentTokenCount, DeepSeek prompt_cache_hit_tokens).
	CachedInputTokens int
	// CacheWriteTokens is the part of InputTokens written to the vendor's prompt cache on
	// this request (Anthropic cache_creation_input_tokens, OpenAI cache_write_tokens); 0
	// for vendors that do not report cache writes apart.
	CacheWriteTokens int
	// CacheWrite1hTokens is the part of CacheWriteTokens written to Anthropic's one-hour
	// cache (cache_creation.ephemeral_1h_input_tokens), billed at twice the input rate
	// where the five-minute writes bill at 1.25 times.
	CacheWrite1hTokens int
	// ReasoningTokens is the part of OutputTokens spent on hidden reasoning.
	ReasoningTokens int
	// Estimated is true when the vendor reported no usage, or one the Client does not take
	// (a negative count, or an input, output or total above 2^30 tokens), and the numbers
	// are the Client's own estimate: the prompt's estimate and the output's, from the
	// text received.
	Estimated bool
}

// billable is the usage the limiter reconciles against: input plus output tokens as the
// upstream reported them (saturating), 0 when unknown or only estimated.
func (u *Usage) billable() int {
	if u == nil || u.Estimated {
		return 0
	}
	return satAdd(max(u.InputTokens, 0), max(u.OutputTokens, 0))
}

// satAdd adds two non-negative ints, saturating at the largest int.
func satAdd(a, b int) int {
	if a > maxInt-b {
		return maxInt
	}
	return a + b
}

// Response is the result of a successful call.
type Response struct {
	ID    string
	Model string // the model that answered, as the upstream names it
	Text  string
	// Reasoning is the visible reasoning or thinking text, where the vendor returns it.
	Reasoning       string
	ToolCalls       []ToolCall
	FinishReason    finish.Reason
	RawFinishReason string
	// Refusal is the model's refusal message, where the vendor reports one separately.
	Refusal string
	Usage   Usage
	// RateLimits is the upstream's view of the key's quota, read from response headers.
	RateLimits *ratelimit.Status
	// Status is the HTTP status of the upstream's answer, as its adapter reports it; 0
	// when the adapter does not say (the Client's trace then records 200).
	Status int

	// Upstream names the upstream that served the response.
	Upstream string
	// Attempts is the trace of every attempt the call made, the successful one last.
	Attempts []Attempt
	// Fallback is true when the response came from an upstream other than the first one
	// tried, or from the final fallback function.
	Fallback bool
	// Degraded is true when the final fallback function produced the response.
	Degraded bool
	// Cost is what the call cost, every attempt of it together, failed ones included
	// (see WithPricing and pricing.Cost); for a stream it is set at its end, on the
	// Response that Stream.Response returns then. Unknown without pricing, and for a
	// response of the fallback function beyond the attempts before it.
	Cost pricing.Cost
	// Cached is true when middleware answered from a stored answer instead of an
	// upstream (package cache: an exact or semantic hit, an idempotency replay). Usage is
	// then that of the call that produced the answer, and Attempts is empty.
	Cached bool

	// firstTry holds the trace of a one-shot call that its first attempt served:
	// Attempts then points here, and the trace costs no allocation of its own.
	firstTry [1]Attempt
}

// Attempt records one try of a call against one upstream.
type Attempt struct {
	Upstream string
	Model    string
	// Key labels the API key used ("key#1" for the first of the upstream's keys); never the key.
	Key string
	// Number counts attempts of the call from 1, across upstreams.
	Number int
	// Class is failure.None for the successful attempt.
	Class failure.Class
	// Status is the HTTP status the upstream answered with (200 for a stream that began,
	// even when it broke later); 0 when no response arrived or no call was made.
	Status int
	// Err is the attempt's error, nil on success.
	Err error
	// Local is true for a local refusal: no upstream call was made (an open breaker,
	// every key cooling down or evicted, the limiter could not admit in time, the adapter
	// could not express the request). See Decision.
	Local bool
	// Hedge marks an attempt sent while an earlier attempt of the call was still waiting
	// for an answer (see Hedge). The attempt that lost the race ends failure.Canceled.
	Hedge bool
	// Start is when the upstream call began, after the waits (for a local refusal, when
	// the attempt began).
	Start time.Time
	// Latency is the upstream call's duration; for a committed stream, from the call to
	// the stream's end or close.
	Latency time.Duration
	// TimeToFirstToken is a stream's time from the call to its first content token; 0
	// for one-shot calls and for streams that sent none.
	TimeToFirstToken time.Duration
	// Waited is the time spent waiting before the call: Retry-After or backoff, the
	// caller partition's limiter (first attempt), a cooling key, the key's limiter.
	Waited time.Duration
	// RetryAfter is the wait the upstream asked for, 0 when none.
	RetryAfter time.Duration
	// EstimatedTokens is the limiter's token cost estimate (prompt + reserved output).
	EstimatedTokens int
	// ChargedTokens is what the key's limiter charged its token buckets for the attempt:
	// the prompt part of EstimatedTokens times the charge ratio it has learned from the
	// upstream's headers and usage reports (what the upstream counts against its own
	// estimate), plus the reserved output, saturating at 2^40. It equals EstimatedTokens
	// until the limiter has learned a ratio; 0 when no limiter admitted the attempt.
	ChargedTokens int
	// Usage is the reported usage, when the attempt succeeded.
	Usage Usage
	// Notes are the adapter's notes on how it translated the request for its vendor (a
	// clamped parameter, a remapped id), copied from Call.Notes.
	Notes []string
	// Cost is what the attempt cost (see WithPricing and pricing.Cost): a known $0 for a
	// local refusal or an error response, its usage at its model's price otherwise, an
	// estimate for an attempt that may have billed without saying (a timeout after the
	// request was sent). Unknown without pricing or without a price for the model.
	Cost pricing.Cost
	// Batch is, for Client.Embed, the index of the batch the attempt belongs to (from 0,
	// in input order); Number counts from 1 within each batch. 0 for other calls.
	Batch int
}
