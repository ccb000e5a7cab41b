// Package ratelimit holds the vocabulary of the Client's rate limiter that callers
// name rarely: what a request does when it cannot be admitted at once ([Mode]:
// [Wait] or [FailFast], set with llmclient.WithLimiterMode), how an upstream counts
// tokens against its quota ([Metering], a field of llmclient.Limits), and the rate
// limits a vendor reports in its response headers ([Status] and its [Window]s, in
// llmclient.Response.RateLimits and llmclient.Error.RateLimits), the order of admission
// when a key is short of capacity ([Priority]: [Interactive] or [Batch], in
// llmclient.Request.Priority), and what a vendor counts against its quotas ([Rule],
// which a provider declares by implementing [Ruler]).
package ratelimit

import "time"

// Metering is how an upstream counts a request against its tokens-per-minute quota.
type Metering uint8

const (
	// MeterAdmission: the upstream charges its estimate of the prompt plus max tokens when
	// it admits the request and gives nothing back (OpenAI and Azure OpenAI document this).
	// Reconciliation then only charges more when the reported usage exceeds the estimate;
	// it refunds nothing, because the upstream does not either.
	MeterAdmission Metering = iota
	// MeterUsage: the upstream counts the tokens actually used (Anthropic adjusts output
	// tokens to the real count at the end of a request). Reconciliation refunds an
	// over-reservation and charges an overrun.
	MeterUsage
)

// Mode says what a request does when the limiter cannot admit it at once.
type Mode uint8

const (
	// Wait waits for capacity, as long as the wait fits before the context's
	// deadline and within llmclient.WithMaxWait; without a deadline or llmclient.WithMaxWait it waits as long
	// as it takes. A wait that does not fit is not started: the attempt is refused at once
	// with llmclient.ErrRateLimited (a local refusal, see Decision), and the call moves on to the
	// next upstream or, when none is left, returns.
	//
	// With a deadline, the wait must also leave the upstream's expected service time: the
	// time its calls have recently taken (for streams, to their first token), learned per
	// upstream. A request that would be charged and then die at its deadline is refused
	// instead, before it is charged. And large prompts are not refused more often than
	// small ones: a request is refused when the queue ahead of it would not let the
	// largest usual request (about the 99th percentile of recent charges) through in time,
	// whatever its own size, so a stream of small requests cannot keep the large ones out.
	// Without a deadline none of this applies.
	Wait Mode = iota
	// FailFast never waits, with or without a deadline: a request that cannot be
	// admitted at once is refused with llmclient.ErrRateLimited, so the call moves on to another
	// upstream or returns at once. Keys cooling down after a rate limit are not waited
	// for either.
	FailFast
)

// Rule is how a vendor meters its token quotas: what it charges when it admits a
// request and what of the reported usage counts. The zero Rule is OpenAI's
// (prompt and max_tokens charged at admission, against one tokens-per-minute quota; a
// prompt read from the cache counts in full), the rule of a Provider that does not say
// otherwise (see Ruler).
type Rule struct {
	// OutputOnUsage: output tokens count as they are generated, and max_tokens does not
	// factor into the output quota (Anthropic's OTPM). A request's output quantity
	// (Limits.OTPM) holds its expected output (its reserved output, MaxTokens or
	// llmclient.WithReservedOutput's default, times the share of it the key's calls
	// generate, plus a reserve for that share's spread) while it is in flight, and is
	// reconciled with what it generated when the usage is reported; the bucket gets no
	// refill while its level plus the output in flight fills the vendor's bucket, as the
	// vendor's own does. False: the reservation is charged at admission and kept; only an
	// overrun is charged after.
	OutputOnUsage bool
	// CacheReadsFree: input read from the vendor's prompt cache does not count toward its
	// token quotas (Anthropic's ITPM for most models). The usage's CachedInputTokens are
	// then not reconciled as charged; a prompt whose prefix the Client sent within the
	// cache's lifetime is charged its estimate less what that call read from or wrote to
	// the cache, and the learned ratio of what the upstream counts to the prompt's
	// estimate, which scales the charge of the other prompts, leaves the cache reads out.
	CacheReadsFree bool
	// InputOnly: the tokens-per-minute quota (Limits.TPM) counts input tokens only
	// (Gemini's TPM): no output is reserved against it and the output reported is not
	// reconciled with it.
	InputOnly bool
}

// Ruler is an optional capability of a Provider: how its vendor meters token quotas
// (see Rule). provider/anthropic and provider/gemini implement it; a Provider that
// does not has the zero Rule. It must be safe for concurrent use.
type Ruler interface {
	QuotaRule() Rule
}

// Priority orders admission when a limiter is short of capacity.
type Priority uint8

// The request priorities. The zero value is Interactive; an unknown value is
// treated as Interactive.
const (
	Interactive Priority = iota
	Batch
)

// Window is one quota dimension reported by an upstream.
type Window struct {
	// Known is false when the upstream sent nothing for this dimension.
	Known     bool
	Limit     int64
	Remaining int64
	// Reset is how long until the window is replenished, relative to when the response was read.
	Reset time.Duration
}

// Status is the quota state an upstream reported in its response headers
// (x-ratelimit-* for OpenAI, anthropic-ratelimit-* for Anthropic).
type Status struct {
	Requests     Window
	Tokens       Window
	InputTokens  Window
	OutputTokens Window
}
