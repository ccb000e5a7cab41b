package anthropic_test

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/internal/providertest"
)

func event(name, data string) string { return "event: " + name + "\ndata: " + data + "\n\n" }

var (
	evStart = event("message_start", `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"claude-opus-4-6","usage":{"input_tokens":5,"output_tokens":1}}}`)
	evBlock = event("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`)
	evBad   = event("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"x`)
	evEnd   = event("content_block_stop", `{"type":"content_block_stop","index":0}`)
	evDelta = event("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":3}}`)
	evStop  = event("message_stop", `{"type":"message_stop"}`)
)

func evText(s string) string {
	return event("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"`+s+`"}}`)
}

// A content_block_delta whose data does not parse, between good events, is skipped and
// counted; the stream completes.
func TestStreamSkipsMalformedEvent(t *testing.T) {
	st := openStream(t, providertest.SSE(evStart+evBlock+evText("Hel")+evBad+evText("lo")+evEnd+evDelta+evStop))
	got, err := providertest.Drain(st)
	if err != nil {
		t.Fatalf("err = %v", err)
	}
	providertest.EqualLines(t, got, []string{
		"id=msg_1 model=claude-opus-4-6", `text="Hel"`, `text="lo"`,
		"finish=stop(end_turn) usage=in:5,out:3,total:8,cached:0,reasoning:0",
	})
	if n := st.(interface{ SkippedEvents() int }).SkippedEvents(); n != 1 {
		t.Errorf("SkippedEvents() = %d, want 1", n)
	}
}

// Past the bound, before any good event, or in an event that carries the end, a
// malformed event fails the stream; a skipped event that may have been the message_delta
// leaves message_stop a cut, not a clean end.
func TestStreamMalformedEventFails(t *testing.T) {
	tests := []struct {
		name, body string
		cut        bool
		message    string
	}{
		{"past the bound", evStart + evBlock + strings.Repeat(evBad, 9) + evEnd + evDelta + evStop, false, "8 malformed events skipped"},
		{"before any event", evBad + evStart + evBlock + evEnd + evDelta + evStop, false, "malformed"},
		{"malformed message_delta", evStart + evBlock + evText("Hi") + evEnd + event("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_`) + evStop, false, "malformed \"message_delta\" event"},
		{"malformed message_stop", evStart + evBlock + evText("Hi") + evEnd + evDelta + event("message_stop", `{"type":"mess`), false, "malformed \"message_stop\" event"},
		{"malformed error event", evStart + evBlock + evText("Hi") + event("error", `{"type":"error","error":{"type":"overl`) + evEnd + evDelta + evStop, false, "malformed \"error\" event"},
		{"unnamed message_delta skipped", evStart + evBlock + evText("Hi") + evEnd + `data: {"type":"message_delta","delta":{"stop_reason":"end_` + "\n\n" + evStop, true, ""},
		{"skipped then cut", evStart + evBlock + evText("Hi") + evBad, true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := providertest.Drain(openStream(t, providertest.SSE(tt.body)))
			if tt.cut {
				if !errors.Is(err, io.ErrUnexpectedEOF) {
					t.Fatalf("err = %v, want a cut", err)
				}
				return
			}
			var e *llmclient.Error
			if !errors.As(err, &e) || e.Class != failure.ServerError || !strings.Contains(e.Message, tt.message) {
				t.Fatalf("err = %v (class %v)", err, llmclient.ClassOf(err))
			}
		})
	}
}
