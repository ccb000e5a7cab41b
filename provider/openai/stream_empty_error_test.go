package openai_test

import (
	"context"
	"testing"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/internal/providertest"
	"github.com/llmclient/llmclient/provider/openai"
)

// TestStreamEmptyErrorEvent checks that a failure event whose data line is empty still
// fails the stream (as a server_error: the upstream failed after HTTP 200) instead of being
// skipped as an event that carries nothing, in Chat Completions and in the Responses API.
func TestStreamEmptyErrorEvent(t *testing.T) {
	chat := `data: {"id":"c1","model":"m","choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}]}

event: error
data:

data: {"id":"c1","model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}

data: [DONE]

`
	created := sseEvent("response.created", `{"type":"response.created","response":{"id":"r1","model":"m"}}`)
	text := sseEvent("response.output_text.delta", `{"type":"response.output_text.delta","delta":"Hi"}`)
	completed := sseEvent("response.completed", `{"type":"response.completed","response":{"id":"r1","model":"m","status":"completed"}}`)
	for _, tc := range []struct {
		name string
		body string
		opts []openai.Option
	}{
		{"chat error", chat, nil},
		{"responses error", created + text + "event: error\ndata:\n\n" + completed, []openai.Option{openai.WithResponsesAPI()}},
		{"responses failed", created + text + "event: response.failed\ndata: \n\n" + completed, []openai.Option{openai.WithResponsesAPI()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := newUpstream(t, reply{Header: map[string]string{"Content-Type": "text/event-stream"}, Body: tc.body})
			st, err := newProvider(t, u, tc.opts...).Stream(context.Background(), simpleCall("m"))
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			got, err := providertest.Drain(st)
			if c := llmclient.ClassOf(err); c != failure.ServerError {
				t.Errorf("chunks %q, err = %v (class %v), want a server_error", got, err, c)
			}
		})
	}
}
