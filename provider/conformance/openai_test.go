package conformance_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/llmclient/llmclient"
	finishpkg "github.com/llmclient/llmclient/finish"
	"github.com/llmclient/llmclient/provider/conformance"
	"github.com/llmclient/llmclient/provider/openai"
)

// openaiWire is the Chat Completions wire format: developers.openai.com/docs/guides/error-codes,
// the Chat Completions and streaming references, and the error shapes of OpenAI-compatible
// vendors where OpenAI itself has none (Azure's content filter, DeepSeek's 402).
type openaiWire struct{}

func (openaiWire) NewProvider(baseURL string, client *http.Client, apiKey string) (llmclient.Provider, error) {
	return openai.New(openai.WithBaseURL(baseURL+"/v1"), openai.WithHTTPClient(client), openai.WithAPIKey(apiKey))
}

func (openaiWire) Decode(r *http.Request, body []byte) (*conformance.Seen, error) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
		return nil, fmt.Errorf("%s %s, want POST /v1/chat/completions", r.Method, r.URL.Path)
	}
	key, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return nil, errors.New("no Authorization: Bearer header")
	}
	var b struct {
		Model    string `json:"model"`
		Stream   bool   `json:"stream"`
		Messages []struct {
			Role       string          `json:"role"`
			Content    json.RawMessage `json:"content"`
			ToolCallID string          `json:"tool_call_id"`
			ToolCalls  []struct {
				ID       string `json:"id"`
				Type     string `json:"type"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"messages"`
		Tools []struct {
			Type     string `json:"type"`
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(body, &b); err != nil {
		return nil, fmt.Errorf("body: %w", err)
	}
	s := &conformance.Seen{Stream: b.Stream, Model: b.Model, APIKey: key}
	for _, t := range b.Tools {
		s.Tools = append(s.Tools, t.Function.Name)
	}
	var system []string
	for _, m := range b.Messages {
		text, images := openaiContent(m.Content)
		s.Images += images
		if images > 0 && m.Role != "user" {
			return nil, fmt.Errorf("an image in a %s message: only user messages take images", m.Role)
		}
		if m.Role == "system" || m.Role == "developer" {
			system = append(system, text)
		}
		for _, tc := range m.ToolCalls {
			if len(tc.ID) > 40 {
				return nil, fmt.Errorf("tool call id %q is longer than 40 characters", tc.ID)
			}
		}
		for _, tc := range m.ToolCalls {
			s.ToolCalls = append(s.ToolCalls, llmclient.ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
		}
		if m.Role == "tool" {
			var text string
			if err := json.Unmarshal(m.Content, &text); err != nil {
				return nil, fmt.Errorf("tool message content is not a string: %s", m.Content)
			}
			s.ToolResults = append(s.ToolResults, conformance.ToolResult{Ref: m.ToolCallID, Content: text})
		}
	}
	s.System = strings.Join(system, "\n")
	return s, nil
}

// openaiContent reads message content, a string or parts: its text and image count.
func openaiContent(raw json.RawMessage) (string, int) {
	var text string
	if json.Unmarshal(raw, &text) == nil {
		return text, 0
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	_ = json.Unmarshal(raw, &parts)
	var b strings.Builder
	images := 0
	for _, p := range parts {
		switch p.Type {
		case "text", "input_text", "output_text":
			b.WriteString(p.Text)
		case "image_url", "input_image":
			images++
		}
	}
	return b.String(), images
}

// DecodeEmbed reads POST /v1/embeddings: {"model","input":[…],"dimensions"}.
func (openaiWire) DecodeEmbed(r *http.Request, body []byte) (*conformance.EmbedSeen, error) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/embeddings" {
		return nil, fmt.Errorf("%s %s, want POST /v1/embeddings", r.Method, r.URL.Path)
	}
	key, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return nil, errors.New("no Authorization: Bearer header")
	}
	var b struct {
		Model      string   `json:"model"`
		Input      []string `json:"input"`
		Dimensions int      `json:"dimensions"`
	}
	if err := json.Unmarshal(body, &b); err != nil {
		return nil, fmt.Errorf("body: %w", err)
	}
	return &conformance.EmbedSeen{Model: b.Model, APIKey: key, Inputs: b.Input, Dimensions: b.Dimensions}, nil
}

// RenderEmbed answers with a CreateEmbeddingResponse, its data in reverse order (index
// tells the order) as nothing in the API forbids.
func (openaiWire) RenderEmbed(r *conformance.EmbedReply, req *conformance.EmbedSeen) (*conformance.WireResponse, error) {
	data := make([]any, 0, len(r.Vectors))
	for i := len(r.Vectors) - 1; i >= 0; i-- {
		data = append(data, map[string]any{"object": "embedding", "index": i, "embedding": r.Vectors[i]})
	}
	wr := conformance.JSON(http.StatusOK, map[string]any{"object": "list", "data": data, "model": req.Model,
		"usage": map[string]any{"prompt_tokens": r.InputTokens, "total_tokens": r.InputTokens}})
	openaiHeaders(wr.Header)
	return wr, nil
}

func (w openaiWire) Render(r *conformance.Reply, req *conformance.Seen) (*conformance.WireResponse, error) {
	if r.Fail != nil {
		return w.fail(r.Fail, req)
	}
	if r.Usage.CacheWriteTokens > 0 {
		return nil, conformance.NotApplicable("OpenAI reports no prompt-cache writes")
	}
	if req.Stream {
		return w.stream(r, req)
	}
	msg := map[string]any{"role": "assistant", "content": nil, "refusal": nil}
	if text := strings.Join(r.Text, ""); text != "" {
		msg["content"] = text
	}
	if len(r.ToolCalls) > 0 {
		var calls []any
		for _, tc := range r.ToolCalls {
			calls = append(calls, map[string]any{"id": tc.ID, "type": "function",
				"function": map[string]any{"name": tc.Name, "arguments": tc.Arguments}})
		}
		msg["tool_calls"] = calls
	}
	wr := conformance.JSON(http.StatusOK, map[string]any{
		"id": "chatcmpl-cf1", "object": "chat.completion", "created": 1735689600, "model": req.Model,
		"system_fingerprint": "fp_cf",
		"choices": []any{map[string]any{"index": 0, "message": msg, "logprobs": nil,
			"finish_reason": openaiFinish(r.Finish)}},
		"usage": openaiUsage(r.Usage),
	})
	openaiHeaders(wr.Header)
	return wr, nil
}

func openaiFinish(f finishpkg.Reason) string {
	switch f {
	case finishpkg.Length:
		return "length"
	case finishpkg.ToolCalls:
		return "tool_calls"
	case finishpkg.ContentFilter:
		return "content_filter"
	}
	return "stop"
}

func openaiUsage(u llmclient.Usage) map[string]any {
	return map[string]any{"prompt_tokens": u.InputTokens, "completion_tokens": u.OutputTokens,
		"total_tokens":              u.InputTokens + u.OutputTokens,
		"prompt_tokens_details":     map[string]any{"cached_tokens": u.CachedInputTokens, "audio_tokens": 0},
		"completion_tokens_details": map[string]any{"reasoning_tokens": 0, "audio_tokens": 0}}
}

// openaiHeaders adds the headers every OpenAI response carries.
func openaiHeaders(h http.Header) {
	h.Set("X-Request-Id", "req_cf0123")
	h.Set("Openai-Processing-Ms", "123")
	h.Set("X-Ratelimit-Limit-Requests", "500")
	h.Set("X-Ratelimit-Remaining-Requests", "499")
	h.Set("X-Ratelimit-Reset-Requests", "120ms")
	h.Set("X-Ratelimit-Limit-Tokens", "200000")
	h.Set("X-Ratelimit-Remaining-Tokens", "199000")
	h.Set("X-Ratelimit-Reset-Tokens", "300ms")
}

// stream renders a reply as chat.completion.chunk events ending with [DONE], the usage
// chunk (choices: []) before it, as stream_options.include_usage asks.
func (w openaiWire) stream(r *conformance.Reply, req *conformance.Seen) (*conformance.WireResponse, error) {
	chunk := func(delta map[string]any, finish any) map[string]any {
		return map[string]any{"id": "chatcmpl-cf1", "object": "chat.completion.chunk", "created": 1735689600,
			"model": req.Model, "system_fingerprint": "fp_cf",
			"choices": []any{map[string]any{"index": 0, "delta": delta, "logprobs": nil, "finish_reason": finish}}}
	}
	events := []conformance.Event{{Data: chunk(map[string]any{"role": "assistant", "content": "", "refusal": nil}, nil)}}
	for i, t := range r.Text {
		if r.End != conformance.EndMarker && i == r.EndAfter {
			return w.streamEnd(r, events)
		}
		events = append(events, conformance.Event{Data: chunk(map[string]any{"content": t}, nil)})
	}
	if r.End != conformance.EndMarker {
		return w.streamEnd(r, events)
	}
	for i, tc := range r.ToolCalls {
		events = append(events, conformance.Event{Data: chunk(map[string]any{"tool_calls": []any{map[string]any{
			"index": i, "id": tc.ID, "type": "function", "function": map[string]any{"name": tc.Name, "arguments": ""}}}}, nil)})
		for _, frag := range fragments(tc.Arguments, 3) {
			events = append(events, conformance.Event{Data: chunk(map[string]any{"tool_calls": []any{map[string]any{
				"index": i, "function": map[string]any{"arguments": frag}}}}, nil)})
		}
	}
	events = append(events, conformance.Event{Data: chunk(map[string]any{}, openaiFinish(r.Finish))})
	events = append(events, conformance.Event{Data: map[string]any{"id": "chatcmpl-cf1", "object": "chat.completion.chunk",
		"created": 1735689600, "model": req.Model, "choices": []any{}, "usage": openaiUsage(r.Usage)}})
	events = append(events, conformance.Event{Data: "[DONE]"})
	wr := conformance.SSE(events...)
	openaiHeaders(wr.Header)
	return wr, nil
}

// streamEnd ends a stream early: a data line with an error object (no [DONE] follows), or
// nothing at all for a cut.
func (w openaiWire) streamEnd(r *conformance.Reply, events []conformance.Event) (*conformance.WireResponse, error) {
	if r.End == conformance.EndError {
		body, err := w.errorBody(r.EndFail, nil)
		if err != nil {
			return nil, err
		}
		events = append(events, conformance.Event{Data: body.v})
	}
	wr := conformance.SSE(events...)
	openaiHeaders(wr.Header)
	return wr, nil
}

type openaiError struct {
	status int
	v      any
	header http.Header
}

func (w openaiWire) fail(f *conformance.Failure, req *conformance.Seen) (*conformance.WireResponse, error) {
	e, err := w.errorBody(f, req)
	if err != nil {
		return nil, err
	}
	wr := conformance.JSON(e.status, e.v)
	openaiHeaders(wr.Header)
	for k, v := range e.header {
		wr.Header[k] = v
	}
	return wr, nil
}

// errorBody returns {"error":{"message","type","param","code"}} for f, with its status
// and extra headers. req is nil for an in-band error.
func (openaiWire) errorBody(f *conformance.Failure, req *conformance.Seen) (*openaiError, error) {
	key := ""
	if req != nil {
		key = req.APIKey
	}
	obj := func(status int, msg string, typ, param, code any) *openaiError {
		return &openaiError{status: status, header: http.Header{},
			v: map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": param, "code": code}}}
	}
	switch f.Kind {
	case conformance.KindRateLimited, conformance.KindRateLimitedBodyHint:
		e := obj(429, "Rate limit reached for "+conformance.Model+" in organization org-cf on requests per min (RPM): Limit 3, Used 3, Requested 1. Please try again in "+
			f.RetryAfter.String()+". Visit https://platform.openai.com/account/rate-limits to learn more.",
			"requests", "requests", "rate_limit_exceeded")
		e.header.Set("X-Ratelimit-Remaining-Requests", "0")
		e.header.Set("X-Ratelimit-Reset-Requests", f.RetryAfter.String())
		if f.Kind == conformance.KindRateLimited {
			if f.RetryAfter%time.Second == 0 {
				e.header.Set("Retry-After", strconv.Itoa(int(f.RetryAfter/time.Second)))
			} else {
				e.header.Set("Retry-After-Ms", strconv.FormatInt(f.RetryAfter.Milliseconds(), 10))
			}
		}
		return e, nil
	case conformance.KindQuota429:
		return obj(429, "You exceeded your current quota, please check your plan and billing details. For more information on this error, read the docs: https://platform.openai.com/docs/guides/error-codes/api-errors.",
			"insufficient_quota", nil, "insufficient_quota"), nil
	case conformance.KindBilling:
		// DeepSeek, OpenAI-compatible: 402 Insufficient Balance.
		return obj(402, "Insufficient Balance", "unknown_error", nil, "invalid_request_error"), nil
	case conformance.KindOverloaded:
		return obj(503, "The server is overloaded or not ready yet.", "service_unavailable_error", nil, "server_is_overloaded"), nil
	case conformance.KindServerError:
		return obj(500, "The server had an error while processing your request. Sorry about that!", "server_error", nil, nil), nil
	case conformance.KindTimeout:
		return nil, conformance.NotApplicable("OpenAI documents no timeout error response; a gateway 504 is a server_error in the design's class table")
	case conformance.KindBadRequest:
		return obj(400, "Invalid 'temperature': decimal above maximum value. Expected a value <= 2, but got 3 instead.",
			"invalid_request_error", "temperature", "decimal_above_max_value"), nil
	case conformance.KindContextLength:
		return obj(400, "This model's maximum context length is 128000 tokens. However, your messages resulted in 130567 tokens. Please reduce the length of the messages.",
			"invalid_request_error", "messages", "context_length_exceeded"), nil
	case conformance.KindPromptBlocked:
		// Azure OpenAI's content filter on the prompt.
		return &openaiError{status: 400, header: http.Header{}, v: map[string]any{"error": map[string]any{
			"message": "The response was filtered due to the prompt triggering Azure OpenAI's content management policy. Please modify your prompt and retry. To learn more about our content filtering policies please read our documentation: https://go.microsoft.com/fwlink/?linkid=2198766",
			"type":    nil, "param": "prompt", "code": "content_filter", "status": 400,
			"innererror": map[string]any{"code": "ResponsibleAIPolicyViolation", "content_filter_result": map[string]any{
				"hate":      map[string]any{"filtered": false, "severity": "safe"},
				"self_harm": map[string]any{"filtered": false, "severity": "safe"},
				"sexual":    map[string]any{"filtered": false, "severity": "safe"},
				"violence":  map[string]any{"filtered": true, "severity": "high"},
			}},
		}}}, nil
	case conformance.KindAuth:
		return obj(401, "Incorrect API key provided: "+key+". You can find your API key at https://platform.openai.com/account/api-keys.",
			"invalid_request_error", nil, "invalid_api_key"), nil
	case conformance.KindPermission:
		return obj(403, "Country, region, or territory not supported", "request_forbidden", nil, "unsupported_country_region_territory"), nil
	case conformance.KindNotFound:
		return obj(404, "The model `"+conformance.Model+"` does not exist or you do not have access to it.",
			"invalid_request_error", nil, "model_not_found"), nil
	}
	return nil, fmt.Errorf("openai wire: unknown failure kind %q", f.Kind)
}
