package anthropic_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/internal/providertest"
)

// TestCrossVendorTranslation sends a conversation begun on other vendors: tool-call ids
// that break Anthropic's pattern or repeat across turns, an image in the system prompt,
// an out-of-range temperature, and cache breakpoints on tools, system and messages. The
// body is checked against testdata/cross_vendor.json (validated against the Anthropic
// spec by provider/conformance/specs), and every translation leaves a note.
func TestCrossVendorTranslation(t *testing.T) {
	signed := "call_0__thought__CiQB/w=="
	req := llmclient.Request{
		Messages: []llmclient.Message{
			{Role: llmclient.RoleSystem, Content: []llmclient.Part{
				{Type: llmclient.PartText, Text: "You are a weather bot.", Cache: &llmclient.CacheControl{TTL: time.Hour}},
				llmclient.ImageURLPart("https://example.com/logo.png"),
			}},
			llmclient.UserMessage("Weather in Paris?"),
			{Role: llmclient.RoleAssistant, ToolCalls: []llmclient.ToolCall{
				{ID: signed, Name: "get_weather", Arguments: `{"city":"Paris"}`},
				{ID: "call_1", Name: "get_weather", Arguments: `{"city":"Rome"}`},
			}},
			llmclient.ToolResultMessage(signed, "18C"),
			{Role: llmclient.RoleTool, ToolCallID: "call_1", Content: []llmclient.Part{llmclient.TextPart("24C")},
				Cache: &llmclient.CacheControl{}},
			llmclient.UserMessage("And Berlin?"),
			{Role: llmclient.RoleAssistant, ToolCalls: []llmclient.ToolCall{{ID: "call_1", Name: "get_weather", Arguments: `{"city":"Berlin"}`}}},
			llmclient.ToolResultMessage("call_1", "12C"),
			{Role: llmclient.RoleAssistant, ToolCalls: []llmclient.ToolCall{{ID: "functions.get_weather:0", Name: "get_weather", Arguments: `{"city":"Oslo"}`}}},
			llmclient.ToolResultMessage("functions.get_weather:0", "2C"),
		},
		Tools:       []llmclient.Tool{{Name: "get_weather", Parameters: json.RawMessage(`{"type":"object"}`), Cache: &llmclient.CacheControl{}}},
		Temperature: llmclient.Float(1.5),
		TopP:        llmclient.Float(-1),
	}
	p, rec := serve(t, providertest.Fixed(http.StatusOK, okBody))
	call := &llmclient.Call{Model: "claude-sonnet-4-5", Request: &req}
	providertest.Exchange(t, p, call, false)
	providertest.Golden(t, "cross_vendor.json", rec.Last(t).Body, *update)
	providertest.EqualLines(t, call.Notes, []string{
		"anthropic: temperature 1.5 lowered to the maximum 1",
		"anthropic: top_p -1 raised to the minimum 0",
		"anthropic: message 0: 1 image(s) of the system prompt moved to a user turn (the system prompt takes text only)",
		`anthropic: tool call id "call_0__thought__CiQB/w==" sent as "lcid_Y2FsbF8wX190aG91Z2h0X19DaVFCL3c9PQ" (Anthropic ids match ^[a-zA-Z0-9_-]+$)`,
		`anthropic: tool call id "call_1" repeats an earlier turn's; sent as "call_1_2" (tool_use ids must be unique)`,
		`anthropic: tool call id "functions.get_weather:0" sent as "lcid_ZnVuY3Rpb25zLmdldF93ZWF0aGVyOjA" (Anthropic ids match ^[a-zA-Z0-9_-]+$)`,
	})
	if req.Temperature == nil || *req.Temperature != 1.5 {
		t.Error("the caller's request was modified")
	}
}

// TestCacheBreakpointLimit checks that more than four breakpoints keep the last four.
func TestCacheBreakpointLimit(t *testing.T) {
	c := &llmclient.CacheControl{}
	var msgs []llmclient.Message
	for _, text := range []string{"a", "b", "c", "d", "e", "f"} {
		msgs = append(msgs, llmclient.Message{Role: llmclient.RoleUser, Content: []llmclient.Part{{Type: llmclient.PartText, Text: text, Cache: c}}})
	}
	p, rec := serve(t, providertest.Fixed(http.StatusOK, okBody))
	call := &llmclient.Call{Model: "m", Request: &llmclient.Request{Messages: msgs}}
	providertest.Exchange(t, p, call, false)
	var body struct {
		Messages []struct {
			Content []struct {
				Text  string          `json:"text"`
				Cache json.RawMessage `json:"cache_control"`
			} `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(rec.Last(t).Body, &body); err != nil || len(body.Messages) != 1 {
		t.Fatalf("body %s: %v", rec.Last(t).Body, err)
	}
	var marked string
	for _, b := range body.Messages[0].Content {
		if b.Cache != nil {
			marked += b.Text
		}
	}
	if marked != "cdef" {
		t.Errorf("breakpoints on %q, want the last four (cdef)", marked)
	}
	providertest.EqualLines(t, call.Notes, []string{"anthropic: 6 cache breakpoints; the first 2 dropped (at most 4 per request)"})
}
