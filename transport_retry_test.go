package llmclient_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient/breaker"
	"github.com/llmclient/llmclient/event"
	"github.com/llmclient/llmclient/failure"

	"github.com/llmclient/llmclient"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTransportStainlessRetriesAddNoAttempts plays an SDK with two retries of its own
// (openai-go's default) against an upstream that always fails: the upstream sees the
// transport's attempts only.
func TestTransportStainlessRetriesAddNoAttempts(t *testing.T) {
	tests := []struct {
		name string
		step func(http.ResponseWriter, *http.Request)
		// wantResponse: the SDK gets the last error response, marked not to be retried;
		// else an *Error.
		wantResponse bool
	}{
		{"error status", status(503, err503), true},
		{"stalled response", func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				up := newScript(tt.step)
				c := newClient(t, oaiUpstream(t, "oai", "http://oai.test/v1"),
					llmclient.WithMaxAttempts(3), llmclient.WithAttemptTimeout(10*time.Second))
				rt := c.Transport(memTransport{up})

				var firstErr error
				for retry := 0; retry <= 2; retry++ {
					resp, err := post(t, context.Background(), rt, "http://oai.test/v1/chat/completions", chatBody,
						"X-Stainless-Retry-Count", strconv.Itoa(retry))
					if retry == 0 {
						if tt.wantResponse {
							require.NoError(t, err)
							assert.Equal(t, 503, resp.StatusCode)
							assert.Equal(t, "false", resp.Header.Get("X-Should-Retry"), "tell the SDK not to retry")
							body, _ := readBody(t, resp)
							assert.JSONEq(t, err503, body)
							continue
						}
						require.Error(t, err)
						firstErr = err
						assert.Equal(t, failure.Timeout, llmclient.ClassOf(err))
						continue
					}
					// The SDK retries anyway: answered at once, with no upstream attempt.
					require.Error(t, err)
					require.Nil(t, resp)
					if firstErr != nil {
						assert.Equal(t, firstErr.Error(), err.Error(), "the same failure again")
					} else {
						assert.ErrorIs(t, err, llmclient.ErrSDKRetry)
					}
				}
				assert.Equal(t, 3, up.count(), "the configured limit, not 3 × (1 + SDK retries)")
			})
		})
	}
}

// TestTransportPlainRequestsAreRetried checks that requests without the SDK header get the
// transport's retries each time, when they are not the same request again within the
// repeat window.
func TestTransportPlainRequestsAreRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		up := newScript(status(503, err503))
		c := newClient(t, oaiUpstream(t, "oai", "http://oai.test/v1"), llmclient.WithMaxAttempts(2))
		rt := c.Transport(memTransport{up}, llmclient.WithRepeatWindow(0))
		for range 2 {
			resp, err := post(t, context.Background(), rt, "http://oai.test/v1/chat/completions", chatBody)
			require.NoError(t, err)
			_, _ = readBody(t, resp)
		}
		assert.Equal(t, 4, up.count(), "repeat detection off: each request is a call of its own")

		rt = c.Transport(memTransport{up})
		for _, body := range []string{chatBody, strings.Replace(chatBody, "one word", "two words", 1)} {
			resp, err := post(t, context.Background(), rt, "http://oai.test/v1/chat/completions", body)
			require.NoError(t, err)
			_, _ = readBody(t, resp)
		}
		assert.Equal(t, 8, up.count(), "different bodies are different calls")
	})
}

func TestTransportRetryAfterIsHonoured(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		up := newScript(
			status(429, `{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}`, "Retry-After", "7"),
			ok(chatOK))
		var log eventLog
		c := newClient(t, oaiUpstream(t, "oai", "http://oai.test/v1"), llmclient.WithObserver(log.observe))
		rt := c.Transport(memTransport{up})
		var resp *http.Response
		took := elapsed(func() {
			var err error
			resp, err = post(t, context.Background(), rt, "http://oai.test/v1/chat/completions", chatBody)
			require.NoError(t, err)
		})
		_, _ = readBody(t, resp)
		assert.Equal(t, 200, resp.StatusCode)
		assert.GreaterOrEqual(t, took, 7*time.Second)
		assert.Less(t, took, 9*time.Second)
		attempts := log.kinds(event.Attempt)
		require.Len(t, attempts, 2)
		assert.Equal(t, failure.RateLimited, attempts[0].Class)
		assert.Equal(t, 429, attempts[0].Status)
		assert.Equal(t, failure.None, attempts[1].Class)
	})
}

func TestTransportBreakerOpens(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		up := newScript(status(500, `{"error":{"message":"boom","type":"server_error"}}`))
		c := newClient(t, oaiUpstream(t, "oai", "http://oai.test/v1"),
			llmclient.WithMaxAttempts(1),
			llmclient.WithBreaker(breaker.Config{ConsecutiveFailures: 3, OpenTimeout: time.Minute}))
		rt := c.Transport(memTransport{up}, llmclient.WithRepeatWindow(0)) // three calls, not repeats of one
		for range 3 {
			resp, err := post(t, context.Background(), rt, "http://oai.test/v1/chat/completions", chatBody)
			require.NoError(t, err)
			assert.Equal(t, 500, resp.StatusCode)
			_, _ = readBody(t, resp)
		}
		assert.Equal(t, breaker.Open, c.Breaker("oai").State())
		resp, err := post(t, context.Background(), rt, "http://oai.test/v1/chat/completions", chatBody)
		require.NoError(t, err, "a local refusal is answered in the vendor's error format")
		body, _ := readBody(t, resp)
		assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
		assert.Equal(t, "60", resp.Header.Get("Retry-After"), "the breaker's remaining open time")
		assert.Equal(t, "false", resp.Header.Get("X-Should-Retry"))
		assert.Equal(t, "unavailable", resp.Header.Get("X-Llmclient-Class"))
		assert.JSONEq(t, `{"error":{"message":"llmclient: unavailable: request refused locally (upstream oai)","type":"server_error","param":null,"code":"circuit_open"}}`, body)
		assert.Equal(t, 3, up.count(), "an open breaker sends nothing")
	})
}

func TestTransportKeyCooldown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		up := newScript(
			status(429, `{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}`, "Retry-After", "30"),
			ok(chatOK), ok(chatOK))
		var log eventLog
		c := newClient(t, oaiUpstream(t, "oai", "http://oai.test/v1", "sk-one", "sk-two"), llmclient.WithObserver(log.observe))
		rt := c.Transport(memTransport{up})
		for range 2 {
			resp, err := post(t, context.Background(), rt, "http://oai.test/v1/chat/completions", chatBody,
				"Authorization", "Bearer sk-caller")
			require.NoError(t, err)
			assert.Equal(t, 200, resp.StatusCode)
			_, _ = readBody(t, resp)
		}
		got := up.requests()
		require.Len(t, got, 3)
		assert.Equal(t, "Bearer sk-one", got[0].Header.Get("Authorization"))
		assert.Equal(t, "Bearer sk-two", got[1].Header.Get("Authorization"), "the cooled key is skipped at once")
		assert.Equal(t, "Bearer sk-two", got[2].Header.Get("Authorization"), "and stays skipped for the next call")
		cool := log.kinds(event.KeyCooldown)
		require.Len(t, cool, 1)
		assert.Equal(t, "key#1", cool[0].Key)
	})
}

func TestTransportUnknownPathIsRetriedOnItsUpstream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newScript(status(502, "<html>bad gateway</html>"), ok(`{"data":[]}`))
		b := newScript(ok(`{"data":["b"]}`))
		c := newClient(t, oaiUpstream(t, "a", "http://a.test/v1"), oaiUpstream(t, "b", "http://b.test/v1"))
		rt := c.Transport(memTransport{hostMux{"a.test": a, "b.test": b}})
		req, err := http.NewRequest(http.MethodGet, "http://a.test/v1/models", nil)
		require.NoError(t, err)
		resp, err := rt.RoundTrip(req)
		require.NoError(t, err)
		body, _ := readBody(t, resp)
		assert.JSONEq(t, `{"data":[]}`, body)
		assert.Equal(t, 2, a.count())
		assert.Equal(t, 0, b.count(), "no failover for a path the dialect does not know")
	})
}

func TestTransportPassesUnknownHostsThrough(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		other := newScript(status(503, "busy"))
		c := newClient(t, oaiUpstream(t, "oai", "http://oai.test/v1"))
		rt := c.Transport(memTransport{hostMux{"other.test": other}})
		resp, err := post(t, context.Background(), rt, "http://other.test/v1/chat/completions", chatBody)
		require.NoError(t, err)
		_, _ = readBody(t, resp)
		assert.Equal(t, 503, resp.StatusCode)
		assert.Empty(t, resp.Header.Get("X-Should-Retry"), "untouched")
		assert.Equal(t, 1, other.count(), "not protected, not retried")
	})
}

func TestTransportHonoursContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		up := newScript(status(503, err503))
		c := newClient(t, oaiUpstream(t, "oai", "http://oai.test/v1"), llmclient.WithBackoff(10*time.Second, 20*time.Second))
		rt := c.Transport(memTransport{up})
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		resp, err := post(t, ctx, rt, "http://oai.test/v1/chat/completions", chatBody)
		if err == nil {
			_, _ = readBody(t, resp)
		}
		// The backoff does not fit before the deadline: no wait, the last answer at once.
		assert.Equal(t, 1, up.count())
		require.NoError(t, err)
		assert.Equal(t, 503, resp.StatusCode)

		ctx2, cancel2 := context.WithCancel(context.Background())
		stall := newScript(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
		rt2 := newClient(t, oaiUpstream(t, "oai", "http://oai.test/v1")).Transport(memTransport{stall})
		go func() { time.Sleep(time.Second); cancel2() }()
		_, err = post(t, ctx2, rt2, "http://oai.test/v1/chat/completions", chatBody)
		require.Error(t, err)
		assert.True(t, errors.Is(err, context.Canceled), "got %v", err)
		assert.Equal(t, 1, stall.count())
	})
}

// TestTransportReusesConnections checks that discarded error bodies are drained and
// closed so that retries reuse the connection.
func TestTransportReusesConnections(t *testing.T) {
	up := newScript(status(503, err503), status(503, err503), ok(chatOK))
	srv := httptest.NewUnstartedServer(up)
	var mu sync.Mutex
	conns := 0
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			mu.Lock()
			conns++
			mu.Unlock()
		}
	}
	srv.Start()
	defer srv.Close()
	base := &http.Transport{}
	defer base.CloseIdleConnections()
	c := newClient(t, append(fast(), oaiUpstream(t, "oai", srv.URL+"/v1"))...)
	rt := c.Transport(base)
	for range 2 {
		resp, err := post(t, context.Background(), rt, srv.URL+"/v1/chat/completions", chatBody)
		require.NoError(t, err)
		_, _ = readBody(t, resp)
	}
	assert.Equal(t, 4, up.count())
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, 1, conns, "one connection for every attempt")
}
