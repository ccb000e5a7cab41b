package otel_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/failure"
	llmotel "github.com/llmclient/llmclient/otel"
	"github.com/llmclient/llmclient/provider/openai"
)

const (
	secretPrompt     = "my-secret-prompt-words"
	secretCompletion = "my-secret-completion-words"
)

// quotingServer is an upstream in OpenAI's wire format whose answers quote text: a 422
// whose message quotes the request's prompt, and a 200 whose body is cut in the middle
// of the completion.
func quotingServer(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		if strings.Contains(string(body), "cut") {
			_, _ = io.WriteString(w, `{"id":"c1","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"`+secretCompletion)
			return
		}
		w.WriteHeader(http.StatusUnprocessableEntity)
		_, _ = io.WriteString(w, `{"error":{"message":"Invalid content: '`+secretPrompt+`' is not allowed","type":"invalid_request_error","code":"invalid_value"}}`)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func quotingCall(t *testing.T, r *rig, url, prompt string) {
	t.Helper()
	p, err := openai.New(openai.WithBaseURL(url+"/v1"), openai.WithAPIKey("sk-test"))
	require.NoError(t, err)
	c := r.client(t, llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: p}), llmclient.WithMaxAttempts(1))
	_, err = c.Complete(context.Background(), &llmclient.Request{Model: "m",
		Messages: []llmclient.Message{llmclient.UserMessage(prompt + " " + secretPrompt)}})
	require.Error(t, err)
}

// spanLeaks returns the spans whose status description or attributes quote text.
func spanLeaks(spans []tracetest.SpanStub, text ...string) []string {
	var out []string
	for _, s := range spans {
		for _, x := range text {
			if strings.Contains(s.Status.Description, x) {
				out = append(out, s.Name+": status "+s.Status.Description)
			}
			for _, kv := range s.Attributes {
				if strings.Contains(kv.Value.Emit(), x) {
					out = append(out, s.Name+": "+string(kv.Key))
				}
			}
		}
	}
	return out
}

// Span status descriptions name the failure (class, upstream, status, the vendor's code)
// but not the vendor's message or a snippet of the body, which can quote the prompt (a
// 422 that repeats the offending input) or the completion (a 2xx body cut short); with
// WithErrorMessages they carry the whole error text.
func TestSpanStatusHoldsNoContent(t *testing.T) {
	srv := quotingServer(t)
	for _, prompt := range []string{"quote", "cut"} {
		t.Run(prompt, func(t *testing.T) {
			r := newRig(t)
			quotingCall(t, r, srv.URL, prompt)
			spans := r.spans.GetSpans()
			require.NotEmpty(t, spans)
			assert.Empty(t, spanLeaks(spans, secretPrompt, secretCompletion))
			call := r.one(t, "chat m")
			assert.Equal(t, codes.Error, call.Status.Code)
			assert.Contains(t, call.Status.Description, `upstream "a"`)
			if prompt == "quote" {
				assert.Contains(t, call.Status.Description, "status 422")
				assert.Contains(t, call.Status.Description, "invalid_value")
			}
			att := r.one(t, "attempt a")
			assert.Equal(t, codes.Error, att.Status.Code)
			assert.NotEmpty(t, att.Status.Description)

			opted := newRig(t, llmotel.WithErrorMessages(true))
			quotingCall(t, opted, srv.URL, prompt)
			want := secretPrompt
			if prompt == "cut" {
				want = secretCompletion
			}
			assert.Contains(t, opted.one(t, "chat m").Status.Description, want, "opted in")
		})
	}
}

// quotingStream fails, after its first chunk, with an adapter's error that quotes the
// body (Message) and wraps the network error that broke the read: the Client wraps that
// error in its own (stream_interrupted).
type quotingStream struct{ n int }

func (s *quotingStream) Recv() (llmclient.Chunk, error) {
	s.n++
	if s.n == 1 {
		return llmclient.Chunk{Text: "hello"}, nil
	}
	return llmclient.Chunk{}, &llmclient.Error{Class: failure.ServerError, Status: 200,
		Message: "vendor: broken event; body: {\"delta\":\"" + secretCompletion + "\"}",
		Err:     &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}}
}

func (s *quotingStream) Close() error { return nil }

// quotingProvider's calls fail with errors that quote the prompt or the completion and
// wrap a network error.
type quotingProvider struct{}

func (quotingProvider) Complete(context.Context, *llmclient.Call) (*llmclient.Response, error) {
	// A 400 whose body read failed midway: the vendor's message and the read's error.
	return nil, &llmclient.Error{Class: failure.BadRequest, Status: 400,
		Message: "Invalid content: '" + secretPrompt + "'",
		Err:     &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}}
}

func (quotingProvider) Stream(context.Context, *llmclient.Call) (llmclient.ProviderStream, error) {
	return &quotingStream{}, nil
}

// A failure whose cause is a network error under another *llmclient.Error (an adapter's,
// with the vendor's message) names the network error alone: the status used to find the
// network error anywhere down the chain and then print the whole inner error, message
// included.
func TestSpanStatusNamesOnlyTheNetworkCause(t *testing.T) {
	const reset = "read tcp: connection reset by peer"
	r := newRig(t)
	c := r.client(t, llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: quotingProvider{}}),
		llmclient.WithStreamContinuation(false), llmclient.WithMaxAttempts(1))
	s, err := c.Stream(context.Background(), chatReq("s"))
	require.NoError(t, err)
	for s.Next() {
	}
	require.Error(t, s.Err())
	s.Close()
	_, err = c.Complete(context.Background(), chatReq("c"))
	require.Error(t, err)

	spans := r.spans.GetSpans()
	require.NotEmpty(t, spans)
	assert.Empty(t, spanLeaks(spans, secretPrompt, secretCompletion))
	for _, name := range []string{"chat s", "chat c"} {
		call := r.one(t, name)
		assert.Equal(t, codes.Error, call.Status.Code, name)
		assert.True(t, strings.HasSuffix(call.Status.Description, ": "+reset), "%s: %q", name, call.Status.Description)
	}
}
