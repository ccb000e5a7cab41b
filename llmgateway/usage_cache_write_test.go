package llmgateway_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// An Anthropic answer's cache reads and writes reach an OpenAI caller in
// usage.prompt_tokens_details (cached_tokens, cache_write_tokens), with the prompt's
// tokens counting both, one-shot and streamed.
func TestOpenAIDoorReportsCacheWrites(t *testing.T) {
	oa, an := newVendor(t, "openai"), newVendor(t, "anthropic")
	usage := `"usage":{"input_tokens":5,"cache_read_input_tokens":100,"cache_creation_input_tokens":300,"output_tokens":3}`
	an.setHandler(func(w http.ResponseWriter, r *http.Request, n int) bool {
		if strings.Contains(an.lastBody(), `"stream":true`) {
			w.Header().Set("content-type", "text/event-stream")
			writeAnEvent(w, "message_start", `{"type":"message_start","message":{"id":"msg_up","type":"message","role":"assistant","model":"claude-up","content":[],"stop_reason":null,"stop_sequence":null,`+usage+`}}`)
			writeAnEvent(w, "content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`)
			writeAnEvent(w, "content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hi"}}`)
			writeAnEvent(w, "content_block_stop", `{"type":"content_block_stop","index":0}`)
			writeAnEvent(w, "message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":3}}`)
			writeAnEvent(w, "message_stop", `{"type":"message_stop"}`)
			return true
		}
		w.Header().Set("content-type", "application/json")
		io.WriteString(w, `{"id":"msg_up","type":"message","role":"assistant","model":"claude-up","content":[{"type":"text","text":"hi"}],"stop_reason":"end_turn","stop_sequence":null,`+usage+`}`)
		return true
	})
	g := startGateway(t, baseConfig(oa, an, ""))
	want := `"prompt_tokens_details":{"cached_tokens":100,"cache_write_tokens":300}`
	_, body := post(t, g.api.URL+"/v1/chat/completions", "gw-key-a", `{"model":"claude-sonnet","messages":[{"role":"user","content":"x"}]}`)
	if !strings.Contains(body, want) || !strings.Contains(body, `"prompt_tokens":405`) {
		t.Errorf("one-shot usage without the cache writes:\n%s", body)
	}
	_, body = post(t, g.api.URL+"/v1/chat/completions", "gw-key-a", `{"model":"claude-sonnet","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"x"}]}`)
	if !strings.Contains(body, want) {
		t.Errorf("stream usage without the cache writes:\n%s", body)
	}
}
