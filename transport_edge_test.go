package llmclient_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/event"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/provider/gemini"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTransportRetriesACutConnection(t *testing.T) {
	cut := func(w http.ResponseWriter, _ *http.Request) {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			_ = conn.Close()
		}
	}
	up := newScript(cut, ok(chatOK))
	srv := httptest.NewServer(up)
	defer srv.Close()
	base := &http.Transport{}
	defer base.CloseIdleConnections()
	var log eventLog
	c := newClient(t, append(fast(), oaiUpstream(t, "oai", srv.URL+"/v1"), llmclient.WithObserver(log.observe))...)
	resp, err := post(t, context.Background(), c.Transport(base), srv.URL+"/v1/chat/completions", chatBody)
	require.NoError(t, err)
	body, _ := readBody(t, resp)
	assert.JSONEq(t, chatOK, body)
	assert.Equal(t, 2, up.count())
	at := log.kinds(event.Attempt)
	require.Len(t, at, 2)
	assert.Equal(t, failure.Network, at[0].Class)
}

// TestTransportStreamTimeoutKeepsTheLastResponse: with a total stream timeout configured,
// a call that fails on error statuses still returns the last one.
func TestTransportStreamTimeoutKeepsTheLastResponse(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		up := newScript(status(503, err503))
		c := newClient(t, oaiUpstream(t, "oai", "http://oai.test/v1"), llmclient.WithStreamTimeout(time.Minute))
		resp, err := post(t, context.Background(), c.Transport(memTransport{up}), "http://oai.test/v1/chat/completions", streamBody)
		require.NoError(t, err)
		_, _ = readBody(t, resp)
		assert.Equal(t, 503, resp.StatusCode)
		assert.Equal(t, 3, up.count())
	})
}

func TestTransportGeminiJSONStreamIsReadWhole(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		arr := `[{"candidates":[{"content":{"role":"model","parts":[{"text":"hi"}]},"finishReason":"STOP"}]}]`
		up := newScript(status(503, `{"error":{"code":503,"message":"unavailable","status":"UNAVAILABLE"}}`), ok(arr))
		pg, err := gemini.New(gemini.WithBaseURL("http://gem.test"))
		require.NoError(t, err)
		c := newClient(t, llmclient.WithUpstream(llmclient.Upstream{Name: "gem", Provider: pg}))
		resp, err := post(t, context.Background(), c.Transport(memTransport{up}),
			"http://gem.test/v1beta/models/gemini-2.5-flash:streamGenerateContent", `{"contents":[]}`, "X-Goog-Api-Key", "k")
		require.NoError(t, err)
		body, err := readBody(t, resp)
		require.NoError(t, err)
		assert.Equal(t, arr, body)
		assert.Equal(t, int64(len(arr)), resp.ContentLength)
	})
}

func TestTransportLargeResponseIsHandedOverWhileRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		big := `{"object":"list","data":[` + strings.Repeat(`{"embedding":[0.1,0.2]},`, 200) + `{}]}`
		up := newScript(ok(big))
		var log eventLog
		c := newClient(t, oaiUpstream(t, "oai", "http://oai.test/v1"), llmclient.WithObserver(log.observe))
		ct := &countingTransport{base: memTransport{up}}
		resp, err := post(t, context.Background(), c.Transport(ct, llmclient.WithMaxReplayBody(1024)),
			"http://oai.test/v1/embeddings", `{"model":"text-embedding-3-small","input":"hi"}`)
		require.NoError(t, err)
		assert.Equal(t, 1, c.InFlight("oai"), "the attempt holds its slot while the body is read")
		body, err := readBody(t, resp)
		require.NoError(t, err)
		assert.Equal(t, big, body)
		synctest.Wait()
		assert.Equal(t, 0, c.InFlight("oai"))
		at := log.kinds(event.Attempt)
		require.Len(t, at, 1)
		assert.Equal(t, failure.None, at[0].Class)
		assert.Equal(t, ct.opened.Load(), ct.closed.Load())
	})
}

// A stream of a shape the dialect does not know passes through unchanged. Only its
// silence is timed: any bytes are progress, and a read that waits on the upstream longer
// than the idle timeout fails (TestTransportBodyReadRawIsBoundedByTheIdleTimeout).
func TestTransportUnknownStreamsPassThrough(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		events := "data: one\n\n" + ": ping\n\n" + "data: two\n\n"
		up := newScript(sseStep(ev{0, "data: one\n\n"}, ev{900 * time.Millisecond, ": ping\n\n"},
			ev{900 * time.Millisecond, "data: two\n\n"}))
		c := newClient(t, oaiUpstream(t, "oai", "http://oai.test/v1"), llmclient.WithIdleTimeout(time.Second))
		resp, err := post(t, context.Background(), c.Transport(memTransport{up}), "http://oai.test/v1/threads/runs", `{"stream":true}`)
		require.NoError(t, err)
		body, err := readBody(t, resp)
		require.NoError(t, err, "no gap reached the idle timeout")
		assert.Equal(t, events, body)
	})
}

// TestTransportConcurrent runs one-shot and streaming calls at once, some failing, and
// checks that every slot and body is released.
func TestTransportConcurrent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var n sync.Mutex
		calls := 0
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			n.Lock()
			calls++
			k := calls
			n.Unlock()
			switch {
			case k%5 == 0:
				status(503, err503)(w, r)
			case bytes.Contains(body, []byte(`"stream":true`)):
				sseStep(ev{time.Millisecond, chunk("a")}, ev{time.Millisecond, chunk("b")}, ev{0, done})(w, r)
			default:
				ok(chatOK)(w, r)
			}
		})
		ct := &countingTransport{base: memTransport{h}}
		c := newClient(t, oaiUpstream(t, "oai", "http://oai.test/v1", "k1", "k2", "k3"),
			llmclient.WithRetryBudget(1, 100, time.Minute))
		rt := c.Transport(ct)
		var wg sync.WaitGroup
		for i := range 40 {
			wg.Go(func() {
				body := chatBody
				if i%2 == 0 {
					body = streamBody
				}
				resp, err := post(t, context.Background(), rt, "http://oai.test/v1/chat/completions", body)
				if err != nil {
					t.Error(err)
					return
				}
				got, err := readBody(t, resp)
				if err != nil || resp.StatusCode != 200 || got == "" {
					t.Errorf("call %d: %d %q %v", i, resp.StatusCode, got, err)
				}
			})
		}
		wg.Wait()
		synctest.Wait()
		assert.Equal(t, 0, c.InFlight("oai"))
		assert.Equal(t, ct.opened.Load(), ct.closed.Load())
	})
}

func BenchmarkTransportOverhead(b *testing.B) {
	static := rtFunc(func(req *http.Request) (*http.Response, error) {
		_, _ = io.Copy(io.Discard, req.Body)
		_ = req.Body.Close()
		return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}},
			Body: io.NopCloser(strings.NewReader(chatOK)), ContentLength: int64(len(chatOK)), Request: req}, nil
	})
	c, err := llmclient.New(oaiUpstream(b, "oai", "http://oai.test/v1"))
	if err != nil {
		b.Fatal(err)
	}
	const events = roleChunk + `data: {"id":"s1","object":"chat.completion.chunk","model":"gpt-4o","choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":null}]}` + "\n\n" + stopChunk + done
	stream := rtFunc(func(req *http.Request) (*http.Response, error) {
		_, _ = io.Copy(io.Discard, req.Body)
		_ = req.Body.Close()
		return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/event-stream"}},
			Body: io.NopCloser(strings.NewReader(events)), ContentLength: -1, Request: req}, nil
	})
	for _, tc := range []struct {
		name string
		rt   http.RoundTripper
		body string
	}{{"direct", static, chatBody}, {"transport", c.Transport(static), chatBody},
		{"stream/direct", stream, streamBody}, {"stream/transport", c.Transport(stream), streamBody}} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				req, _ := http.NewRequest(http.MethodPost, "http://oai.test/v1/chat/completions", strings.NewReader(tc.body))
				resp, err := tc.rt.RoundTrip(req)
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
			}
		})
	}
}

type rtFunc func(*http.Request) (*http.Response, error)

func (f rtFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

var _ = fmt.Sprint

// TestTransportPartitionLimits: a partition named by the request's context is limited
// before an upstream is chosen; a stream holds the partition's slot until it is closed.
func TestTransportPartitionLimits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		up := newScript(sseStep(ev{0, chunk("a")}, ev{10 * time.Second, done}))
		c := newClient(t, oaiUpstream(t, "oai", "http://oai.test/v1"),
			llmclient.WithPartitionLimits("", llmclient.Limits{MaxConcurrent: 1}))
		rt := c.Transport(memTransport{up})
		ctx := llmclient.WithPartition(context.Background(), "team-a")
		first, err := post(t, ctx, rt, "http://oai.test/v1/chat/completions", streamBody)
		require.NoError(t, err)
		var second time.Duration
		finished := make(chan struct{})
		go func() {
			defer close(finished)
			second = elapsed(func() {
				resp, err := post(t, ctx, rt, "http://oai.test/v1/chat/completions", streamBody)
				if err == nil {
					_, _ = readBody(t, resp)
				}
			})
		}()
		time.Sleep(3 * time.Second)
		synctest.Wait()
		assert.Equal(t, 1, up.count(), "the second call waits for the partition's slot")
		_, _ = readBody(t, first)
		<-finished
		assert.Equal(t, 2, up.count())
		assert.GreaterOrEqual(t, second, 20*time.Second, "10s waiting for the slot, then its own 10s stream")
	})
}

// TestTransportMatchesBaseURLWithoutRegardToCase: a request is protected when its scheme
// and host match an upstream's base URL in any case, with or without the default port, and
// its path lies under the base path; a path that only shares the base path's prefix, or
// another port, passes through unprotected.
func TestTransportMatchesBaseURLWithoutRegardToCase(t *testing.T) {
	synctest.Test(t, testTransportMatchesBaseURL)
}

func testTransportMatchesBaseURL(t *testing.T) {
	var calls atomic.Int32
	base := rtFunc(func(r *http.Request) (*http.Response, error) {
		calls.Add(1)
		if r.Body != nil {
			_, _ = io.Copy(io.Discard, r.Body)
		}
		return &http.Response{StatusCode: 503, Header: http.Header{"Content-Type": {"application/json"}},
			Body: io.NopCloser(strings.NewReader(err503)), Request: r}, nil
	})
	c := newClient(t, append(fast(), oaiUpstream(t, "oai", "https://api.example.test/v1"), llmclient.WithMaxAttempts(2))...)
	rt := c.Transport(base)
	for _, tc := range []struct {
		url       string
		protected bool
	}{
		{"https://api.example.test/v1/chat/completions", true},
		{"HTTPS://API.Example.TEST/v1/chat/completions", true},
		{"https://api.example.test:443/v1/chat/completions", true},
		{"https://API.EXAMPLE.TEST:443/v1/chat/completions", true},
		{"https://api.example.test:8443/v1/chat/completions", false},
		{"http://api.example.test/v1/chat/completions", false},
		{"https://api.example.test/v1x/chat/completions", false},
		{"https://api.example.test/v2/chat/completions", false},
	} {
		calls.Store(0)
		req, err := http.NewRequest(http.MethodPost, tc.url, strings.NewReader(chatBody))
		require.NoError(t, err)
		resp, err := rt.RoundTrip(req)
		require.NoError(t, err, tc.url)
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		want := int32(1)
		if tc.protected {
			want = 2 // retried once after the 503
		}
		assert.Equal(t, want, calls.Load(), tc.url)
	}
}
