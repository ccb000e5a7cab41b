package llmclient_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/provider/anthropic"
	"github.com/llmclient/llmclient/provider/fake"
	"github.com/llmclient/llmclient/provider/openai"
	"github.com/llmclient/llmclient/ratelimit"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// streamQuota streams "hi"; with limit set, its headers report that many requests a
// minute, none remaining, the window resetting in 30 s.
func streamQuota(limit string) http.HandlerFunc {
	s := sseStep(ev{0, roleChunk}, ev{0, chunk("hi")}, ev{0, stopChunk}, ev{0, done})
	return func(w http.ResponseWriter, r *http.Request) {
		if limit != "" {
			w.Header().Set("x-ratelimit-limit-requests", limit)
			w.Header().Set("x-ratelimit-remaining-requests", "0")
			w.Header().Set("x-ratelimit-reset-requests", "30s")
		}
		s(w, r)
	}
}

// streamed opens a stream of chatReq(model) on c, reads it to its end and returns its
// response.
func streamed(t *testing.T, ctx context.Context, c *llmclient.Client, model string) *llmclient.Response {
	t.Helper()
	s, err := c.Stream(ctx, chatReq(model))
	require.NoError(t, err)
	_, err = readAll(s)
	require.NoError(t, err)
	return s.Response()
}

// A typed stream's response headers teach the key's limiter the quota, as a one-shot
// answer's do: a key without declared limits follows its upstream's headers whatever
// the call's shape. The report is in the stream's Response and in Snapshot, and the
// calls after it wait for the window the headers announced.
func TestStreamsLearnTheQuotaFromTheirHeaders(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newClient(t, openaiOver(t, "a", streamQuota("2"), "k1"))
		resp := streamed(t, context.Background(), c, "gpt-4o")
		require.NotNil(t, resp.RateLimits, "the stream's Response carries the quota its headers reported")
		assert.Equal(t, int64(0), resp.RateLimits.Requests.Remaining)
		keys := c.Snapshot().Upstreams[0].Keys
		require.Len(t, keys, 1)
		require.NotNil(t, keys[0].Reported, "Snapshot shows the quota the stream's headers reported")

		ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
		defer cancel()
		// The first call was admitted before anything was learned; the key's bucket starts
		// from the learned limit, and the calls after it wait for the window to refill, as
		// one-shot calls do.
		d := elapsed(func() {
			for range 3 {
				streamed(t, ctx, c, "gpt-4o")
			}
		})
		assert.GreaterOrEqual(t, d, 30*time.Second, "the next calls wait for the window the headers announced")
	})
}

// A daily window learned from one lying one-shot answer is forgotten when a stream's
// headers carry no quota report, as when a one-shot answer's do not.
func TestLyingRateLimitHeadersForgottenOnAStreamWithout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var n atomic.Int64
		lying, stream := lyingOnce(), streamQuota("")
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if n.Add(1) == 1 {
				lying(w, r)
				return
			}
			stream(w, r)
		})
		c := newClient(t, openaiOver(t, "a", h, "k1"))
		_, err := c.Complete(context.Background(), chatReq("gpt-4o"))
		require.NoError(t, err)
		for i := range 3 {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Hour)
			d := elapsed(func() { streamed(t, ctx, c, "gpt-4o") })
			cancel()
			if i == 0 {
				assert.LessOrEqual(t, d, time.Hour+time.Minute, "stream %d waited", i+1)
			} else {
				assert.Zero(t, d, "stream %d waited: the window no answer reports any more is forgotten", i+1)
			}
		}
	})
}

// The same through Anthropic's and OpenAI's Responses API streams: their quota headers
// reach the stream's Response and Snapshot.
func TestStreamsLearnTheQuotaFromTheirHeadersVendors(t *testing.T) {
	named := func(name, data string) ev { return ev{0, "event: " + name + "\ndata: " + data + "\n\n"} }
	cases := []struct {
		name, model string
		header      map[string]string
		events      []ev
		new         func(hc *http.Client) (llmclient.Provider, error)
	}{
		{"anthropic", "claude-opus-4-6", map[string]string{
			"anthropic-ratelimit-requests-limit":     "50",
			"anthropic-ratelimit-requests-remaining": "7",
			"anthropic-ratelimit-requests-reset":     "2030-01-01T00:00:30Z",
		}, []ev{
			named("message_start", `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"claude-opus-4-6","usage":{"input_tokens":5,"output_tokens":1}}}`),
			named("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`),
			named("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hi"}}`),
			named("content_block_stop", `{"type":"content_block_stop","index":0}`),
			named("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":2}}`),
			named("message_stop", `{"type":"message_stop"}`),
		}, func(hc *http.Client) (llmclient.Provider, error) {
			return anthropic.New(anthropic.WithBaseURL("http://ant.test"), anthropic.WithAPIKey("k"), anthropic.WithHTTPClient(hc))
		}},
		{"openai responses", "gpt-4o", map[string]string{
			"x-ratelimit-limit-requests":     "50",
			"x-ratelimit-remaining-requests": "7",
			"x-ratelimit-reset-requests":     "30s",
		}, []ev{
			named("response.created", `{"type":"response.created","response":{"id":"r1","model":"gpt-4o"}}`),
			named("response.output_text.delta", `{"type":"response.output_text.delta","delta":"hi"}`),
			named("response.completed", `{"type":"response.completed","response":{"id":"r1","model":"gpt-4o","status":"completed","usage":{"input_tokens":3,"output_tokens":2,"total_tokens":5}}}`),
		}, func(hc *http.Client) (llmclient.Provider, error) {
			return openai.New(openai.WithBaseURL("http://oai.test/v1"), openai.WithResponsesAPI(), openai.WithHTTPClient(hc))
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				stream := sseStep(tc.events...)
				h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					for k, v := range tc.header {
						w.Header().Set(k, v)
					}
					stream(w, r)
				})
				p, err := tc.new(&http.Client{Transport: memTransport{h: h}})
				require.NoError(t, err)
				c := newClient(t, llmclient.WithUpstream(llmclient.Upstream{Name: tc.name, Provider: p, Keys: []string{"k"}}))
				resp := streamed(t, context.Background(), c, tc.model)
				require.NotNil(t, resp.RateLimits)
				assert.Equal(t, int64(50), resp.RateLimits.Requests.Limit)
				assert.Equal(t, int64(7), resp.RateLimits.Requests.Remaining)
				require.NotNil(t, c.Snapshot().Upstreams[0].Keys[0].Reported)
			})
		})
	}
}

// The fake provider's streams report a step's RateLimits as they open, as a vendor's
// stream headers do; a step without them says nothing.
func TestFakeStreamsReportTheirRateLimits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rl := ratelimit.Status{Requests: ratelimit.Window{Known: true, Limit: 10, Remaining: 3, Reset: time.Minute}}
		p := fake.New(fake.Stream("hi").RateLimits(rl), fake.Stream("hi"))
		c := newClient(t, up("a", p, "k1"))
		resp := streamed(t, context.Background(), c, "m")
		require.NotNil(t, resp.RateLimits)
		assert.Equal(t, rl, *resp.RateLimits)
		assert.NotNil(t, c.Snapshot().Upstreams[0].Keys[0].Reported)
		assert.Nil(t, streamed(t, context.Background(), c, "m").RateLimits)
	})
}
