package anthropic_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/provider/anthropic"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func newDialect(t testing.TB, opts ...anthropic.Option) *anthropic.Provider {
	t.Helper()
	p, err := anthropic.New(opts...)
	require.NoError(t, err)
	return p
}

func TestDialectBaseURL(t *testing.T) {
	assert.Equal(t, "https://api.anthropic.com", newDialect(t).BaseURL())
	assert.Equal(t, "http://127.0.0.1:9/proxy", newDialect(t, anthropic.WithBaseURL("http://127.0.0.1:9/proxy")).BaseURL())
	// A base in the OpenAI SDKs' style, ending in /v1, is taken without it.
	assert.Equal(t, "http://127.0.0.1:9/proxy", newDialect(t, anthropic.WithBaseURL("http://127.0.0.1:9/proxy/v1")).BaseURL())
	assert.Equal(t, "http://127.0.0.1:9", newDialect(t, anthropic.WithBaseURL("http://127.0.0.1:9/v1/")).BaseURL())
}

// A base URL ending in /v1 sends to /v1/messages, not /v1/v1/messages.
func TestBaseURLWithV1(t *testing.T) {
	var path string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		path = r.URL.Path
		w.Header().Set("content-type", "application/json")
		_, _ = io.WriteString(w, `{"id":"m","type":"message","role":"assistant","model":"c","content":[{"type":"text","text":"hi"}],"stop_reason":"end_turn","usage":{"input_tokens":1,"output_tokens":1}}`)
	}))
	defer srv.Close()
	p := newDialect(t, anthropic.WithBaseURL(srv.URL+"/v1"), anthropic.WithAPIKey("sk-test"))
	_, err := p.Complete(context.Background(), &llmclient.Call{Model: "c", Request: &llmclient.Request{Model: "c", Messages: []llmclient.Message{llmclient.UserMessage("hi")}}})
	require.NoError(t, err)
	assert.Equal(t, "/v1/messages", path)
}

func TestDialectInspect(t *testing.T) {
	p := newDialect(t)
	body := `{"model":"claude-sonnet-4-5","max_tokens":512,"stream":true,
		"system":[{"type":"text","text":"Be brief."}],
		"messages":[{"role":"user","content":[{"type":"text","text":"What is this?"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AAAA"}}]},
			{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"look","input":{"q":1}}]},
			{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"a cat"}]}],
		"tools":[{"name":"look","description":"Look.","input_schema":{"type":"object"}}]}`
	call, ok := p.Inspect("POST", "/v1/messages", []byte(body))
	require.True(t, ok)
	assert.Equal(t, anthropic.ShapeMessages, call.Shape)
	assert.True(t, call.Stream)
	assert.Equal(t, "claude-sonnet-4-5", call.Request.Model)
	assert.Equal(t, 512, call.Request.MaxTokens)
	assert.Len(t, call.Request.Messages, 4, "system, user, assistant, tool result")
	assert.Len(t, call.Request.Tools, 1)

	// A body with an odd field still yields the routing fields.
	call, ok = p.Inspect("POST", "/v1/messages", []byte(`{"model":"claude-x","max_tokens":9,"stream":true,"messages":"odd"}`))
	require.True(t, ok)
	assert.Equal(t, "claude-x", call.Request.Model)
	assert.Equal(t, 9, call.Request.MaxTokens)
	assert.True(t, call.Stream)

	call, ok = p.Inspect("POST", "/v1/messages", nil)
	require.True(t, ok, "an unbuffered body still has its shape")
	assert.Empty(t, call.Request.Model)

	for _, tt := range []struct{ method, path string }{
		{"GET", "/v1/messages"}, {"POST", "/v1/messages/count_tokens"}, {"POST", "/v1/messages/batches"}, {"GET", "/v1/models"},
	} {
		_, ok := p.Inspect(tt.method, tt.path, []byte(body))
		assert.False(t, ok, "%s %s", tt.method, tt.path)
	}
}

func TestDialectAuthorize(t *testing.T) {
	h := http.Header{"X-Api-Key": {"caller"}, "Authorization": {"Bearer caller"}, "Anthropic-Version": {"2023-06-01"}}
	newDialect(t).Authorize(h, "pool")
	assert.Equal(t, "pool", h.Get("X-Api-Key"))
	assert.Empty(t, h.Get("Authorization"))
	assert.Equal(t, "2023-06-01", h.Get("Anthropic-Version"))

	h = http.Header{"X-Api-Key": {"caller"}}
	newDialect(t, anthropic.WithAPIKey("own")).Authorize(h, "")
	assert.Equal(t, "own", h.Get("X-Api-Key"))

	h = http.Header{"X-Api-Key": {"caller"}}
	newDialect(t).Authorize(h, "")
	assert.Empty(t, h.Get("X-Api-Key"), "no key of its own: the caller's is still removed")
}

func TestDialectStreamAndErrors(t *testing.T) {
	p := newDialect(t)
	body := "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"model\":\"c\",\"usage\":{\"input_tokens\":3}}}\n\n" +
		"event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n"
	s := p.NewStream(anthropic.ShapeMessages, &http.Response{StatusCode: 200, Header: http.Header{}, Body: io.NopCloser(strings.NewReader(body))})
	defer s.Close()
	c, err := s.Recv()
	require.NoError(t, err)
	assert.False(t, c.HasContent())
	_, err = s.Recv()
	assert.Equal(t, failure.Overloaded, llmclient.ClassOf(err))

	e := p.ClassifyError(529, http.Header{"Retry-After": {"3"}}, []byte(`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`))
	assert.Equal(t, failure.Overloaded, e.Class)
	rl := p.RateLimits(http.Header{"Anthropic-Ratelimit-Requests-Remaining": {"5"}, "Anthropic-Ratelimit-Requests-Limit": {"50"}})
	require.NotNil(t, rl)
	assert.Equal(t, int64(5), rl.Requests.Remaining)
}

func FuzzDialectInspect(f *testing.F) {
	p := newDialect(f)
	f.Add([]byte(`{"model":"claude-x","max_tokens":5,"system":"s","messages":[{"role":"user","content":"hi"}]}`))
	f.Add([]byte(`{"model":"claude-x","messages":[{"role":"user","content":[{"type":"tool_result","content":[{"type":"text","text":"x"}]}]}]}`))
	f.Add([]byte(`{"messages":7}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		call, ok := p.Inspect("POST", "/v1/messages", body)
		if !ok || call.Shape != anthropic.ShapeMessages {
			t.Fatalf("POST /v1/messages not recognized: %+v", call)
		}
		_ = llmclient.EstimatePromptTokens(nil, &call.Request)
	})
}
