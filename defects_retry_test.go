package llmclient_test

import (
	"context"
	"errors"
	"math"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/event"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/provider/fake"
	"github.com/llmclient/llmclient/ratelimit"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Retry and failover edge cases, each through the public API.

// limited registers an upstream with a request limit of 6 per minute and a burst of 1:
// after one call, the next is admitted only 10 s later.
func limited(name string, p llmclient.Provider) llmclient.Option {
	return llmclient.WithUpstream(llmclient.Upstream{Name: name, Provider: p,
		Limits: llmclient.Limits{RPM: 6, RequestBurst: 1}})
}

// Fail-fast and WithMaxWait refuse at once without a deadline, move on to the
// next upstream at once, and a local refusal is never an upstream Retry-After.
func TestDefect01LocalRefusalFailsFastWithoutDeadline(t *testing.T) {
	modes := map[string]llmclient.Option{
		"fail-fast": llmclient.WithLimiterMode(ratelimit.FailFast),
		"max-wait":  llmclient.WithMaxWait(time.Second),
	}
	for name, mode := range modes {
		t.Run(name+"/two upstreams", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				a := fake.New(fake.Reply("a").Forever())
				b := fake.New(fake.Reply("b").Forever())
				c := newClient(t, limited("a", a), up("b", b), mode)
				_, err := c.Complete(context.Background(), chatReq("m"))
				require.NoError(t, err)
				var resp *llmclient.Response
				d := elapsed(func() { resp, err = c.Complete(context.Background(), chatReq("m")) })
				require.NoError(t, err)
				assert.Equal(t, time.Duration(0), d, "the refusal must move on at once")
				assert.Equal(t, "b", resp.Upstream)
				assert.Equal(t, 1, a.Calls())
			})
		})
		t.Run(name+"/one upstream", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				a := fake.New(fake.Reply("a").Forever())
				c := newClient(t, limited("a", a), mode)
				_, err := c.Complete(context.Background(), chatReq("m"))
				require.NoError(t, err)
				d := elapsed(func() { _, err = c.Complete(context.Background(), chatReq("m")) })
				assert.Equal(t, time.Duration(0), d, "with nowhere to go the refusal returns at once")
				var e *llmclient.Error
				require.ErrorAs(t, err, &e)
				assert.Equal(t, failure.RateLimited, e.Class)
				assert.ErrorIs(t, err, llmclient.ErrRateLimited)
				assert.Zero(t, e.RetryAfter, "a local refusal is not an upstream Retry-After")
				assert.InDelta(t, float64(10*time.Second), float64(e.AdmitAfter), float64(time.Millisecond), "it says how long the limiter would wait")
				assert.Equal(t, 1, a.Calls())
			})
		})
	}
}

// A class whose decision says Failover: false never reaches a second upstream,
// not even once its attempts on the first run out.
func TestDefect02FailoverFalseNeverLeavesTheUpstream(t *testing.T) {
	t.Run("retry without failover", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			a := fake.New(fake.Fail(500).Forever())
			b := fake.New(fake.Reply("b").Forever())
			c := newClient(t, up("a", a), up("b", b),
				llmclient.WithDecision(failure.ServerError, llmclient.Decision{Retry: true, Failover: false}))
			_, err := c.Complete(context.Background(), chatReq("m"))
			require.Error(t, err)
			assert.Equal(t, failure.ServerError, llmclient.ClassOf(err))
			assert.Equal(t, 3, a.Calls(), "three attempts on a")
			assert.Equal(t, 0, b.Calls(), "Failover: false")
		})
	})
	t.Run("auth with four keys and three attempts", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			a := fake.New(fake.Fail(401).Forever())
			b := fake.New(fake.Reply("b").Forever())
			c := newClient(t, up("a", a, "k1", "k2", "k3", "k4"), up("b", b), llmclient.WithMaxAttempts(3))
			_, err := c.Complete(context.Background(), chatReq("m"))
			require.Error(t, err)
			assert.Equal(t, failure.Auth, llmclient.ClassOf(err))
			assert.Equal(t, 3, a.Calls(), "one call on each of three keys")
			assert.Equal(t, 0, b.Calls(), "auth does not fail over")
		})
	})
}

// A spent retry budget returns at once, without sleeping the backoff first.
func TestDefect03SpentBudgetDoesNotSleep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := fake.New(fake.Fail(503).Forever())
		c := newClient(t, up("a", a), llmclient.WithRetryBudget(0, 0, 10*time.Second),
			llmclient.WithBackoff(15*time.Second, 30*time.Second))
		var err error
		d := elapsed(func() { _, err = c.Complete(context.Background(), chatReq("m")) })
		require.Error(t, err)
		assert.ErrorIs(t, err, llmclient.ErrRetryBudget)
		assert.Equal(t, time.Duration(0), d, "no backoff is slept for a retry that cannot be made")
		assert.Equal(t, 1, a.Calls())
	})
}

// Every key cooling is a local refusal of class unavailable that moves on to a
// healthy upstream at once, and every failover raises an event.
func TestDefect04EveryKeyCoolingFailsOver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := fake.New(fake.Fail(429).RetryAfter(20*time.Second), fake.Reply("a").Forever())
		b := fake.New(fake.Reply("b").Forever())
		var log eventLog
		c := newClient(t, up("a", a, "k1"), up("b", b), llmclient.WithObserver(log.observe))
		resp, err := c.Complete(context.Background(), chatReq("m"))
		require.NoError(t, err)
		assert.Equal(t, "b", resp.Upstream, "a 20s Retry-After is no reason to wait while b is free")

		var d time.Duration
		d = elapsed(func() { resp, err = c.Complete(context.Background(), chatReq("m")) })
		require.NoError(t, err)
		assert.Equal(t, time.Duration(0), d)
		assert.Equal(t, "b", resp.Upstream)
		require.Len(t, resp.Attempts, 2)
		assert.Equal(t, failure.Unavailable, resp.Attempts[0].Class, "every key cooling is unavailable")
		assert.ErrorIs(t, resp.Attempts[0].Err, llmclient.ErrNoKey)
		assert.Equal(t, 1, a.Calls(), "the cooling key is not called")

		fo := log.kinds(event.Failover)
		require.Len(t, fo, 2, "one failover event per call")
		assert.Equal(t, "a", fo[0].Upstream)
		assert.Equal(t, "b", fo[0].Target)
	})
}

// With only one upstream, every key cooling waits for the first key to come back, within
// the deadline, as the limiter waits for capacity; a wait that does not fit returns at once.
func TestEveryKeyCoolingWaitsWhenThereIsNowhereElse(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := fake.New(fake.Fail(429).RetryAfter(20*time.Second).Times(1), fake.Reply("a").Forever())
		c := newClient(t, up("a", a, "k1"), llmclient.WithDecision(failure.RateLimited,
			llmclient.Decision{Cooldown: true}))
		_, err := c.Complete(context.Background(), chatReq("m"))
		require.Error(t, err)

		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		d := elapsed(func() { _, err = c.Complete(ctx, chatReq("m")) })
		assert.Equal(t, time.Duration(0), d, "20s does not fit a 5s deadline")
		assert.Equal(t, failure.Unavailable, llmclient.ClassOf(err))
		assert.True(t, errors.Is(err, llmclient.ErrNoKey))

		var resp *llmclient.Response
		d = elapsed(func() { resp, err = c.Complete(context.Background(), chatReq("m")) })
		require.NoError(t, err)
		assert.Equal(t, 20*time.Second, d, "without a deadline the call waits for the key")
		assert.Equal(t, 20*time.Second, resp.Attempts[0].Waited)
	})
}

// A 429 with "Retry-After: 0" is retried after the jittered backoff, as without the
// header (Error.RetryAfter's doc), not at once.
func TestRetryAfterZeroWaitsTheBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newScript(status(429, `{"error":{"message":"slow down","type":"rate_limit_error"}}`, "Retry-After", "0"), ok(chatOK))
		c := newClient(t, openaiOver(t, "a", h, "k1"), llmclient.WithBackoff(time.Second, 10*time.Second))
		var err error
		d := elapsed(func() { _, err = c.Complete(context.Background(), chatReq("gpt-4o")) })
		require.NoError(t, err)
		assert.Equal(t, 2, h.count())
		assert.GreaterOrEqual(t, d, 500*time.Millisecond, "the retry waited the backoff (1 s ±50%%)")
		assert.LessOrEqual(t, d, 1500*time.Millisecond)
	})
}

// A Retry-After that saturates (MaxInt64) under a cap of MaxInt64 is waited, not
// overflowed by its jitter into a negative wait and retried at once.
func TestHugeRetryAfterUnderAHugeCapIsWaited(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := fake.New(fake.Fail(503).RetryAfter(time.Duration(math.MaxInt64)), fake.Reply("ok").Forever())
		c := newClient(t, up("a", p), llmclient.WithMaxRetryAfter(time.Duration(math.MaxInt64)), llmclient.WithCallBudget(0))
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		time.AfterFunc(time.Hour, cancel)
		var err error
		d := elapsed(func() { _, err = c.Complete(ctx, chatReq("m")) })
		require.Error(t, err, "served by a retry: the wait overflowed")
		assert.Equal(t, time.Hour, d, "the call waited the Retry-After until its caller gave up")
		assert.Equal(t, 1, p.Calls())
	})
}
