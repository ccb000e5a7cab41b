package anthropic_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/internal/providertest"
	"github.com/llmclient/llmclient/provider/anthropic"
)

// oneShotMessage is a Message sent whole to a streaming request.
const oneShotMessage = `{"id":"msg_1","type":"message","role":"assistant","model":"claude-opus-4-6","content":[{"type":"text","text":"Hi"}],"stop_reason":"end_turn","usage":{"input_tokens":5,"output_tokens":1}}` + "\n"

var endBodies = []struct{ name, body string }{
	{"message_stop", streamText},
	{"one-shot body", oneShotMessage},
}

func opener(t *testing.T, srv *httptest.Server) llmclient.ProviderStream {
	t.Helper()
	p, err := anthropic.New(anthropic.WithBaseURL(srv.URL), anthropic.WithHTTPClient(srv.Client()), anthropic.WithAPIKey(testKey))
	if err != nil {
		t.Fatal(err)
	}
	st, err := p.Stream(context.Background(), providertest.UserCall("claude-opus-4-6", llmclient.UserMessage("Hello")))
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestStreamCloseAfterEndKeepsConnection: a stream read to message_stop and closed gives
// its connection back to the pool, even when the body's end arrives after the event.
func TestStreamCloseAfterEndKeepsConnection(t *testing.T) {
	for _, tc := range endBodies {
		t.Run(tc.name, func(t *testing.T) { providertest.CheckEndKeepsConnection(t, tc.body, opener) })
	}
}

// TestStreamCloseAfterEndHostileUpstream: an upstream that holds the body open after
// message_stop, or keeps sending, does not hold up Close.
func TestStreamCloseAfterEndHostileUpstream(t *testing.T) {
	for _, tc := range endBodies {
		t.Run(tc.name, func(t *testing.T) { providertest.CheckEndHostileUpstream(t, tc.body, opener) })
	}
}

// TestDecoderCloseAfterEndLeavesBody: the Transport's decoder does not read on in Close.
func TestDecoderCloseAfterEndLeavesBody(t *testing.T) {
	p, err := anthropic.New(anthropic.WithAPIKey(testKey))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range endBodies {
		t.Run(tc.name, func(t *testing.T) {
			providertest.CheckDecoderLeavesBody(t, tc.body, func(resp *http.Response) llmclient.ProviderStream {
				return p.NewStream("", resp)
			})
		})
	}
}

// errorEventBody is a stream that fails in band: an overloaded error after a 200.
const errorEventBody = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-opus-4-6\",\"content\":[],\"usage\":{\"input_tokens\":5,\"output_tokens\":1}}}\n\n" +
	"event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n"

// TestStreamCloseAfterErrorEventKeepsConnection: a stream that ends with an error event
// gives its connection back to the pool, and an upstream that holds the body open after
// the event does not hold up Close.
func TestStreamCloseAfterErrorEventKeepsConnection(t *testing.T) {
	providertest.CheckErrorEventEnd(t, errorEventBody, opener)
}
