package anthropic_test

import (
	"context"
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/finish"
	"github.com/llmclient/llmclient/internal/providertest"
)

func TestCompleteSuccess(t *testing.T) {
	// Shape from docs.anthropic.com/en/api/messages, with prompt caching and thinking.
	const body = `{
	  "id": "msg_013Zva2CMHLNnXjNJJKqJ2EF",
	  "type": "message",
	  "role": "assistant",
	  "model": "claude-sonnet-4-5-20250929",
	  "content": [
	    {"type": "thinking", "thinking": "The user greets me.", "signature": "EqQBCgIYAhIM"},
	    {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix"},
	    {"type": "text", "text": "Hi! "},
	    {"type": "text", "text": "My name is Claude."}
	  ],
	  "stop_reason": "end_turn",
	  "stop_sequence": null,
	  "usage": {"input_tokens": 12, "cache_creation_input_tokens": 100, "cache_read_input_tokens": 2000, "output_tokens": 6, "service_tier": "standard"}
	}`
	p, _ := serve(t, providertest.Fixed(http.StatusOK, body,
		"request-id", "req_018EeWyXxfu5pfWkrYcMdjWG",
		"anthropic-ratelimit-requests-limit", "50",
		"anthropic-ratelimit-requests-remaining", "49",
		"anthropic-ratelimit-requests-reset", time.Now().Add(time.Hour).UTC().Format(time.RFC3339),
		"anthropic-ratelimit-input-tokens-limit", "30000",
		"anthropic-ratelimit-input-tokens-remaining", "27000",
	))
	resp := providertest.Complete(t, p, providertest.UserCall("claude-sonnet-4-5", llmclient.UserMessage("Hello")))
	want := llmclient.Usage{InputTokens: 2112, OutputTokens: 6, TotalTokens: 2118, CachedInputTokens: 2000, CacheWriteTokens: 100}
	if resp.Usage != want {
		t.Errorf("usage = %+v, want %+v", resp.Usage, want)
	}
	if resp.ID != "msg_013Zva2CMHLNnXjNJJKqJ2EF" || resp.Model != "claude-sonnet-4-5-20250929" {
		t.Errorf("id, model = %q, %q", resp.ID, resp.Model)
	}
	if resp.Text != "Hi! My name is Claude." || resp.Reasoning != "The user greets me." {
		t.Errorf("text %q, reasoning %q", resp.Text, resp.Reasoning)
	}
	if resp.FinishReason != finish.Stop || resp.RawFinishReason != "end_turn" {
		t.Errorf("finish = %q (%q)", resp.FinishReason, resp.RawFinishReason)
	}
	rl := resp.RateLimits
	if rl == nil || !rl.Requests.Known || rl.Requests.Limit != 50 || rl.Requests.Remaining != 49 ||
		rl.Requests.Reset < 59*time.Minute || rl.Requests.Reset > time.Hour {
		t.Fatalf("rate limits = %+v", rl)
	}
	if !rl.InputTokens.Known || rl.InputTokens.Remaining != 27000 || rl.Tokens.Known || rl.OutputTokens.Known {
		t.Errorf("token windows = %+v", rl)
	}
}

// TestToolCallResponse is the model's half of a tool round trip (the request half is in
// testdata/tool_round_trip.json).
func TestToolCallResponse(t *testing.T) {
	const body = `{"id":"msg_01Aq9w938a90dw8q","type":"message","role":"assistant","model":"claude-sonnet-4-5",
	  "content":[
	    {"type":"text","text":"I'll check the weather."},
	    {"type":"tool_use","id":"toolu_01A09q90qw90lq917835lq9","name":"get_weather","input":{"city":"San Francisco","unit":"celsius"}},
	    {"type":"tool_use","id":"toolu_02","name":"now","input":{}}
	  ],
	  "stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":472,"output_tokens":91}}`
	p, _ := serve(t, providertest.Fixed(http.StatusOK, body))
	resp := providertest.Complete(t, p, providertest.UserCall("m", llmclient.UserMessage("weather?")))
	want := []llmclient.ToolCall{
		{ID: "toolu_01A09q90qw90lq917835lq9", Name: "get_weather", Arguments: `{"city":"San Francisco","unit":"celsius"}`},
		{ID: "toolu_02", Name: "now", Arguments: `{}`},
	}
	if !reflect.DeepEqual(resp.ToolCalls, want) {
		t.Errorf("tool calls = %+v, want %+v", resp.ToolCalls, want)
	}
	if resp.FinishReason != finish.ToolCalls || resp.Text != "I'll check the weather." {
		t.Errorf("finish %q, text %q", resp.FinishReason, resp.Text)
	}
	if resp.RateLimits != nil {
		t.Errorf("rate limits without headers = %+v, want nil", resp.RateLimits)
	}
}

func TestStopReasons(t *testing.T) {
	for raw, want := range map[string]finish.Reason{
		"end_turn":                      finish.Stop,
		"stop_sequence":                 finish.Stop,
		"max_tokens":                    finish.Length,
		"model_context_window_exceeded": finish.Length,
		"tool_use":                      finish.ToolCalls,
		"refusal":                       finish.Refusal,
		"pause_turn":                    finish.Other,
		"something_new":                 finish.Other,
	} {
		body := `{"id":"m","model":"c","content":[{"type":"text","text":"x"}],"stop_reason":"` + raw + `","usage":{"input_tokens":1,"output_tokens":1}}`
		p, _ := serve(t, providertest.Fixed(http.StatusOK, body))
		resp := providertest.Complete(t, p, providertest.UserCall("m", llmclient.UserMessage("hi")))
		if resp.FinishReason != want || resp.RawFinishReason != raw {
			t.Errorf("%s: finish = %q (%q), want %q", raw, resp.FinishReason, resp.RawFinishReason, want)
		}
	}
}

func TestCompleteMalformedBody(t *testing.T) {
	p, _ := serve(t, providertest.Fixed(http.StatusOK, `{"id":"msg_1","content":[`))
	_, err := p.Complete(context.Background(), providertest.UserCall("m", llmclient.UserMessage("hi")))
	if c := llmclient.ClassOf(err); c != failure.ServerError {
		t.Fatalf("err = %v (class %v), want a server_error", err, c)
	}
}
