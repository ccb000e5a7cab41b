package openai

import (
	"net/http"
	"testing"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/finish"
)

func FuzzParseResponse(f *testing.F) {
	for _, s := range []string{
		`{"id":"x","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"Hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":2}}`,
		`{"choices":[{"message":{"content":null,"tool_calls":[{"id":"c","function":{"name":"f","arguments":{"a":1}}}]},"finish_reason":"tool_calls"}]}`,
		`{"choices":[{"message":{"content":[{"type":"text","text":"a"}],"reasoning":{"x":1},"reasoning_content":"r","refusal":"no"}}]}`,
		`{"choices":[{"message":{"function_call":{"name":"f","arguments":"{}"}},"finish_reason":"function_call"}]}`,
		`{"error":{"message":"m","code":429}}`,
		`{"choices":[]}`,
		`<html>`,
		``,
		`{"usage":{"prompt_tokens_details":null,"prompt_cache_hit_tokens":5},"choices":[{}]}`,
	} {
		f.Add(s)
	}
	now := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, body string) {
		resp, e := parseResponse(200, http.Header{}, []byte(body), now)
		if (resp == nil) == (e == nil) {
			t.Fatalf("want exactly one of response and error: %v, %v", resp, e)
		}
		if e != nil && (e.Status != 200 || e.Class == failure.None || e.Class == failure.Unknown) {
			t.Fatalf("error %#v", e)
		}
	})
}

func TestNormalizeFinishReason(t *testing.T) {
	tests := map[string]finish.Reason{
		"":                             finish.None,
		"stop":                         finish.Stop,
		"eos":                          finish.Stop,
		"end_turn":                     finish.Stop,
		"length":                       finish.Length,
		"max_tokens":                   finish.Length,
		"tool_calls":                   finish.ToolCalls,
		"function_call":                finish.ToolCalls,
		"content_filter":               finish.ContentFilter,
		"insufficient_system_resource": finish.Other,
		"abort":                        finish.Other,
	}
	for raw, want := range tests {
		if got := normalizeFinishReason(raw); got != want {
			t.Errorf("normalizeFinishReason(%q) = %q; want %q", raw, got, want)
		}
	}
}

func BenchmarkBuildBody(b *testing.B) {
	req := &llmclient.Request{
		Model: "gpt-4o",
		Messages: []llmclient.Message{
			llmclient.SystemMessage("You are a helpful assistant. Answer briefly."),
			llmclient.UserMessage("What is the capital of France? Explain in one sentence."),
			llmclient.AssistantMessage("Paris is the capital of France."),
			llmclient.UserMessage("And of Italy?"),
		},
		MaxTokens:   256,
		Temperature: llmclient.Float(0.2),
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := buildBody(req, "gpt-4o", FieldMaxCompletionTokens, false, false, nil); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseResponse(b *testing.B) {
	body := []byte(`{"id":"chatcmpl-1","object":"chat.completion","created":1741570283,"model":"gpt-4o-2024-08-06","choices":[{"index":0,"message":{"role":"assistant","content":"Paris is the capital of France.","refusal":null},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":30,"completion_tokens":8,"total_tokens":38,"prompt_tokens_details":{"cached_tokens":0},"completion_tokens_details":{"reasoning_tokens":0}}}`)
	h := http.Header{}
	h.Set("X-Ratelimit-Remaining-Tokens", "29999990")
	h.Set("X-Ratelimit-Reset-Tokens", "6m0s")
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		if _, e := parseResponse(200, h, body, now); e != nil {
			b.Fatal(e)
		}
	}
}

func BenchmarkClassifyError(b *testing.B) {
	body := []byte(`{"error":{"message":"Rate limit reached for gpt-4o in organization org-abc on tokens per min (TPM): Limit 200000, Used 199821, Requested 2295. Please try again in 634ms.","type":"tokens","param":null,"code":"rate_limit_exceeded"}}`)
	h := http.Header{}
	h.Set("X-Request-Id", "req_1")
	b.ReportAllocs()
	for b.Loop() {
		if e := ClassifyError(429, h, body); e.Class != failure.RateLimited {
			b.Fatal(e)
		}
	}
}
