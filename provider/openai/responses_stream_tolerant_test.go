package openai_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/internal/providertest"
	"github.com/llmclient/llmclient/provider/openai"
)

// responsesStreamOf opens a typed Responses API stream over body.
func responsesStreamOf(t *testing.T, body string) llmclient.ProviderStream {
	t.Helper()
	p, _ := responsesProvider(t, reply{Header: map[string]string{"Content-Type": "text/event-stream"}, Body: body}, openai.WithAPIKey("sk-resp-secret"))
	st, err := p.Stream(context.Background(), simpleCall("m"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

const (
	respCreated   = `{"type":"response.created","response":{"id":"r1","model":"m"}}`
	respBadDelta  = `{"type":"response.output_text.delta","delta":"Hi`
	respCompleted = `{"type":"response.completed","response":{"id":"r1","model":"m","status":"completed","usage":{"input_tokens":3,"output_tokens":2,"total_tokens":5}}}`
)

func respText(s string) string {
	return sseEvent("response.output_text.delta", `{"type":"response.output_text.delta","delta":"`+s+`"}`)
}

// A malformed event between good ones is skipped and counted; the stream completes.
func TestResponsesStreamSkipsMalformedEvent(t *testing.T) {
	st := responsesStreamOf(t, sseEvent("response.created", respCreated)+respText("Hel")+
		sseEvent("response.output_text.delta", respBadDelta)+respText("lo")+sseEvent("response.completed", respCompleted))
	got, err := providertest.Drain(st)
	if err != nil {
		t.Fatalf("err = %v", err)
	}
	providertest.EqualLines(t, got, []string{
		"id=r1 model=m", `text="Hel"`, `text="lo"`,
		"id=r1 model=m finish=stop(completed) usage=in:3,out:2,total:5,cached:0,reasoning:0",
	})
	if n := st.(interface{ SkippedEvents() int }).SkippedEvents(); n != 1 {
		t.Errorf("SkippedEvents() = %d, want 1", n)
	}
}

// Past the bound, a malformed event fails the stream with the count in the message; a
// malformed event before any good one, a malformed error event, and a malformed terminal
// event followed by the end of the body are not a clean end.
func TestResponsesStreamMalformedEventFails(t *testing.T) {
	bad := sseEvent("response.output_text.delta", respBadDelta)
	tests := []struct {
		name, body string
		cut        bool
		message    string
	}{
		{"past the bound", sseEvent("response.created", respCreated) + strings.Repeat(bad, 9) + sseEvent("response.completed", respCompleted), false, "8 malformed events skipped"},
		{"before any event", bad + sseEvent("response.created", respCreated) + sseEvent("response.completed", respCompleted), false, "malformed stream event"},
		{"malformed error event", sseEvent("response.created", respCreated) + sseEvent("error", `{"type":"error","code":"x`) + sseEvent("response.completed", respCompleted), false, "malformed stream event"},
		{"malformed end", sseEvent("response.created", respCreated) + respText("Hi") + sseEvent("response.completed", respCompleted[:40]), true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := providertest.Drain(responsesStreamOf(t, tt.body))
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
