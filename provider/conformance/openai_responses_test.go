package conformance_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/finish"
	"github.com/llmclient/llmclient/provider/conformance"
	"github.com/llmclient/llmclient/provider/openai"
)

// responsesWire is OpenAI's Responses API wire format (POST /v1/responses, one-shot and
// as named SSE events), with the error responses of Chat Completions, which the two APIs
// share.
type responsesWire struct{}

func (responsesWire) NewProvider(baseURL string, client *http.Client, apiKey string) (llmclient.Provider, error) {
	return openai.New(openai.WithBaseURL(baseURL+"/v1"), openai.WithHTTPClient(client), openai.WithAPIKey(apiKey), openai.WithResponsesAPI())
}

func (responsesWire) Decode(r *http.Request, body []byte) (*conformance.Seen, error) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/responses" {
		return nil, fmt.Errorf("%s %s, want POST /v1/responses", r.Method, r.URL.Path)
	}
	key, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return nil, errors.New("no Authorization: Bearer header")
	}
	var b struct {
		Model        string `json:"model"`
		Stream       bool   `json:"stream"`
		Instructions string `json:"instructions"`
		Input        []struct {
			Type      string          `json:"type"`
			Role      string          `json:"role"`
			Content   json.RawMessage `json:"content"`
			CallID    string          `json:"call_id"`
			Name      string          `json:"name"`
			Arguments string          `json:"arguments"`
			Output    json.RawMessage `json:"output"`
		} `json:"input"`
		Tools []struct {
			Type string `json:"type"`
			Name string `json:"name"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(body, &b); err != nil {
		return nil, fmt.Errorf("body: %w", err)
	}
	s := &conformance.Seen{Stream: b.Stream, Model: b.Model, APIKey: key}
	for _, t := range b.Tools {
		if t.Type != "function" {
			return nil, fmt.Errorf("tool type %q, want function", t.Type)
		}
		s.Tools = append(s.Tools, t.Name)
	}
	system := []string{}
	if b.Instructions != "" {
		system = append(system, b.Instructions)
	}
	for _, it := range b.Input {
		if len(it.CallID) > 64 {
			return nil, fmt.Errorf("call_id %q is longer than 64 characters", it.CallID)
		}
		switch it.Type {
		case "message", "":
			text, images := openaiContent(it.Content)
			s.Images += images
			if it.Role == "system" || it.Role == "developer" {
				system = append(system, text)
			}
		case "function_call":
			s.ToolCalls = append(s.ToolCalls, llmclient.ToolCall{ID: it.CallID, Name: it.Name, Arguments: it.Arguments})
		case "function_call_output":
			text, images := openaiContent(it.Output)
			s.Images += images
			s.ToolResults = append(s.ToolResults, conformance.ToolResult{Ref: it.CallID, Content: text})
		default:
			return nil, fmt.Errorf("unknown input item type %q", it.Type)
		}
	}
	s.System = strings.Join(system, "\n")
	return s, nil
}

// responsesStatus maps a finish reason to a Response's status and incomplete reason.
func responsesStatus(f finish.Reason) (status string, details any) {
	switch f {
	case finish.Length:
		return "incomplete", map[string]any{"reason": "max_output_tokens"}
	case finish.ContentFilter:
		return "incomplete", map[string]any{"reason": "content_filter"}
	}
	return "completed", nil
}

func responsesUsage(u llmclient.Usage) map[string]any {
	return map[string]any{"input_tokens": u.InputTokens, "input_tokens_details": map[string]any{"cached_tokens": u.CachedInputTokens},
		"output_tokens": u.OutputTokens, "output_tokens_details": map[string]any{"reasoning_tokens": 0},
		"total_tokens": u.InputTokens + u.OutputTokens}
}

// response is the Response object for r, complete.
func (responsesWire) response(r *conformance.Reply, req *conformance.Seen) map[string]any {
	var output []any
	if text := strings.Join(r.Text, ""); text != "" {
		output = append(output, map[string]any{"type": "message", "id": "msg_cf1", "status": "completed", "role": "assistant",
			"content": []any{map[string]any{"type": "output_text", "text": text, "annotations": []any{}}}})
	}
	for i, tc := range r.ToolCalls {
		output = append(output, map[string]any{"type": "function_call", "id": fmt.Sprintf("fc_cf%d", i), "call_id": tc.ID,
			"name": tc.Name, "arguments": tc.Arguments, "status": "completed"})
	}
	if output == nil {
		output = []any{}
	}
	status, details := responsesStatus(r.Finish)
	return map[string]any{"id": "resp_cf1", "object": "response", "created_at": 1735689600, "status": status,
		"error": nil, "incomplete_details": details, "model": req.Model, "output": output, "usage": responsesUsage(r.Usage)}
}

func (w responsesWire) Render(r *conformance.Reply, req *conformance.Seen) (*conformance.WireResponse, error) {
	if r.Fail != nil {
		return openaiWire{}.fail(r.Fail, req)
	}
	if r.Usage.CacheWriteTokens > 0 {
		return nil, conformance.NotApplicable("OpenAI reports no prompt-cache writes")
	}
	if req.Stream {
		return w.stream(r, req)
	}
	wr := conformance.JSON(http.StatusOK, w.response(r, req))
	openaiHeaders(wr.Header)
	return wr, nil
}

// stream renders a reply as Responses API events: response.created, text deltas, function
// call items with their argument deltas, and response.completed (or response.incomplete);
// an early end sends an error event or nothing.
func (w responsesWire) stream(r *conformance.Reply, req *conformance.Seen) (*conformance.WireResponse, error) {
	seq := 0
	ev := func(typ string, data map[string]any) conformance.Event {
		data["type"] = typ
		data["sequence_number"] = seq
		seq++
		return conformance.Event{Name: typ, Data: data}
	}
	created := map[string]any{"id": "resp_cf1", "object": "response", "status": "in_progress", "model": req.Model, "output": []any{}}
	events := []conformance.Event{ev("response.created", map[string]any{"response": created})}
	for i, t := range r.Text {
		if r.End != conformance.EndMarker && i == r.EndAfter {
			return w.streamEnd(r, events, ev)
		}
		events = append(events, ev("response.output_text.delta", map[string]any{"item_id": "msg_cf1", "output_index": 0, "content_index": 0, "delta": t}))
	}
	if r.End != conformance.EndMarker {
		return w.streamEnd(r, events, ev)
	}
	for i, tc := range r.ToolCalls {
		idx := i + 1
		events = append(events, ev("response.output_item.added", map[string]any{"output_index": idx, "item": map[string]any{
			"type": "function_call", "id": fmt.Sprintf("fc_cf%d", i), "call_id": tc.ID, "name": tc.Name, "arguments": "", "status": "in_progress"}}))
		for _, frag := range fragments(tc.Arguments, 3) {
			events = append(events, ev("response.function_call_arguments.delta", map[string]any{"item_id": fmt.Sprintf("fc_cf%d", i), "output_index": idx, "delta": frag}))
		}
		events = append(events, ev("response.function_call_arguments.done", map[string]any{"item_id": fmt.Sprintf("fc_cf%d", i), "output_index": idx, "arguments": tc.Arguments}))
	}
	status, _ := responsesStatus(r.Finish)
	events = append(events, ev("response."+status, map[string]any{"response": w.response(r, req)}))
	wr := conformance.SSE(events...)
	openaiHeaders(wr.Header)
	return wr, nil
}

func (responsesWire) streamEnd(r *conformance.Reply, events []conformance.Event, ev func(string, map[string]any) conformance.Event) (*conformance.WireResponse, error) {
	if r.End == conformance.EndError {
		e, err := openaiWire{}.errorBody(r.EndFail, nil)
		if err != nil {
			return nil, err
		}
		obj := e.v.(map[string]any)["error"].(map[string]any)
		events = append(events, ev("error", map[string]any{"code": obj["code"], "message": obj["message"], "param": obj["param"]}))
	}
	wr := conformance.SSE(events...)
	openaiHeaders(wr.Header)
	return wr, nil
}
