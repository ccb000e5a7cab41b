package otel_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/provider/openai"
)

const (
	sseRole = `data: {"id":"s1","object":"chat.completion.chunk","model":"gpt-4o-mini","choices":[{"index":0,"delta":{"role":"assistant"},"finish_reason":null}]}` + "\n\n"
	sseStop = `data: {"id":"s1","object":"chat.completion.chunk","model":"gpt-4o-mini","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n"
)

func sseText(s string) string {
	return `data: {"id":"s1","object":"chat.completion.chunk","model":"gpt-4o-mini","choices":[{"index":0,"delta":{"content":"` + s + `"},"finish_reason":null}]}` + "\n\n"
}

// openAIServer is a loopback upstream in OpenAI's wire format: its first chat request
// fails with a 500, later ones stream; embeddings answer at once; /other is no API.
func openAIServer(t *testing.T) *httptest.Server {
	var chats atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		switch r.URL.Path {
		case "/v1/chat/completions":
			if chats.Add(1) == 1 {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusInternalServerError)
				_, _ = io.WriteString(w, `{"error":{"message":"The server had an error","type":"server_error","code":null}}`)
				return
			}
			w.Header().Set("Content-Type", "text/event-stream")
			for _, ev := range []string{sseRole, sseText("Hel"), sseText("lo"), sseStop, "data: [DONE]\n\n"} {
				_, _ = io.WriteString(w, ev)
				w.(http.Flusher).Flush()
			}
		case "/v1/embeddings":
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.1,0.2]}],"model":"text-embedding-3-small","usage":{"prompt_tokens":2,"total_tokens":2}}`)
		default:
			_, _ = io.WriteString(w, "not an API")
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func send(t *testing.T, ctx context.Context, hc *http.Client, method, url, body string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	require.NoError(t, err)
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	return resp, string(data)
}

// Transport mode: a call span per protected request, with its attempts under it, ended
// when its streamed body ends; requests passed through get none.
func TestTransport(t *testing.T) {
	r := newRig(t)
	srv := openAIServer(t)
	p, err := openai.New(openai.WithBaseURL(srv.URL + "/v1"))
	require.NoError(t, err)
	c := r.client(t, llmclient.WithUpstream(llmclient.Upstream{Name: "oai", Provider: p, Keys: []string{"sk-upstream"}}),
		llmclient.WithBackoff(time.Millisecond, 2*time.Millisecond))
	rt := r.tel.Transport(c.Transport(srv.Client().Transport))
	defer rt.(interface{ CloseIdleConnections() }).CloseIdleConnections()
	hc := &http.Client{Transport: rt}
	ctx, root := r.root(context.Background())

	start := time.Now()
	resp, body := send(t, ctx, hc, http.MethodPost, srv.URL+"/v1/chat/completions",
		`{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	end := time.Now()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Contains(t, body, `"Hel"`)
	_, _ = send(t, ctx, hc, http.MethodPost, srv.URL+"/v1/embeddings", `{"model":"text-embedding-3-small","input":"hi"}`)
	_, other := send(t, ctx, hc, http.MethodGet, srv.URL+"/other", "")
	assert.Equal(t, "not an API", other)
	root.End()

	call := r.one(t, "chat gpt-4o-mini")
	assert.Equal(t, trace.SpanKindClient, call.SpanKind)
	assert.Equal(t, r.one(t, "caller").SpanContext.SpanID(), call.Parent.SpanID())
	assert.False(t, call.StartTime.Before(start))
	assert.False(t, call.EndTime.After(end))
	assert.Equal(t, codes.Unset, call.Status.Code)
	ca := attrs(call.Attributes)
	assert.Equal(t, "chat", ca["gen_ai.operation.name"])
	assert.Equal(t, "openai", ca["gen_ai.provider.name"])
	assert.Equal(t, "gpt-4o-mini", ca["gen_ai.request.model"])
	assert.Equal(t, "gpt-4o-mini", ca["gen_ai.response.model"])
	assert.Equal(t, int64(2), ca["llmclient.attempts"])
	assert.Equal(t, int64(3), ca["llmclient.chunks"], "two content chunks and the finish chunk")
	kids := r.childrenOf(call)
	require.Len(t, kids, 2)
	assert.Equal(t, "attempt oai", kids[0].Name)
	assert.Equal(t, "server_error", attrs(kids[0].Attributes)["error.type"])
	assert.Equal(t, int64(500), attrs(kids[0].Attributes)["http.response.status_code"])
	assert.Equal(t, true, attrs(kids[1].Attributes)["llmclient.retry"])
	assert.False(t, kids[0].StartTime.Before(call.StartTime))

	emb := r.one(t, "embeddings text-embedding-3-small")
	assert.Equal(t, "embeddings", attrs(emb.Attributes)["gen_ai.operation.name"])
	assert.Equal(t, []string{"attempt oai", "attempt oai", "attempt oai", "caller", "chat gpt-4o-mini",
		"embeddings text-embedding-3-small"}, sorted(r.names()), "no span for the request passed through")

	ms := r.collect(t)
	d := wrapHF(histF(t, ms, "gen_ai.client.operation.duration"))
	chat := matching(d, map[string]any{"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai",
		"gen_ai.request.model": "gpt-4o-mini"})
	require.Len(t, chat, 1)
	assert.Equal(t, uint64(1), chat[0].Count)
	assert.Len(t, matching(d, map[string]any{"gen_ai.operation.name": "embeddings"}), 1)
	f := histF(t, ms, "gen_ai.client.operation.time_to_first_chunk")
	require.Len(t, f, 1)
	assert.Equal(t, "chat", setAttrs(f[0].Attributes)["gen_ai.operation.name"])
	pc := histF(t, ms, "gen_ai.client.operation.time_per_output_chunk")
	require.Len(t, pc, 1)
	assert.Equal(t, uint64(2), pc[0].Count)
	att := wrapI(sumI(t, ms, "llmclient.client.attempts"))
	assert.Len(t, matching(att, map[string]any{"error.type": "server_error", "http.response.status_code": int64(500)}), 1)
}

// A request the Client's transport refuses before any attempt gets a span with the error.
func TestTransportRefusal(t *testing.T) {
	r := newRig(t)
	srv := openAIServer(t)
	p, err := openai.New(openai.WithBaseURL(srv.URL + "/v1"))
	require.NoError(t, err)
	c := r.client(t, llmclient.WithUpstream(llmclient.Upstream{Name: "oai", Provider: p}))
	rt := r.tel.Transport(c.Transport(srv.Client().Transport))
	defer rt.(interface{ CloseIdleConnections() }).CloseIdleConnections()
	req, err := http.NewRequest(http.MethodPost, srv.URL+"/v1/chat/completions",
		strings.NewReader(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`))
	require.NoError(t, err)
	req.Header.Set("X-Stainless-Retry-Count", "1") // an SDK retry the transport never saw fail
	_, err = rt.RoundTrip(req)
	require.ErrorIs(t, err, llmclient.ErrSDKRetry)
	s := r.one(t, "chat")
	assert.Equal(t, "unavailable", attrs(s.Attributes)["error.type"])
	assert.Equal(t, codes.Error, s.Status.Code)
}

func sorted(s []string) []string {
	out := append([]string(nil), s...)
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j] < out[j-1]; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}
