package anthropic_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/llmclient/llmclient"
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
	st, err := p.Stream(context.Background(), userCall("claude-opus-4-6", llmclient.UserMessage("Hello")))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func TestStreamText(t *testing.T) {
	got, err := drain(openStream(t, sseReply(streamText)))
	if err != nil {
		t.Fatal(err)
	}
	equalLines(t, got, []string{
		"id=msg_1nZdL29xx5MUA1yADyHTEsnR8uuvGzszyY model=claude-opus-4-6",
		"keep-alive",
		`text="Hello"`,
		"keep-alive",
		`text="!"`,
		"finish=stop(end_turn) usage=in:125,out:15,total:140,cached:100",
	})
}

func TestStreamToolUse(t *testing.T) {
	got, err := drain(openStream(t, sseReply(streamTools)))
	if err != nil {
		t.Fatal(err)
	}
	equalLines(t, got, []string{
		"id=msg_014p7gG3wDgGV9EUtLvnow3U model=claude-sonnet-4-5",
		`reasoning="Need the weather tool."`,
		`text="Let me check."`,
		"tool[2]=toolu_01T1x1fJ34qAmk2tNTrN7Up6,get_weather,",
		`tool[2]=,,{"city": "San`,
		`tool[2]=,, Francisco"}`,
		"finish=tool_calls(tool_use) usage=in:472,out:40,total:512,cached:0",
		"usage=in:472,out:89,total:561,cached:0",
	})
}

// TestStreamDeltaInputTokens checks that a message_delta that reports input counts
// (cumulative) wins over message_start's.
func TestStreamDeltaInputTokens(t *testing.T) {
	body := strings.Replace(streamText, `"usage": {"output_tokens": 15}`,
		`"usage": {"input_tokens": 30, "cache_read_input_tokens": 100, "cache_creation_input_tokens": null, "output_tokens": 15}`, 1)
	got, err := drain(openStream(t, sseReply(body)))
	if err != nil {
		t.Fatal(err)
	}
	if last := got[len(got)-1]; last != "finish=stop(end_turn) usage=in:130,out:15,total:145,cached:100" {
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
			st := openStream(t, sseReply(tc.body))
			got, err := drain(st)
			var e *llmclient.Error
			if !errors.As(err, &e) {
				t.Fatalf("err = %v, want *llmclient.Error", err)
			}
			if e.Class != llmclient.ClassOverloaded || e.Type != "overloaded_error" || e.Message != "Overloaded" || e.Status != 200 {
				t.Errorf("error = %+v", e)
			}
			if len(got) != tc.chunks {
				t.Errorf("chunks before the error = %q, want %d", got, tc.chunks)
			}
			if _, again := st.Recv(); again != err {
				t.Errorf("Recv after the error = %v, want the same error", again)
			}
		})
	}
	t.Run("unknown type", func(t *testing.T) {
		st := openStream(t, sseReply(`event: error
data: {"type":"error","error":{"type":"mystery_error","message":"?"}}

`))
		_, err := st.Recv()
		if c := llmclient.ClassOf(err); c != llmclient.ClassServerError {
			t.Errorf("class = %v, want server_error", c)
		}
	})
}

func TestStreamCut(t *testing.T) {
	cut, _, _ := strings.Cut(streamText, "event: message_delta")
	t.Run("clean EOF", func(t *testing.T) {
		got, err := drain(openStream(t, sseReply(cut)))
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("err = %v, want io.ErrUnexpectedEOF", err)
		}
		if len(got) != 5 {
			t.Errorf("chunks = %q", got)
		}
		if llmclient.ClassOf(err) != llmclient.ClassNetwork {
			t.Errorf("class = %v", llmclient.ClassOf(err))
		}
	})
	t.Run("connection dropped", func(t *testing.T) {
		st := openStream(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, cut)
			w.(http.Flusher).Flush()
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close() // in the middle of a chunked body
			}
		})
		_, err := drain(st)
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("err = %v, want io.ErrUnexpectedEOF", err)
		}
	})
	t.Run("empty body", func(t *testing.T) {
		_, err := drain(openStream(t, sseReply("")))
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("err = %v, want io.ErrUnexpectedEOF", err)
		}
	})
	t.Run("garbage event", func(t *testing.T) {
		_, err := drain(openStream(t, sseReply("event: message_start\ndata: {not json\n\n")))
		if c := llmclient.ClassOf(err); c != llmclient.ClassServerError {
			t.Fatalf("err = %v (class %v), want a server_error", err, c)
		}
	})
}

func TestStreamHTTPError(t *testing.T) {
	p, _ := serve(t, fixed(529, errBody("overloaded_error", "Overloaded")))
	st, err := p.Stream(context.Background(), userCall("m", llmclient.UserMessage("hi")))
	if st != nil || llmclient.ClassOf(err) != llmclient.ClassOverloaded {
		t.Fatalf("Stream = %v, %v; want an overloaded error", st, err)
	}
}

// TestStreamCloseUnblocks checks that Close ends a Recv waiting on a silent upstream.
func TestStreamCloseUnblocks(t *testing.T) {
	release := make(chan struct{})
	st := openStream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		head, _, _ := strings.Cut(streamText, "event: content_block_start")
		_, _ = io.WriteString(w, head)
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	defer close(release)
	if _, err := st.Recv(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := st.Recv()
		done <- err
	}()
	time.Sleep(10 * time.Millisecond) // let Recv block on the network (not a timing assertion)
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, net.ErrClosed) {
			t.Errorf("Recv after Close = %v, want net.ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not unblock Recv")
	}
	if err := st.Close(); err != nil {
		t.Errorf("second Close = %v", err)
	}
}
