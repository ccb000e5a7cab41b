package anthropic

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/finish"
	"github.com/llmclient/llmclient/internal/adapter"
	"github.com/llmclient/llmclient/internal/jsonx"
)

// wireResponse is a Messages API response (Message), also the message of message_start.
type wireResponse struct {
	ID         string         `json:"id"`
	Model      string         `json:"model"`
	Content    []wireOutBlock `json:"content"`
	StopReason string         `json:"stop_reason"`
	Usage      wireUsage      `json:"usage"`
}

// wireOutBlock is a response content block: text, thinking, redacted_thinking, tool_use and
// server-tool blocks (which are ignored).
type wireOutBlock struct {
	Type     string          `json:"type"`
	Text     string          `json:"text"`
	Thinking string          `json:"thinking"`
	ID       string          `json:"id"`
	Name     string          `json:"name"`
	Input    json.RawMessage `json:"input"`
}

// wireUsage is Usage and MessageDeltaUsage. Input counts are pointers because a
// message_delta may leave them null. Counts are read as every usage reader reads them
// (jsonx.Count): a count that is not an integer never fails the answer; one that cannot
// be a count reads as -1, which the Client takes as no report.
type wireUsage struct {
	InputTokens              *jsonx.Count `json:"input_tokens"`
	OutputTokens             jsonx.Count  `json:"output_tokens"`
	CacheReadInputTokens     *jsonx.Count `json:"cache_read_input_tokens"`
	CacheCreationInputTokens *jsonx.Count `json:"cache_creation_input_tokens"`
	// CacheCreation splits the cache writes by time to live.
	CacheCreation *wireCacheCreation `json:"cache_creation"`
}

// wireCacheCreation is the Usage's cache_creation: the writes of the 5-minute and the
// 1-hour cache.
type wireCacheCreation struct {
	Ephemeral1h jsonx.Count `json:"ephemeral_1h_input_tokens"`
}

// parseResponse decodes a one-shot response body.
func parseResponse(body []byte) (*llmclient.Response, error) {
	var w wireResponse
	if err := json.Unmarshal(body, &w); err != nil {
		return nil, fmt.Errorf("decode response: %w", err) // malformed adds the "anthropic: " prefix
	}
	resp := &llmclient.Response{
		ID:              w.ID,
		Model:           w.Model,
		RawFinishReason: w.StopReason,
		FinishReason:    finishReason(w.StopReason),
	}
	var text, reasoning strings.Builder
	for _, b := range w.Content {
		switch b.Type {
		case "text":
			text.WriteString(b.Text)
		case "thinking":
			reasoning.WriteString(b.Thinking)
		case "tool_use":
			resp.ToolCalls = append(resp.ToolCalls, llmclient.ToolCall{ID: adapter.UnpatternID(b.ID), Name: b.Name, Arguments: toolInput(b.Input)})
		}
	}
	resp.Text, resp.Reasoning = text.String(), reasoning.String()
	resp.Usage = usage(w.Usage, nil)
	return resp, nil
}

// usage converts Anthropic usage to the common form. InputTokens includes the cache reads
// and cache writes, which Anthropic counts apart from input_tokens, so that it is the whole
// prompt as llmclient.Usage documents; CachedInputTokens is the cache reads and
// CacheWriteTokens the cache writes, of which CacheWrite1hTokens went to the one-hour
// cache. start, when not nil, supplies the input counts a stream's message_delta leaves
// out. A count that cannot be one (negative) makes the counts it is part of -1
// (adapter.SumCounts).
func usage(u wireUsage, start *wireUsage) llmclient.Usage {
	in := pick(u.InputTokens, start, func(s *wireUsage) *jsonx.Count { return s.InputTokens })
	read := pick(u.CacheReadInputTokens, start, func(s *wireUsage) *jsonx.Count { return s.CacheReadInputTokens })
	created := pick(u.CacheCreationInputTokens, start, func(s *wireUsage) *jsonx.Count { return s.CacheCreationInputTokens })
	out := llmclient.Usage{
		InputTokens:       adapter.SumCounts(adapter.SumCounts(in, read), created),
		OutputTokens:      int(u.OutputTokens),
		CachedInputTokens: read,
		CacheWriteTokens:  created,
	}
	cc := u.CacheCreation
	if cc == nil && start != nil {
		cc = start.CacheCreation
	}
	if cc != nil {
		out.CacheWrite1hTokens = min(max(int(cc.Ephemeral1h), 0), max(created, 0))
	}
	out.TotalTokens = adapter.AddTokens(out.InputTokens, out.OutputTokens)
	return out
}

// pick returns *v, else the start value, else 0.
func pick(v *jsonx.Count, start *wireUsage, field func(*wireUsage) *jsonx.Count) int {
	if v != nil {
		return int(*v)
	}
	if start != nil {
		if s := field(start); s != nil {
			return int(*s)
		}
	}
	return 0
}

// finishReason normalizes a stop_reason. model_context_window_exceeded (generation reached
// the context window) is reported as finish.Length, like max_tokens; pause_turn (a server
// tool paused a long turn) as finish.Other.
func finishReason(s string) finish.Reason {
	switch s {
	case "":
		return finish.None
	case "end_turn", "stop_sequence":
		return finish.Stop
	case "max_tokens", "model_context_window_exceeded":
		return finish.Length
	case "tool_use":
		return finish.ToolCalls
	case "refusal":
		return finish.Refusal
	}
	return finish.Other
}
