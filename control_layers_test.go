package llmclient_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/event"
	"github.com/llmclient/llmclient/health"
	"github.com/llmclient/llmclient/limitstore"
	"github.com/llmclient/llmclient/provider/fake"
	"github.com/llmclient/llmclient/ratelimit"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// controlEvents returns the event.Control events the log holds.
func controlEvents(log *eventLog) []llmclient.Event { return log.kinds(event.Control) }

// A 429 with a Retry-After pauses the only key of a limited pool in its limiter; RestoreKey
// lifts that pause too, so the next call goes out at once.
func TestRestoreKeyLiftsLimiterPause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := fake.New(fake.Fail(429).RetryAfter(30*time.Second).Times(1), fake.Reply("ok").Forever())
		var log eventLog
		c := newClient(t, llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: p, Keys: []string{"sk-one"},
			Limits: llmclient.Limits{RPM: 600}}), llmclient.WithMaxAttempts(1), llmclient.WithObserver(log.observe),
			llmclient.WithLimiterMode(ratelimit.FailFast))
		_, err := c.Complete(context.Background(), chatReq("m"))
		require.Error(t, err)
		_, err = c.Complete(context.Background(), chatReq("m"))
		require.Error(t, err, "the key is paused for the Retry-After")

		require.NoError(t, c.RestoreKey("a", "key#1"))
		resp, err := c.Complete(context.Background(), chatReq("m"))
		require.NoError(t, err, "a restored key serves the next call")
		assert.Equal(t, "ok", resp.Text)
		ev := controlEvents(&log)
		require.Len(t, ev, 1)
		assert.Contains(t, ev[0].Changed, "limiter_pause")
	})
}

// The adapter's own key, which Snapshot calls "default", can be evicted and restored.
func TestRestoreAndEvictDefaultKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := fake.New(fake.Fail(401).Times(1), fake.Reply("ok").Forever())
		c := newClient(t, up("a", p), llmclient.WithMaxAttempts(1))
		_, err := c.Complete(context.Background(), chatReq("m"))
		require.Error(t, err)
		assert.Equal(t, health.KeyEvicted, c.Snapshot().Upstreams[0].Keys[0].State)
		_, err = c.Complete(context.Background(), chatReq("m"))
		require.ErrorIs(t, err, llmclient.ErrNoKey, "the evicted key is out for an hour")

		require.NoError(t, c.RestoreKey("a", "default"))
		assert.Equal(t, health.KeyReady, c.Snapshot().Upstreams[0].Keys[0].State)
		_, err = c.Complete(context.Background(), chatReq("m"))
		require.NoError(t, err)

		require.NoError(t, c.EvictKey("a", "default"))
		_, err = c.Complete(context.Background(), chatReq("m"))
		require.ErrorIs(t, err, llmclient.ErrNoKey)
		assert.Equal(t, health.KeyEvicted, c.Snapshot().Upstreams[0].Keys[0].State)
	})
}

// With a limit store, a 401 evicts the key in the store too, for every replica; RestoreKey
// lifts that eviction, so the next call does not evict the key again from the store.
func TestRestoreKeyLiftsStoreEviction(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := fake.New(fake.Fail(401).Times(1), fake.Reply("ok").Forever())
		var log eventLog
		store := limitstore.NewMemory()
		c := newClient(t, up("a", p, "sk-one", "sk-two"), llmclient.WithMaxAttempts(1),
			llmclient.WithLimitStore(store), llmclient.WithObserver(log.observe))
		_, err := c.Complete(context.Background(), chatReq("m"))
		require.Error(t, err)
		evicted := p.Requests()[0].APIKey
		label := "key#1"
		if evicted == "sk-two" {
			label = "key#2"
		}
		require.NoError(t, c.RestoreKey("a", label))
		for range 4 {
			_, err := c.Complete(context.Background(), chatReq("m"))
			require.NoError(t, err)
		}
		for _, k := range c.Snapshot().Upstreams[0].Keys {
			assert.Equal(t, health.KeyReady, k.State, k.Label)
		}
		used := 0
		for _, r := range p.Requests()[1:] {
			if r.APIKey == evicted {
				used++
			}
		}
		assert.Positive(t, used, "the restored key serves calls again")
		ev := controlEvents(&log)
		require.Len(t, ev, 1)
		assert.ElementsMatch(t, []string{"pool_eviction", "store_eviction"}, ev[0].Changed)

		// A second Client sharing the store sees the key's eviction lifted too.
		p2 := fake.New(fake.Reply("ok").Forever())
		c2 := newClient(t, up("a", p2, "sk-one", "sk-two"), llmclient.WithLimitStore(store))
		for range 4 {
			_, err := c2.Complete(context.Background(), chatReq("m"))
			require.NoError(t, err)
		}
		for _, k := range c2.Snapshot().Upstreams[0].Keys {
			assert.Equal(t, health.KeyReady, k.State, k.Label)
		}
	})
}

// A key paused in its limiter after a 429 shows as cooling, until the pause's end.
func TestSnapshotShowsLimiterPauseAsCooling(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := fake.New(fake.Fail(429).RetryAfter(30*time.Second).Times(1), fake.Reply("ok").Forever())
		c := newClient(t, llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: p, Keys: []string{"sk-one"},
			Limits: llmclient.Limits{RPM: 600}}), llmclient.WithMaxAttempts(1),
			llmclient.WithLimiterMode(ratelimit.FailFast))
		start := time.Now()
		_, err := c.Complete(context.Background(), chatReq("m"))
		require.Error(t, err)
		k := c.Snapshot().Upstreams[0].Keys[0]
		assert.Equal(t, health.KeyCooling, k.State)
		assert.Equal(t, start.Add(30*time.Second), k.Until)
		time.Sleep(31 * time.Second)
		assert.Equal(t, health.KeyReady, c.Snapshot().Upstreams[0].Keys[0].State)
	})
}

// A control names what it changed, and changes nothing (and says so) when there was
// nothing to change.
func TestControlsReportWhatChanged(t *testing.T) {
	p := fake.New(fake.Reply("ok").Forever())
	var log eventLog
	c := newClient(t, up("a", p, "sk-one"), llmclient.WithObserver(log.observe))
	require.NoError(t, c.RestoreKey("a", "key#1"))
	require.NoError(t, c.EvictKey("a", "key#1"))
	require.NoError(t, c.Drain("a", true))
	require.NoError(t, c.Drain("a", true))
	require.NoError(t, c.ForceBreakerOpen("a"))
	require.NoError(t, c.ResetBreaker("a"))
	var got [][]string
	for _, e := range controlEvents(&log) {
		got = append(got, e.Changed)
	}
	assert.Equal(t, [][]string{nil, {"pool_eviction"}, {"drain"}, nil, {"breaker"}, {"breaker"}}, got)
}

func TestControlUnknownNames(t *testing.T) {
	c := newClient(t, up("a", fake.New(fake.Reply("ok").Forever()), "sk-one"))
	err := c.ForceBreakerOpen("nope")
	require.Error(t, err)
	assert.Contains(t, err.Error(), `no upstream named "nope"`)
	assert.NotContains(t, err.Error(), "for model")
	err = c.RestoreKey("a", "key#9")
	require.ErrorIs(t, err, llmclient.ErrNoKey)
	assert.Contains(t, err.Error(), `no key labeled "key#9"`)
	assert.True(t, errors.Is(err, llmclient.ErrNoKey))
	assert.True(t, errors.Is(c.ForceBreakerOpen("nope"), llmclient.ErrNoUpstream), "the sentinel stays")
}
