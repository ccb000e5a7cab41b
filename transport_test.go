package llmclient_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const chatBody = `{"model":"gpt-4o","messages":[{"role":"user","content":"Say hello, in one word."}]}`

func TestTransportReplaysBodyAcrossRetries(t *testing.T) {
	up := newScript(status(503, err503), status(503, err503), status(503, err503), ok(chatOK))
	srv := httptest.NewServer(up)
	defer srv.Close()
	c := newClient(t, append(fast(), oaiUpstream(t, "oai", srv.URL+"/v1"), llmclient.WithMaxAttempts(4))...)
	rt := c.Transport(nil)

	req, err := http.NewRequest(http.MethodPost, srv.URL+"/v1/chat/completions", strings.NewReader(chatBody))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer sk-caller")
	req.Header.Set("Content-Type", "application/json")
	resp, err := rt.RoundTrip(req)
	require.NoError(t, err)
	body, err := readBody(t, resp)
	require.NoError(t, err)
	assert.Equal(t, 200, resp.StatusCode)
	assert.JSONEq(t, chatOK, body)

	got := up.requests()
	require.Len(t, got, 4, "three retries after three 503s")
	for i, r := range got {
		assert.Equal(t, chatBody, r.Body, "attempt %d body", i+1)
		assert.Equal(t, "/v1/chat/completions", r.Path)
		assert.Equal(t, "Bearer sk-caller", r.Header.Get("Authorization"), "no pool: the caller's key goes out")
		assert.Equal(t, "application/json", r.Header.Get("Content-Type"))
	}
	// The caller's request is untouched.
	assert.Equal(t, "Bearer sk-caller", req.Header.Get("Authorization"))
	assert.Equal(t, srv.URL+"/v1/chat/completions", req.URL.String())
}

func TestTransportUsesGetBodyForLargeBodies(t *testing.T) {
	up := newScript(status(503, err503), ok(chatOK))
	srv := httptest.NewServer(up)
	defer srv.Close()
	c := newClient(t, append(fast(), oaiUpstream(t, "oai", srv.URL+"/v1"))...)
	rt := c.Transport(nil, llmclient.WithMaxReplayBody(1024))

	big := `{"model":"gpt-4o","messages":[{"role":"user","content":"` + strings.Repeat("x", 4096) + `"}]}`
	req, err := http.NewRequest(http.MethodPost, srv.URL+"/v1/chat/completions", strings.NewReader(big))
	require.NoError(t, err)
	require.NotNil(t, req.GetBody)
	resp, err := rt.RoundTrip(req)
	require.NoError(t, err)
	_, _ = readBody(t, resp)
	assert.Equal(t, 200, resp.StatusCode)
	got := up.requests()
	require.Len(t, got, 2)
	for _, r := range got {
		assert.Equal(t, big, r.Body)
	}
}

func TestTransportNonReplayableBodyGetsOneAttempt(t *testing.T) {
	up := newScript(status(503, err503), ok(chatOK))
	srv := httptest.NewServer(up)
	defer srv.Close()
	c := newClient(t, append(fast(), oaiUpstream(t, "oai", srv.URL+"/v1"))...)
	rt := c.Transport(nil, llmclient.WithMaxReplayBody(1024))

	big := `{"model":"gpt-4o","messages":[{"role":"user","content":"` + strings.Repeat("y", 4096) + `"}]}`
	body := &closeTracker{Reader: strings.NewReader(big)}
	req, err := http.NewRequest(http.MethodPost, srv.URL+"/v1/chat/completions", body)
	require.NoError(t, err)
	require.Nil(t, req.GetBody, "a custom reader has no GetBody")
	resp, err := rt.RoundTrip(req)
	require.NoError(t, err)
	_, _ = readBody(t, resp)
	assert.Equal(t, 503, resp.StatusCode, "no retry: the body cannot be sent again")
	got := up.requests()
	require.Len(t, got, 1)
	assert.Equal(t, big, got[0].Body, "the whole body went out on the one attempt")
	assert.True(t, body.closed.Load(), "the caller's body is closed")
}

func TestTransportClosesEveryBody(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		up := newScript(
			status(429, `{"error":{"message":"slow down","type":"requests","code":"rate_limit_exceeded"}}`, "Retry-After", "2"),
			status(503, err503),
			ok(chatOK),
			// a stream: one stall before its first token, one in-band error, then success
			sseStep(ev{0, roleChunk}, ev{-1, ""}),
			sseStep(ev{0, `data: {"error":{"message":"overloaded","type":"server_error","code":"server_is_overloaded"}}` + "\n\n"}),
			sseStep(ev{0, roleChunk}, ev{10 * time.Millisecond, chunk("Hel")}, ev{0, chunk("lo")}, ev{0, stopChunk}, ev{0, done}),
		)
		ct := &countingTransport{base: memTransport{up}}
		c := newClient(t, oaiUpstream(t, "oai", "http://oai.test/v1"), llmclient.WithFirstTokenTimeout(5*time.Second))
		rt := c.Transport(ct)

		resp, err := post(t, context.Background(), rt, "http://oai.test/v1/chat/completions", chatBody)
		require.NoError(t, err)
		b, err := readBody(t, resp)
		require.NoError(t, err)
		assert.JSONEq(t, chatOK, b)

		resp, err = post(t, context.Background(), rt, "http://oai.test/v1/chat/completions",
			`{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
		require.NoError(t, err)
		b, err = readBody(t, resp)
		require.NoError(t, err)
		assert.Equal(t, roleChunk+chunk("Hel")+chunk("lo")+stopChunk+done, b)

		synctest.Wait()
		assert.Equal(t, int64(6), ct.opened.Load())
		assert.Equal(t, ct.opened.Load(), ct.closed.Load(), "every upstream body closed")
		assert.Equal(t, 0, c.InFlight("oai"))
	})
}

// closeTracker is a request body that records its Close.
type closeTracker struct {
	io.Reader
	closed atomic.Bool
}

func (c *closeTracker) Close() error { c.closed.Store(true); return nil }

// getBodyTransport answers every request from memory after reading its body twice: once
// from Body and once from GetBody, as a transport that resends on a dead connection does.
type getBodyTransport struct {
	mu     sync.Mutex
	bodies [][2]string
}

func (g *getBodyTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	first, _ := io.ReadAll(req.Body)
	_ = req.Body.Close()
	var again []byte
	if req.GetBody != nil {
		rc, err := req.GetBody()
		if err != nil {
			return nil, err
		}
		again, _ = io.ReadAll(rc)
		_ = rc.Close()
	}
	g.mu.Lock()
	g.bodies = append(g.bodies, [2]string{string(first), string(again)})
	g.mu.Unlock()
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(strings.NewReader(chatOK)), ContentLength: int64(len(chatOK)), Request: req}, nil
}

// The GetBody of each attempt recreates that call's own body, call after call through the
// same transport (its calls' state is pooled and reused).
func TestTransportGetBodyIsTheCallsBody(t *testing.T) {
	g := &getBodyTransport{}
	c := newClient(t, oaiUpstream(t, "oai", "http://oai.test/v1"))
	rt := c.Transport(g)
	var want []string
	for i := range 20 {
		body := `{"model":"gpt-4o","messages":[{"role":"user","content":"call ` + strconv.Itoa(i) + strings.Repeat("!", i) + `"}]}`
		want = append(want, body)
		resp, err := post(t, context.Background(), rt, "http://oai.test/v1/chat/completions", body)
		require.NoError(t, err)
		_, err = readBody(t, resp)
		require.NoError(t, err)
	}
	require.Len(t, g.bodies, len(want))
	for i, b := range g.bodies {
		assert.Equal(t, want[i], b[0], "call %d: Body", i)
		assert.Equal(t, want[i], b[1], "call %d: GetBody", i)
	}
}
