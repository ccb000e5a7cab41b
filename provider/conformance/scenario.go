package conformance

import (
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/finish"
)

// Kind is a vendor-neutral kind of upstream failure. Each Wire renders it as its vendor's
// documented error response, and each kind has the class every adapter must give it.
type Kind string

// The failure kinds. A Wire returns ErrNotApplicable for the kinds its vendor cannot send.
const (
	// KindRateLimited is a rate limit whose wait comes in a Retry-After header
	// (OpenAI 429 rate_limit_exceeded, Anthropic 429 rate_limit_error).
	KindRateLimited Kind = "rate_limited"
	// KindRateLimitedBodyHint is a rate limit whose wait comes only in the body: a
	// "try again in 1.5s" message (OpenAI) or RetryInfo.retryDelay (Gemini).
	KindRateLimitedBodyHint Kind = "rate_limited_body_hint"
	// KindQuota429 is a 429 that means quota or spend exhausted, not a rate: OpenAI
	// insufficient_quota, Anthropic enforced_spend_limit_reached, Gemini's PerDay quota.
	KindQuota429 Kind = "quota_exhausted_429"
	// KindBilling is a billing failure with a status of its own (402: Anthropic
	// billing_error, Gemini prepaid credits, DeepSeek "Insufficient Balance").
	KindBilling Kind = "quota_exhausted_402"
	// KindOverloaded is the vendor's capacity (OpenAI 503 server_is_overloaded,
	// Anthropic 529 overloaded_error, Gemini 503 UNAVAILABLE).
	KindOverloaded Kind = "overloaded"
	// KindServerError is an internal error (500).
	KindServerError Kind = "server_error"
	// KindTimeout is the upstream giving up (Anthropic 504 timeout_error, Gemini 504
	// DEADLINE_EXCEEDED).
	KindTimeout Kind = "timeout"
	// KindBadRequest is a malformed request (400).
	KindBadRequest Kind = "bad_request"
	// KindContextLength is a prompt over the model's context window.
	KindContextLength Kind = "context_length"
	// KindPromptBlocked is a prompt refused by a safety filter before generation (Azure
	// OpenAI 400 content_filter, Gemini promptFeedback.blockReason).
	KindPromptBlocked Kind = "prompt_blocked"
	// KindAuth is a wrong or revoked key.
	KindAuth Kind = "auth"
	// KindPermission is a key without access to the resource (403).
	KindPermission Kind = "permission"
	// KindNotFound is an unknown model or path (404).
	KindNotFound Kind = "not_found"
)

// Kinds returns every failure kind, in the order the scenario table uses.
func Kinds() []Kind {
	return []Kind{KindRateLimited, KindRateLimitedBodyHint, KindQuota429, KindBilling,
		KindOverloaded, KindServerError, KindTimeout, KindBadRequest, KindContextLength,
		KindPromptBlocked, KindAuth, KindPermission, KindNotFound}
}

// Class returns the class every adapter must give a failure of kind k; failure.Unknown for an
// unknown kind.
func (k Kind) Class() failure.Class {
	switch k {
	case KindRateLimited, KindRateLimitedBodyHint:
		return failure.RateLimited
	case KindQuota429, KindBilling:
		return failure.QuotaExhausted
	case KindOverloaded:
		return failure.Overloaded
	case KindServerError:
		return failure.ServerError
	case KindTimeout:
		return failure.Timeout
	case KindBadRequest:
		return failure.BadRequest
	case KindContextLength:
		return failure.ContextLength
	case KindPromptBlocked:
		return failure.ContentFiltered
	case KindAuth:
		return failure.Auth
	case KindPermission:
		return failure.Permission
	case KindNotFound:
		return failure.NotFound
	}
	return failure.Unknown
}

// Failure is an upstream failure, vendor-neutral.
type Failure struct {
	Kind Kind
	// RetryAfter is the wait the upstream asks for; 0 for none. The Wire puts it where its
	// vendor does: a header for KindRateLimited, the body for KindRateLimitedBodyHint.
	RetryAfter time.Duration
}

// End says how a streamed reply ends.
type End uint8

// The ways a stream ends.
const (
	// EndMarker ends the stream cleanly, with the vendor's end marker ([DONE],
	// message_stop, a finish reason).
	EndMarker End = iota
	// EndError sends the error event EndFail after EndAfter text pieces, after HTTP 200,
	// and ends the body.
	EndError
	// EndCut ends the body after EndAfter text pieces without the end marker: a dropped
	// connection.
	EndCut
)

// Reply is one upstream answer, vendor-neutral. A Wire renders it in its vendor's format:
// a one-shot body, or an event stream when the request asked for one. The response id is
// the Wire's choice and the model is the request's.
type Reply struct {
	// Fail, when set, makes the upstream answer with this error response instead of a
	// generation; the other fields are then ignored.
	Fail *Failure
	// Text is the generated text in pieces: a stream sends one content delta per piece,
	// a one-shot body their concatenation.
	Text []string
	// ToolCalls are the calls the model makes, after the text. A stream may fragment
	// their arguments as its vendor does.
	ToolCalls []llmclient.ToolCall
	// Finish is why generation stopped: finish.Stop, finish.Length, finish.ToolCalls, or
	// finish.ContentFilter, which each Wire renders as its vendor's filter or refusal
	// (OpenAI content_filter, Anthropic refusal, Gemini SAFETY).
	Finish finish.Reason
	// Usage is the token usage reported (InputTokens and OutputTokens; TotalTokens is
	// their sum).
	Usage llmclient.Usage
	// End, EndAfter and EndFail apply to streams only; see End.
	End      End
	EndAfter int
	EndFail  *Failure
	// Signature is an opaque token a vendor that signs tool calls (Target.SignsToolCalls)
	// attaches to the first of ToolCalls; other Wires ignore it.
	Signature string
}

// Want is the expected outcome of a call, as seen through the adapter directly. Run derives
// what a Client must return from it: a filtered answer becomes a failure.ContentFiltered
// error, an error after the first token a failure.StreamInterrupted one.
type Want struct {
	// Class is the failure class; failure.None for success. failure.ContentFiltered is met by a
	// filtered answer (finish.ContentFilter or finish.Refusal, with no content) or an error.
	Class failure.Class
	// Text, ToolCalls, Finish and Usage describe a successful response (for a stream, the
	// response its chunks add up to). Tool-call IDs are not compared (vendors without ids
	// get made-up ones); arguments are compared as JSON.
	Text      string
	ToolCalls []llmclient.ToolCall
	Finish    finish.Reason
	Usage     *llmclient.Usage
	// Chunks are the texts of a stream's content chunks, in order: all of them on success,
	// those before the error on failure.
	Chunks []string
	// RetryAfter is the wait the error must carry.
	RetryAfter time.Duration
	// AfterFirstToken says a stream's error comes after content (Chunks), not before it.
	AfterFirstToken bool
	// Cut says the error is a body that ended without the end marker: it must wrap
	// io.ErrUnexpectedEOF.
	Cut bool
}

// FollowUp continues a conversation whose first call returned tool calls: the request is
// resent with the assistant's tool calls and one result per call appended.
type FollowUp struct {
	// ToolResult is the content of each tool result.
	ToolResult string
	Reply      Reply
	Want       Want
}

// Scenario is one row of the conformance table.
type Scenario struct {
	// Name is the subtest name: "complete/..." or "stream/...".
	Name string
	// Stream selects Provider.Stream (Client.Stream) over Complete.
	Stream bool
	// Request is what the caller sends.
	Request llmclient.Request
	// Reply is what the upstream answers.
	Reply Reply
	// Want is the expected outcome.
	Want Want
	// Then continues a tool-call round trip; nil for single calls.
	Then *FollowUp
	// Loopback also runs the scenario over a real HTTP server on 127.0.0.1 (Wire targets).
	Loopback bool
}

// Model is the model name every scenario requests.
const Model = "cf-model"

// Scenarios returns the conformance table, a fresh copy on each call:
//
//	complete/text, complete/max_tokens, complete/tool_call_round_trip,
//	complete/content_filtered, complete/prompt_cache_read, complete/prompt_cache_write,
//	complete/error/<kind> for every Kind; stream/prompt_cache_read, stream/text_with_usage, stream/tool_call_round_trip, stream/content_filtered,
//	stream/error_event_before_first_token, stream/error_event_after_first_token,
//	stream/cut_before_first_token, stream/cut_after_first_token, stream/error/<kind>.
func Scenarios() []Scenario {
	usage := llmclient.Usage{InputTokens: 12, OutputTokens: 5, TotalTokens: 17}
	hello := func() llmclient.Request {
		return llmclient.Request{Model: Model, Messages: []llmclient.Message{llmclient.UserMessage("Say hello.")}}
	}
	weather := func() llmclient.Request {
		return llmclient.Request{
			Model:    Model,
			Messages: []llmclient.Message{llmclient.UserMessage("What is the weather in Paris?")},
			Tools: []llmclient.Tool{{
				Name:        "get_weather",
				Description: "Current weather for a city.",
				Parameters:  []byte(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`),
			}},
		}
	}
	call := []llmclient.ToolCall{{ID: "call_cf1", Name: "get_weather", Arguments: `{"city":"Paris"}`}}
	// cached is a request with prompt-cache breakpoints on its tool and system prompt.
	cached := func() llmclient.Request {
		r := weather()
		bp := &llmclient.CacheControl{TTL: time.Hour}
		r.Tools[0].Cache = bp
		r.Messages = append([]llmclient.Message{{Role: llmclient.RoleSystem,
			Content: []llmclient.Part{{Type: llmclient.PartText, Text: "You are a weather bot.", Cache: bp}}}}, r.Messages...)
		return r
	}
	cacheRead := llmclient.Usage{InputTokens: 2100, OutputTokens: 5, TotalTokens: 2105, CachedInputTokens: 2048}
	cacheWrite := llmclient.Usage{InputTokens: 2100, OutputTokens: 5, TotalTokens: 2105, CacheWriteTokens: 2048}
	u := func() *llmclient.Usage { c := usage; return &c }
	roundTrip := func() *FollowUp {
		return &FollowUp{
			ToolResult: `{"temp_c":21}`,
			Reply:      Reply{Text: []string{"It is 21°C", " in Paris."}, Finish: finish.Stop, Usage: usage},
			Want: Want{Text: "It is 21°C in Paris.", Chunks: []string{"It is 21°C", " in Paris."},
				Finish: finish.Stop, Usage: u()},
		}
	}

	out := []Scenario{
		{
			Name: "complete/text", Request: hello(), Loopback: true,
			Reply: Reply{Text: []string{"Hello", ", world."}, Finish: finish.Stop, Usage: usage},
			Want:  Want{Text: "Hello, world.", Finish: finish.Stop, Usage: u()},
		},
		{
			Name: "complete/max_tokens", Request: hello(),
			Reply: Reply{Text: []string{"Hello, wor"}, Finish: finish.Length, Usage: usage},
			Want:  Want{Text: "Hello, wor", Finish: finish.Length, Usage: u()},
		},
		{
			Name: "complete/tool_call_round_trip", Request: weather(),
			Reply: Reply{ToolCalls: call, Finish: finish.ToolCalls, Usage: usage},
			Want:  Want{ToolCalls: call, Finish: finish.ToolCalls, Usage: u()},
			Then:  roundTrip(),
		},
		{
			Name: "complete/content_filtered", Request: hello(),
			Reply: Reply{Finish: finish.ContentFilter, Usage: usage},
			Want:  Want{Class: failure.ContentFiltered},
		},
		{
			Name: "complete/prompt_cache_read", Request: cached(),
			Reply: Reply{Text: []string{"Hello again."}, Finish: finish.Stop, Usage: cacheRead},
			Want:  Want{Text: "Hello again.", Finish: finish.Stop, Usage: &cacheRead},
		},
		{
			Name: "complete/prompt_cache_write", Request: cached(),
			Reply: Reply{Text: []string{"Hello."}, Finish: finish.Stop, Usage: cacheWrite},
			Want:  Want{Text: "Hello.", Finish: finish.Stop, Usage: &cacheWrite},
		},
		{
			Name: "stream/prompt_cache_read", Stream: true, Request: cached(),
			Reply: Reply{Text: []string{"Hello", " again."}, Finish: finish.Stop, Usage: cacheRead},
			Want:  Want{Text: "Hello again.", Chunks: []string{"Hello", " again."}, Finish: finish.Stop, Usage: &cacheRead},
		},
		{
			Name: "stream/text_with_usage", Stream: true, Request: hello(), Loopback: true,
			Reply: Reply{Text: []string{"Hel", "lo", ", world."}, Finish: finish.Stop, Usage: usage},
			Want: Want{Text: "Hello, world.", Chunks: []string{"Hel", "lo", ", world."},
				Finish: finish.Stop, Usage: u()},
		},
		{
			Name: "stream/tool_call_round_trip", Stream: true, Request: weather(),
			Reply: Reply{ToolCalls: call, Finish: finish.ToolCalls, Usage: usage},
			Want:  Want{ToolCalls: call, Finish: finish.ToolCalls, Usage: u()},
			Then:  roundTrip(),
		},
		{
			Name: "stream/content_filtered", Stream: true, Request: hello(),
			Reply: Reply{Finish: finish.ContentFilter, Usage: usage},
			Want:  Want{Class: failure.ContentFiltered},
		},
		{
			Name: "stream/error_event_before_first_token", Stream: true, Request: hello(), Loopback: true,
			Reply: Reply{Text: []string{"Hello"}, Finish: finish.Stop, Usage: usage,
				End: EndError, EndAfter: 0, EndFail: &Failure{Kind: KindOverloaded}},
			Want: Want{Class: failure.Overloaded},
		},
		{
			Name: "stream/error_event_after_first_token", Stream: true, Request: hello(), Loopback: true,
			Reply: Reply{Text: []string{"Hel", "lo", ", world."}, Finish: finish.Stop, Usage: usage,
				End: EndError, EndAfter: 2, EndFail: &Failure{Kind: KindServerError}},
			Want: Want{Class: failure.ServerError, AfterFirstToken: true, Chunks: []string{"Hel", "lo"}},
		},
		{
			Name: "stream/cut_before_first_token", Stream: true, Request: hello(),
			Reply: Reply{Text: []string{"Hello"}, Finish: finish.Stop, Usage: usage, End: EndCut, EndAfter: 0},
			Want:  Want{Class: failure.Network, Cut: true},
		},
		{
			Name: "stream/cut_after_first_token", Stream: true, Request: hello(),
			Reply: Reply{Text: []string{"Hel", "lo", ", world."}, Finish: finish.Stop, Usage: usage,
				End: EndCut, EndAfter: 2},
			Want: Want{Class: failure.Network, Cut: true, AfterFirstToken: true, Chunks: []string{"Hel", "lo"}},
		},
	}
	for _, stream := range []bool{false, true} {
		prefix := "complete/error/"
		if stream {
			prefix = "stream/error/"
		}
		for _, k := range Kinds() {
			f := Failure{Kind: k}
			switch k {
			case KindRateLimited:
				f.RetryAfter = 2 * time.Second
			case KindRateLimitedBodyHint:
				f.RetryAfter = 1500 * time.Millisecond
			}
			out = append(out, Scenario{
				Name: prefix + string(k), Stream: stream, Request: hello(),
				Loopback: k == KindRateLimited,
				Reply:    Reply{Fail: &f},
				Want:     Want{Class: k.Class(), RetryAfter: f.RetryAfter},
			})
		}
	}
	return out
}

// recovery is the reply a retried call gets after a retryable failure.
func recovery() (Reply, Want) {
	usage := llmclient.Usage{InputTokens: 12, OutputTokens: 2, TotalTokens: 14}
	u := usage
	return Reply{Text: []string{"Recovered."}, Finish: finish.Stop, Usage: usage},
		Want{Text: "Recovered.", Chunks: []string{"Recovered."}, Finish: finish.Stop, Usage: &u}
}
