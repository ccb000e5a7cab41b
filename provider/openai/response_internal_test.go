package openai

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
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
		`{"choices":[{"message":{"content":"a"}}],"usage":{"prompt_tokens":5.7,"completion_tokens":-1e18,"total_tokens":"x"}}`,
		`{"choices":[{"message":{"content":"a"}}],"usage":{"prompt_tokens":92233720368547758070,"prompt_tokens_details":{"cached_tokens":1e400}}}`,
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

// FuzzUsageCountAgrees: whatever value a usage count holds (a fraction, an exponent, a
// negative, a number beyond int64, a string, null), the typed answer parses — the count
// never fails an otherwise valid answer — and the typed parsers (one-shot and stream)
// and the transport's usage reader read the same usage from it, for Chat Completions and
// for the Responses API.
func FuzzUsageCountAgrees(f *testing.F) {
	for _, v := range []string{`5`, `5.7`, `-5`, `-0.5`, `1e18`, `-1e18`, `9223372036854775807`, `92233720368547758070`,
		`1e400`, `2.5e3`, `0`, `-0`, `null`, `"7"`, `true`, `{}`, `[1]`, `1073741825`} {
		f.Add(v, uint8(0))
		f.Add(v, uint8(4))
	}
	var p Provider
	now := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	chat := []string{"prompt_tokens", "completion_tokens", "total_tokens", "prompt_cache_hit_tokens", "cached_tokens", "cache_write_tokens", "reasoning_tokens"}
	resp := []string{"input_tokens", "output_tokens", "total_tokens", "cached_tokens", "cache_write_tokens", "reasoning_tokens"}
	f.Fuzz(func(t *testing.T, count string, field uint8) {
		var compact bytes.Buffer // one line, as a stream's data line holds it
		if json.Compact(&compact, []byte(count)) != nil {
			return
		}
		count = compact.String()
		members := map[string]string{"prompt_tokens": "11", "completion_tokens": "3", "cached_tokens": "2", "cache_write_tokens": "4", "reasoning_tokens": "1"}
		members[chat[int(field)%len(chat)]] = count
		usage := `{"prompt_tokens":` + members["prompt_tokens"] + `,"completion_tokens":` + members["completion_tokens"]
		for _, k := range []string{"total_tokens", "prompt_cache_hit_tokens"} {
			if v, ok := members[k]; ok {
				usage += `,"` + k + `":` + v
			}
		}
		usage += `,"prompt_tokens_details":{"cached_tokens":` + members["cached_tokens"] + `,"cache_write_tokens":` + members["cache_write_tokens"] +
			`},"completion_tokens_details":{"reasoning_tokens":` + members["reasoning_tokens"] + `}}`
		body := `{"id":"c","model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":` + usage + `}`
		typed, e := parseResponse(200, http.Header{}, []byte(body), now)
		if e != nil {
			t.Fatalf("%s: the answer failed: %v", body, e)
		}
		u, model, ok := p.ReadUsage(ShapeChatCompletions, []byte(body))
		if !ok || model != "gpt-4o" || u != typed.Usage {
			t.Fatalf("%s: typed %+v, transport %+v %q %v", body, typed.Usage, u, model, ok)
		}
		chunk := `{"id":"c","object":"chat.completion.chunk","model":"gpt-4o","choices":[],"usage":` + usage + `}`
		chunks, err := fuzzDecode(t, strings.NewReader(ev(chunk)+done), len(chunk)+32)
		if err != io.EOF || len(chunks) != 1 || chunks[0].Usage == nil || *chunks[0].Usage != typed.Usage {
			t.Fatalf("%s: typed %+v, stream %+v (%v)", body, typed.Usage, chunks, err)
		}

		rm := map[string]string{"input_tokens": "11", "output_tokens": "3", "total_tokens": "14", "cached_tokens": "2", "cache_write_tokens": "4", "reasoning_tokens": "1"}
		rm[resp[int(field)%len(resp)]] = count
		body = `{"id":"r","model":"gpt-4o","status":"completed","output":[{"type":"message","content":[{"type":"output_text","text":"hi"}]}],` +
			`"usage":{"input_tokens":` + rm["input_tokens"] + `,"output_tokens":` + rm["output_tokens"] + `,"total_tokens":` + rm["total_tokens"] +
			`,"input_tokens_details":{"cached_tokens":` + rm["cached_tokens"] + `,"cache_write_tokens":` + rm["cache_write_tokens"] + `},"output_tokens_details":{"reasoning_tokens":` + rm["reasoning_tokens"] + `}}}`
		typed, e = parseResponsesBody(200, http.Header{}, []byte(body), now)
		if e != nil {
			t.Fatalf("%s: the answer failed: %v", body, e)
		}
		if u, _, ok := p.ReadUsage(ShapeResponses, []byte(body)); !ok || u != typed.Usage {
			t.Fatalf("%s: typed %+v, transport %+v %v", body, typed.Usage, u, ok)
		}
	})
}
