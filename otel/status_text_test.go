package otel_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/llmclient/llmclient"
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
