package llmclient_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/breaker"
	"github.com/llmclient/llmclient/event"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/provider/fake"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Operator controls, each announced by an event.

func controls(log *eventLog) []string {
	var out []string
	for _, e := range log.kinds(event.Control) {
		out = append(out, e.Upstream+" "+e.Key+" "+e.Action)
	}
	return out
}

func TestForceBreakerOpenAndReset(t *testing.T) {
	primary := fake.New(fake.Reply("p").Forever())
	secondary := fake.New(fake.Reply("s").Forever())
	var log eventLog
	c := newClient(t, up("primary", primary), up("secondary", secondary), llmclient.WithObserver(log.observe))
	require.NoError(t, c.ForceBreakerOpen("primary"))
	for range 3 {
		resp, err := c.Complete(context.Background(), chatReq("m"))
		require.NoError(t, err)
		assert.Equal(t, "secondary", resp.Upstream)
	}
	assert.Zero(t, primary.Calls())
	snap := c.Snapshot().Upstreams[0]
	assert.Equal(t, breaker.Open, snap.Breaker.State)
	assert.True(t, snap.Breaker.Forced)
	require.NoError(t, c.ResetBreaker("primary"))
	resp, err := c.Complete(context.Background(), chatReq("m"))
	require.NoError(t, err)
	assert.Equal(t, "primary", resp.Upstream)
	assert.Equal(t, []string{"primary  breaker_force_open", "primary  breaker_reset"}, controls(&log))
	var changes []string
	for _, e := range log.kinds(event.Breaker) {
		changes = append(changes, e.From.String()+">"+e.To.String())
	}
	assert.Equal(t, []string{"closed>open", "open>closed"}, changes)
}

func TestForceBreakerClosedHoldsThroughFailures(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		primary := fake.New(fake.Fail(500).Forever())
		c := newClient(t, up("primary", primary), llmclient.WithMaxAttempts(1),
			llmclient.WithBreaker(breaker.Config{ConsecutiveFailures: 2}))
		require.NoError(t, c.ForceBreakerClosed("primary"))
		for range 10 {
			_, err := c.Complete(context.Background(), chatReq("m"))
			assert.Equal(t, failure.ServerError, llmclient.ClassOf(err))
		}
		assert.Equal(t, 10, primary.Calls(), "every call reached the upstream")
		assert.Equal(t, breaker.Closed, c.Breaker("primary").State())
	})
}

func TestEvictAndRestoreKey(t *testing.T) {
	p := fake.New(fake.Reply("ok").Forever())
	var log eventLog
	c := newClient(t, up("a", p, "sk-one", "sk-two"), llmclient.WithObserver(log.observe))
	require.NoError(t, c.EvictKey("a", "key#1"))
	for range 4 {
		_, err := c.Complete(context.Background(), chatReq("m"))
		require.NoError(t, err)
	}
	for _, r := range p.Requests() {
		assert.Equal(t, "sk-two", r.APIKey, "an evicted key is never used")
	}
	assert.Equal(t, "evicted", string(c.Snapshot().Upstreams[0].Keys[0].State))
	require.NoError(t, c.RestoreKey("a", "key#1"))
	assert.Equal(t, "ready", string(c.Snapshot().Upstreams[0].Keys[0].State))
	used := map[string]bool{}
	for range 4 {
		_, err := c.Complete(context.Background(), chatReq("m"))
		require.NoError(t, err)
	}
	for _, r := range p.Requests()[4:] {
		used[r.APIKey] = true
	}
	assert.True(t, used["sk-one"], "the restored key serves again")
	ev := log.kinds(event.Control)
	require.Len(t, ev, 2)
	assert.Equal(t, "key_evict", ev[0].Action)
	assert.Equal(t, "key#1", ev[0].Key)
	assert.False(t, ev[0].Until.IsZero())
	assert.Equal(t, "key_restore", ev[1].Action)
	for _, e := range log.events {
		assert.NotContains(t, e.Key, "sk-", "events carry labels, never keys")
	}
}

// A key the upstream evicted (a 401) comes back with RestoreKey, before its eviction ends.
func TestRestoreKeyAfterAnEviction(t *testing.T) {
	p := fake.New(fake.Fail(401).Times(1), fake.Reply("ok").Forever())
	c := newClient(t, up("a", p, "sk-only"), llmclient.WithMaxAttempts(1))
	_, err := c.Complete(context.Background(), chatReq("m"))
	require.Error(t, err)
	_, err = c.Complete(context.Background(), chatReq("m"))
	require.ErrorIs(t, err, llmclient.ErrNoKey, "the key is evicted")
	require.NoError(t, c.RestoreKey("a", "key#1"))
	_, err = c.Complete(context.Background(), chatReq("m"))
	require.NoError(t, err)
}

// A drained upstream takes no new calls; its open stream finishes; undraining resumes it.
func TestDrain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		primary := fake.New(fake.Stream("a", "b", "c").ChunkDelay(time.Second).Forever())
		secondary := fake.New(fake.Stream("s").Forever())
		var log eventLog
		c := newClient(t, up("primary", primary), up("secondary", secondary), llmclient.WithObserver(log.observe))
		s, err := c.Stream(context.Background(), chatReq("m"))
		require.NoError(t, err)
		require.NoError(t, c.Drain("primary", true))
		assert.True(t, c.Snapshot().Upstreams[0].Drained)
		s2, err := c.Stream(context.Background(), chatReq("m"))
		require.NoError(t, err)
		for s2.Next() {
		}
		require.NoError(t, s2.Close())
		assert.Equal(t, "secondary", s2.Response().Upstream)
		text := ""
		for s.Next() {
			text += s.Current().Text
		}
		require.NoError(t, s.Err(), "the stream in flight finishes")
		assert.Equal(t, "abc", text)
		require.NoError(t, s.Close())
		require.NoError(t, c.Drain("primary", false))
		s3, err := c.Stream(context.Background(), chatReq("m"))
		require.NoError(t, err)
		for s3.Next() {
		}
		require.NoError(t, s3.Close())
		assert.Equal(t, "primary", s3.Response().Upstream)
		assert.Equal(t, []string{"primary  drain", "primary  undrain"}, controls(&log))

		// With nowhere else to go, a drained upstream's call fails as unavailable.
		require.NoError(t, c.Drain("secondary", true))
		require.NoError(t, c.Drain("primary", true))
		_, err = c.Complete(context.Background(), chatReq("m"))
		assert.Equal(t, failure.Unavailable, llmclient.ClassOf(err))
	})
}

func TestControlsRefuseUnknownNames(t *testing.T) {
	var log eventLog
	c := newClient(t, up("a", fake.New(), "sk-1"), llmclient.WithObserver(log.observe))
	assert.ErrorIs(t, c.ForceBreakerOpen("nope"), llmclient.ErrNoUpstream)
	assert.ErrorIs(t, c.ForceBreakerClosed("nope"), llmclient.ErrNoUpstream)
	assert.ErrorIs(t, c.ResetBreaker("nope"), llmclient.ErrNoUpstream)
	assert.ErrorIs(t, c.Drain("nope", true), llmclient.ErrNoUpstream)
	assert.ErrorIs(t, c.EvictKey("nope", "key#1"), llmclient.ErrNoUpstream)
	assert.ErrorIs(t, c.EvictKey("a", "key#9"), llmclient.ErrNoKey)
	assert.ErrorIs(t, c.RestoreKey("a", ""), llmclient.ErrNoKey)
	assert.Empty(t, log.kinds(event.Control))
	assert.Equal(t, breaker.Closed, c.Breaker("a").State())
}
