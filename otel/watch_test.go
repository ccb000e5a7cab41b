package otel_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/provider/fake"
	"github.com/llmclient/llmclient/ratelimit"
)

// Watch's gauges read the Client's state: breakers, keys, limiter levels against their
// limits, and the quota the upstream reported.
func TestWatchGauges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t)
		p := fake.New(
			fake.Fail(429).RetryAfter(30*time.Second).RateLimits(ratelimit.Status{
				Requests: ratelimit.Window{Known: true, Limit: 600, Remaining: 0}}),
			fake.Reply("ok").RateLimits(ratelimit.Status{Tokens: ratelimit.Window{Known: true, Limit: 60000, Remaining: 9000}}))
		c, err := llmclient.New(llmclient.WithObserver(r.tel.Observe), llmclient.WithMaxAttempts(1),
			llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: p, Keys: []string{"sk-1", "sk-2"},
				Limits: llmclient.Limits{RPM: 600, TPM: 60000, MaxConcurrent: 2}}))
		require.NoError(t, err)
		reg, err := r.tel.Watch(c)
		require.NoError(t, err)
		_, err = c.Complete(context.Background(), chatReq("m"))
		require.Error(t, err)
		_, err = c.Complete(context.Background(), chatReq("m"))
		require.NoError(t, err)

		ms := r.collect(t)
		value := func(points []dpI, want map[string]any) int64 {
			t.Helper()
			m := matching(points, want)
			require.Len(t, m, 1, "%v", want)
			return m[0].Value
		}
		bs := wrapI(gaugeI(t, ms, "llmclient.breaker.state"))
		assert.Equal(t, int64(1), value(bs, map[string]any{"llmclient.upstream": "a", "llmclient.breaker.state": "closed"}))
		assert.Equal(t, int64(0), value(bs, map[string]any{"llmclient.upstream": "a", "llmclient.breaker.state": "open"}))
		assert.Equal(t, int64(0), value(bs, map[string]any{"llmclient.upstream": "a", "llmclient.breaker.state": "half-open"}))
		ks := wrapI(gaugeI(t, ms, "llmclient.key.state"))
		assert.Equal(t, int64(1), value(ks, map[string]any{"llmclient.key": "key#1", "llmclient.key.state": "cooling"}))
		assert.Equal(t, int64(0), value(ks, map[string]any{"llmclient.key": "key#1", "llmclient.key.state": "ready"}))
		assert.Equal(t, int64(1), value(ks, map[string]any{"llmclient.key": "key#2", "llmclient.key.state": "ready"}))
		assert.Equal(t, int64(0), value(wrapI(gaugeI(t, ms, "llmclient.upstream.in_flight")), map[string]any{"llmclient.upstream": "a"}))

		rem := wrapF(gaugeF(t, ms, "llmclient.limiter.remaining"))
		capa := wrapF(gaugeF(t, ms, "llmclient.limiter.capacity"))
		lim := wrapI(gaugeI(t, ms, "llmclient.limiter.limit"))
		k2req := map[string]any{"llmclient.key": "key#2", "llmclient.limit.dimension": "requests"}
		require.Len(t, matching(rem, k2req), 1)
		assert.Equal(t, 99.0, matching(rem, k2req)[0].Value)
		assert.Equal(t, 100.0, matching(capa, k2req)[0].Value)
		assert.Equal(t, int64(600), value(lim, k2req))
		k2conc := map[string]any{"llmclient.key": "key#2", "llmclient.limit.dimension": "concurrency"}
		assert.Equal(t, 2.0, matching(rem, k2conc)[0].Value)
		assert.Equal(t, int64(60000), value(lim, map[string]any{"llmclient.key": "key#2", "llmclient.limit.dimension": "tokens"}))

		rr := wrapF(gaugeF(t, ms, "llmclient.upstream.ratelimit.remaining"))
		rl := wrapI(gaugeI(t, ms, "llmclient.upstream.ratelimit.limit"))
		k1 := map[string]any{"llmclient.key": "key#1", "llmclient.limit.dimension": "requests"}
		require.Len(t, matching(rr, k1), 1)
		assert.Equal(t, 0.0, matching(rr, k1)[0].Value)
		assert.Equal(t, int64(600), value(rl, k1))
		k2 := map[string]any{"llmclient.key": "key#2", "llmclient.limit.dimension": "tokens"}
		assert.Equal(t, 9000.0, matching(rr, k2)[0].Value, "TPM remaining as reported: 15%")
		assert.Empty(t, matching(rr, map[string]any{"llmclient.key": "key#2", "llmclient.limit.dimension": "requests"}))

		cd := sumI(t, ms, "llmclient.key.cooldowns")
		require.Len(t, cd, 1)
		assert.Equal(t, map[string]any{"llmclient.upstream": "a", "llmclient.key": "key#1", "error.type": "rate_limited"},
			setAttrs(cd[0].Attributes))

		require.NoError(t, reg.Unregister())
		ms = r.collect(t)
		assert.NotContains(t, ms, "llmclient.breaker.state", "no gauges once unregistered")
	})
}
