package redisstore_test

import (
	"context"
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/breaker"
	"github.com/llmclient/llmclient/provider/fake"
	"github.com/llmclient/llmclient/redisstore"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sharedReplica is one replica of a service on st: a primary it shares breaker state for,
// and a backup.
func sharedReplica(t *testing.T, st *redisstore.Store, primary llmclient.Provider) *llmclient.Client {
	t.Helper()
	c, err := llmclient.New(
		llmclient.WithUpstream(llmclient.Upstream{Name: "primary", Provider: primary}),
		llmclient.WithUpstream(llmclient.Upstream{Name: "backup", Provider: fake.New(fake.Reply("backup").Forever())}),
		llmclient.WithLimitStore(st), llmclient.WithSharedBreakers("primary"), llmclient.WithMaxAttempts(1),
		// An open period far longer than the test: nothing here depends on timing.
		llmclient.WithBreaker(breaker.Config{ConsecutiveFailures: 2, OpenTimeout: time.Hour, MaxOpenTimeout: time.Hour}),
	)
	require.NoError(t, err)
	return c
}

func chat() *llmclient.Request {
	return &llmclient.Request{Model: "m", Messages: []llmclient.Message{llmclient.UserMessage("hi")}}
}

// TestSharedBreakerAcrossReplicas: a breaker opened on replica A is honoured by replica B
// from its next attempt, and by a replica started later; a reset on A clears it for
// replicas that had not seen it.
func TestSharedBreakerAcrossReplicas(t *testing.T) {
	srv := startRedis(t)
	down := fake.New(fake.Fail(500).Forever())
	a := sharedReplica(t, srv.store(), down)
	fineB := fake.New(fake.Reply("primary").Forever())
	b := sharedReplica(t, srv.store(), fineB)

	resp, err := b.Complete(ctx(t), chat())
	require.NoError(t, err)
	assert.Equal(t, "primary", resp.Upstream, "nothing tripped yet")

	for range 2 {
		resp, err := a.Complete(ctx(t), chat())
		require.NoError(t, err)
		assert.Equal(t, "backup", resp.Upstream)
	}
	require.Equal(t, breaker.Open, a.Breaker("primary").State())

	resp, err = b.Complete(ctx(t), chat())
	require.NoError(t, err)
	assert.Equal(t, "backup", resp.Upstream, "B honours A's trip on its next attempt")
	assert.Equal(t, 1, fineB.Calls())
	assert.ErrorIs(t, resp.Attempts[0].Err, llmclient.ErrCircuitOpen)

	late := fake.New(fake.Reply("primary").Forever())
	c := sharedReplica(t, srv.store(), late)
	resp, err = c.Complete(ctx(t), chat())
	require.NoError(t, err)
	assert.Equal(t, "backup", resp.Upstream, "a replica started later sees the trip")
	assert.Zero(t, late.Calls())

	require.NoError(t, a.ResetBreaker("primary"))
	fresh := fake.New(fake.Reply("primary").Forever())
	d := sharedReplica(t, srv.store(), fresh)
	resp, err = d.Complete(ctx(t), chat())
	require.NoError(t, err)
	assert.Equal(t, "primary", resp.Upstream, "the reset cleared the record")
}

// TestSharedBreakerStoreDown: with Redis unreachable the local breaker alone decides.
func TestSharedBreakerStoreDown(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(freePort(t)), ContextTimeoutEnabled: true,
		MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { rdb.Close() })
	st, err := redisstore.New(rdb, redisstore.WithTimeout(500*time.Millisecond))
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	p := fake.New(fake.Reply("primary").Forever())
	c := sharedReplica(t, st, p)
	for range 3 {
		resp, err := c.Complete(context.Background(), chat())
		require.NoError(t, err)
		assert.Equal(t, "primary", resp.Upstream)
	}
	_, err = st.BreakerOpen(context.Background(), "primary")
	assert.ErrorIs(t, err, redisstore.ErrUnavailable)
}

// TestBreakerRecordBounds: any duration is clamped to [1ms, 24h]; nothing overflows.
func TestBreakerRecordBounds(t *testing.T) {
	srv := startRedis(t)
	st := srv.store()
	for _, d := range []time.Duration{0, -time.Second, math.MinInt64, time.Duration(math.MaxInt64), 1<<62 + 1} {
		require.NoError(t, st.ResetBreaker(ctx(t), "u"))
		require.NoError(t, st.TripBreaker(ctx(t), "u", d), "%v", d)
		left, err := st.BreakerOpen(ctx(t), "u")
		require.NoError(t, err)
		assert.LessOrEqual(t, left, 24*time.Hour, "%v", d)
		if d > time.Hour {
			assert.Greater(t, left, 23*time.Hour, "%v: a huge period is a day", d)
		}
	}
	// A shorter trip never shortens a longer one.
	require.NoError(t, st.TripBreaker(ctx(t), "v", time.Hour))
	require.NoError(t, st.TripBreaker(ctx(t), "v", time.Second))
	left, err := st.BreakerOpen(ctx(t), "v")
	require.NoError(t, err)
	assert.Greater(t, left, 59*time.Minute)
	// Prefixes keep applications apart.
	other := srv.store(redisstore.WithPrefix("other"))
	left, err = other.BreakerOpen(ctx(t), "v")
	require.NoError(t, err)
	assert.Zero(t, left)
}
