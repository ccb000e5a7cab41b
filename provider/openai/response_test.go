package openai_test

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/finish"
	"github.com/llmclient/llmclient/internal/providertest"
	"github.com/llmclient/llmclient/ratelimit"
)

func TestCompleteResponses(t *testing.T) {
	tests := []struct {
		name    string
		headers map[string]string
		body    string
		want    llmclient.Response
	}{
		{
			name: "text with usage and rate limits",
			headers: map[string]string{
				"X-Ratelimit-Limit-Requests": "10000", "X-Ratelimit-Remaining-Requests": "9999", "X-Ratelimit-Reset-Requests": "6ms",
				"X-Ratelimit-Limit-Tokens": "30000000", "X-Ratelimit-Remaining-Tokens": "29999990", "X-Ratelimit-Reset-Tokens": "6m0s",
			},
			body: `{"id":"chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG","object":"chat.completion","created":1741570283,"model":"gpt-4o-2024-08-06",
				"choices":[{"index":0,"message":{"role":"assistant","content":"Hello there!","refusal":null,"annotations":[]},"logprobs":null,"finish_reason":"stop"}],
				"usage":{"prompt_tokens":1117,"completion_tokens":46,"total_tokens":1163,
					"prompt_tokens_details":{"cached_tokens":1024,"audio_tokens":0},
					"completion_tokens_details":{"reasoning_tokens":12,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}},
				"service_tier":"default","system_fingerprint":"fp_fc9f1d7035"}`,
			want: llmclient.Response{
				ID: "chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG", Model: "gpt-4o-2024-08-06", Text: "Hello there!",
				FinishReason: finish.Stop, RawFinishReason: "stop",
				Usage: llmclient.Usage{InputTokens: 1117, OutputTokens: 46, TotalTokens: 1163, CachedInputTokens: 1024, ReasoningTokens: 12},
				RateLimits: &ratelimit.Status{
					Requests: ratelimit.Window{Known: true, Limit: 10000, Remaining: 9999, Reset: 6 * time.Millisecond},
					Tokens:   ratelimit.Window{Known: true, Limit: 30000000, Remaining: 29999990, Reset: 6 * time.Minute},
				},
			},
		},
		{
			name: "tool calls",
			body: `{"id":"chatcmpl-abc123","object":"chat.completion","model":"gpt-4o-mini",
				"choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[
					{"id":"call_abc123","type":"function","function":{"name":"get_current_weather","arguments":"{\n\"location\": \"Boston, MA\"\n}"}},
					{"id":"call_def456","type":"function","function":{"name":"get_time","arguments":"{}"}}]},
				"logprobs":null,"finish_reason":"tool_calls"}],
				"usage":{"prompt_tokens":82,"completion_tokens":17,"total_tokens":99}}`,
			want: llmclient.Response{
				ID: "chatcmpl-abc123", Model: "gpt-4o-mini",
				ToolCalls: []llmclient.ToolCall{
					{ID: "call_abc123", Name: "get_current_weather", Arguments: "{\n\"location\": \"Boston, MA\"\n}"},
					{ID: "call_def456", Name: "get_time", Arguments: "{}"},
				},
				FinishReason: finish.ToolCalls, RawFinishReason: "tool_calls",
				Usage: llmclient.Usage{InputTokens: 82, OutputTokens: 17, TotalTokens: 99},
			},
		},
		{
			name: "arguments as an object (some compatible servers)",
			body: `{"choices":[{"message":{"tool_calls":[{"id":"c","function":{"name":"f","arguments":{"a":1}}}]},"finish_reason":"tool_calls"}]}`,
			want: llmclient.Response{
				ToolCalls:    []llmclient.ToolCall{{ID: "c", Name: "f", Arguments: `{"a":1}`}},
				FinishReason: finish.ToolCalls, RawFinishReason: "tool_calls",
			},
		},
		{
			name: "legacy function_call",
			body: `{"choices":[{"message":{"content":null,"function_call":{"name":"f","arguments":"{\"x\":1}"}},"finish_reason":"function_call"}]}`,
			want: llmclient.Response{
				ToolCalls:    []llmclient.ToolCall{{Name: "f", Arguments: `{"x":1}`}},
				FinishReason: finish.ToolCalls, RawFinishReason: "function_call",
			},
		},
		{
			name: "DeepSeek reasoner with cache hit tokens",
			body: `{"id":"930c60df","object":"chat.completion","model":"deepseek-reasoner",
				"choices":[{"index":0,"message":{"role":"assistant","content":"9.11 < 9.8","reasoning_content":"Compare the decimals..."},"logprobs":null,"finish_reason":"stop"}],
				"usage":{"prompt_tokens":20,"completion_tokens":300,"total_tokens":320,"prompt_tokens_details":{"cached_tokens":0},
					"completion_tokens_details":{"reasoning_tokens":250},"prompt_cache_hit_tokens":16,"prompt_cache_miss_tokens":4}}`,
			want: llmclient.Response{
				ID: "930c60df", Model: "deepseek-reasoner", Text: "9.11 < 9.8", Reasoning: "Compare the decimals...",
				FinishReason: finish.Stop, RawFinishReason: "stop",
				Usage: llmclient.Usage{InputTokens: 20, OutputTokens: 300, TotalTokens: 320, CachedInputTokens: 16, ReasoningTokens: 250},
			},
		},
		{
			name: "reasoning field (OpenRouter, Groq, vLLM)",
			body: `{"choices":[{"message":{"content":"4","reasoning":"2+2"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":5}}`,
			want: llmclient.Response{
				Text: "4", Reasoning: "2+2", FinishReason: finish.Stop, RawFinishReason: "stop",
				Usage: llmclient.Usage{InputTokens: 3, OutputTokens: 5, TotalTokens: 8},
			},
		},
		{
			name: "reasoning as an object is ignored, not fatal",
			body: `{"choices":[{"message":{"content":"ok","reasoning":{"effort":"low"}},"finish_reason":"stop"}]}`,
			want: llmclient.Response{Text: "ok", FinishReason: finish.Stop, RawFinishReason: "stop"},
		},
		{
			name: "refusal",
			body: `{"choices":[{"message":{"role":"assistant","content":null,"refusal":"I'm sorry, I cannot assist with that request."},"finish_reason":"stop"}]}`,
			want: llmclient.Response{
				Refusal:      "I'm sorry, I cannot assist with that request.",
				FinishReason: finish.Refusal, RawFinishReason: "stop",
			},
		},
		{
			name: "content filtered output (Azure)",
			body: `{"id":"x","choices":[{"index":0,"finish_reason":"content_filter","message":{"role":"assistant","content":null},"content_filter_results":{"hate":{"filtered":true,"severity":"high"}}}],"prompt_filter_results":[{"prompt_index":0,"content_filter_results":{}}]}`,
			want: llmclient.Response{ID: "x", FinishReason: finish.ContentFilter, RawFinishReason: "content_filter"},
		},
		{
			name: "length",
			body: `{"choices":[{"message":{"content":"Once upon"},"finish_reason":"length"}]}`,
			want: llmclient.Response{Text: "Once upon", FinishReason: finish.Length, RawFinishReason: "length"},
		},
		{
			name: "DeepSeek insufficient_system_resource",
			body: `{"choices":[{"message":{"content":"Partial"},"finish_reason":"insufficient_system_resource"}]}`,
			want: llmclient.Response{Text: "Partial", FinishReason: finish.Other, RawFinishReason: "insufficient_system_resource"},
		},
		{
			name: "content as parts (Mistral)",
			body: `{"choices":[{"message":{"content":[{"type":"thinking","thinking":[{"type":"text","text":"hmm"}]},{"type":"text","text":"Hi "},{"type":"text","text":"there"}]},"finish_reason":"stop"}]}`,
			want: llmclient.Response{Text: "Hi there", FinishReason: finish.Stop, RawFinishReason: "stop"},
		},
		{
			name: "leading blank lines (DeepSeek keep-alive) and no usage",
			body: "\n\n\n" + `{"choices":[{"message":{"content":"late"},"finish_reason":"stop"}]}`,
			want: llmclient.Response{Text: "late", FinishReason: finish.Stop, RawFinishReason: "stop"},
		},
		{
			name: "first choice wins",
			body: `{"choices":[{"index":0,"message":{"content":"a"},"finish_reason":"stop"},{"index":1,"message":{"content":"b"},"finish_reason":"length"}]}`,
			want: llmclient.Response{Text: "a", FinishReason: finish.Stop, RawFinishReason: "stop"},
		},
		{
			name: "error member null is not an error",
			body: `{"choices":[{"message":{"content":"a"},"finish_reason":"eos"}],"error":null}`,
			want: llmclient.Response{Text: "a", FinishReason: finish.Stop, RawFinishReason: "eos"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := newUpstream(t, reply{Header: tt.headers, Body: tt.body})
			p := newProvider(t, u)
			got, err := p.Complete(context.Background(), simpleCall("gpt-4o"))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(*got, tt.want) {
				t.Fatalf("response\n got %+v\nwant %+v", *got, tt.want)
			}
		})
	}
}

func TestCompleteBrokenSuccess(t *testing.T) {
	tests := []struct {
		name  string
		body  string
		class failure.Class
		msg   string
	}{
		{"html from a proxy", "<html><body>upstream connect error</body></html>", failure.ServerError, "malformed JSON"},
		{"empty body", "", failure.ServerError, "malformed JSON"},
		{"truncated JSON", `{"id":"x","choices":[{"message":`, failure.ServerError, "malformed JSON"},
		{"no choices", `{"id":"x","object":"chat.completion","choices":[]}`, failure.ServerError, "no choices"},
		{"in-band rate limit", `{"error":{"message":"Rate limit exceeded","type":"rate_limit_error","code":"rate_limit_exceeded"}}`, failure.RateLimited, "Rate limit exceeded"},
		{"in-band with integer code (OpenRouter)", `{"error":{"code":502,"message":"Provider returned error"}}`, failure.ServerError, "Provider returned error"},
		{"in-band quota", `{"error":{"code":402,"message":"Insufficient credits"}}`, failure.QuotaExhausted, "Insufficient credits"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := newUpstream(t, reply{Header: map[string]string{"X-Request-Id": "req_1"}, Body: tt.body})
			p := newProvider(t, u)
			e := providertest.CompleteError(t, p, simpleCall("gpt-4o"))
			if e.Class != tt.class || e.Status != 200 || !strings.Contains(e.Message, tt.msg) || e.RequestID != "req_1" || e.Model != "gpt-4o" {
				t.Fatalf("got %#v; want class %v, status 200, message containing %q", e, tt.class, tt.msg)
			}
		})
	}
}

func TestCompleteHugeBody(t *testing.T) {
	u := newUpstream(t, reply{Body: `{"choices":[{"message":{"content":"` + strings.Repeat("x", 33<<20) + `"}}]}`})
	p := newProvider(t, u)
	e := providertest.CompleteError(t, p, simpleCall("gpt-4o"))
	if e.Status != 200 || !strings.Contains(e.Message, "32 MiB") {
		t.Fatalf("got %v", e)
	}
}
