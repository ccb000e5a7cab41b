package llmclient_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/event"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/provider/anthropic"
	"github.com/llmclient/llmclient/provider/gemini"
	"github.com/llmclient/llmclient/provider/openai"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTransportFailsOverAcrossBaseURLs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newScript(status(503, err503))
		b := newScript(ok(chatOK))
		pb, err := openai.New(openai.WithBaseURL("https://b.test/openai/v1"), openai.WithAPIKey("sk-b-own"))
		require.NoError(t, err)
		c := newClient(t, oaiUpstream(t, "a", "http://a.test/v1"),
			llmclient.WithUpstream(llmclient.Upstream{Name: "b", Provider: pb}),
			llmclient.WithModelGroup("gpt-4o", "a", "b"), llmclient.WithMaxAttempts(2))
		rt := c.Transport(memTransport{hostMux{"a.test": a, "b.test": b}})
		resp, err := post(t, context.Background(), rt, "http://a.test/v1/chat/completions?trace=1", chatBody,
			"Authorization", "Bearer sk-caller", "OpenAI-Beta", "x")
		require.NoError(t, err)
		body, _ := readBody(t, resp)
		assert.JSONEq(t, chatOK, body)
		require.Equal(t, 2, a.count())
		got := b.requests()
		require.Len(t, got, 1)
		assert.Equal(t, "/openai/v1/chat/completions", got[0].Path, "the base path is rewritten")
		assert.Equal(t, "trace=1", got[0].Query)
		assert.Equal(t, "Bearer sk-b-own", got[0].Header.Get("Authorization"), "the caller's key never leaves for another upstream")
		assert.Equal(t, "x", got[0].Header.Get("OpenAI-Beta"), "other headers are kept")
		assert.Equal(t, chatBody, got[0].Body)
	})
}

func TestTransportFailoverRenamesTheModel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newScript(status(503, err503))
		b := newScript(ok(chatOK))
		pb, err := openai.New(openai.WithBaseURL("http://b.test/v1"))
		require.NoError(t, err)
		c := newClient(t, oaiUpstream(t, "a", "http://a.test/v1"),
			llmclient.WithUpstream(llmclient.Upstream{Name: "b", Provider: pb, Models: map[string]string{"gpt-4o": "other-model"}}),
			llmclient.WithMaxAttempts(1))
		rt := c.Transport(memTransport{hostMux{"a.test": a, "b.test": b}})
		resp, err := post(t, context.Background(), rt, "http://a.test/v1/chat/completions", chatBody)
		require.NoError(t, err)
		_, _ = readBody(t, resp)
		assert.Equal(t, 200, resp.StatusCode)
		require.Equal(t, 1, b.count())
		assert.JSONEq(t, strings.Replace(chatBody, `"gpt-4o"`, `"other-model"`, 1), b.requests()[0].Body,
			"b gets the request under its own name for the model")
		assert.Equal(t, chatBody, a.requests()[0].Body, "a serves the name as it is")
	})
}

func TestTransportKeyPoolRewritesAuthAndNeverLeaks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		echo := func(w http.ResponseWriter, r *http.Request) {
			key := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
			status(401, fmt.Sprintf(`{"error":{"message":"Incorrect API key provided: %s.","type":"invalid_request_error","code":"invalid_api_key"}}`, key))(w, r)
		}
		up := newScript(echo)
		var log eventLog
		c := newClient(t, oaiUpstream(t, "oai", "http://oai.test/v1", "sk-pool-one", "sk-pool-two"), llmclient.WithObserver(log.observe))
		rt := c.Transport(memTransport{up})
		resp, err := post(t, context.Background(), rt, "http://oai.test/v1/chat/completions", chatBody, "Authorization", "Bearer sk-caller")
		require.NoError(t, err)
		body, _ := readBody(t, resp)
		assert.Equal(t, 401, resp.StatusCode)
		got := up.requests()
		require.Len(t, got, 2, "the second key is tried at once")
		assert.Equal(t, "Bearer sk-pool-one", got[0].Header.Get("Authorization"))
		assert.Equal(t, "Bearer sk-pool-two", got[1].Header.Get("Authorization"))
		assert.NotContains(t, body, "sk-pool", "the returned body is redacted")
		assert.Contains(t, body, "[REDACTED]")
		assert.Len(t, log.kinds(event.KeyEvicted), 2)
		assert.Len(t, log.kinds(event.Alert), 2)
		for _, e := range log.events {
			s := fmt.Sprintf("%+v", e)
			if e.Err != nil {
				s += e.Err.Error()
			}
			assert.NotContains(t, s, "sk-pool")
			assert.NotContains(t, s, "sk-caller")
		}

		// Both keys evicted: the next call fails without a request, and says so.
		resp, err = post(t, context.Background(), rt, "http://oai.test/v1/chat/completions", chatBody, "Authorization", "Bearer sk-caller")
		require.NoError(t, err)
		body, _ = readBody(t, resp)
		assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, "a local refusal, in the vendor's error format")
		assert.Equal(t, "unavailable", resp.Header.Get("X-Llmclient-Class"))
		assert.NotContains(t, body, "sk-")
		assert.Equal(t, 2, up.count())
	})
}

func TestTransportRedactsTheCallersKeyInErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		leak := `data: {"error":{"message":"key sk-caller-secret is overloaded","type":"server_error","code":"server_is_overloaded"}}` + "\n\n"
		up := newScript(sseStep(ev{0, leak}), sseStep(ev{0, roleChunk}, ev{-1, ""}))
		c := newClient(t, oaiUpstream(t, "oai", "http://oai.test/v1"), llmclient.WithFirstTokenTimeout(5*time.Second))
		rt := c.Transport(memTransport{up})

		// The last attempt timed out: the caller gets the *Error, whose trace holds the
		// first attempt's error, redacted.
		_, err := post(t, context.Background(), rt, "http://oai.test/v1/chat/completions", streamBody, "Authorization", "Bearer sk-caller-secret")
		require.Error(t, err)
		var e *llmclient.Error
		require.ErrorAs(t, err, &e)
		require.Len(t, e.Attempts, 3)
		assert.Equal(t, failure.Overloaded, e.Attempts[0].Class)
		assert.Contains(t, e.Attempts[0].Err.Error(), "[REDACTED]")
		for _, a := range e.Attempts {
			assert.NotContains(t, a.Err.Error(), "sk-caller-secret")
		}
		assert.NotContains(t, err.Error(), "sk-caller-secret")

		// A last in-band error is replayed to the caller, redacted too.
		up2 := newScript(sseStep(ev{0, leak}))
		c2 := newClient(t, oaiUpstream(t, "oai", "http://oai.test/v1"), llmclient.WithMaxAttempts(1))
		resp, err := post(t, context.Background(), c2.Transport(memTransport{up2}), "http://oai.test/v1/chat/completions", streamBody,
			"Authorization", "Bearer sk-caller-secret")
		require.NoError(t, err)
		body, _ := readBody(t, resp)
		assert.Contains(t, body, "key [REDACTED] is overloaded")
	})
}

func TestTransportEstimatesTokensForTheLimiter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		up := newScript(ok(chatOK))
		var log eventLog
		p, err := openai.New(openai.WithBaseURL("http://oai.test/v1"))
		require.NoError(t, err)
		c := newClient(t, llmclient.WithUpstream(llmclient.Upstream{Name: "oai", Provider: p, Limits: llmclient.Limits{TPM: 1_000_000}}),
			llmclient.WithObserver(log.observe))
		rt := c.Transport(memTransport{up})
		long := strings.Repeat("hello world ", 500)
		for _, body := range []string{
			`{"model":"gpt-4o","max_completion_tokens":100,"messages":[{"role":"user","content":"` + long + `"}]}`,
			`{"model":"text-embedding-3-small","input":["` + long + `"]}`,
			`{"model":"text-embedding-3-small","input":[[1,2,3,4,5]]}`,
		} {
			path := "/v1/chat/completions"
			if strings.Contains(body, "embedding") {
				path = "/v1/embeddings"
			}
			resp, err := post(t, context.Background(), rt, "http://oai.test"+path, body)
			require.NoError(t, err)
			_, _ = readBody(t, resp)
		}
		at := log.kinds(event.Attempt)
		require.Len(t, at, 3)
		// "hello world " × 500 is 1,000 words: about 1,000 tokens.
		assert.InDelta(t, 1000+100, at[0].EstimatedTokens, 100, "prompt plus max_completion_tokens")
		assert.InDelta(t, 1000, at[1].EstimatedTokens, 100, "embeddings reserve no output")
		assert.Less(t, at[2].EstimatedTokens, 20, "token ids are counted as they are")
		assert.GreaterOrEqual(t, at[2].EstimatedTokens, 5)
	})
}

func TestTransportAnthropicAndGemini(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		antOverloaded := `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`
		antOK := `{"id":"msg_1","type":"message","role":"assistant","model":"claude-x","content":[{"type":"text","text":"hi"}],"stop_reason":"end_turn","usage":{"input_tokens":3,"output_tokens":1}}`
		ant := newScript(status(529, antOverloaded), ok(antOK))
		gemErr := `{"error":{"code":429,"message":"Resource exhausted","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"3s"}]}}`
		gemChunk := "data: {\"candidates\":[{\"content\":{\"role\":\"model\",\"parts\":[{\"text\":\"hi\"}]},\"finishReason\":\"STOP\"}],\"usageMetadata\":{\"promptTokenCount\":3,\"candidatesTokenCount\":1}}\n\n"
		gem := newScript(status(429, gemErr), sseStep(ev{0, gemChunk}))

		pa, err := anthropic.New(anthropic.WithBaseURL("http://ant.test"))
		require.NoError(t, err)
		pg, err := gemini.New(gemini.WithBaseURL("http://gem.test"))
		require.NoError(t, err)
		var log eventLog
		c := newClient(t,
			llmclient.WithUpstream(llmclient.Upstream{Name: "ant", Provider: pa, Keys: []string{"ant-key"}}),
			llmclient.WithUpstream(llmclient.Upstream{Name: "gem", Provider: pg, Keys: []string{"gem-key"}}),
			llmclient.WithObserver(log.observe))
		rt := c.Transport(memTransport{hostMux{"ant.test": ant, "gem.test": gem}})

		resp, err := post(t, context.Background(), rt, "http://ant.test/v1/messages",
			`{"model":"claude-x","max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`, "X-Api-Key", "caller")
		require.NoError(t, err)
		body, _ := readBody(t, resp)
		assert.JSONEq(t, antOK, body)
		require.Equal(t, 2, ant.count())
		assert.Equal(t, "ant-key", ant.requests()[1].Header.Get("X-Api-Key"))

		var took time.Duration
		took = elapsed(func() {
			resp, err = post(t, context.Background(), rt, "http://gem.test/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse",
				`{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`, "X-Goog-Api-Key", "caller")
			require.NoError(t, err)
		})
		body, err = readBody(t, resp)
		require.NoError(t, err)
		assert.Equal(t, gemChunk, body)
		assert.GreaterOrEqual(t, took, 3*time.Second, "the RetryInfo delay in the body is honoured")
		require.Equal(t, 2, gem.count())
		assert.Equal(t, "gem-key", gem.requests()[1].Header.Get("X-Goog-Api-Key"))
		assert.Equal(t, "alt=sse", gem.requests()[1].Query)

		at := log.kinds(event.Attempt)
		require.Len(t, at, 4)
		assert.Equal(t, failure.Overloaded, at[0].Class)
		assert.Equal(t, "claude-x", at[0].Model)
		assert.Equal(t, failure.RateLimited, at[2].Class)
		assert.Equal(t, "gemini-2.5-flash", at[2].Model)
		assert.Equal(t, 3, at[3].InputTokens)
	})
}

// TestTransportRedactsTheCallersKeyInOneShotErrors: an error response that echoes the
// caller's own key (read from its request only when there is something to redact) reaches
// the caller and the trace redacted, from an Authorization header and from an X-Api-Key.
func TestTransportRedactsTheCallersKeyInOneShotErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, hdr := range [][2]string{{"Authorization", "Bearer sk-caller-secret"}, {"X-Api-Key", "sk-caller-secret"}} {
			echo := `{"error":{"message":"key sk-caller-secret is invalid","type":"invalid_request_error","code":"invalid_api_key"}}`
			up := newScript(status(401, echo))
			c := newClient(t, oaiUpstream(t, "oai", "http://oai.test/v1"), llmclient.WithMaxAttempts(1))
			var events []llmclient.Event
			c2 := newClient(t, oaiUpstream(t, "oai", "http://oai.test/v1"), llmclient.WithMaxAttempts(1),
				llmclient.WithObserver(func(_ context.Context, e llmclient.Event) { events = append(events, e) }))
			for _, cl := range []*llmclient.Client{c, c2} {
				resp, err := post(t, context.Background(), cl.Transport(memTransport{up}), "http://oai.test/v1/chat/completions", chatBody, hdr[0], hdr[1])
				require.NoError(t, err, hdr[0])
				body, _ := readBody(t, resp)
				assert.Equal(t, 401, resp.StatusCode)
				assert.NotContains(t, body, "sk-caller-secret", hdr[0])
				assert.Contains(t, body, "[REDACTED]", hdr[0])
				up = newScript(status(401, echo))
			}
			require.NotEmpty(t, events)
			for _, e := range events {
				if e.Err != nil {
					assert.NotContains(t, e.Err.Error(), "sk-caller-secret", hdr[0])
				}
			}
		}
	})
}

// TestTransportErrorTraceOutlivesTheCall: the trace an error carries is its own, not the
// pooled call's, so later round trips through the same Transport leave it as it was.
func TestTransportErrorTraceOutlivesTheCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var n atomic.Int32
		base := rtFunc(func(r *http.Request) (*http.Response, error) {
			if r.Body != nil {
				_, _ = io.Copy(io.Discard, r.Body)
			}
			return nil, fmt.Errorf("connection reset %d: %w", n.Add(1), io.EOF)
		})
		c := newClient(t, append(fast(), oaiUpstream(t, "oai", "http://oai.test/v1"), llmclient.WithMaxAttempts(2))...)
		rt := c.Transport(base)
		var errs []*llmclient.Error
		var want [][]llmclient.Attempt
		for i := range 20 { // distinct bodies: not taken for an SDK's retries of one request
			body := strings.Replace(chatBody, "Say hello", fmt.Sprintf("Say hello %d", i), 1)
			resp, err := post(t, context.Background(), rt, "http://oai.test/v1/chat/completions", body)
			if resp != nil { // the breaker opened: a local refusal, answered as a response
				_, _ = readBody(t, resp)
				require.Equal(t, "unavailable", resp.Header.Get("X-Llmclient-Class"))
				require.NotEmpty(t, errs)
				break
			}
			var e *llmclient.Error
			require.ErrorAs(t, err, &e)
			require.NotEmpty(t, e.Attempts, "%v", err)
			for j, a := range e.Attempts {
				require.Equal(t, "oai", a.Upstream, "attempt %d of call %d", j+1, i)
				require.Equal(t, j+1, a.Number, "attempt %d of call %d", j+1, i)
				require.Error(t, a.Err, "attempt %d of call %d", j+1, i)
			}
			errs = append(errs, e)
			want = append(want, slices.Clone(e.Attempts))
		}
		for i, e := range errs {
			assert.Equal(t, want[i], e.Attempts, "error %d's trace changed after later calls", i)
		}
	})
}

// Two upstreams on one host (two accounts behind one API gateway): failing over from the
// one the caller addressed to the other, none of the caller's credentials goes along when
// the target has a key of its own. An upstream of that host without a key of its own
// gets the caller's other credential headers, as the only way to authenticate there (its
// dialect's own header, here Authorization, is never the caller's on another upstream).
func TestTransportFailoverOnTheSameHostLeavesTheCallersCredentials(t *testing.T) {
	for name, tc := range map[string]struct {
		keysB []string
		want  map[string]string
	}{
		"the target has a pool key": {[]string{"sk-b"}, map[string]string{
			"Authorization": "Bearer sk-b", "X-Api-Key": "", "Cf-Aig-Authorization": ""}},
		"the target has no key of its own": {nil, map[string]string{
			"Authorization": "", "X-Api-Key": "sk-caller", "Cf-Aig-Authorization": "Bearer cf-caller"}},
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				gw := newScript(func(w http.ResponseWriter, r *http.Request) {
					if strings.HasPrefix(r.URL.Path, "/a/") {
						status(500, err503)(w, r)
						return
					}
					ok(chatOK)(w, r)
				})
				pa, err := openai.New(openai.WithBaseURL("http://gw.test/a/v1"))
				require.NoError(t, err)
				pb, err := openai.New(openai.WithBaseURL("http://gw.test/b/v1"))
				require.NoError(t, err)
				c := newClient(t, llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: pa, Keys: []string{"sk-a"}}),
					llmclient.WithUpstream(llmclient.Upstream{Name: "b", Provider: pb, Keys: tc.keysB}),
					llmclient.WithModelGroup("gpt-4o", "a", "b"), llmclient.WithMaxAttempts(3))
				rt := c.Transport(memTransport{gw})
				resp, err := post(t, context.Background(), rt, "http://gw.test/a/v1/chat/completions", chatBody,
					"Authorization", "Bearer sk-caller", "X-Api-Key", "sk-caller", "Cf-Aig-Authorization", "Bearer cf-caller")
				require.NoError(t, err)
				_, _ = readBody(t, resp)
				require.Equal(t, 200, resp.StatusCode)
				got := gw.requests()
				last := got[len(got)-1]
				require.Equal(t, "/b/v1/chat/completions", last.Path)
				for h, v := range tc.want {
					assert.Equal(t, v, last.Header.Get(h), h)
				}
			})
		})
	}
}
