package gemini_test

import (
	"context"
	"net/http"
	"reflect"
	"testing"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/finish"
	"github.com/llmclient/llmclient/internal/providertest"
)

func TestCompleteSuccess(t *testing.T) {
	// Shape from ai.google.dev/api/generate-content#v1beta.GenerateContentResponse, with a
	// thought summary (includeThoughts) and context caching.
	const body = `{
	  "candidates": [{
	    "content": {"parts": [
	      {"text": "The user wants a greeting.", "thought": true},
	      {"text": "Hello! "},
	      {"text": "How can I help?", "thoughtSignature": "c2lnbmF0dXJl"}
	    ], "role": "model"},
	    "finishReason": "STOP",
	    "index": 0,
	    "safetyRatings": [{"category": "HARM_CATEGORY_HARASSMENT", "probability": "NEGLIGIBLE"}]
	  }],
	  "usageMetadata": {"promptTokenCount": 1200, "candidatesTokenCount": 7, "totalTokenCount": 1257, "cachedContentTokenCount": 1000, "thoughtsTokenCount": 50,
	    "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 1200}]},
	  "modelVersion": "gemini-2.5-flash",
	  "responseId": "mAitaLmkHPPlz7IPvtfUqQ4"
	}`
	p, _ := serve(t, providertest.Fixed(http.StatusOK, body))
	resp := providertest.Complete(t, p, providertest.UserCall("gemini-2.5-flash", llmclient.UserMessage("Hello")))
	want := llmclient.Usage{InputTokens: 1200, OutputTokens: 57, TotalTokens: 1257, CachedInputTokens: 1000, ReasoningTokens: 50}
	if resp.Usage != want {
		t.Errorf("usage = %+v, want %+v", resp.Usage, want)
	}
	if resp.ID != "mAitaLmkHPPlz7IPvtfUqQ4" || resp.Model != "gemini-2.5-flash" {
		t.Errorf("id, model = %q, %q", resp.ID, resp.Model)
	}
	if resp.Text != "Hello! How can I help?" || resp.Reasoning != "The user wants a greeting." {
		t.Errorf("text %q, reasoning %q", resp.Text, resp.Reasoning)
	}
	if resp.FinishReason != finish.Stop || resp.RawFinishReason != "STOP" || resp.RateLimits != nil {
		t.Errorf("finish = %q (%q), rate limits %v", resp.FinishReason, resp.RawFinishReason, resp.RateLimits)
	}
}

// TestToolCallResponse is the model's half of a tool round trip (the request half is in
// testdata/tool_round_trip.json): made-up IDs carry the thought signature.
func TestToolCallResponse(t *testing.T) {
	const body = `{"candidates":[{"content":{"role":"model","parts":[
	    {"functionCall":{"name":"get_weather","args":{"city":"Paris"}},"thoughtSignature":"CiQBcsjafDx7c2lnbmF0dXJl"},
	    {"functionCall":{"name":"get_weather","args":{"city":"Rome"}}},
	    {"functionCall":{"id":"fc-7","name":"now"}}
	  ]},"finishReason":"STOP","index":0}],
	  "usageMetadata":{"promptTokenCount":70,"candidatesTokenCount":30,"totalTokenCount":100},"modelVersion":"gemini-3-pro-preview"}`
	p, _ := serve(t, providertest.Fixed(http.StatusOK, body))
	resp := providertest.Complete(t, p, providertest.UserCall("m", llmclient.UserMessage("weather?")))
	want := []llmclient.ToolCall{
		{ID: "call_0__thought__CiQBcsjafDx7c2lnbmF0dXJl", Name: "get_weather", Arguments: `{"city":"Paris"}`},
		{ID: "call_1", Name: "get_weather", Arguments: `{"city":"Rome"}`},
		{ID: "fc-7", Name: "now", Arguments: `{}`},
	}
	if !reflect.DeepEqual(resp.ToolCalls, want) {
		t.Errorf("tool calls = %+v, want %+v", resp.ToolCalls, want)
	}
	if resp.FinishReason != finish.ToolCalls || resp.RawFinishReason != "STOP" {
		t.Errorf("finish = %q (%q)", resp.FinishReason, resp.RawFinishReason)
	}
}

func TestFinishReasons(t *testing.T) {
	for raw, want := range map[string]finish.Reason{
		"STOP":                      finish.Stop,
		"MAX_TOKENS":                finish.Length,
		"SAFETY":                    finish.ContentFilter,
		"RECITATION":                finish.ContentFilter,
		"BLOCKLIST":                 finish.ContentFilter,
		"PROHIBITED_CONTENT":        finish.ContentFilter,
		"SPII":                      finish.ContentFilter,
		"IMAGE_SAFETY":              finish.ContentFilter,
		"MALFORMED_FUNCTION_CALL":   finish.Other,
		"OTHER":                     finish.Other,
		"LANGUAGE":                  finish.Other,
		"FINISH_REASON_UNSPECIFIED": finish.Other,
		"SOMETHING_NEW":             finish.Other,
	} {
		body := `{"candidates":[{"content":{"parts":[{"text":"x"}]},"finishReason":"` + raw + `"}]}`
		p, _ := serve(t, providertest.Fixed(http.StatusOK, body))
		resp := providertest.Complete(t, p, providertest.UserCall("m", llmclient.UserMessage("hi")))
		if resp.FinishReason != want || resp.RawFinishReason != raw {
			t.Errorf("%s: finish = %q (%q), want %q", raw, resp.FinishReason, resp.RawFinishReason, want)
		}
	}
}

func TestBlockedPrompt(t *testing.T) {
	const body = `{"promptFeedback":{"blockReason":"PROHIBITED_CONTENT","safetyRatings":[]},"usageMetadata":{"promptTokenCount":9,"totalTokenCount":9},"modelVersion":"gemini-2.5-flash","responseId":"rb"}`
	p, _ := serve(t, providertest.Fixed(http.StatusOK, body))
	e := providertest.CompleteError(t, p, providertest.UserCall("gemini-2.5-flash", llmclient.UserMessage("...")))
	if e.Class != failure.ContentFiltered || e.Status != 200 || e.Code != "PROHIBITED_CONTENT" || e.Model != "gemini-2.5-flash" {
		t.Errorf("error = %+v", e)
	}
	if e.Partial == nil || e.Partial.FinishReason != finish.ContentFilter || e.Partial.Usage.InputTokens != 9 || e.Partial.ID != "rb" {
		t.Errorf("partial = %+v", e.Partial)
	}
}

func TestCompleteMalformedBody(t *testing.T) {
	for _, body := range []string{`{"candidates":[`, `<html>proxy</html>`} {
		p, _ := serve(t, providertest.Fixed(http.StatusOK, body))
		_, err := p.Complete(context.Background(), providertest.UserCall("m", llmclient.UserMessage("hi")))
		if c := llmclient.ClassOf(err); c != failure.ServerError {
			t.Errorf("%q: err = %v (class %v), want a server_error", body, err, c)
		}
	}
}

func TestCompleteErrorIn200(t *testing.T) {
	p, _ := serve(t, providertest.Fixed(http.StatusOK, `{"error":{"code":503,"message":"The model is overloaded. Please try again later.","status":"UNAVAILABLE"}}`))
	_, err := p.Complete(context.Background(), providertest.UserCall("m", llmclient.UserMessage("hi")))
	if c := llmclient.ClassOf(err); c != failure.Overloaded {
		t.Errorf("err = %v (class %v), want overloaded", err, c)
	}
}
