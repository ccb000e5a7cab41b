package llmclient_test

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/breaker"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/health"
	"github.com/llmclient/llmclient/provider/fake"
	"github.com/llmclient/llmclient/ratelimit"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// snapshotScenario runs: on "a" (two keys), a 429 after 100ms that cools key#1 for 30s,
// then a success on key#2; on "b", a 401 that evicts its only key; on "c", two 500s that
// open its breaker (two consecutive failures trip it).
func snapshotScenario(t *testing.T) (*llmclient.Client, time.Time) {
	t.Helper()
	start := time.Now()
	a := fake.New(
		fake.Fail(429).RetryAfter(30*time.Second).Latency(100*time.Millisecond).RateLimits(ratelimit.Status{
			Requests: ratelimit.Window{Known: true, Limit: 600, Remaining: 0, Reset: 30 * time.Second}}),
		fake.Reply("ok").Usage(10, 5).RateLimits(ratelimit.Status{
			Tokens: ratelimit.Window{Known: true, Limit: 60000, Remaining: 59000, Reset: time.Second}}),
	)
	b := fake.New(fake.Fail(401))
	cc := fake.New(fake.Fail(500).Times(2))
	c := newClient(t,
		llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: a, Keys: []string{"sk-1", "sk-2"},
			Limits: llmclient.Limits{RPM: 600, TPM: 60000, MaxConcurrent: 4}}),
		up("b", b, "sk-b"), up("c", cc),
		llmclient.WithModelGroup("ga", "a"), llmclient.WithModelGroup("gb", "b"), llmclient.WithModelGroup("gc", "c"),
		llmclient.WithMaxAttempts(1),
		llmclient.WithBreaker(breaker.Config{ConsecutiveFailures: 2}))
	ctx := context.Background()
	_, err := c.Complete(ctx, chatReq("ga"))
	require.Equal(t, failure.RateLimited, llmclient.ClassOf(err))
	_, err = c.Complete(ctx, chatReq("ga"))
	require.NoError(t, err)
	_, err = c.Complete(ctx, chatReq("gb"))
	require.Equal(t, failure.Auth, llmclient.ClassOf(err))
	for range 2 {
		_, err = c.Complete(ctx, chatReq("gc"))
		require.Error(t, err)
	}
	return c, start
}

func TestSnapshot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, start := snapshotScenario(t)
		s := c.Snapshot()
		require.Len(t, s.Upstreams, 3)
		a, b, cu := s.Upstreams[0], s.Upstreams[1], s.Upstreams[2]

		assert.Equal(t, "a", a.Name)
		assert.Equal(t, "fake", a.Adapter)
		assert.Equal(t, breaker.Closed, a.Breaker.State)
		assert.Equal(t, 0, a.InFlight)
		assert.Equal(t, time.Minute, a.Window)
		assert.Equal(t, 2, a.Attempts)
		assert.Equal(t, 1, a.Errors)
		assert.Equal(t, 1, a.RateLimited)
		assert.Equal(t, 0.5, a.ErrorRate)
		assert.InEpsilon(t, float64(100*time.Millisecond), float64(a.LatencyP99), 0.13, "the 429 took 100ms")
		assert.LessOrEqual(t, a.LatencyP50, a.LatencyP90)
		assert.LessOrEqual(t, a.LatencyP90, a.LatencyP99)

		require.Len(t, a.Keys, 2)
		k1, k2 := a.Keys[0], a.Keys[1]
		assert.Equal(t, "key#1", k1.Label)
		assert.Equal(t, health.KeyCooling, k1.State)
		assert.Equal(t, start.Add(100*time.Millisecond+30*time.Second), k1.Until, "cooling for the Retry-After")
		require.NotNil(t, k1.Reported)
		assert.Equal(t, &health.Level{Limit: 600, Remaining: 0, Reset: 30 * time.Second}, k1.Reported.Requests)
		assert.Nil(t, k1.Reported.Tokens)
		assert.Equal(t, 1.0, k1.RateFactor, "a report of little left does not slow the key down by itself")
		require.NotNil(t, k1.Requests)
		assert.Equal(t, int64(600), k1.Requests.Limit)
		assert.Equal(t, 100.0, k1.Requests.Capacity)
		assert.InDelta(t, -200, k1.Requests.Remaining, 1,
			"the bucket is as far below full as the upstream's: 30 s of refill at 10 a second")

		assert.Equal(t, "key#2", k2.Label)
		assert.Equal(t, health.KeyReady, k2.State)
		assert.True(t, k2.Until.IsZero())
		require.NotNil(t, k2.Requests)
		assert.Equal(t, &health.Level{Limit: 600, Capacity: 100, Remaining: 99}, k2.Requests)
		require.NotNil(t, k2.Tokens)
		assert.Equal(t, int64(60000), k2.Tokens.Limit)
		assert.Equal(t, 10000.0, k2.Tokens.Capacity)
		assert.Less(t, k2.Tokens.Remaining, 10000.0, "the call's estimate is charged")
		assert.Greater(t, k2.Tokens.Remaining, 5000.0)
		assert.Equal(t, &health.Level{Limit: 4, Capacity: 4, Remaining: 4}, k2.Concurrency)
		assert.Equal(t, 1.0, k2.RateFactor)
		require.NotNil(t, k2.Reported)
		assert.Equal(t, &health.Level{Limit: 60000, Remaining: 59000, Reset: time.Second}, k2.Reported.Tokens)
		assert.Equal(t, start.Add(100*time.Millisecond), k2.Reported.At)

		require.Len(t, b.Keys, 1)
		assert.Equal(t, health.KeyEvicted, b.Keys[0].State)
		assert.Equal(t, start.Add(100*time.Millisecond+time.Hour), b.Keys[0].Until)
		assert.Nil(t, b.Keys[0].Requests, "no limits, no levels")
		assert.Zero(t, b.Keys[0].RateFactor)

		assert.Equal(t, breaker.Open, cu.Breaker.State)
		assert.Equal(t, breaker.DefaultOpenTimeout, cu.Breaker.OpenRemaining)
		require.Len(t, cu.Keys, 1)
		assert.Equal(t, "default", cu.Keys[0].Label)
		assert.Equal(t, 2, cu.Attempts)
		assert.Equal(t, 1.0, cu.ErrorRate)

		// A minute later the window is empty and the cooldown is over.
		time.Sleep(61 * time.Second)
		s = c.Snapshot()
		a = s.Upstreams[0]
		assert.Zero(t, a.Attempts)
		assert.Zero(t, a.ErrorRate)
		assert.Zero(t, a.LatencyP50)
		assert.Equal(t, health.KeyReady, a.Keys[0].State)
		assert.Equal(t, breaker.HalfOpen, s.Upstreams[2].Breaker.State)
	})
}

func TestSnapshotJSON(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, _ := snapshotScenario(t)
		data, err := json.Marshal(c.Snapshot())
		require.NoError(t, err)
		var got struct {
			Upstreams []struct {
				Name    string
				Breaker struct {
					State         string `json:"state"`
					OpenRemaining string `json:"open_remaining"`
				} `json:"breaker"`
				Window     string  `json:"window"`
				ErrorRate  float64 `json:"error_rate"`
				LatencyP99 string  `json:"latency_p99"`
				Keys       []struct {
					Label    string          `json:"label"`
					State    string          `json:"state"`
					Until    *time.Time      `json:"until"`
					Requests json.RawMessage `json:"requests"`
					Reported *struct {
						Requests struct {
							Limit     int64   `json:"limit"`
							Remaining float64 `json:"remaining"`
							Reset     string  `json:"reset"`
						} `json:"requests"`
					} `json:"reported"`
				} `json:"keys"`
			} `json:"upstreams"`
		}
		require.NoError(t, json.Unmarshal(data, &got), string(data))
		a := got.Upstreams[0]
		assert.Equal(t, "closed", a.Breaker.State)
		assert.Equal(t, "0s", a.Breaker.OpenRemaining)
		assert.Equal(t, "1m0s", a.Window)
		assert.Equal(t, 0.5, a.ErrorRate)
		p99, err := time.ParseDuration(a.LatencyP99)
		require.NoError(t, err, a.LatencyP99)
		assert.InEpsilon(t, float64(100*time.Millisecond), float64(p99), 0.13)
		assert.Equal(t, "cooling", a.Keys[0].State)
		assert.NotNil(t, a.Keys[0].Until)
		assert.Nil(t, a.Keys[1].Until, "a ready key has no until")
		var lv struct {
			Limit     int64   `json:"limit"`
			Remaining float64 `json:"remaining"`
			Capacity  float64 `json:"capacity"`
		}
		require.NoError(t, json.Unmarshal(a.Keys[0].Requests, &lv))
		assert.Equal(t, int64(600), lv.Limit)
		assert.Equal(t, 100.0, lv.Capacity)
		assert.InDelta(t, -200, lv.Remaining, 1)
		require.NotNil(t, a.Keys[0].Reported)
		assert.Equal(t, "30s", a.Keys[0].Reported.Requests.Reset)
		assert.Equal(t, "open", got.Upstreams[2].Breaker.State)
		assert.Equal(t, "15s", got.Upstreams[2].Breaker.OpenRemaining)
		assert.Equal(t, "evicted", got.Upstreams[1].Keys[0].State)
		assert.NotContains(t, string(data), "sk-", "no key in a snapshot")
	})
}

// Snapshots taken while many calls run are each consistent, and after the calls the
// counts add up to what the upstream saw. Run with -race.
func TestSnapshotUnderLoad(t *testing.T) {
	const workers, perWorker, maxConcurrent = 16, 150, 3
	p := fake.New(fake.Loop(fake.Reply("ok"), fake.Fail(503), fake.Stream("a", "b"), fake.Fail(429), fake.Reply("ok")))
	keys := []string{"k1", "k2", "k3"}
	c := newClient(t, llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: p, Keys: keys,
		Limits: llmclient.Limits{RPM: 1 << 30, TPM: 1 << 40, MaxConcurrent: maxConcurrent}}),
		llmclient.WithBackoff(time.Microsecond, time.Microsecond), llmclient.WithKeyCooldown(time.Microsecond),
		llmclient.WithRetryBudget(1, 1000, time.Minute))
	var done atomic.Bool
	var snaps atomic.Int64
	var wg sync.WaitGroup
	check := func(s health.Snapshot) {
		u := s.Upstreams[0]
		inFlight := 0
		for _, k := range u.Keys {
			assert.GreaterOrEqual(t, k.InFlight, 0)
			inFlight += k.InFlight
			if assert.NotNil(t, k.Concurrency) {
				assert.GreaterOrEqual(t, k.Concurrency.Remaining, 0.0)
				assert.LessOrEqual(t, k.Concurrency.Remaining, float64(maxConcurrent))
			}
			if assert.NotNil(t, k.Requests) {
				assert.LessOrEqual(t, k.Requests.Remaining, k.Requests.Capacity)
			}
		}
		assert.Equal(t, inFlight, u.InFlight)
		// In flight: admitted or waiting for a slot. Keys are read one after the other, so
		// a call that moves on to another key meanwhile may be counted on both.
		assert.LessOrEqual(t, u.InFlight, workers*len(keys))
		assert.LessOrEqual(t, u.Errors, u.Attempts)
		assert.LessOrEqual(t, u.RateLimited, u.Errors)
		assert.GreaterOrEqual(t, u.ErrorRate, 0.0)
		assert.LessOrEqual(t, u.ErrorRate, 1.0)
		assert.LessOrEqual(t, u.LatencyP50, u.LatencyP90)
		assert.LessOrEqual(t, u.LatencyP90, u.LatencyP99)
		_, err := json.Marshal(s)
		assert.NoError(t, err)
	}
	wg.Go(func() {
		for !done.Load() {
			check(c.Snapshot())
			snaps.Add(1)
		}
	})
	var calls sync.WaitGroup
	for w := range workers {
		calls.Go(func() {
			for i := range perWorker {
				if (w+i)%3 == 0 {
					s, err := c.Stream(context.Background(), chatReq("m"))
					if err == nil {
						for s.Next() {
						}
						s.Close()
					}
					continue
				}
				_, _ = c.Complete(context.Background(), chatReq("m"))
			}
		})
	}
	calls.Wait()
	done.Store(true)
	wg.Wait()
	require.Positive(t, snaps.Load())

	s := c.Snapshot()
	check(s)
	u := s.Upstreams[0]
	assert.Equal(t, 0, u.InFlight)
	assert.Equal(t, p.Calls(), u.Attempts, "every upstream call is in the window")
	assert.Positive(t, u.Errors)
	assert.Positive(t, u.RateLimited)
	for _, k := range u.Keys {
		assert.Equal(t, float64(maxConcurrent), k.Concurrency.Remaining, "every slot is back")
	}
}
