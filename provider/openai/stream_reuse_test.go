package openai_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/internal/providertest"
	"github.com/llmclient/llmclient/provider/openai"
)

// Bodies that end with the vendor's end marker.
const (
	chatDone = `data: {"id":"c1","object":"chat.completion.chunk","model":"gpt-4o","choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}]}` + "\n\n" +
		`data: {"id":"c1","object":"chat.completion.chunk","model":"gpt-4o","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n" +
		"data: [DONE]\n\n"
	responsesDone = "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"r1\",\"model\":\"gpt-4o\"}}\n\n" +
		"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"Hi\"}\n\n" +
		"event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"r1\",\"model\":\"gpt-4o\",\"status\":\"completed\"}}\n\n"
	// oneShotDone is a completion sent whole to a streaming request.
	oneShotDone = `{"id":"c1","object":"chat.completion","model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"Hi"},"finish_reason":"stop"}]}` + "\n"
)

// opener opens a stream on a Provider with opts pointed at the test server.
func opener(opts ...openai.Option) providertest.Opener {
	return func(t *testing.T, srv *httptest.Server) llmclient.ProviderStream {
		t.Helper()
		p, err := openai.New(append([]openai.Option{openai.WithBaseURL(srv.URL + "/v1"),
			openai.WithHTTPClient(srv.Client())}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		st, err := p.Stream(context.Background(), simpleCall("gpt-4o"))
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
}

var endBodies = []struct {
	name string
	body string
	opts []openai.Option
}{
	{"chat completions", chatDone, nil},
	{"one-shot body", oneShotDone, nil},
	{"responses", responsesDone, []openai.Option{openai.WithResponsesAPI()}},
}

// TestStreamCloseAfterEndKeepsConnection: a stream read to its end marker and closed
// gives its connection back to the pool, even when the body's end arrives after the marker.
func TestStreamCloseAfterEndKeepsConnection(t *testing.T) {
	for _, tc := range endBodies {
		t.Run(tc.name, func(t *testing.T) {
			providertest.CheckEndKeepsConnection(t, tc.body, opener(tc.opts...))
		})
	}
}

// TestStreamCloseAfterEndHostileUpstream: an upstream that holds the body open after the
// end marker, or keeps sending, does not hold up Close.
func TestStreamCloseAfterEndHostileUpstream(t *testing.T) {
	for _, tc := range endBodies {
		t.Run(tc.name, func(t *testing.T) {
			providertest.CheckEndHostileUpstream(t, tc.body, opener(tc.opts...))
		})
	}
}

// TestDecoderCloseAfterEndLeavesBody: the Transport's decoders do not read on in Close.
func TestDecoderCloseAfterEndLeavesBody(t *testing.T) {
	p, err := openai.New()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range endBodies {
		t.Run(tc.name, func(t *testing.T) {
			shape := openai.ShapeChatCompletions
			if len(tc.opts) > 0 {
				shape = openai.ShapeResponses
			}
			providertest.CheckDecoderLeavesBody(t, tc.body, func(resp *http.Response) llmclient.ProviderStream {
				return p.NewStream(shape, resp)
			})
		})
	}
}

// errorEventBodies are streams that fail in band after a 200.
var errorEventBodies = []struct{ name, body string }{
	{"error object", `data: {"id":"c1","object":"chat.completion.chunk","model":"gpt-4o","choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}]}` + "\n\n" +
		`data: {"error":{"message":"The server had an error","type":"server_error"}}` + "\n\n"},
	{"error event", "event: error\ndata: {\"error\":{\"message\":\"overloaded\",\"type\":\"server_error\"}}\n\n"},
}

// TestStreamCloseAfterErrorEventKeepsConnection: a stream that ends with an in-band error
// gives its connection back to the pool, and an upstream that holds the body open after
// it does not hold up Close.
func TestStreamCloseAfterErrorEventKeepsConnection(t *testing.T) {
	for _, tc := range errorEventBodies {
		t.Run(tc.name, func(t *testing.T) {
			providertest.CheckErrorEventEnd(t, tc.body, opener())
		})
	}
}
