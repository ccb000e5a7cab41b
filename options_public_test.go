package llmclient_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/provider/fake"
	"github.com/llmclient/llmclient/ratelimit"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Options that had only internal tests, through the public API.

// fixedEstimator counts every text as n tokens.
type fixedEstimator struct{ n int }

func (e fixedEstimator) CountTokens(string, string) int { return e.n }

func TestWithEstimator(t *testing.T) {
	limited := llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: fake.New(fake.Reply("ok").Forever()),
		Limits: llmclient.Limits{TPM: 1 << 30}})
	estimated := func(opts ...llmclient.Option) int {
		c := newClient(t, append([]llmclient.Option{limited}, opts...)...)
		resp, err := c.Complete(context.Background(), chatReq("m"))
		require.NoError(t, err)
		require.Len(t, resp.Attempts, 1)
		return resp.Attempts[0].EstimatedTokens
	}
	def := estimated()
	big := estimated(llmclient.WithEstimator(fixedEstimator{n: 5000}))
	assert.GreaterOrEqual(t, big, 5000, "the limiter charges the prompt as the estimator counts it")
	assert.Less(t, def, 5000)
	assert.Equal(t, def, estimated(llmclient.WithEstimator(nil)), "nil restores the default")
}

func TestWithGroupFallback(t *testing.T) {
	down := fake.New(fake.Fail(500).Forever())
	cheap := fake.New(fake.Reply("cheap").Forever())
	opts := []llmclient.Option{up("flagship", down), up("mini", cheap), llmclient.WithMaxAttempts(1),
		llmclient.WithModelGroup("chat", "flagship"), llmclient.WithModelGroup("economy", "mini")}

	_, err := newClient(t, opts...).Complete(context.Background(), chatReq("chat"))
	assert.Equal(t, failure.ServerError, llmclient.ClassOf(err), "without a fallback the group fails")

	c := newClient(t, append(opts, llmclient.WithGroupFallback("chat", "economy"))...)
	resp, err := c.Complete(context.Background(), chatReq("chat"))
	require.NoError(t, err)
	assert.Equal(t, "mini", resp.Upstream, "the fallback group's chain follows the group's own")

	_, err = llmclient.New(append(opts, llmclient.WithGroupFallback("chat", "nope"))...)
	assert.Error(t, err, "a fallback to an unknown group")
}

func TestWithKeepAliveResetsIdle(t *testing.T) {
	// Keep-alives every 500ms through a 3s stall after the first chunk, with a 1s idle
	// timeout: only keep-alives that reset the idle timer let the stream go on.
	read := func(on bool) error {
		var err error
		synctest.Test(t, func(t *testing.T) {
			p := fake.New(fake.Stream("a", "b").StallAfter(1, 3*time.Second).KeepAlive(500 * time.Millisecond))
			c := newClient(t, up("a", p), llmclient.WithIdleTimeout(time.Second), llmclient.WithKeepAliveResetsIdle(on),
				llmclient.WithMaxAttempts(1))
			s, serr := c.Stream(context.Background(), chatReq("m"))
			require.NoError(t, serr)
			defer s.Close()
			for s.Next() {
			}
			err = s.Err()
		})
		return err
	}
	assert.ErrorIs(t, read(false), llmclient.ErrIdleTimeout, "by default keep-alives do not count as progress")
	assert.NoError(t, read(true))
}

func TestWithPartitionOverride(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newClient(t, up("a", fake.New(fake.Reply("ok").Forever())), llmclient.WithLimiterMode(ratelimit.FailFast),
			llmclient.WithPartitionLimits("tenant", llmclient.Limits{RPM: 1, RequestBurst: 1}),
			llmclient.WithPartitionOverride("vip", llmclient.Limits{}),
			llmclient.WithPartitionOverride("big", llmclient.Limits{RPM: 6000, RequestBurst: 3}))
		call := func(tenant string) error {
			req := chatReq("m")
			req.Metadata = map[string]string{"tenant": tenant}
			_, err := c.Complete(context.Background(), req)
			return err
		}
		require.NoError(t, call("small"))
		assert.Equal(t, failure.RateLimited, llmclient.ClassOf(call("small")), "the default partition limits hold")
		for range 5 {
			require.NoError(t, call("vip"), "a zero override exempts the partition")
		}
		for range 3 {
			require.NoError(t, call("big"), "an override replaces the default limits")
		}
		assert.Equal(t, failure.RateLimited, llmclient.ClassOf(call("big")))

		// An override alone turns partitions on, limiting only the partitions it names.
		c2 := newClient(t, up("a", fake.New(fake.Reply("ok").Forever())), llmclient.WithLimiterMode(ratelimit.FailFast),
			llmclient.WithPartitionOverride("tiny", llmclient.Limits{RPM: 1, RequestBurst: 1}))
		ctx := llmclient.WithPartition(context.Background(), "tiny")
		_, err := c2.Complete(ctx, chatReq("m"))
		require.NoError(t, err)
		_, err = c2.Complete(ctx, chatReq("m"))
		assert.Equal(t, failure.RateLimited, llmclient.ClassOf(err))
		for range 3 {
			_, err := c2.Complete(llmclient.WithPartition(context.Background(), "other"), chatReq("m"))
			require.NoError(t, err)
		}
	})
}
