package llmclient_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/provider/anthropic"
	"github.com/llmclient/llmclient/provider/gemini"
	"github.com/llmclient/llmclient/provider/openai"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Transport and secrets: credentials across failover, key leaks, body handling.

const (
	poolKey   = "sk-pool-0123456789abcdefghijklmnopqrstuv"
	callerKey = "sk-caller-0123456789abcdefghijklmnopqrst"
	bKey      = "sk-b-own-0123456789abcdefghijklmnopqrstu"
)

// openaiAt registers an OpenAI upstream at baseURL with its provider's own key.
func openaiAt(t *testing.T, name, baseURL, key string, keys ...string) llmclient.Option {
	t.Helper()
	opts := []openai.Option{openai.WithBaseURL(baseURL)}
	if key != "" {
		opts = append(opts, openai.WithAPIKey(key))
	}
	p, err := openai.New(opts...)
	require.NoError(t, err)
	return llmclient.WithUpstream(llmclient.Upstream{Name: name, Provider: p, Keys: keys})
}

// When failover changes the host, the caller's credentials stay behind; the
// target gets only its own upstream's credential.
func TestDefect16CredentialsStayBehindOnAnotherHost(t *testing.T) {
	a := newScript(status(503, err503))
	b := newScript(ok(chatOK))
	c := newClient(t, openaiAt(t, "a", "http://a.test/v1", ""), openaiAt(t, "b", "http://b.test/v1", bKey),
		llmclient.WithModelGroup("gpt-4o", "a", "b"), llmclient.WithMaxAttempts(1))
	rt := c.Transport(memTransport{hostMux{"a.test": a, "b.test": b}})
	body := `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`
	resp, err := post(t, context.Background(), rt, "http://a.test/v1/chat/completions?key="+callerKey+"&trace=1", body,
		"Authorization", "Bearer "+callerKey, "Cookie", "session=s3cret", "Cf-Aig-Authorization", "Bearer cf-"+callerKey,
		"Helicone-Auth", "Bearer he-"+callerKey, "X-Request-Label", "kept")
	require.NoError(t, err)
	_, _ = readBody(t, resp)
	require.Len(t, a.requests(), 1)
	assert.Equal(t, "Bearer "+callerKey, a.requests()[0].Header.Get("Authorization"), "the caller's own upstream gets its credentials")
	require.Len(t, b.requests(), 1)
	got := b.requests()[0]
	assert.Equal(t, "Bearer "+bKey, got.Header.Get("Authorization"))
	for _, h := range []string{"Cookie", "Cf-Aig-Authorization", "Helicone-Auth"} {
		assert.Empty(t, got.Header.Get(h), h)
	}
	assert.Equal(t, "kept", got.Header.Get("X-Request-Label"), "other headers go along")
	assert.NotContains(t, got.Query, callerKey)
	assert.Contains(t, got.Query, "trace=1")
}

// No key leaks — not a failover target's own key in the body or events, not a
// pool key echoed in a header, not a key cut short by truncation, not any formatted struct.
func TestDefect17NoKeyLeaks(t *testing.T) {
	t.Run("failover target's own key, echoed in body and header", func(t *testing.T) {
		echo := func(w http.ResponseWriter, r *http.Request) {
			key := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
			w.Header().Set("X-Debug-Key", key)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(401)
			_, _ = io.WriteString(w, `{"error":{"message":"Incorrect API key provided: `+key+`","type":"invalid_request_error","code":"invalid_api_key"}}`)
		}
		a := newScript(status(503, err503))
		b := newScript(echo)
		var events []string
		c := newClient(t, openaiAt(t, "a", "http://a.test/v1", "", poolKey), openaiAt(t, "b", "http://b.test/v1", bKey),
			llmclient.WithModelGroup("gpt-4o", "a", "b"), llmclient.WithMaxAttempts(1),
			llmclient.WithObserver(func(_ context.Context, e llmclient.Event) { events = append(events, fmt.Sprintf("%+v %v", e, e.Err)) }))
		rt := c.Transport(memTransport{hostMux{"a.test": a, "b.test": b}})
		resp, err := post(t, context.Background(), rt, "http://a.test/v1/chat/completions",
			`{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`)
		require.NoError(t, err)
		body, _ := readBody(t, resp)
		assert.Equal(t, 401, resp.StatusCode)
		for _, k := range []string{bKey, poolKey} {
			assert.NotContains(t, body, k)
			assert.NotContains(t, fmt.Sprint(resp.Header), k)
			assert.NotContains(t, strings.Join(events, "\n"), k)
		}
		assert.Equal(t, "Bearer "+bKey, b.requests()[0].Header.Get("Authorization"), "b did get its key")
	})
	t.Run("key cut by a truncated message", func(t *testing.T) {
		msg := strings.Repeat("x", 1000) + poolKey // the vendor message is cut at 1024 bytes
		h := http.HandlerFunc(status(400, `{"error":{"message":"`+msg+`","type":"invalid_request_error","code":null}}`))
		c := newClient(t, openaiOver(t, "a", h, poolKey))
		_, err := c.Complete(context.Background(), chatReq("m"))
		require.Error(t, err)
		assert.NotContains(t, err.Error(), poolKey[:minCutLeak])
		var e *llmclient.Error
		require.ErrorAs(t, err, &e)
		assert.NotContains(t, e.Message, poolKey[:minCutLeak])
	})
	t.Run("formatted structs", func(t *testing.T) {
		oai, err := openai.New(openai.WithAPIKey(bKey))
		require.NoError(t, err)
		ant, err := anthropic.New(anthropic.WithAPIKey(bKey))
		require.NoError(t, err)
		gem, err := gemini.New(gemini.WithAPIKey(bKey))
		require.NoError(t, err)
		u := llmclient.Upstream{Name: "a", Provider: oai, Keys: []string{poolKey}}
		c := newClient(t, llmclient.WithUpstream(u), up("b", ant), up("g", gem))
		call := llmclient.Call{Model: "m", APIKey: poolKey}
		var logs bytes.Buffer
		for _, h := range []slog.Handler{slog.NewJSONHandler(&logs, nil), slog.NewTextHandler(&logs, nil)} {
			slog.New(h).Info("x", "client", c, "upstream", u, "openai", oai, "anthropic", ant, "gemini", gem, "call", call)
		}
		for _, v := range []any{c, u, &u, oai, ant, gem, call, &call, []llmclient.Upstream{u}} {
			for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q"} {
				out := fmt.Sprintf(verb, v)
				assert.NotContains(t, out, poolKey, "%s of %T", verb, v)
				assert.NotContains(t, out, bKey, "%s of %T", verb, v)
			}
		}
		assert.NotContains(t, logs.String(), poolKey)
		assert.NotContains(t, logs.String(), bKey)
		assert.Contains(t, fmt.Sprint(u), `"a"`, "the description still names the upstream")
	})
}

// minCutLeak is the part of a key that must not survive truncation.
const minCutLeak = 12

// A non-replayable body is closed once; a replayed error body matches its
// headers; an explicit Host override is kept on the caller's own upstream.
func TestDefect18TransportBodiesAndHost(t *testing.T) {
	t.Run("non-replayable body closed once", func(t *testing.T) {
		up := newScript(ok(chatOK))
		c := newClient(t, oaiUpstream(t, "oai", "http://oai.test/v1"))
		rt := c.Transport(memTransport{up}, llmclient.WithMaxReplayBody(1<<10))
		body := &closeCounter{Reader: strings.NewReader(`{"model":"gpt-4o","messages":[{"role":"user","content":"` + strings.Repeat("y", 4<<10) + `"}]}`)}
		req, err := http.NewRequest(http.MethodPost, "http://oai.test/v1/chat/completions", body)
		require.NoError(t, err)
		req.GetBody = nil
		resp, err := rt.RoundTrip(req)
		require.NoError(t, err)
		_, _ = readBody(t, resp)
		assert.Equal(t, int64(1), body.closes.Load())
	})
	t.Run("gzip error body", func(t *testing.T) {
		var gz bytes.Buffer
		zw := gzip.NewWriter(&gz)
		_, _ = io.WriteString(zw, err503)
		_ = zw.Close()
		up := newScript(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Encoding", "gzip")
			w.WriteHeader(503)
			_, _ = w.Write(gz.Bytes())
		})
		c := newClient(t, oaiUpstream(t, "oai", "http://oai.test/v1"), llmclient.WithMaxAttempts(1))
		rt := c.Transport(memTransport{up})
		resp, err := post(t, context.Background(), rt, "http://oai.test/v1/chat/completions",
			`{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`, "Accept-Encoding", "gzip")
		require.NoError(t, err)
		raw, _ := readBody(t, resp)
		got := raw
		if resp.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(strings.NewReader(raw))
			require.NoError(t, err, "the body is gzip, as its header says")
			b, _ := io.ReadAll(zr)
			got = string(b)
		}
		assert.Equal(t, err503, got, "the body decodes as its headers say")
	})
	t.Run("host override", func(t *testing.T) {
		var host string
		up := newScript(func(w http.ResponseWriter, r *http.Request) {
			host = r.Host
			ok(chatOK)(w, r)
		})
		c := newClient(t, oaiUpstream(t, "oai", "http://oai.test/v1"))
		rt := c.Transport(hostHeader{memTransport{up}})
		req, err := http.NewRequest(http.MethodPost, "http://oai.test/v1/chat/completions",
			strings.NewReader(`{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`))
		require.NoError(t, err)
		req.Host = "gateway.internal"
		resp, err := rt.RoundTrip(req)
		require.NoError(t, err)
		_, _ = readBody(t, resp)
		assert.Equal(t, "gateway.internal", host)
	})
}

type closeCounter struct {
	io.Reader
	closes atomic.Int64
}

func (c *closeCounter) Close() error { c.closes.Add(1); return nil }

// hostHeader passes the request's Host on to an in-process handler, as a network
// transport sends it in the Host header.
type hostHeader struct{ base http.RoundTripper }

func (h hostHeader) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Host != "" {
		r := req.Clone(req.Context())
		r.Host = req.Host
		r.URL.Host = req.URL.Host
		return h.base.RoundTrip(r)
	}
	return h.base.RoundTrip(req)
}
