package llmclient_test

import (
	"context"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/provider/fake"
	"github.com/llmclient/llmclient/ratelimit"
	"github.com/llmclient/llmclient/routing"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Every CallOptions field, through Complete and, where it applies, the transport.
func TestCallOptions(t *testing.T) {
	with := func(o llmclient.CallOptions) context.Context {
		return llmclient.WithCallOptions(context.Background(), o)
	}
	t.Run("attempt caps", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			a := fake.New(fake.Fail(500).Forever())
			b := fake.New(fake.Fail(500).Forever())
			c := newClient(t, up("a", a), up("b", b))
			_, err := c.Complete(with(llmclient.CallOptions{MaxAttempts: 1, MaxTotalAttempts: 1}), chatReq("m"))
			require.Error(t, err)
			assert.Equal(t, 1, a.Calls()+b.Calls())
			_, err = c.Complete(with(llmclient.CallOptions{MaxAttempts: 2}), chatReq("m"))
			require.Error(t, err)
			assert.Equal(t, 1+2, a.Calls())
			assert.Equal(t, 2, b.Calls())
		})
	})
	t.Run("attempt timeout", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			a := fake.New(fake.Reply("slow").Latency(time.Minute), fake.Reply("ok"))
			c := newClient(t, up("a", a))
			var err error
			d := elapsed(func() {
				_, err = c.Complete(with(llmclient.CallOptions{AttemptTimeout: 3 * time.Second}), chatReq("m"))
			})
			require.NoError(t, err)
			assert.Equal(t, 3*time.Second, d)
		})
	})
	t.Run("pin and exclude", func(t *testing.T) {
		a, b, cc := fake.New(fake.Reply("a").Forever()), fake.New(fake.Reply("b").Forever()), fake.New(fake.Reply("c").Forever())
		c := newClient(t, up("a", a), up("b", b), up("c", cc))
		resp, err := c.Complete(with(llmclient.CallOptions{Pin: []string{"c", "a"}}), chatReq("m"))
		require.NoError(t, err)
		assert.Equal(t, "c", resp.Upstream)
		resp, err = c.Complete(with(llmclient.CallOptions{Exclude: []string{"a"}}), chatReq("m"))
		require.NoError(t, err)
		assert.Equal(t, "b", resp.Upstream)
		_, err = c.Complete(with(llmclient.CallOptions{Pin: []string{"nope"}}), chatReq("m"))
		assert.Equal(t, failure.NotFound, llmclient.ClassOf(err), "pinning never adds an upstream")
	})
	t.Run("no failover", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			a := fake.New(fake.Fail(500).Forever())
			b := fake.New(fake.Reply("b").Forever())
			c := newClient(t, up("a", a), up("b", b))
			_, err := c.Complete(with(llmclient.CallOptions{NoFailover: true}), chatReq("m"))
			require.Error(t, err)
			assert.Equal(t, 0, b.Calls())
		})
	})
	t.Run("routing", func(t *testing.T) {
		a := fake.New(fake.Reply("a").Forever())
		b := fake.New(fake.Reply("b").Forever())
		c := newClient(t, llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: a, Weight: 1}),
			llmclient.WithUpstream(llmclient.Upstream{Name: "b", Provider: b, Weight: 1000}))
		for range 50 {
			_, err := c.Complete(with(llmclient.CallOptions{Routing: routing.Weighted}), chatReq("m"))
			require.NoError(t, err)
		}
		assert.Greater(t, b.Calls(), 45)
		resp, err := c.Complete(context.Background(), chatReq("m"))
		require.NoError(t, err)
		assert.Equal(t, "a", resp.Upstream, "without options, the Client's own ordered routing")
	})
	t.Run("headers", func(t *testing.T) {
		var got http.Header
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got = r.Header.Clone(); ok(chatOK)(w, r) })
		c := newClient(t, openaiOver(t, "a", h, "sk-pool-key-0123456789"))
		ctx := with(llmclient.CallOptions{Headers: http.Header{"Idempotency-Key": {"k-1"}, "Authorization": {"Bearer mine"}}})
		_, err := c.Complete(ctx, chatReq("m"))
		require.NoError(t, err)
		assert.Equal(t, "k-1", got.Get("Idempotency-Key"))
		assert.Equal(t, "Bearer sk-pool-key-0123456789", got.Get("Authorization"), "never replaces the credential")
		// The transport sends them too.
		up := newScript(ok(chatOK))
		tc := newClient(t, oaiUpstream(t, "oai", "http://oai.test/v1"))
		resp, err := post(t, ctx, tc.Transport(memTransport{up}), "http://oai.test/v1/chat/completions", chatBody)
		require.NoError(t, err)
		_, _ = readBody(t, resp)
		assert.Equal(t, "k-1", up.requests()[0].Header.Get("Idempotency-Key"))
	})
	t.Run("batch", func(t *testing.T) {
		a := fake.New(fake.Reply("a").Forever())
		c := newClient(t, up("a", a))
		_, err := c.Complete(with(llmclient.CallOptions{Batch: true}), chatReq("m"))
		require.NoError(t, err)
		assert.Equal(t, ratelimit.Batch, a.Requests()[0].Request.Priority)
	})
	t.Run("bad values", func(t *testing.T) {
		a := fake.New(fake.Reply("a").Forever())
		c := newClient(t, up("a", a))
		for _, o := range []llmclient.CallOptions{{MaxAttempts: -1}, {AttemptTimeout: -1}, {Routing: 99},
			{Hedge: &routing.Hedge{On: true, Delay: -1}}} {
			_, err := c.Complete(with(o), chatReq("m"))
			assert.Equal(t, failure.BadRequest, llmclient.ClassOf(err), "%+v", o)
		}
		assert.Equal(t, 0, a.Calls())
	})
}
