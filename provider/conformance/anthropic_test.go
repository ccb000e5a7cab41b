package conformance_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/finish"
	"github.com/llmclient/llmclient/provider/anthropic"
	"github.com/llmclient/llmclient/provider/conformance"
)

// anthropicWire is the Messages API wire format: docs.anthropic.com/en/api/errors,
// /en/api/rate-limits and the streaming guide.
type anthropicWire struct{}

func (anthropicWire) NewProvider(baseURL string, client *http.Client, apiKey string) (llmclient.Provider, error) {
	return anthropic.New(anthropic.WithBaseURL(baseURL), anthropic.WithHTTPClient(client), anthropic.WithAPIKey(apiKey))
}

func (anthropicWire) Decode(r *http.Request, body []byte) (*conformance.Seen, error) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/messages" {
		return nil, fmt.Errorf("%s %s, want POST /v1/messages", r.Method, r.URL.Path)
	}
	if r.Header.Get("Anthropic-Version") == "" {
		return nil, errors.New("no anthropic-version header")
	}
	key := r.Header.Get("X-Api-Key")
	if key == "" {
		return nil, errors.New("no x-api-key header")
	}
	var b struct {
		Model     string `json:"model"`
		MaxTokens int    `json:"max_tokens"`
		Stream    bool   `json:"stream"`
		Messages  []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
		System json.RawMessage `json:"system"`
	}
	if err := json.Unmarshal(body, &b); err != nil {
		return nil, fmt.Errorf("body: %w", err)
	}
	if b.MaxTokens <= 0 {
		return nil, errors.New("max_tokens is required")
	}
	s := &conformance.Seen{Stream: b.Stream, Model: b.Model, APIKey: key}
	for _, t := range b.Tools {
		s.Tools = append(s.Tools, t.Name)
	}
	if len(b.System) > 0 {
		s.System = anthropicResultText(b.System)
	}
	for _, m := range b.Messages {
		if len(m.Content) == 0 || m.Content[0] == '"' {
			continue
		}
		var blocks []struct {
			Type      string          `json:"type"`
			ID        string          `json:"id"`
			Name      string          `json:"name"`
			Input     json.RawMessage `json:"input"`
			ToolUseID string          `json:"tool_use_id"`
			Content   json.RawMessage `json:"content"`
		}
		if err := json.Unmarshal(m.Content, &blocks); err != nil {
			return nil, fmt.Errorf("message content: %w", err)
		}
		for _, bl := range blocks {
			if bl.Type == "tool_result" && len(bl.Content) > 0 && bl.Content[0] == '[' {
				var inner []struct {
					Type string `json:"type"`
				}
				_ = json.Unmarshal(bl.Content, &inner)
				for _, in := range inner {
					if in.Type == "image" {
						s.Images++
					}
				}
			}
			for _, id := range []string{bl.ID, bl.ToolUseID} {
				if id != "" && !anthropicToolID.MatchString(id) {
					return nil, fmt.Errorf("tool id %q does not match %s", id, anthropicToolID)
				}
			}
			switch bl.Type {
			case "image":
				s.Images++
			case "tool_use":
				s.ToolCalls = append(s.ToolCalls, llmclient.ToolCall{ID: bl.ID, Name: bl.Name, Arguments: string(bl.Input)})
			case "tool_result":
				s.ToolResults = append(s.ToolResults, conformance.ToolResult{Ref: bl.ToolUseID, Content: anthropicResultText(bl.Content)})
			}
		}
	}
	return s, nil
}

// anthropicToolID is the pattern of tool_use.id and tool_result.tool_use_id.
var anthropicToolID = regexp.MustCompile(`^[a-zA-Z0-9_-]+$`)

// anthropicResultText reads a tool_result's content: a string or text blocks.
func anthropicResultText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var blocks []struct {
		Text string `json:"text"`
	}
	_ = json.Unmarshal(raw, &blocks)
	var b strings.Builder
	for _, bl := range blocks {
		b.WriteString(bl.Text)
	}
	return b.String()
}

func anthropicFinish(f finish.Reason) string {
	switch f {
	case finish.Length:
		return "max_tokens"
	case finish.ToolCalls:
		return "tool_use"
	case finish.ContentFilter:
		return "refusal"
	}
	return "end_turn"
}

// anthropicUsage is Anthropic's usage object: input_tokens counts the prompt tokens that
// were neither read from nor written to the cache.
func anthropicUsage(u llmclient.Usage, out int) map[string]any {
	return map[string]any{"input_tokens": u.InputTokens - u.CachedInputTokens - u.CacheWriteTokens, "output_tokens": out,
		"cache_creation_input_tokens": u.CacheWriteTokens, "cache_read_input_tokens": u.CachedInputTokens}
}

// anthropicHeaders adds the headers every Messages response carries.
func anthropicHeaders(h http.Header) {
	h.Set("Request-Id", "req_011CFconformance")
	h.Set("Anthropic-Ratelimit-Requests-Limit", "50")
	h.Set("Anthropic-Ratelimit-Requests-Remaining", "49")
	h.Set("Anthropic-Ratelimit-Requests-Reset", "2030-01-01T00:00:00Z")
}

func (w anthropicWire) Render(r *conformance.Reply, req *conformance.Seen) (*conformance.WireResponse, error) {
	if r.Fail != nil {
		return w.fail(r.Fail, req)
	}
	if req.Stream {
		return w.stream(r, req)
	}
	var content []any
	if text := strings.Join(r.Text, ""); text != "" {
		content = append(content, map[string]any{"type": "text", "text": text})
	}
	for _, tc := range r.ToolCalls {
		content = append(content, map[string]any{"type": "tool_use", "id": tc.ID, "name": tc.Name,
			"input": json.RawMessage(tc.Arguments)})
	}
	if content == nil {
		content = []any{}
	}
	wr := conformance.JSON(http.StatusOK, map[string]any{
		"id": "msg_01CF", "type": "message", "role": "assistant", "model": req.Model,
		"content": content, "stop_reason": anthropicFinish(r.Finish), "stop_sequence": nil,
		"usage": anthropicUsage(r.Usage, r.Usage.OutputTokens),
	})
	anthropicHeaders(wr.Header)
	return wr, nil
}

// stream renders message_start, content blocks with their deltas, message_delta (stop
// reason, cumulative usage) and message_stop, with a ping and a comment in between.
func (w anthropicWire) stream(r *conformance.Reply, req *conformance.Seen) (*conformance.WireResponse, error) {
	ev := func(name string, data map[string]any) conformance.Event {
		data["type"] = name
		return conformance.Event{Name: name, Data: data}
	}
	events := []conformance.Event{
		ev("message_start", map[string]any{"message": map[string]any{
			"id": "msg_01CF", "type": "message", "role": "assistant", "model": req.Model, "content": []any{},
			"stop_reason": nil, "stop_sequence": nil,
			"usage": anthropicUsage(r.Usage, 1)}}),
		ev("ping", map[string]any{}),
	}
	index := 0
	if len(r.Text) > 0 || r.End != conformance.EndMarker {
		events = append(events, ev("content_block_start", map[string]any{"index": 0,
			"content_block": map[string]any{"type": "text", "text": ""}}))
		for i, t := range r.Text {
			if r.End != conformance.EndMarker && i == r.EndAfter {
				return w.streamEnd(r, events)
			}
			events = append(events, ev("content_block_delta", map[string]any{"index": 0,
				"delta": map[string]any{"type": "text_delta", "text": t}}))
			if i == 0 {
				events = append(events, conformance.Event{}) // a keep-alive comment
			}
		}
		if r.End != conformance.EndMarker {
			return w.streamEnd(r, events)
		}
		events = append(events, ev("content_block_stop", map[string]any{"index": 0}))
		index++
	}
	for _, tc := range r.ToolCalls {
		events = append(events, ev("content_block_start", map[string]any{"index": index,
			"content_block": map[string]any{"type": "tool_use", "id": tc.ID, "name": tc.Name, "input": map[string]any{}}}))
		for _, frag := range append([]string{""}, fragments(tc.Arguments, 3)...) {
			events = append(events, ev("content_block_delta", map[string]any{"index": index,
				"delta": map[string]any{"type": "input_json_delta", "partial_json": frag}}))
		}
		events = append(events, ev("content_block_stop", map[string]any{"index": index}))
		index++
	}
	events = append(events,
		ev("message_delta", map[string]any{"delta": map[string]any{"stop_reason": anthropicFinish(r.Finish), "stop_sequence": nil},
			"usage": map[string]any{"output_tokens": r.Usage.OutputTokens}}),
		ev("message_stop", map[string]any{}))
	wr := conformance.SSE(events...)
	anthropicHeaders(wr.Header)
	return wr, nil
}

// streamEnd ends a stream early: an error event after HTTP 200, or nothing for a cut.
func (w anthropicWire) streamEnd(r *conformance.Reply, events []conformance.Event) (*conformance.WireResponse, error) {
	if r.End == conformance.EndError {
		_, body, err := w.errorBody(r.EndFail, nil)
		if err != nil {
			return nil, err
		}
		events = append(events, conformance.Event{Name: "error", Data: body})
	}
	wr := conformance.SSE(events...)
	anthropicHeaders(wr.Header)
	return wr, nil
}

func (w anthropicWire) fail(f *conformance.Failure, req *conformance.Seen) (*conformance.WireResponse, error) {
	status, body, err := w.errorBody(f, req)
	if err != nil {
		return nil, err
	}
	wr := conformance.JSON(status, body)
	anthropicHeaders(wr.Header)
	if f.Kind == conformance.KindRateLimited {
		wr.Header.Set("Retry-After", strconv.Itoa(int((f.RetryAfter+time.Second-1)/time.Second)))
		wr.Header.Set("Anthropic-Ratelimit-Requests-Remaining", "0")
	}
	return wr, nil
}

// errorBody returns {"type":"error","error":{"type","message"},"request_id"} for f and its
// status. req is nil for a stream's error event.
func (anthropicWire) errorBody(f *conformance.Failure, req *conformance.Seen) (int, map[string]any, error) {
	key := ""
	if req != nil {
		key = req.APIKey
	}
	var status int
	var typ, msg string
	var details map[string]any
	switch f.Kind {
	case conformance.KindRateLimited:
		if f.RetryAfter%time.Second != 0 {
			return 0, nil, conformance.NotApplicable("Anthropic's retry-after header counts whole seconds")
		}
		status, typ, msg = 429, "rate_limit_error", "This request would exceed the rate limit for your organization (cf) of 50 requests per minute. For details, refer to: https://docs.claude.com/en/api/rate-limits."
	case conformance.KindRateLimitedBodyHint:
		return 0, nil, conformance.NotApplicable("Anthropic gives its wait only in the retry-after header")
	case conformance.KindQuota429:
		status, typ, msg = 429, "rate_limit_error", "This request would exceed your account's monthly spend limit."
		details = map[string]any{"error_code": "enforced_spend_limit_reached"}
	case conformance.KindBilling:
		status, typ, msg = 402, "billing_error", "Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits."
	case conformance.KindOverloaded:
		status, typ, msg = 529, "overloaded_error", "Overloaded"
	case conformance.KindServerError:
		status, typ, msg = 500, "api_error", "Internal server error"
	case conformance.KindTimeout:
		status, typ, msg = 504, "timeout_error", "Request timed out"
	case conformance.KindBadRequest:
		status, typ, msg = 400, "invalid_request_error", "temperature: range: 0..1"
	case conformance.KindContextLength:
		status, typ, msg = 400, "invalid_request_error", "prompt is too long: 208310 tokens > 200000 maximum"
	case conformance.KindPromptBlocked:
		return 0, nil, conformance.NotApplicable(`Anthropic blocks no prompt with an error; it refuses with stop_reason "refusal" (the content_filtered scenarios)`)
	case conformance.KindAuth:
		status, typ, msg = 401, "authentication_error", "invalid x-api-key: "+key
	case conformance.KindPermission:
		status, typ, msg = 403, "permission_error", "Your API key does not have permission to use the specified resource."
	case conformance.KindNotFound:
		status, typ, msg = 404, "not_found_error", "model: "+conformance.Model
	default:
		return 0, nil, fmt.Errorf("anthropic wire: unknown failure kind %q", f.Kind)
	}
	e := map[string]any{"type": typ, "message": msg}
	if details != nil {
		e["details"] = details
	}
	return status, map[string]any{"type": "error", "error": e, "request_id": "req_011CFconformance"}, nil
}
