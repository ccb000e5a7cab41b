package llmclient_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/breaker"
	"github.com/llmclient/llmclient/budget"
	"github.com/llmclient/llmclient/event"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/limitstore"
	"github.com/llmclient/llmclient/pricing"
	"github.com/llmclient/llmclient/provider/fake"
	"github.com/llmclient/llmclient/routing"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// withOpts attaches CallOptions to ctx.
func withOpts(ctx context.Context, o llmclient.CallOptions) context.Context {
	return llmclient.WithCallOptions(ctx, o)
}

// A call with NoFailover cannot move: the rules for a call that could move (the wait
// threshold, retry-or-fail-over-first for a timeout, half the time left per attempt) do
// not apply to it, whatever other upstreams its route has.
func TestNoFailoverWaitsAndRetriesOnItsUpstream(t *testing.T) {
	backupOf := func() *fake.Provider { return fake.New(fake.Reply("backup").Forever()) }
	cases := map[string]struct {
		primary *fake.Provider
		opts    []llmclient.Option
		want    time.Duration // the call's duration
	}{
		"retry-after over the wait threshold": {
			primary: fake.New(fake.Fail(429).RetryAfter(3*time.Second).Code("rate_limit_exceeded"), fake.Reply("primary")),
			want:    3 * time.Second, // plus jitter, checked below
		},
		"attempt timeout": {
			primary: fake.New(fake.Reply("late").Latency(time.Hour), fake.Reply("primary")),
			opts:    []llmclient.Option{llmclient.WithAttemptTimeout(time.Second)},
			want:    time.Second,
		},
		"slower than half the deadline": {
			primary: fake.New(fake.Reply("primary").Latency(6 * time.Second)),
			want:    6 * time.Second,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				backup := backupOf()
				c := newClient(t, append(tc.opts, up("primary", tc.primary), up("backup", backup))...)
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				var resp *llmclient.Response
				var err error
				d := elapsed(func() {
					resp, err = c.Complete(withOpts(ctx, llmclient.CallOptions{NoFailover: true}), chatReq("m"))
				})
				require.NoError(t, err)
				assert.Equal(t, "primary", resp.Text)
				assert.GreaterOrEqual(t, d, tc.want)
				assert.Less(t, d, tc.want+2*time.Second)
				assert.Zero(t, backup.Calls())
			})
		})
	}
}

// A backup that cannot serve is not somewhere to go: a primary 429 with a long
// Retry-After, a primary timeout, or a primary slower than half the deadline stays on the
// primary when the backup is drained, has every key evicted, or was tripped by another
// Client sharing the store — as it does when the backup's breaker is open.
func TestBackupThatCannotServeIsNotSomewhereToGo(t *testing.T) {
	type setup func(t *testing.T, c *llmclient.Client, other *llmclient.Client)
	backups := map[string]setup{
		"drained": func(t *testing.T, c, _ *llmclient.Client) { require.NoError(t, c.Drain("backup", true)) },
		"keys evicted": func(t *testing.T, c, _ *llmclient.Client) {
			require.NoError(t, c.EvictKey("backup", "key#1"))
			require.NoError(t, c.EvictKey("backup", "key#2"))
		},
		"breaker open": func(t *testing.T, c, _ *llmclient.Client) { require.NoError(t, c.ForceBreakerOpen("backup")) },
		"tripped by another replica": func(t *testing.T, c, other *llmclient.Client) {
			for range 10 { // the other replica's calls open its breaker, recorded in the store
				_, _ = other.Complete(context.Background(), chatReq("m"))
			}
			require.Equal(t, breaker.Open, other.Breaker("backup").State())
			// This replica learns of the trip on its next attempt there.
			_, err := c.Complete(withOpts(context.Background(), llmclient.CallOptions{Pin: []string{"backup"}}), chatReq("m"))
			require.ErrorIs(t, err, llmclient.ErrCircuitOpen)
		},
	}
	primaries := map[string]struct {
		script func() *fake.Provider
		opts   []llmclient.Option
	}{
		"429 retry-after 5s": {script: func() *fake.Provider {
			return fake.New(fake.Fail(429).RetryAfter(5*time.Second).Code("rate_limit_exceeded"), fake.Reply("primary"))
		}},
		"timeout": {script: func() *fake.Provider {
			return fake.New(fake.Reply("late").Latency(time.Hour), fake.Reply("primary"))
		}, opts: []llmclient.Option{llmclient.WithAttemptTimeout(2 * time.Second)}},
		"slower than half the deadline": {script: func() *fake.Provider {
			return fake.New(fake.Reply("primary").Latency(12 * time.Second))
		}},
	}
	for bname, prepare := range backups {
		for pname, p := range primaries {
			t.Run(bname+"/"+pname, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					store := limitstore.NewMemory()
					primary := p.script()
					backupFails := fake.New(fake.Fail(500).Forever())
					backup := llmclient.WithUpstream(llmclient.Upstream{Name: "backup", Provider: fake.New(fake.Reply("backup").Forever()), Keys: []string{"k1", "k2"}})
					opts := append([]llmclient.Option{up("primary", primary), backup,
						llmclient.WithLimitStore(store), llmclient.WithSharedBreakers("backup")}, p.opts...)
					c := newClient(t, opts...)
					other := newClient(t, llmclient.WithUpstream(llmclient.Upstream{Name: "backup", Provider: backupFails, Keys: []string{"k1", "k2"}}),
						llmclient.WithLimitStore(store), llmclient.WithSharedBreakers("backup"))
					prepare(t, c, other)
					ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
					defer cancel()
					resp, err := c.Complete(ctx, chatReq("m"))
					require.NoError(t, err)
					assert.Equal(t, "primary", resp.Text)
					assert.Equal(t, failure.None, resp.Attempts[len(resp.Attempts)-1].Class)
				})
			})
		}
	}
}

// The recovery ramp paces only calls that have somewhere else to go: with the only other
// upstream drained, every call after the breaker closes is admitted.
func TestRecoveryRampAdmitsCallsWithNowhereElseToGo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newClient(t, up("primary", fake.New(fake.Reply("ok").Forever())), up("backup", fake.New(fake.Reply("b").Forever())),
			llmclient.WithRecoveryRamp(10*time.Second))
		require.NoError(t, c.Drain("backup", true))
		require.NoError(t, c.ForceBreakerOpen("primary"))
		require.NoError(t, c.ResetBreaker("primary")) // closes: the ramp begins
		for i := range 3 {
			resp, err := c.Complete(context.Background(), chatReq("m"))
			require.NoError(t, err, "call %d", i)
			assert.Equal(t, "ok", resp.Text)
		}
	})
}

// A fallback upstream that maps only its own group's name (or only one model) is asked
// for that model, never for the caller's group name.
func TestFallbacksAreAskedForTheirOwnModel(t *testing.T) {
	newPrimary := func(f *fake.FailStep) llmclient.Option {
		return llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: fake.New(f.Forever()),
			Models: map[string]string{"chat": "gpt-a"}})
	}
	t.Run("group fallback", func(t *testing.T) {
		b := fake.New(fake.Reply("from b").Forever())
		c := newClient(t, newPrimary(fake.Fail(500)),
			llmclient.WithUpstream(llmclient.Upstream{Name: "b", Provider: b, Models: map[string]string{"backup": "claude-b"}}),
			llmclient.WithModelGroup("chat", "a"), llmclient.WithModelGroup("backup", "b"),
			llmclient.WithGroupFallback("chat", "backup"), llmclient.WithMaxAttempts(1))
		resp, err := c.Complete(context.Background(), chatReq("chat"))
		require.NoError(t, err)
		assert.Equal(t, "from b", resp.Text)
		require.Equal(t, 1, b.Calls())
		assert.Equal(t, "claude-b", b.Requests()[0].Model)
	})
	t.Run("context fallback", func(t *testing.T) {
		big := fake.New(fake.Reply("from big").Forever())
		c := newClient(t, newPrimary(fake.FailClass(failure.ContextLength)),
			llmclient.WithUpstream(llmclient.Upstream{Name: "big", Provider: big, Models: map[string]string{"long": "gpt-big"}}),
			llmclient.WithModelGroup("chat", "a"), llmclient.WithContextFallback("big"))
		resp, err := c.Complete(context.Background(), chatReq("chat"))
		require.NoError(t, err)
		assert.Equal(t, "from big", resp.Text)
		require.Equal(t, 1, big.Calls())
		assert.Equal(t, "gpt-big", big.Requests()[0].Model)
	})
}

// Only what the upstream did counts against its breaker: callers whose deadlines pass
// mid-stream, and attempts cut by the Client's share of the call's time, do not open it.
func TestBreakerCountsOnlyWhatTheUpstreamDid(t *testing.T) {
	t.Run("caller deadline mid-stream", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			p := fake.New(fake.Stream("a", "b", "c", "d", "e").ChunkDelay(time.Second).Forever())
			c := newClient(t, up("p", p))
			var wg sync.WaitGroup
			for range 12 {
				wg.Go(func() {
					ctx, cancel := context.WithTimeout(context.Background(), 2500*time.Millisecond)
					defer cancel()
					s, err := c.Stream(ctx, chatReq("m"))
					if err != nil {
						return
					}
					for s.Next() {
					}
					assert.Error(t, s.Err())
					s.Close()
				})
			}
			wg.Wait()
			assert.Equal(t, breaker.Closed, c.Breaker("p").State())
			assert.Zero(t, c.Breaker("p").Snapshot().Failures)
		})
	})
	t.Run("cut by half the time left", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			slow := fake.New(fake.Reply("slow").Latency(6 * time.Second).Forever())
			c := newClient(t, up("slow", slow), up("fast", fake.New(fake.Reply("fast").Forever())))
			for range 12 {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				resp, err := c.Complete(withOpts(ctx, llmclient.CallOptions{Pin: []string{"slow", "fast"}}), chatReq("m"))
				cancel()
				require.NoError(t, err)
				assert.Equal(t, "fast", resp.Text)
			}
			s := c.Breaker("slow").Snapshot()
			assert.Equal(t, breaker.Closed, s.State)
			assert.Zero(t, s.Failures)
		})
	})
}

// An upstream whose attempts keep being cut by the Client's share stops receiving first
// attempts after a few calls, and is tried first again later.
func TestSlowMemberStopsGettingFirstAttempts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		slow := fake.New(fake.Reply("slow").Latency(6 * time.Second).Forever())
		fast := fake.New(fake.Reply("fast").Latency(300 * time.Millisecond).Forever())
		c := newClient(t, up("slow", slow), up("fast", fast))
		call := func() time.Duration {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			var err error
			d := elapsed(func() { _, err = c.Complete(ctx, chatReq("m")) })
			require.NoError(t, err)
			return d
		}
		for range 20 {
			call()
		}
		assert.LessOrEqual(t, slow.Calls(), 10, "first attempts stop within about ten calls")
		assert.Equal(t, 300*time.Millisecond, call(), "a call starts on the fast member")
		snap := c.Snapshot()
		assert.False(t, snap.Upstreams[0].Serving)
		assert.Equal(t, "slow", snap.Upstreams[0].Refusal)
		time.Sleep(time.Minute)
		before := slow.Calls()
		call()
		assert.Equal(t, before+1, slow.Calls(), "tried first again once the demotion ends")
	})
}

// A hedge is not a retry in the events.
func TestHedgeIsNotARetryInEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var log eventLog
		c := newClient(t, up("a", fake.New(fake.Reply("a").Latency(time.Second).Forever())),
			up("b", fake.New(fake.Reply("b").Latency(100*time.Millisecond).Forever())),
			llmclient.WithHedging("", routing.Hedge{On: true, Delay: 200 * time.Millisecond}),
			llmclient.WithObserver(log.observe))
		_, err := c.Complete(context.Background(), chatReq("m"))
		require.NoError(t, err)
		var hedges int
		for _, e := range log.kinds(event.Attempt) {
			if e.Hedge {
				hedges++
				assert.False(t, e.Retry, "a hedge is reported as a retry")
			}
		}
		assert.Equal(t, 1, hedges)
	})
}

// x-should-retry: false on a 429 (OpenAI's "Request too large") is the request's failure:
// no other key of the pool is tried with it, and none cools down.
func TestShouldRetryFalseDoesNotCoolThePool(t *testing.T) {
	p := fake.New(fake.Fail(429).Code("rate_limit_exceeded").ShouldRetry(false).RetryAfter(time.Minute), fake.Reply("ok").Forever())
	c := newClient(t, up("p", p, "k1", "k2", "k3"))
	_, err := c.Complete(context.Background(), chatReq("m"))
	require.Error(t, err)
	assert.Equal(t, 1, p.Calls())
	for _, k := range c.Snapshot().Upstreams[0].Keys {
		assert.Equal(t, "ready", string(k.State), k.Label)
	}
	_, err = c.Complete(context.Background(), chatReq("m"))
	require.NoError(t, err)
}

// ForceBreakerClosed holds under WithSharedBreakers: another Client's trip does not refuse
// the forced Client's calls.
func TestForceBreakerClosedHoldsOverASharedTrip(t *testing.T) {
	store := limitstore.NewMemory()
	c := newClient(t, up("p", fake.New(fake.Reply("ok").Forever())), llmclient.WithLimitStore(store), llmclient.WithSharedBreakers())
	require.NoError(t, c.ForceBreakerClosed("p"))
	failing := newClient(t, up("p", fake.New(fake.Fail(500).Forever())), llmclient.WithLimitStore(store),
		llmclient.WithSharedBreakers(), llmclient.WithMaxAttempts(1))
	for range 10 { // another Client trips the shared breaker after the force
		_, _ = failing.Complete(context.Background(), chatReq("m"))
	}
	require.Equal(t, breaker.Open, failing.Breaker("p").State())
	for range 3 {
		resp, err := c.Complete(context.Background(), chatReq("m"))
		require.NoError(t, err)
		assert.Equal(t, "ok", resp.Text)
	}
	snap := c.Snapshot().Upstreams[0]
	assert.True(t, snap.Breaker.Forced)
	assert.True(t, snap.Serving)
}

// A Pin's order holds on groups with a routing strategy.
func TestPinOrderHoldsUnderRouting(t *testing.T) {
	for _, s := range []routing.Policy{routing.Weighted, routing.LeastInFlight, routing.Latency} {
		c := newClient(t, up("a", fake.New(fake.Reply("a").Forever())), up("b", fake.New(fake.Reply("b").Forever())),
			llmclient.WithModelGroup("chat", "a", "b"), llmclient.WithRouting("chat", s))
		for range 20 {
			resp, err := c.Complete(withOpts(context.Background(), llmclient.CallOptions{Pin: []string{"b", "a"}}), chatReq("chat"))
			require.NoError(t, err)
			require.Equal(t, "b", resp.Upstream, "strategy %d", s)
		}
	}
}

// Snapshot tells why an upstream cannot serve, and until when.
func TestSnapshotSaysWhyAnUpstreamCannotServe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newClient(t, up("drained", fake.New()), up("forced", fake.New()), up("cooling", fake.New(fake.Fail(429).RetryAfter(30*time.Second).Forever()), "k1"),
			up("ok", fake.New()))
		require.NoError(t, c.Drain("drained", true))
		require.NoError(t, c.ForceBreakerOpen("forced"))
		_, _ = c.Complete(withOpts(context.Background(), llmclient.CallOptions{Pin: []string{"cooling"}, NoFailover: true, MaxAttempts: 1}), chatReq("m"))
		got := map[string]string{}
		for _, u := range c.Snapshot().Upstreams {
			got[u.Name] = u.Refusal
			assert.Equal(t, u.Refusal == "", u.Serving, u.Name)
			if u.Name == "cooling" {
				assert.Equal(t, time.Now().Add(30*time.Second), u.RefusedUntil)
			}
		}
		assert.Equal(t, map[string]string{"drained": "drained", "forced": "forced_open", "cooling": "no_key", "ok": ""}, got)
	})
}

// With no context deadline, a call is bounded by its time budget (WithCallBudget, 10m by
// default): a hung upstream with nowhere else to go ends the call at the budget, and one
// with a healthy peer gets half of it before the call moves on.
func TestCallWithoutDeadlineIsBoundedByDefault(t *testing.T) {
	t.Run("alone", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			c := newClient(t, up("hung", fake.New(fake.Reply("late").Latency(24*time.Hour).Forever())))
			var err error
			d := elapsed(func() { _, err = c.Complete(context.Background(), chatReq("m")) })
			require.Error(t, err)
			assert.Equal(t, failure.Timeout, llmclient.ClassOf(err))
			assert.InDelta(t, 10*time.Minute, d, float64(time.Second))
		})
	})
	t.Run("with a peer", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			c := newClient(t, up("hung", fake.New(fake.Reply("late").Latency(24*time.Hour).Forever())),
				up("peer", fake.New(fake.Reply("ok").Forever())))
			var resp *llmclient.Response
			var err error
			d := elapsed(func() { resp, err = c.Complete(context.Background(), chatReq("m")) })
			require.NoError(t, err)
			assert.Equal(t, "peer", resp.Upstream)
			assert.InDelta(t, 5*time.Minute, d, float64(time.Second))
		})
	})
	t.Run("own budget", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			c := newClient(t, up("hung", fake.New(fake.Reply("late").Latency(24*time.Hour).Forever())),
				llmclient.WithCallBudget(30*time.Second))
			var err error
			d := elapsed(func() { _, err = c.Complete(context.Background(), chatReq("m")) })
			require.Error(t, err)
			assert.InDelta(t, 30*time.Second, d, float64(time.Second))
		})
	})
	t.Run("a committed stream is not cut", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			c := newClient(t, up("p", fake.New(fake.Stream("a", "b", "c").ChunkDelay(40*time.Second).Forever())),
				llmclient.WithCallBudget(time.Minute), llmclient.WithIdleTimeout(0))
			s, err := c.Stream(context.Background(), chatReq("m"))
			require.NoError(t, err)
			defer s.Close()
			for s.Next() {
			}
			require.NoError(t, s.Err())
			assert.Equal(t, "abc", s.Response().Text)
		})
	})
}

// WithCallBudget's bounds.
func TestWithCallBudgetBounds(t *testing.T) {
	p := fake.New()
	for _, d := range []time.Duration{-1, 24*time.Hour + 1, time.Duration(1<<63 - 1)} {
		_, err := llmclient.New(up("p", p), llmclient.WithCallBudget(d))
		assert.ErrorContains(t, err, "WithCallBudget", "%v", d)
	}
	for _, d := range []time.Duration{0, 24 * time.Hour} {
		_, err := llmclient.New(up("p", p), llmclient.WithCallBudget(d))
		assert.NoError(t, err, "%v", d)
	}
}

// A silent upstream (no first token) fails over after the default first-token timeout,
// with no context deadline and no option set.
func TestSilentStreamFailsOverByDefault(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		silent := fake.New(fake.Stream("late").StallFirst(24 * time.Hour).Forever())
		c := newClient(t, up("silent", silent), up("peer", fake.New(fake.Stream("o", "k").Forever())))
		var s *llmclient.Stream
		var err error
		d := elapsed(func() { s, err = c.Stream(context.Background(), chatReq("m")) })
		require.NoError(t, err)
		defer s.Close()
		for s.Next() {
		}
		require.NoError(t, s.Err())
		assert.Equal(t, "peer", s.Response().Upstream)
		assert.Equal(t, time.Minute, d)
		assert.Equal(t, 1, silent.Calls(), "a silent upstream is not retried while a peer can serve")
	})
}

// A connection reset moves to a healthy peer at once, without a backoff on the failing
// upstream; alone, the upstream is retried with backoff.
func TestConnectionResetMovesToPeerAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		failing := fake.New(fake.FailClass(failure.Network).Forever())
		c := newClient(t, up("failing", failing), up("peer", fake.New(fake.Reply("ok").Forever())))
		var resp *llmclient.Response
		var err error
		d := elapsed(func() { resp, err = c.Complete(context.Background(), chatReq("m")) })
		require.NoError(t, err)
		assert.Equal(t, "peer", resp.Upstream)
		assert.Zero(t, d)
		assert.Equal(t, 1, failing.Calls())

		alone := newClient(t, up("failing", fake.New(fake.FailClass(failure.Network).Times(1), fake.Reply("ok"))))
		d = elapsed(func() { resp, err = alone.Complete(context.Background(), chatReq("m")) })
		require.NoError(t, err)
		assert.Positive(t, d, "backoff before retrying the only upstream")
	})
}

// A Retry-After equal to the wait threshold is waited for on the same upstream, whatever
// the jitter added to it; one longer moves to the peer.
func TestRetryAfterAtTheWaitThresholdIsWaited(t *testing.T) {
	for _, tc := range []struct {
		after time.Duration
		want  string
	}{{2 * time.Second, "primary"}, {2*time.Second + time.Millisecond, "peer"}} {
		synctest.Test(t, func(t *testing.T) {
			primary := fake.New(fake.Fail(429).RetryAfter(tc.after).Code("rate_limit_exceeded"), fake.Reply("primary"))
			c := newClient(t, up("primary", primary), up("peer", fake.New(fake.Reply("peer").Forever())))
			resp, err := c.Complete(context.Background(), chatReq("m"))
			require.NoError(t, err)
			assert.Equal(t, tc.want, resp.Text, "Retry-After %v", tc.after)
		})
	}
}

// Without WithFirstTokenTimeout, the first-token limit is learned per upstream and model:
// an upstream whose streams start in half a second fails over after the floor (10 s) once
// it has 20 streams behind it; one whose streams start in 40 s keeps a limit above a
// minute (here a 90 s start is waited for); another model of the same upstream still has
// the default minute.
func TestFirstTokenLimitIsLearned(t *testing.T) {
	open := func(c *llmclient.Client, model string) (*llmclient.Stream, time.Duration, error) {
		var s *llmclient.Stream
		var err error
		d := elapsed(func() { s, err = c.Stream(context.Background(), chatReq(model)) })
		if err == nil {
			for s.Next() {
			}
			err = s.Err()
			s.Close()
		}
		return s, d, err
	}
	t.Run("fast model", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			p := fake.New(fake.Stream("a").StallFirst(500*time.Millisecond).Times(20), fake.Stream("late").StallFirst(time.Hour).Forever())
			c := newClient(t, up("p", p), up("peer", fake.New(fake.Stream("ok").Forever())))
			for range 20 {
				_, _, err := open(c, "m")
				require.NoError(t, err)
			}
			s, d, err := open(c, "m")
			require.NoError(t, err)
			assert.Equal(t, "peer", s.Response().Upstream)
			assert.Equal(t, 10*time.Second, d, "the learned floor")
			_, d, err = open(c, "other")
			require.NoError(t, err)
			assert.Equal(t, time.Minute, d, "another model: the default until learned")
		})
	})
	t.Run("slow starter", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			p := fake.New(fake.Stream("a").StallFirst(40*time.Second).Times(20), fake.Stream("b").StallFirst(90*time.Second))
			c := newClient(t, up("p", p), up("peer", fake.New(fake.Stream("ok").Forever())))
			for range 20 {
				_, _, err := open(c, "m")
				require.NoError(t, err)
			}
			s, d, err := open(c, "m")
			require.NoError(t, err)
			assert.Equal(t, "p", s.Response().Upstream)
			assert.Equal(t, 90*time.Second, d)
		})
	})
	t.Run("set explicitly", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			p := fake.New(fake.Stream("a").StallFirst(40 * time.Second).Forever())
			c := newClient(t, up("p", p), up("peer", fake.New(fake.Stream("ok").Forever())), llmclient.WithFirstTokenTimeout(30*time.Second))
			for range 5 { // (ten such timeouts in a row would open p's breaker)
				s, d, err := open(c, "m")
				require.NoError(t, err)
				assert.Equal(t, "peer", s.Response().Upstream)
				assert.Equal(t, 30*time.Second, d)
			}
		})
	})
}

// A budget's Reroute group is asked for its own model: an economy upstream that maps only
// the economy group's name gets that mapping, not the caller's group name.
func TestBudgetRerouteAsksForTheEconomyModel(t *testing.T) {
	flagship := priced(t, "big", 10*pricing.Dollar, 40*pricing.Dollar, 0)
	economy := priced(t, "small", pricing.Dollar/10, pricing.Dollar/10*4, 0)
	small := fake.New(exactUsage().Forever())
	c := newClient(t,
		llmclient.WithUpstream(llmclient.Upstream{Name: "big", Provider: fake.New(exactUsage().Forever()),
			Models: map[string]string{"m": "big-model"}, Prices: map[string]*pricing.Model{"": flagship}}),
		llmclient.WithUpstream(llmclient.Upstream{Name: "small", Provider: small,
			Models: map[string]string{"economy": "small-model"}, Prices: map[string]*pricing.Model{"": economy}}),
		llmclient.WithModelGroup("m", "big"), llmclient.WithModelGroup("economy", "small"),
		llmclient.WithBudget(budget.Budget{Name: "flagship", Scope: budget.Client(), Cap: pricing.Dollar / 1000, Reroute: "economy"}))
	for range 3 {
		_, _ = c.Complete(context.Background(), budgetReq())
	}
	require.NotZero(t, small.Calls(), "the reroute reached the economy group")
	for _, r := range small.Requests() {
		assert.Equal(t, "small-model", r.Model)
	}
}

// A stream that breaks after running longer than the time budget is still continued: its
// continuation gets the budget anew.
func TestContinuationAfterALongStreamGetsTheBudgetAnew(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		primary := fake.New(fake.Stream("a", "b", "c", "d").ChunkDelay(4 * time.Minute).CutAfter(3))
		peer := fake.New(fake.Stream("a", "b", "c", "d").Forever())
		c := newClient(t, up("primary", primary), up("peer", peer), llmclient.WithIdleTimeout(10*time.Minute))
		s, err := c.Stream(context.Background(), chatReq("m"))
		require.NoError(t, err)
		defer s.Close()
		for s.Next() {
		}
		require.NoError(t, s.Err())
		assert.Equal(t, "abcd", s.Response().Text)
		assert.Equal(t, 1, peer.Calls())
	})
}
