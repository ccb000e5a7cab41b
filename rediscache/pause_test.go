package rediscache_test

import (
	"context"
	"testing"
	"time"

	"github.com/llmclient/llmclient/cache"
	"github.com/llmclient/llmclient/provider/fake"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A Redis that serves reads but holds writes (CLIENT PAUSE WRITE: what Redis itself does
// during a FAILOVER) answers the lookup and stalls the store of the answer. The store ran
// before the answer was returned, detached from the caller's context, so an answer the
// upstream gave at once came back after the store timeout, past the caller's deadline.
// It now runs behind the call, and lands once Redis takes writes again. The bounds are
// loose: the answer takes milliseconds, and came after 10 s.
func TestPausedRedisDoesNotHoldTheAnswer(t *testing.T) {
	srv := startRedis(t)
	st, rdb := srv.store()
	c, err := cache.New(st, cache.WithStoreTimeout(10*time.Second)) // a generous bound, as for a remote Redis
	require.NoError(t, err)
	cl := newClient(t, c, fake.New(fake.Reply("ok").Forever(), fake.Stream("o", "k").Forever()))

	require.NoError(t, rdb.Do(ctx(t), "CLIENT", "PAUSE", "20000", "WRITE").Err())
	t.Cleanup(func() { rdb.Do(context.Background(), "CLIENT", "UNPAUSE") })

	call, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	r, err := cl.Complete(call, chat("hi"))
	require.NoError(t, err)
	assert.Equal(t, "ok", r.Text)
	assert.NoError(t, call.Err(), "the answer came back %v after the call started, past its deadline",
		time.Since(start).Round(time.Millisecond))

	s, err := cl.Stream(call, chat("streamed"))
	require.NoError(t, err)
	for s.Next() {
	}
	require.NoError(t, s.Err())
	assert.NoError(t, call.Err(), "the stream ended %v after the call started, past its deadline",
		time.Since(start).Round(time.Millisecond))
	s.Close()

	require.NoError(t, rdb.Do(ctx(t), "CLIENT", "UNPAUSE").Err())
	require.NoError(t, c.Flush(ctx(t)))
	assert.Equal(t, uint64(2), c.Stats().Stored, "stored once Redis took writes again")
	r, err = cl.Complete(ctx(t), chat("hi"))
	require.NoError(t, err)
	assert.True(t, r.Cached)
}
