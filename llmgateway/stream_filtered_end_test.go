package llmgateway_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// A stream that the vendor ends with a content filter or a refusal is an answer, not a
// failure: the gateway ends it as the vendor did (finish reason, usage, [DONE] or
// message_delta and message_stop), as its one-shot path answers 200 with the filtered
// answer.

// gatewayOverOpenAIStream starts a gateway whose OpenAI upstream answers every request
// with chunks, each a data event; it returns the gateway and the upstream.
func gatewayOverOpenAIStream(t *testing.T, chunks ...string) (*gw, *vendor) {
	t.Helper()
	oa, an := newVendor(t, "openai"), newVendor(t, "anthropic")
	oa.setHandler(func(w http.ResponseWriter, r *http.Request, n int) bool {
		writeOpenAIChunks(w, chunks...)
		return true
	})
	return startGateway(t, baseConfig(oa, an, "")), oa
}

// writeOpenAIChunks writes each of chunks as a data event.
func writeOpenAIChunks(w http.ResponseWriter, chunks ...string) {
	w.Header().Set("content-type", "text/event-stream")
	for _, c := range chunks {
		fmt.Fprintf(w, "data: %s\n\n", c)
		w.(http.Flusher).Flush()
	}
}

// Same vendor, no translation: an OpenAI stream ending finish_reason content_filter
// (Azure's filtered output) reaches an OpenAI caller as OpenAI sent it: the chunks, the
// usage chunk, [DONE]. The SDKs then return finish_reason content_filter instead of
// raising.
func TestStreamContentFilterSameVendor(t *testing.T) {
	g, oa := gatewayOverOpenAIStream(t,
		`{"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-up","choices":[{"index":0,"delta":{"role":"assistant","content":"Once upon"},"finish_reason":null}]}`,
		`{"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-up","choices":[{"index":0,"delta":{},"finish_reason":"content_filter"}]}`,
		`{"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-up","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7}}`,
		`[DONE]`)
	resp, body := post(t, g.api.URL+"/v1/chat/completions", "gw-key-a", `{"model":"gpt-4o","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"x"}]}`)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	if strings.Contains(body, `{"error"`) || !strings.HasSuffix(body, "data: [DONE]\n\n") {
		t.Fatalf("a content_filter stream does not end as the vendor ended it (an error event, no [DONE]):\n%s", body)
	}
	evs := parseSSE(t, body)
	var finishes []any
	for _, e := range evs {
		if e.data == "[DONE]" {
			continue
		}
		if f := at(decode(t, e.data), "choices", 0, "finish_reason"); f != nil {
			finishes = append(finishes, f)
		}
	}
	if len(finishes) != 1 || finishes[0] != "content_filter" {
		t.Errorf("finish reasons %v, want [content_filter]", finishes)
	}
	usage := decode(t, evs[len(evs)-2].data)
	if at(usage, "usage", "completion_tokens") != 2.0 || len(at(usage, "choices").([]any)) != 0 {
		t.Errorf("the usage chunk is lost: %v", usage)
	}
	if n := oa.count(); n != 1 {
		t.Errorf("%d upstream calls, want 1 (a filtered answer is not retried)", n)
	}
}

// The same stream to the Anthropic door ends with stop_reason "refusal" and message_stop.
func TestStreamContentFilterToAnthropicDoor(t *testing.T) {
	g, _ := gatewayOverOpenAIStream(t,
		`{"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-up","choices":[{"index":0,"delta":{"role":"assistant","content":"Once upon"},"finish_reason":null}]}`,
		`{"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-up","choices":[{"index":0,"delta":{},"finish_reason":"content_filter"}]}`,
		`{"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-up","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7}}`,
		`[DONE]`)
	resp, body := post(t, g.api.URL+"/v1/messages", "gw-key-a", `{"model":"gpt-4o","max_tokens":20,"stream":true,"messages":[{"role":"user","content":"x"}]}`)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	evs := parseSSE(t, body)
	if strings.Contains(body, "event: error") || evs[len(evs)-1].name != "message_stop" {
		t.Fatalf("the stream does not end with message_stop:\n%s", body)
	}
	delta := decode(t, evs[len(evs)-2].data)
	if at(delta, "delta", "stop_reason") != "refusal" || at(delta, "usage", "output_tokens") != 2.0 {
		t.Errorf("message_delta %v, want stop_reason refusal and the usage", delta)
	}
}

// An OpenAI upstream streams a refusal (delta.refusal, finish_reason stop). The Anthropic
// door ends the message with stop_reason "refusal"; the OpenAI door passes the refusal
// through (content null, as OpenAI sends it) and ends with the usage and [DONE].
func TestStreamRefusalCrossVendor(t *testing.T) {
	g, _ := gatewayOverOpenAIStream(t,
		`{"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-up","choices":[{"index":0,"delta":{"role":"assistant","content":null,"refusal":""},"finish_reason":null}]}`,
		`{"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-up","choices":[{"index":0,"delta":{"refusal":"I can't help with that."},"finish_reason":null}]}`,
		`{"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-up","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`,
		`{"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-up","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7}}`,
		`[DONE]`)
	resp, body := post(t, g.api.URL+"/v1/messages", "gw-key-a", `{"model":"gpt-4o","max_tokens":20,"stream":true,"messages":[{"role":"user","content":"x"}]}`)
	if resp.StatusCode != 200 || !strings.Contains(body, `"stop_reason":"refusal"`) || strings.Contains(body, "event: error") ||
		!strings.HasSuffix(body, "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n") {
		t.Errorf("anthropic door: a streamed refusal does not end with stop_reason refusal and message_stop:\n%s", body)
	}
	if !strings.Contains(body, `"text":"I can't help with that."`) {
		t.Errorf("anthropic door: the refusal's text is lost:\n%s", body)
	}
	resp, body = post(t, g.api.URL+"/v1/chat/completions", "gw-key-a", `{"model":"gpt-4o","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"x"}]}`)
	if resp.StatusCode != 200 || !strings.Contains(body, `"refusal":"I can't help with that."`) || !strings.HasSuffix(body, "data: [DONE]\n\n") ||
		strings.Contains(body, `{"error"`) {
		t.Fatalf("openai door: the refusal stream is not passed through to [DONE]:\n%s", body)
	}
	first := decode(t, parseSSE(t, body)[0].data)
	if c, ok := at(first, "choices", 0, "delta").(map[string]any)["content"]; ok && c != nil {
		t.Errorf("openai door: the refusal's first chunk has content %q, OpenAI sends none", c)
	}
	if !strings.Contains(body, `"completion_tokens":2`) {
		t.Errorf("openai door: the usage chunk is lost:\n%s", body)
	}
}

// A reasoning model that spends its budget on reasoning answers no content: the one-shot
// path answers it 200 (finish_reason length), and so does the stream, ending [DONE].
func TestStreamReasoningOnlyEndsAsVendorSent(t *testing.T) {
	g, _ := gatewayOverOpenAIStream(t,
		`{"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-up","choices":[{"index":0,"delta":{"role":"assistant","reasoning_content":"Let me think"},"finish_reason":null}]}`,
		`{"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-up","choices":[{"index":0,"delta":{},"finish_reason":"length"}]}`,
		`{"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-up","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":16,"total_tokens":21}}`,
		`[DONE]`)
	resp, body := post(t, g.api.URL+"/v1/chat/completions", "gw-key-a", `{"model":"gpt-4o","max_tokens":16,"stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"x"}]}`)
	if resp.StatusCode != 200 || strings.Contains(body, `{"error"`) || !strings.HasSuffix(body, "data: [DONE]\n\n") ||
		!strings.Contains(body, `"finish_reason":"length"`) || !strings.Contains(body, `"completion_tokens":16`) {
		t.Fatalf("a reasoning-only stream does not end as the vendor ended it:\n%s", body)
	}
}
