package llmgateway_test

import (
	"encoding/base64"
	"encoding/binary"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

func TestOpenAIChatOneShotReachesEitherVendor(t *testing.T) {
	oa, an := newVendor(t, "openai"), newVendor(t, "anthropic")
	g := startGateway(t, baseConfig(oa, an, ""))
	for _, tc := range []struct{ model, text, upstream string }{
		{"gpt-4o", "hello from openai", "oa"},
		{"claude-sonnet", "hello from anthropic", "an"},
	} {
		t.Run(tc.model, func(t *testing.T) {
			resp, body := post(t, g.api.URL+"/v1/chat/completions", "gw-key-a",
				`{"model":"`+tc.model+`","messages":[{"role":"system","content":"be brief"},{"role":"user","content":[{"type":"text","text":"hi"}]}],"max_tokens":20}`)
			if resp.StatusCode != 200 {
				t.Fatalf("status %d: %s", resp.StatusCode, body)
			}
			m := decode(t, body)
			if at(m, "object") != "chat.completion" || at(m, "choices", 0, "message", "content") != tc.text ||
				at(m, "choices", 0, "finish_reason") != "stop" || at(m, "choices", 0, "message", "role") != "assistant" {
				t.Fatalf("body: %s", body)
			}
			if at(m, "usage", "prompt_tokens") != 5.0 || at(m, "usage", "completion_tokens") != 3.0 || at(m, "usage", "total_tokens") != 8.0 {
				t.Fatalf("usage: %s", body)
			}
			if got := resp.Header.Get("x-llmclient-upstream"); got != tc.upstream {
				t.Fatalf("upstream header %q", got)
			}
			if _, err := strconv.ParseFloat(resp.Header.Get("x-llmclient-overhead-ms"), 64); err != nil {
				t.Fatalf("overhead header %q", resp.Header.Get("x-llmclient-overhead-ms"))
			}
			if resp.Header.Get("x-request-id") == "" {
				t.Fatal("no request id")
			}
		})
	}
	if oa.lastKey() != "sk-upstream-1" || an.lastKey() != "sk-upstream-1" {
		t.Fatalf("upstream keys %q %q", oa.lastKey(), an.lastKey())
	}
	if strings.Contains(oa.lastBody(), "gw-key") || strings.Contains(g.logs.String(), "gw-key") || strings.Contains(g.logs.String(), "sk-upstream") {
		t.Fatal("a key leaked into an upstream body or the log")
	}
}

func TestOpenAIChatStreamEndsWithUsageAndDone(t *testing.T) {
	oa, an := newVendor(t, "openai"), newVendor(t, "anthropic")
	g := startGateway(t, baseConfig(oa, an, ""))
	for _, model := range []string{"gpt-4o", "claude-sonnet"} {
		t.Run(model, func(t *testing.T) {
			resp, body := post(t, g.api.URL+"/v1/chat/completions", "gw-key-a",
				`{"model":"`+model+`","messages":[{"role":"user","content":"hi"}],"stream":true,"stream_options":{"include_usage":true}}`)
			if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("content-type"), "text/event-stream") {
				t.Fatalf("status %d %s: %s", resp.StatusCode, resp.Header.Get("content-type"), body)
			}
			evs := parseSSE(t, body)
			if len(evs) < 4 || evs[len(evs)-1].data != "[DONE]" {
				t.Fatalf("events: %q", body)
			}
			var text strings.Builder
			finish := ""
			for i, e := range evs[:len(evs)-2] {
				m := decode(t, e.data)
				if at(m, "object") != "chat.completion.chunk" {
					t.Fatalf("chunk %d: %s", i, e.data)
				}
				if i == 0 && at(m, "choices", 0, "delta", "role") != "assistant" {
					t.Fatalf("first chunk has no role: %s", e.data)
				}
				if s, ok := at(m, "choices", 0, "delta", "content").(string); ok {
					text.WriteString(s)
				}
				if f, ok := at(m, "choices", 0, "finish_reason").(string); ok {
					finish = f
				}
			}
			if text.String() != "Hello" || finish != "stop" {
				t.Fatalf("text %q finish %q: %s", text.String(), finish, body)
			}
			u := decode(t, evs[len(evs)-2].data)
			if len(at(u, "choices").([]any)) != 0 || at(u, "usage", "prompt_tokens") != 5.0 || at(u, "usage", "completion_tokens") != 2.0 {
				t.Fatalf("usage chunk: %s", evs[len(evs)-2].data)
			}
		})
	}
	// Without include_usage there is no usage chunk.
	_, body := post(t, g.api.URL+"/v1/chat/completions", "gw-key-a", `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}],"stream":true}`)
	if strings.Contains(body, `"choices":[]`) || !strings.HasSuffix(body, "data: [DONE]\n\n") {
		t.Fatalf("body: %s", body)
	}
}

func TestAnthropicMessagesReachesEitherVendor(t *testing.T) {
	oa, an := newVendor(t, "openai"), newVendor(t, "anthropic")
	g := startGateway(t, baseConfig(oa, an, ""))
	for _, tc := range []struct{ model, text string }{{"claude-sonnet", "hello from anthropic"}, {"gpt-4o", "hello from openai"}} {
		t.Run(tc.model, func(t *testing.T) {
			resp, body := post(t, g.api.URL+"/v1/messages", "", `{"model":"`+tc.model+`","max_tokens":64,"system":"be brief","messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}]}`,
				"x-api-key", "gw-key-a", "anthropic-version", "2023-06-01")
			if resp.StatusCode != 200 {
				t.Fatalf("status %d: %s", resp.StatusCode, body)
			}
			m := decode(t, body)
			if at(m, "type") != "message" || at(m, "role") != "assistant" || at(m, "content", 0, "type") != "text" ||
				at(m, "content", 0, "text") != tc.text || at(m, "stop_reason") != "end_turn" || !strings.HasPrefix(at(m, "id").(string), "msg_") {
				t.Fatalf("body: %s", body)
			}
			if at(m, "usage", "input_tokens") != 5.0 || at(m, "usage", "output_tokens") != 3.0 {
				t.Fatalf("usage: %s", body)
			}
		})
		t.Run(tc.model+"/stream", func(t *testing.T) {
			resp, body := post(t, g.api.URL+"/v1/messages", "", `{"model":"`+tc.model+`","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"hi"}]}`,
				"x-api-key", "gw-key-a")
			if resp.StatusCode != 200 {
				t.Fatalf("status %d: %s", resp.StatusCode, body)
			}
			evs := parseSSE(t, body)
			var names []string
			var text strings.Builder
			for _, e := range evs {
				names = append(names, e.name)
				m := decode(t, e.data)
				if at(m, "type") != e.name {
					t.Fatalf("event %s has type %v", e.name, at(m, "type"))
				}
				if s, ok := at(m, "delta", "text").(string); ok {
					text.WriteString(s)
				}
			}
			want := "message_start content_block_start content_block_delta content_block_delta content_block_stop message_delta message_stop"
			if strings.Join(names, " ") != want || text.String() != "Hello" {
				t.Fatalf("events %v text %q", names, text.String())
			}
			md := decode(t, evs[len(evs)-2].data)
			if at(md, "delta", "stop_reason") != "end_turn" || at(md, "usage", "output_tokens") != 2.0 {
				t.Fatalf("message_delta: %s", evs[len(evs)-2].data)
			}
		})
	}
}

func TestAnthropicToolUseRoundTripsThroughOpenAIUpstream(t *testing.T) {
	oa, an := newVendor(t, "openai"), newVendor(t, "anthropic")
	oa.setHandler(func(w http.ResponseWriter, r *http.Request, n int) bool {
		w.Header().Set("content-type", "application/json")
		io.WriteString(w, `{"id":"chatcmpl-t","object":"chat.completion","created":1,"model":"gpt-up","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"weather","arguments":"{\"city\":\"Oslo\"}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":5,"completion_tokens":3,"total_tokens":8}}`)
		return true
	})
	g := startGateway(t, baseConfig(oa, an, ""))
	resp, body := post(t, g.api.URL+"/v1/messages", "gw-key-a", `{"model":"gpt-4o","max_tokens":64,
		"tools":[{"name":"weather","description":"w","input_schema":{"type":"object","properties":{"city":{"type":"string"}}}}],
		"messages":[{"role":"user","content":"weather?"},
		  {"role":"assistant","content":[{"type":"tool_use","id":"call_0","name":"weather","input":{"city":"Bergen"}}]},
		  {"role":"user","content":[{"type":"tool_result","tool_use_id":"call_0","content":"rain"},{"type":"text","text":"and Oslo?"}]}]}`)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	m := decode(t, body)
	if at(m, "stop_reason") != "tool_use" || at(m, "content", 0, "type") != "tool_use" || at(m, "content", 0, "name") != "weather" ||
		at(m, "content", 0, "input", "city") != "Oslo" {
		t.Fatalf("body: %s", body)
	}
	up := decode(t, oa.lastBody())
	msgs := at(up, "messages").([]any)
	if len(msgs) != 4 || at(msgs[1], "tool_calls", 0, "function", "name") != "weather" || at(msgs[2], "role") != "tool" ||
		at(msgs[2], "tool_call_id") != "call_0" || at(msgs[3], "role") != "user" {
		t.Fatalf("upstream got: %s", oa.lastBody())
	}
}

func TestEmbeddingsFloatAndBase64(t *testing.T) {
	oa, an := newVendor(t, "openai"), newVendor(t, "anthropic")
	g := startGateway(t, baseConfig(oa, an, ""))
	resp, body := post(t, g.api.URL+"/v1/embeddings", "gw-key-a", `{"model":"text-embedding-3-small","input":["a","b"]}`)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	m := decode(t, body)
	if at(m, "object") != "list" || at(m, "data", 1, "index") != 1.0 || at(m, "data", 1, "embedding", 2) != 1.0 ||
		at(m, "data", 0, "embedding", 1) != -0.25 || at(m, "usage", "prompt_tokens") != 4.0 {
		t.Fatalf("body: %s", body)
	}
	_, body = post(t, g.api.URL+"/embeddings", "gw-key-a", `{"model":"text-embedding-3-small","input":"a","encoding_format":"base64"}`)
	s, _ := at(decode(t, body), "data", 0, "embedding").(string)
	raw, err := base64.StdEncoding.DecodeString(s)
	if err != nil || len(raw) != 12 || math.Float32frombits(binary.LittleEndian.Uint32(raw[4:])) != -0.25 {
		t.Fatalf("base64 embedding: %s", body)
	}
}

func TestModelsListsWhatTheKeyMayCall(t *testing.T) {
	oa, an := newVendor(t, "openai"), newVendor(t, "anthropic")
	g := startGateway(t, baseConfig(oa, an, ""))
	get := func(key string) (int, map[string]any) {
		req, _ := http.NewRequest("GET", g.api.URL+"/v1/models", nil)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			return resp.StatusCode, nil
		}
		return resp.StatusCode, decode(t, string(b))
	}
	ids := func(m map[string]any) []string {
		var out []string
		for _, d := range at(m, "data").([]any) {
			out = append(out, at(d, "id").(string))
		}
		return out
	}
	if _, m := get("gw-key-b"); strings.Join(ids(m), ",") != "gpt-4o-mini" {
		t.Fatalf("tenant b: %v", ids(m))
	}
	if _, m := get("gw-key-a"); len(ids(m)) != 6 || ids(m)[0] != "both" {
		t.Fatalf("tenant a: %v", ids(m))
	}
	if code, _ := get("nope"); code != 401 {
		t.Fatalf("unknown key: %d", code)
	}
}
