package anthropic_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/internal/providertest"
)

// streamServerTool is a web-search turn as the Messages API streams it: a
// server_tool_use block (ContentBlockStartEvent.content_block ResponseServerToolUseBlock)
// whose input arrives as input_json_delta, a web_search_tool_result block, then text.
// The one-shot parser ignores server-tool blocks; the stream must too: the caller
// never executes a server tool.
const streamServerTool = `event: message_start
data: {"type":"message_start","message":{"id":"msg_ws","type":"message","role":"assistant","model":"claude-opus-4-6","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":10,"output_tokens":1}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"server_tool_use","id":"srvtoolu_014hJH82Qum7Td6UV8gDXThB","name":"web_search","input":{}}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"query\": \"weather NYC\"}"}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: content_block_start
data: {"type":"content_block_start","index":1,"content_block":{"type":"web_search_tool_result","tool_use_id":"srvtoolu_014hJH82Qum7Td6UV8gDXThB","content":[]}}

event: content_block_stop
data: {"type":"content_block_stop","index":1}

event: content_block_start
data: {"type":"content_block_start","index":2,"content_block":{"type":"text","text":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":2,"delta":{"type":"text_delta","text":"Sunny."}}

event: content_block_stop
data: {"type":"content_block_stop","index":2}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":20}}

event: message_stop
data: {"type":"message_stop"}

`

// TestStreamIgnoresServerToolUse checks that a server tool's blocks yield nothing: its
// input_json_delta is not a client tool-call delta (one without id and name, which the
// accumulator would turn into a ToolCall{Name:""} the caller would try to run), and its
// result block is not text. Only the text block's text is streamed.
func TestStreamIgnoresServerToolUse(t *testing.T) {
	got, err := providertest.Drain(openStream(t, providertest.SSE(streamServerTool)))
	if err != nil {
		t.Fatal(err)
	}
	providertest.EqualLines(t, got, []string{
		"id=msg_ws model=claude-opus-4-6",
		`text="Sunny."`,
		"finish=stop(end_turn) usage=in:10,out:20,total:30,cached:0,reasoning:0",
	})
}

// TestClientStreamServerToolUseHasNoToolCalls checks what a Client's stream makes of the
// same turn: no tool calls (web_search is a server tool, run by the API) and the text
// alone, as a one-shot answer has them.
func TestClientStreamServerToolUseHasNoToolCalls(t *testing.T) {
	p, _ := serve(t, providertest.SSE(streamServerTool))
	c, err := llmclient.New(llmclient.WithUpstream(llmclient.Upstream{Name: "anthropic", Provider: p}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	st, err := c.Stream(context.Background(), &llmclient.Request{Model: "claude-opus-4-6",
		Messages: []llmclient.Message{llmclient.UserMessage("Weather in NYC?")}})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for st.Next() {
	}
	if err := st.Err(); err != nil {
		t.Fatal(err)
	}
	resp := st.Response()
	if len(resp.ToolCalls) != 0 {
		t.Errorf("Response.ToolCalls = %+v (finish %v), want none: web_search is a server tool", resp.ToolCalls, resp.FinishReason)
	}
	if resp.Text != "Sunny." {
		t.Errorf("Response.Text = %q, want %q", resp.Text, "Sunny.")
	}
}

// TestCompleteIgnoresServerToolUse checks that the one-shot parser reads the same turn as
// the stream does: the text alone, no tool call.
func TestCompleteIgnoresServerToolUse(t *testing.T) {
	body := `{"id":"msg_ws","type":"message","role":"assistant","model":"claude-opus-4-6","content":[` +
		`{"type":"server_tool_use","id":"srvtoolu_014hJH82Qum7Td6UV8gDXThB","name":"web_search","input":{"query":"weather NYC"}},` +
		`{"type":"web_search_tool_result","tool_use_id":"srvtoolu_014hJH82Qum7Td6UV8gDXThB","content":[{"type":"web_search_result","url":"https://example.com","title":"Weather","encrypted_content":"abc"}]},` +
		`{"type":"text","text":"Sunny."}],` +
		`"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":10,"output_tokens":20}}`
	p, _ := serve(t, providertest.Fixed(http.StatusOK, body))
	resp := providertest.Complete(t, p, providertest.UserCall("claude-opus-4-6", llmclient.UserMessage("Weather in NYC?")))
	if len(resp.ToolCalls) != 0 || resp.Text != "Sunny." {
		t.Errorf("Complete: text %q, tool calls %+v; want %q and none", resp.Text, resp.ToolCalls, "Sunny.")
	}
}
