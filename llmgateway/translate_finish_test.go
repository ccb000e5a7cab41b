package llmgateway_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
)

// What a front door of one vendor answers for another vendor's stop reasons and
// content-block numbering.

// writeAnEvent writes one Anthropic SSE event.
func writeAnEvent(w http.ResponseWriter, name, data string) {
	fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, data)
	w.(http.Flusher).Flush()
}

// answerAnthropicText makes an answer every request with text and stopReason, and
// stopSequence (JSON: null or a string), one-shot or streamed as the request asks.
func answerAnthropicText(an *vendor, text, stopReason, stopSequence string) {
	an.setHandler(func(w http.ResponseWriter, r *http.Request, n int) bool {
		if strings.Contains(an.lastBody(), `"stream":true`) {
			w.Header().Set("content-type", "text/event-stream")
			writeAnEvent(w, "message_start", `{"type":"message_start","message":{"id":"msg_up","type":"message","role":"assistant","model":"claude-up","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":5,"output_tokens":1}}}`)
			writeAnEvent(w, "content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`)
			writeAnEvent(w, "content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"`+text+`"}}`)
			writeAnEvent(w, "content_block_stop", `{"type":"content_block_stop","index":0}`)
			writeAnEvent(w, "message_delta", `{"type":"message_delta","delta":{"stop_reason":"`+stopReason+`","stop_sequence":`+stopSequence+`},"usage":{"output_tokens":3}}`)
			writeAnEvent(w, "message_stop", `{"type":"message_stop"}`)
			return true
		}
		w.Header().Set("content-type", "application/json")
		io.WriteString(w, `{"id":"msg_up","type":"message","role":"assistant","model":"claude-up","content":[{"type":"text","text":"`+text+`"}],"stop_reason":"`+stopReason+`","stop_sequence":`+stopSequence+`,"usage":{"input_tokens":5,"output_tokens":3}}`)
		return true
	})
}

// An Anthropic upstream answers "Let me check" (block 0) then two tool_use blocks (blocks
// 1 and 2), their arguments split across deltas. The OpenAI door numbers the calls 0 and
// 1, their positions in tool_calls, as OpenAI does: the SDKs' accumulators index by it.
func TestOpenAIStreamToolIndexesFromAnthropic(t *testing.T) {
	oa, an := newVendor(t, "openai"), newVendor(t, "anthropic")
	an.setHandler(func(w http.ResponseWriter, r *http.Request, n int) bool {
		w.Header().Set("content-type", "text/event-stream")
		writeAnEvent(w, "message_start", `{"type":"message_start","message":{"id":"msg_up","type":"message","role":"assistant","model":"claude-up","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":5,"output_tokens":1}}}`)
		writeAnEvent(w, "content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`)
		writeAnEvent(w, "content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Let me check"}}`)
		writeAnEvent(w, "content_block_stop", `{"type":"content_block_stop","index":0}`)
		for i, city := range []string{"Oslo", "Bergen"} {
			writeAnEvent(w, "content_block_start", fmt.Sprintf(`{"type":"content_block_start","index":%d,"content_block":{"type":"tool_use","id":"toolu_%d","name":"weather","input":{}}}`, i+1, i))
			writeAnEvent(w, "content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":{"type":"input_json_delta","partial_json":"{\"city\": "}}`, i+1))
			writeAnEvent(w, "content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":{"type":"input_json_delta","partial_json":"\"%s\"}"}}`, i+1, city))
			writeAnEvent(w, "content_block_stop", fmt.Sprintf(`{"type":"content_block_stop","index":%d}`, i+1))
		}
		writeAnEvent(w, "message_delta", `{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":20}}`)
		writeAnEvent(w, "message_stop", `{"type":"message_stop"}`)
		return true
	})
	g := startGateway(t, baseConfig(oa, an, ""))
	resp, body := post(t, g.api.URL+"/v1/chat/completions", "gw-key-a",
		`{"model":"claude-sonnet","stream":true,"messages":[{"role":"user","content":"weather in Oslo and Bergen?"}],
		  "tools":[{"type":"function","function":{"name":"weather","parameters":{"type":"object"}}}]}`)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	// Accumulate as openai-python does: by tool_calls[].index.
	type call struct{ id, args string }
	var calls []call
	for _, e := range parseSSE(t, body) {
		if e.data == "[DONE]" {
			continue
		}
		tcs, _ := at(decode(t, e.data), "choices", 0, "delta", "tool_calls").([]any)
		for _, tc := range tcs {
			i := int(at(tc, "index").(float64))
			if i > len(calls) {
				t.Fatalf("tool_calls index %d skips %d: %s", i, len(calls), body)
			}
			if i == len(calls) {
				calls = append(calls, call{})
			}
			if id, ok := at(tc, "id").(string); ok {
				calls[i].id = id
			}
			if a, ok := at(tc, "function", "arguments").(string); ok {
				calls[i].args += a
			}
		}
	}
	want := []call{{"toolu_0", `{"city": "Oslo"}`}, {"toolu_1", `{"city": "Bergen"}`}}
	if fmt.Sprint(calls) != fmt.Sprint(want) {
		t.Fatalf("accumulated tool calls %v, want %v\n%s", calls, want, body)
	}
}

// The reverse: an OpenAI upstream answers text then two parallel tool calls (indexes 0
// and 1). The Anthropic door numbers its content blocks 0, 1, 2 across the text and the
// tool_use blocks, each delta and stop naming its block.
func TestAnthropicStreamBlockIndexesFromOpenAI(t *testing.T) {
	oa, an := newVendor(t, "openai"), newVendor(t, "anthropic")
	oa.setHandler(func(w http.ResponseWriter, r *http.Request, n int) bool {
		writeOpenAIChunks(w,
			`{"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-up","choices":[{"index":0,"delta":{"role":"assistant","content":"Let me check"},"finish_reason":null}]}`,
			`{"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-up","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"weather","arguments":""}}]},"finish_reason":null}]}`,
			`{"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-up","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":\"Oslo\"}"}}]},"finish_reason":null}]}`,
			`{"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-up","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"name":"weather","arguments":""}}]},"finish_reason":null}]}`,
			`{"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-up","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":"{\"city\":\"Bergen\"}"}}]},"finish_reason":null}]}`,
			`{"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-up","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`,
			`{"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-up","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":9,"total_tokens":14}}`,
			`[DONE]`)
		return true
	})
	g := startGateway(t, baseConfig(oa, an, ""))
	resp, body := post(t, g.api.URL+"/v1/messages", "gw-key-a", `{"model":"gpt-4o","max_tokens":64,"stream":true,
		"tools":[{"name":"weather","input_schema":{"type":"object"}}],"messages":[{"role":"user","content":"weather in Oslo and Bergen?"}]}`)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	var starts []string
	open := -1
	for _, e := range parseSSE(t, body) {
		m := decode(t, e.data)
		switch e.name {
		case "content_block_start":
			i := int(at(m, "index").(float64))
			if open != -1 || i != len(starts) {
				t.Fatalf("block %d starts while %d is open, after %d blocks:\n%s", i, open, len(starts), body)
			}
			open = i
			starts = append(starts, fmt.Sprint(at(m, "content_block", "type"), ":", at(m, "content_block", "id")))
		case "content_block_delta", "content_block_stop":
			if i := int(at(m, "index").(float64)); i != open {
				t.Fatalf("%s for block %d while %d is open:\n%s", e.name, i, open, body)
			}
			if e.name == "content_block_stop" {
				open = -1
			}
		}
	}
	if want := "[text:<nil> tool_use:call_a tool_use:call_b]"; fmt.Sprint(starts) != want {
		t.Fatalf("blocks %v, want %s\n%s", starts, want, body)
	}
	if !strings.Contains(body, `"stop_reason":"tool_use"`) {
		t.Errorf("no stop_reason tool_use:\n%s", body)
	}
}

// Anthropic's stop_reason "refusal" (its classifiers cut the answer; no refusal message
// apart from the content) reaches an OpenAI caller as finish_reason "content_filter", the
// Chat Completions reason for content cut by a policy flag, with the content as sent;
// one-shot and streamed alike.
func TestOpenAIRefusalFromAnthropic(t *testing.T) {
	oa, an := newVendor(t, "openai"), newVendor(t, "anthropic")
	answerAnthropicText(an, "I can't help with that.", "refusal", `null`)
	g := startGateway(t, baseConfig(oa, an, ""))
	resp, body := post(t, g.api.URL+"/v1/chat/completions", "gw-key-a", `{"model":"claude-sonnet","messages":[{"role":"user","content":"x"}]}`)
	m := decode(t, body)
	if resp.StatusCode != 200 || at(m, "choices", 0, "finish_reason") != "content_filter" ||
		at(m, "choices", 0, "message", "content") != "I can't help with that." {
		t.Errorf("one-shot: an Anthropic refusal reaches an OpenAI caller as %d %s", resp.StatusCode, body)
	}
	resp, body = post(t, g.api.URL+"/v1/chat/completions", "gw-key-a", `{"model":"claude-sonnet","stream":true,"messages":[{"role":"user","content":"x"}]}`)
	if resp.StatusCode != 200 || !strings.Contains(body, `"finish_reason":"content_filter"`) || !strings.HasSuffix(body, "data: [DONE]\n\n") {
		t.Errorf("stream: an Anthropic refusal reaches an OpenAI caller as %d\n%s", resp.StatusCode, body)
	}
}

// The Anthropic door names the stop sequence that ended an answer when it is known: the
// request gave one, and the upstream stopped on a stop sequence. With more than one the
// Client does not say which matched, and stop_sequence stays null.
func TestAnthropicStopSequenceEchoed(t *testing.T) {
	oa, an := newVendor(t, "openai"), newVendor(t, "anthropic")
	answerAnthropicText(an, "1 2 3", "stop_sequence", `"4"`)
	g := startGateway(t, baseConfig(oa, an, ""))
	_, body := post(t, g.api.URL+"/v1/messages", "gw-key-a", `{"model":"claude-sonnet","max_tokens":10,"stop_sequences":["4"],"messages":[{"role":"user","content":"count"}]}`)
	m := decode(t, body)
	if at(m, "stop_reason") != "stop_sequence" || at(m, "stop_sequence") != "4" {
		t.Errorf("one-shot: stop_sequence lost: %s", body)
	}
	_, body = post(t, g.api.URL+"/v1/messages", "gw-key-a", `{"model":"claude-sonnet","max_tokens":10,"stream":true,"stop_sequences":["4"],"messages":[{"role":"user","content":"count"}]}`)
	if !strings.Contains(body, `"delta":{"stop_reason":"stop_sequence","stop_sequence":"4"}`) {
		t.Errorf("stream: stop_sequence lost:\n%s", body)
	}
	_, body = post(t, g.api.URL+"/v1/messages", "gw-key-a", `{"model":"claude-sonnet","max_tokens":10,"stop_sequences":["4","5"],"messages":[{"role":"user","content":"count"}]}`)
	m = decode(t, body)
	if at(m, "stop_reason") != "stop_sequence" || at(m, "stop_sequence") != nil {
		t.Errorf("two stop sequences: %s, want stop_sequence null (which one matched is not known)", body)
	}
}

// An OpenAI upstream may send more of a call's arguments after the next call began (its
// deltas name their call by index). The Anthropic door still sends one block at a time,
// every delta to the block open, each tool_use block started with its call's id and
// name, and the Anthropic SDK accumulates both calls whole.
func TestAnthropicStreamLateToolDeltaFromOpenAI(t *testing.T) {
	oa, an := newVendor(t, "openai"), newVendor(t, "anthropic")
	chunk := func(delta string) string {
		return `{"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-up","choices":[{"index":0,"delta":` + delta + `,"finish_reason":null}]}`
	}
	oa.setHandler(func(w http.ResponseWriter, r *http.Request, n int) bool {
		writeOpenAIChunks(w,
			chunk(`{"role":"assistant","content":"Let me check"}`),
			chunk(`{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"weather","arguments":"{\"city\":"}}]}`),
			chunk(`{"tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"name":"time","arguments":"{\"zone\":"}}]}`),
			chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"\"Oslo\"}"}}]}`),
			chunk(`{"content":" both"}`),
			chunk(`{"tool_calls":[{"index":1,"function":{"arguments":"\"CET\"}"}}]}`),
			`{"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-up","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`,
			`{"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-up","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":9,"total_tokens":14}}`,
			`[DONE]`)
		return true
	})
	g := startGateway(t, baseConfig(oa, an, ""))
	const req = `{"model":"gpt-4o","max_tokens":64,"stream":true,
		"tools":[{"name":"weather","input_schema":{"type":"object"}},{"name":"time","input_schema":{"type":"object"}}],
		"messages":[{"role":"user","content":"weather in Oslo, and the time?"}]}`
	resp, body := post(t, g.api.URL+"/v1/messages", "gw-key-a", req)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	var blocks []string
	open := -1
	for _, e := range parseSSE(t, body) {
		m := decode(t, e.data)
		switch e.name {
		case "content_block_start":
			i := int(at(m, "index").(float64))
			if open != -1 || i != len(blocks) {
				t.Fatalf("block %d starts while %d is open, after %d blocks:\n%s", i, open, len(blocks), body)
			}
			open = i
			cb := at(m, "content_block")
			if at(cb, "type") == "tool_use" && (at(cb, "id") == "" || at(cb, "name") == "") {
				t.Fatalf("a tool_use block without its id or name: %s\n%s", e.data, body)
			}
			blocks = append(blocks, fmt.Sprint(at(cb, "type"), ":", at(cb, "id")))
		case "content_block_delta", "content_block_stop":
			if i := int(at(m, "index").(float64)); i != open {
				t.Fatalf("%s for block %d while %d is open:\n%s", e.name, i, open, body)
			}
			if e.name == "content_block_stop" {
				open = -1
			}
		}
	}
	if want := "[text:<nil> tool_use:call_a tool_use:call_b text:<nil>]"; fmt.Sprint(blocks) != want {
		t.Fatalf("blocks %v, want %s\n%s", blocks, want, body)
	}
	// The SDK's accumulator, fed the same events, finds both calls' arguments whole.
	client := anthropic.NewClient(aoption.WithBaseURL(g.api.URL), aoption.WithAPIKey("gw-key-a"), aoption.WithMaxRetries(0))
	stream := client.Messages.NewStreaming(context.Background(), anthropic.MessageNewParams{
		Model: "gpt-4o", MaxTokens: 64,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("weather in Oslo, and the time?"))},
	})
	defer stream.Close()
	var acc anthropic.Message
	for stream.Next() {
		if err := acc.Accumulate(stream.Current()); err != nil {
			t.Fatalf("accumulate: %v\n%s", err, body)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, b := range acc.Content {
		switch b.Type {
		case "text":
			got = append(got, "text:"+b.Text)
		case "tool_use":
			got = append(got, b.ID+":"+b.Name+":"+string(b.Input))
		}
	}
	want := []string{"text:Let me check", `call_a:weather:{"city":"Oslo"}`, `call_b:time:{"zone":"CET"}`, "text: both"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("accumulated %q, want %q\n%s", got, want, body)
	}
}
