package openai

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/finish"
	"github.com/llmclient/llmclient/internal/adapter"
	"github.com/llmclient/llmclient/internal/httpx"
)

// ccResponse is a Chat Completions response body, with the variations compatible vendors
// add: reasoning_content (DeepSeek, Qwen, vLLM) or reasoning (OpenRouter, Groq, newer
// vLLM), content as an array of parts, arguments as an object, DeepSeek cache counters.
type ccResponse struct {
	ID      string          `json:"id"`
	Model   string          `json:"model"`
	Choices []ccChoice      `json:"choices"`
	Usage   json.RawMessage `json:"usage"` // read by usageObject, as the transport reads it
	Error   json.RawMessage `json:"error"`
}

type ccChoice struct {
	Message      ccMessage `json:"message"`
	FinishReason string    `json:"finish_reason"`
}

type ccMessage struct {
	Content          json.RawMessage `json:"content"`
	Refusal          string          `json:"refusal"`
	ReasoningContent json.RawMessage `json:"reasoning_content"`
	Reasoning        json.RawMessage `json:"reasoning"`
	ToolCalls        []ccToolCall    `json:"tool_calls"`
	FunctionCall     *ccFunction     `json:"function_call"` // legacy, still sent by old Azure versions
}

type ccToolCall struct {
	ID       string     `json:"id"`
	Function ccFunction `json:"function"`
}

type ccFunction struct {
	Name string `json:"name"`
	// Arguments is a JSON string per the spec; some servers send the object itself.
	Arguments json.RawMessage `json:"arguments"`
}

// ccUsage is the counts of a usage object, as usageObject reads them.
type ccUsage struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	TotalTokens         int `json:"total_tokens"`
	PromptTokensDetails *struct {
		CachedTokens     int `json:"cached_tokens"`
		CacheWriteTokens int `json:"cache_write_tokens"`
	} `json:"prompt_tokens_details"`
	CompletionTokensDetails *struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
	// PromptCacheHitTokens is DeepSeek's count of prompt tokens served from its cache.
	PromptCacheHitTokens int `json:"prompt_cache_hit_tokens"`
}

// usage converts the wire usage. prompt_tokens includes the cache reads (cached_tokens)
// and writes (cache_write_tokens), as llmclient.Usage's InputTokens does: they are its
// parts, not added to it. TotalTokens is computed when the vendor left it out.
func (u *ccUsage) usage() llmclient.Usage {
	out := llmclient.Usage{
		InputTokens:       u.PromptTokens,
		OutputTokens:      u.CompletionTokens,
		TotalTokens:       u.TotalTokens,
		CachedInputTokens: u.PromptCacheHitTokens,
	}
	if d := u.PromptTokensDetails; d != nil {
		if d.CachedTokens > 0 {
			out.CachedInputTokens = d.CachedTokens
		}
		out.CacheWriteTokens = d.CacheWriteTokens
	}
	if d := u.CompletionTokensDetails; d != nil {
		out.ReasoningTokens = d.ReasoningTokens
	}
	if out.TotalTokens == 0 {
		out.TotalTokens = adapter.AddTokens(out.InputTokens, out.OutputTokens)
	}
	return out
}

// normalizeFinishReason maps a vendor finish_reason to the common FinishReason:
//
//	stop, eos, end_turn, stop_sequence  -> finish.Stop
//	length, max_tokens, model_length    -> finish.Length
//	tool_calls, function_call           -> finish.ToolCalls
//	content_filter                      -> finish.ContentFilter
//	""                                  -> finish.None
//	anything else                       -> finish.Other
//
// DeepSeek's insufficient_system_resource (generation cut short by the vendor's capacity)
// is finish.Other, not finish.Length: the output is truncated, but not because of the
// caller's budget, so a larger MaxTokens would not help. RawFinishReason keeps the word so
// callers can treat it as an overload.
func normalizeFinishReason(raw string) finish.Reason {
	switch raw {
	case "":
		return finish.None
	case "stop", "eos", "end_turn", "stop_sequence":
		return finish.Stop
	case "length", "max_tokens", "model_length":
		return finish.Length
	case "tool_calls", "function_call":
		return finish.ToolCalls
	case "content_filter":
		return finish.ContentFilter
	}
	return finish.Other
}

// parseResponse decodes a 2xx Chat Completions body.
//
// A 2xx body that is not a valid completion — not JSON, no choices, or an in-band
// {"error":…} object — is returned as an *llmclient.Error that keeps the status. Garbage
// or missing choices under a success status almost always come from a broken proxy or a
// truncated response, a transient fault, so they are failure.ServerError (retried with
// backoff, counted by the breaker). An in-band error object is classified like an error
// response (see errorFromBody).
func parseResponse(status int, h http.Header, body []byte, now time.Time) (*llmclient.Response, *llmclient.Error) {
	var r ccResponse
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, malformed(status, h, body, now, "malformed JSON: "+err.Error())
	}
	if len(r.Error) > 0 && !bytes.Equal(r.Error, []byte("null")) && len(r.Choices) == 0 {
		return nil, errorFromBodyAt(status, h, body, now)
	}
	if len(r.Choices) == 0 {
		return nil, malformed(status, h, body, now, "response has no choices")
	}
	c := &r.Choices[0]
	out := &llmclient.Response{
		ID:              r.ID,
		Model:           r.Model,
		Text:            contentText(c.Message.Content),
		Refusal:         c.Message.Refusal,
		Reasoning:       jsonString(c.Message.ReasoningContent),
		RawFinishReason: c.FinishReason,
		FinishReason:    normalizeFinishReason(c.FinishReason),
		RateLimits:      ParseRateLimits(h, now),
	}
	if out.Reasoning == "" {
		out.Reasoning = jsonString(c.Message.Reasoning)
	}
	if out.Refusal != "" && (out.FinishReason == finish.Stop || out.FinishReason == finish.None) {
		// OpenAI reports a refusal with finish_reason "stop"; say what happened.
		out.FinishReason = finish.Refusal
	}
	if n := len(c.Message.ToolCalls); n > 0 {
		out.ToolCalls = make([]llmclient.ToolCall, n)
		for i, tc := range c.Message.ToolCalls {
			out.ToolCalls[i] = llmclient.ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: arguments(tc.Function.Arguments)}
		}
	} else if fc := c.Message.FunctionCall; fc != nil && fc.Name != "" {
		out.ToolCalls = []llmclient.ToolCall{{Name: fc.Name, Arguments: arguments(fc.Arguments)}}
	}
	if u, ok := usageObject(r.Usage); ok {
		out.Usage = u
	}
	return out, nil
}

// malformed reports a 2xx body that is not a usable completion.
func malformed(status int, h http.Header, body []byte, now time.Time, why string) *llmclient.Error {
	msg := "openai: " + why
	if s := httpx.Snippet(body, snippetLen); s != "" {
		msg += "; body: " + s
	}
	return &llmclient.Error{
		Class:      failure.ServerError,
		Status:     status,
		Message:    msg,
		RequestID:  requestID(h),
		RateLimits: ParseRateLimits(h, now),
	}
}

// contentText reads message content: a string, null, or an array of parts whose text parts
// are concatenated (Mistral and some gateways answer with parts).
func contentText(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return ""
	}
	switch raw[0] {
	case '"':
		return jsonString(raw)
	case '[':
		var parts []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		if json.Unmarshal(raw, &parts) != nil {
			return ""
		}
		var b strings.Builder
		for _, p := range parts {
			if p.Type == "text" || p.Type == "output_text" {
				b.WriteString(p.Text)
			}
		}
		return b.String()
	}
	return ""
}

// jsonString returns raw as a string when it is a JSON string, else "".
func jsonString(raw json.RawMessage) string {
	var s string
	if len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}

// arguments returns tool-call arguments as the JSON text the model wrote: the content of
// a JSON string, or an object's raw text when a server sends the object itself.
func arguments(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return ""
	}
	if raw[0] == '"' {
		return jsonString(raw)
	}
	return string(raw)
}
