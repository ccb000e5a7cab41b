package anthropic_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/internal/providertest"
)

// streamText is a text stream in the shape of docs.anthropic.com/en/docs/build-with-claude/streaming.
const streamText = `event: message_start
data: {"type": "message_start", "message": {"id": "msg_1nZdL29xx5MUA1yADyHTEsnR8uuvGzszyY", "type": "message", "role": "assistant", "content": [], "model": "claude-opus-4-6", "stop_reason": null, "stop_sequence": null, "usage": {"input_tokens": 25, "cache_read_input_tokens": 100, "cache_creation_input_tokens": 0, "output_tokens": 1}}}

event: content_block_start
data: {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}

event: ping
data: {"type": "ping"}

event: content_block_delta
data: {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hello"}}

: keep-alive

event: content_block_delta
data: {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "!"}}

event: content_block_stop
data: {"type": "content_block_stop", "index": 0}

event: message_delta
data: {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence":null}, "usage": {"output_tokens": 15}}

event: message_stop
data: {"type": "message_stop"}

`

// streamTools has thinking, text and a tool_use block with streamed JSON input.
const streamTools = `event: message_start
data: {"type":"message_start","message":{"id":"msg_014p7gG3wDgGV9EUtLvnow3U","type":"message","role":"assistant","model":"claude-sonnet-4-5","stop_sequence":null,"usage":{"input_tokens":472,"output_tokens":2},"content":[],"stop_reason":null}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"Need the weather tool."}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: content_block_start
data: {"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Let me check."}}

event: content_block_stop
data: {"type":"content_block_stop","index":1}

event: content_block_start
data: {"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_01T1x1fJ34qAmk2tNTrN7Up6","name":"get_weather","input":{}}}

event: content_block_delta
data: {"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"city\": \"San"}}

event: content_block_delta
data: {"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":" Francisco\"}"}}

event: content_block_stop
data: {"type":"content_block_stop","index":2}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":40}}

event: message_delta
data: {"type":"message_delta","delta":{},"usage":{"output_tokens":89}}

event: message_stop
data: {"type":"message_stop"}

`

const overloadedEvent = `event: error
data: {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}

`

func openStream(t *testing.T, reply http.HandlerFunc) llmclient.ProviderStream {
	t.Helper()
	p, _ := serve(t, reply)
	st, err := p.Stream(context.Background(), providertest.UserCall("claude-opus-4-6", llmclient.UserMessage("Hello")))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func TestStreamText(t *testing.T) {
	got, err := providertest.Drain(openStream(t, providertest.SSE(streamText)))
	if err != nil {
		t.Fatal(err)
	}
	providertest.EqualLines(t, got, []string{
		"id=msg_1nZdL29xx5MUA1yADyHTEsnR8uuvGzszyY model=claude-opus-4-6",
		"keep-alive",
		`text="Hello"`,
		"keep-alive",
		`text="!"`,
		"finish=stop(end_turn) usage=in:125,out:15,total:140,cached:100,reasoning:0",
	})
}

func TestStreamToolUse(t *testing.T) {
	got, err := providertest.Drain(openStream(t, providertest.SSE(streamTools)))
	if err != nil {
		t.Fatal(err)
	}
	providertest.EqualLines(t, got, []string{
		"id=msg_014p7gG3wDgGV9EUtLvnow3U model=claude-sonnet-4-5",
		`reasoning="Need the weather tool."`,
		`text="Let me check."`,
		"tool[2]=toolu_01T1x1fJ34qAmk2tNTrN7Up6,get_weather,",
		`tool[2]=,,{"city": "San`,
		`tool[2]=,, Francisco"}`,
		"finish=tool_calls(tool_use) usage=in:472,out:40,total:512,cached:0,reasoning:0",
		"usage=in:472,out:89,total:561,cached:0,reasoning:0",
	})
}

// TestStreamDeltaInputTokens checks that a message_delta that reports input counts
// (cumulative) wins over message_start's.
func TestStreamDeltaInputTokens(t *testing.T) {
	body := strings.Replace(streamText, `"usage": {"output_tokens": 15}`,
		`"usage": {"input_tokens": 30, "cache_read_input_tokens": 100, "cache_creation_input_tokens": null, "output_tokens": 15}`, 1)
	got, err := providertest.Drain(openStream(t, providertest.SSE(body)))
	if err != nil {
		t.Fatal(err)
	}
	if last := got[len(got)-1]; last != "finish=stop(end_turn) usage=in:130,out:15,total:145,cached:100,reasoning:0" {
		t.Errorf("last chunk = %s", last)
	}
}

// TestStreamCacheWrite checks that cache writes reported in message_start count as input
// and as CacheWriteTokens.
func TestStreamCacheWrite(t *testing.T) {
	body := strings.Replace(streamText, `"cache_creation_input_tokens": 0`, `"cache_creation_input_tokens": 2048`, 1)
	got, err := providertest.Drain(openStream(t, providertest.SSE(body)))
	if err != nil {
		t.Fatal(err)
	}
	if last := got[len(got)-1]; last != "finish=stop(end_turn) usage=in:2173,out:15,total:2188,cached:100,reasoning:0,cache_write:2048" {
		t.Errorf("last chunk = %s", last)
	}
}

func TestStreamErrorEvent(t *testing.T) {
	head, _, _ := strings.Cut(streamText, "event: content_block_delta")
	cases := map[string]struct {
		body   string
		chunks int
	}{
		"before first token": {head + overloadedEvent, 2}, // message_start, ping
		"mid-stream":         {strings.Replace(streamText, "event: content_block_stop", strings.TrimSuffix(overloadedEvent, "\n")+"\nevent: content_block_stop", 1), 5},
		"only event":         {overloadedEvent, 0},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, e := providertest.DrainError(t, openStream(t, providertest.SSE(tc.body)))
			if e.Class != failure.Overloaded || e.Type != "overloaded_error" || e.Message != "Overloaded" || e.Status != 200 {
				t.Errorf("error = %+v", e)
			}
			if len(got) != tc.chunks {
				t.Errorf("chunks before the error = %q, want %d", got, tc.chunks)
			}
		})
	}
	t.Run("unknown type", func(t *testing.T) {
		st := openStream(t, providertest.SSE(`event: error
data: {"type":"error","error":{"type":"mystery_error","message":"?"}}

`))
		_, err := st.Recv()
		if c := llmclient.ClassOf(err); c != failure.ServerError {
			t.Errorf("class = %v, want server_error", c)
		}
	})
}

func TestStreamCut(t *testing.T) {
	cut, _, _ := strings.Cut(streamText, "event: message_delta")
	providertest.CheckStreamCuts(t, openStream, providertest.StreamCuts{
		Unfinished: cut,
		Chunks:     5,
		Dropped:    cut,
		Garbage:    "event: message_start\ndata: {not json\n\n",
	})
}

func TestStreamHTTPError(t *testing.T) {
	p, _ := serve(t, providertest.Fixed(529, errBody("overloaded_error", "Overloaded")))
	st, err := p.Stream(context.Background(), providertest.UserCall("m", llmclient.UserMessage("hi")))
	if st != nil || llmclient.ClassOf(err) != failure.Overloaded {
		t.Fatalf("Stream = %v, %v; want an overloaded error", st, err)
	}
}

// TestStreamCloseUnblocks checks that Close ends a Recv waiting on a silent upstream.
func TestStreamCloseUnblocks(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	head, _, _ := strings.Cut(streamText, "event: content_block_start")
	st := openStream(t, providertest.Stall(head, release))
	if _, err := st.Recv(); err != nil {
		t.Fatal(err)
	}
	providertest.CheckCloseUnblocks(t, st)
}

// TestStreamEmptyData checks events whose data line is empty: they are read from their
// name, so an empty "event: ping" is a keep-alive and an empty "event: message_stop" ends
// the stream, instead of either failing it as a malformed event.
func TestStreamEmptyData(t *testing.T) {
	emptyPing := strings.Replace(streamText, `data: {"type": "ping"}`, "data:", 1)
	got, err := providertest.Drain(openStream(t, providertest.SSE(emptyPing)))
	if err != nil {
		t.Fatalf("empty ping: %v", err)
	}
	if len(got) != 6 || got[1] != "keep-alive" {
		t.Errorf("empty ping: chunks = %q", got)
	}
	emptyStop := strings.Replace(streamText, `data: {"type": "message_stop"}`, "data: ", 1)
	if _, err := providertest.Drain(openStream(t, providertest.SSE(emptyStop))); err != nil {
		t.Errorf("empty message_stop: %v, want a clean end", err)
	}
}

// TestStreamToolWithoutInput checks that a tool_use block that streams no input (a tool
// without parameters: no input_json_delta, or only an empty one) ends with "{}" as its
// arguments, as the same call has in a one-shot response, instead of "" (which is not JSON).
func TestStreamToolWithoutInput(t *testing.T) {
	noArgs := `event: message_start
data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],"usage":{"input_tokens":10,"output_tokens":1}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_a","name":"get_time","input":{}}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":""}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: content_block_start
data: {"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_b","name":"get_date","input":{}}}

event: content_block_stop
data: {"type":"content_block_stop","index":1}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":20}}

event: message_stop
data: {"type":"message_stop"}

`
	got, err := providertest.Drain(openStream(t, providertest.SSE(noArgs)))
	if err != nil {
		t.Fatal(err)
	}
	providertest.EqualLines(t, got, []string{
		"id=msg_1 model=claude-sonnet-4-5",
		"tool[0]=toolu_a,get_time,",
		"tool[0]=,,{}",
		"tool[1]=toolu_b,get_date,",
		"tool[1]=,,{}",
		"finish=tool_calls(tool_use) usage=in:10,out:20,total:30,cached:0,reasoning:0",
	})
}
