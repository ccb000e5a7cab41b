package llmclient_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/routing"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Deadlines in transport mode: the same promises for requests made through Client.Transport.

// hang answers only when the client goes away.
func hang(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }

// after answers with step once d has passed.
func after(d time.Duration, step func(http.ResponseWriter, *http.Request)) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(d):
			step(w, r)
		case <-r.Context().Done():
		}
	}
}

// twoUpstreams is a Client with upstreams a and b serving gpt-4o, in that order, and its
// transport over the in-process hosts.
func twoUpstreams(t *testing.T, a, b http.Handler, opts ...llmclient.Option) http.RoundTripper {
	c := newClient(t, append([]llmclient.Option{oaiUpstream(t, "a", "http://a.test/v1", "ka1", "ka2"),
		oaiUpstream(t, "b", "http://b.test/v1"), llmclient.WithModelGroup("gpt-4o", "a", "b")}, opts...)...)
	return c.Transport(memTransport{hostMux{"a.test": a, "b.test": b}})
}

// A hung primary and a 10 s deadline: each request is answered by the secondary within
// the primary's half of the budget plus the secondary's latency, at any retry budget.
func TestTransportHungPrimaryNeverEatsTheDeadline(t *testing.T) {
	for name, opts := range map[string][]llmclient.Option{
		"default budget": nil,
		"no budget":      {llmclient.WithRetryBudget(0, 0, 10*time.Second)},
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				a := newScript(hang)
				b := newScript(after(200*time.Millisecond, ok(chatOK)))
				rt := twoUpstreams(t, a, b, opts...)
				var wg sync.WaitGroup
				for range 10 {
					wg.Go(func() {
						ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
						defer cancel()
						var resp *http.Response
						var err error
						d := elapsed(func() { resp, err = post(t, ctx, rt, "http://a.test/v1/chat/completions", chatBody) })
						if !assert.NoError(t, err) {
							return
						}
						body, _ := readBody(t, resp)
						assert.JSONEq(t, chatOK, body)
						assert.LessOrEqual(t, d, 5*time.Second+200*time.Millisecond)
					})
					time.Sleep(time.Second)
				}
				wg.Wait()
				assert.Equal(t, 10, b.count())
			})
		})
	}
}

// A stream that stalls before its first token on the primary: the secondary's stream is
// handed over after half the deadline.
func TestTransportStallingStreamFailsOverWithinItsShare(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newScript(sseStep(ev{delay: -1}))
		b := newScript(sseStep(ev{300 * time.Millisecond, roleChunk + chunk("ok")}, ev{0, stopChunk + done}))
		rt := twoUpstreams(t, a, b)
		ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
		defer cancel()
		var resp *http.Response
		var err error
		d := elapsed(func() { resp, err = post(t, ctx, rt, "http://a.test/v1/chat/completions", streamBody) })
		require.NoError(t, err)
		body, _ := readBody(t, resp)
		assert.Contains(t, body, `"content":"ok"`)
		assert.Equal(t, 4*time.Second+300*time.Millisecond, d)
		assert.Equal(t, 1, a.count())
	})
}

// Retry-After: 20 on every key of the primary: served by the secondary at once.
func TestTransportCoolingPrimaryMovesToSecondaryAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newScript(status(429, `{"error":{"message":"slow down","type":"requests","code":"rate_limit_exceeded"}}`, "Retry-After", "20"))
		b := newScript(ok(chatOK))
		rt := twoUpstreams(t, a, b)
		for i := range 3 {
			var resp *http.Response
			var err error
			d := elapsed(func() { resp, err = post(t, context.Background(), rt, "http://a.test/v1/chat/completions", chatBody) })
			require.NoError(t, err)
			_, _ = readBody(t, resp)
			assert.Equal(t, 200, resp.StatusCode)
			assert.Equal(t, time.Duration(0), d, "request %d waited", i)
		}
		assert.Equal(t, 2, a.count(), "each key was called once, then left to cool")
		assert.Equal(t, 3, b.count())
	})
}

// Latency routing: a slow primary loses its traffic to the fast secondary.
func TestTransportLatencyRouting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newScript(after(3*time.Second, ok(chatOK)))
		b := newScript(after(200*time.Millisecond, ok(chatOK)))
		rt := twoUpstreams(t, a, b, llmclient.WithRouting("gpt-4o", routing.Latency))
		for range 200 {
			resp, err := post(t, context.Background(), rt, "http://a.test/v1/chat/completions", chatBody)
			require.NoError(t, err)
			_, _ = readBody(t, resp)
		}
		assert.GreaterOrEqual(t, b.count(), 190, "the secondary serves nearly everything")
		assert.GreaterOrEqual(t, a.count(), 1, "the primary is still probed")
	})
}
