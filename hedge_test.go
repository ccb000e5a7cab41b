package llmclient_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/event"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/provider/fake"
	"github.com/llmclient/llmclient/routing"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Hedged requests.

func hedging(d time.Duration) llmclient.Option {
	return llmclient.WithHedging("", routing.Hedge{On: true, Delay: d})
}

func withLimits(name string, p llmclient.Provider, l llmclient.Limits) llmclient.Option {
	return llmclient.WithUpstream(llmclient.Upstream{Name: name, Provider: p, Limits: l})
}

// assertNothingHeld checks that every key slot, limiter admission and partition lease
// went back.
func assertNothingHeld(t *testing.T, c *llmclient.Client) {
	t.Helper()
	keys, limiters, partitions := llmclient.LeasesHeld(c)
	assert.Zero(t, keys+limiters+partitions, "keys %d, limiters %d, partitions %d still held", keys, limiters, partitions)
}

// A stall before the first token with hedging on: the first token comes after the hedge
// delay plus the healthy upstream's time; the stalled attempt is canceled, recorded as
// such and gives back what it held.
func TestHedgedStreamBeatsAStall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		primary := fake.New(fake.Stream("late").StallFirst(time.Hour).Forever())
		secondary := fake.New(fake.Stream("o", "k").StallFirst(300 * time.Millisecond).Forever())
		var log eventLog
		limits := llmclient.Limits{RPM: 600, TPM: 100_000}
		c := newClient(t, withLimits("primary", primary, limits), withLimits("secondary", secondary, limits),
			hedging(500*time.Millisecond), llmclient.WithObserver(log.observe))
		var s *llmclient.Stream
		var err error
		d := elapsed(func() { s, err = c.Stream(context.Background(), chatReq("m")) })
		require.NoError(t, err)
		assert.Equal(t, 800*time.Millisecond, d, "hedge delay + the secondary's time to first token")
		text := ""
		for s.Next() {
			text += s.Current().Text
		}
		require.NoError(t, s.Err())
		require.NoError(t, s.Close())
		assert.Equal(t, "ok", text)
		resp := s.Response()
		assert.Equal(t, "secondary", resp.Upstream)
		require.Len(t, resp.Attempts, 2)
		lost, won := resp.Attempts[0], resp.Attempts[1]
		assert.Equal(t, "primary", lost.Upstream)
		assert.Equal(t, failure.Canceled, lost.Class)
		assert.False(t, lost.Hedge)
		assert.Equal(t, "secondary", won.Upstream)
		assert.Equal(t, failure.None, won.Class)
		assert.True(t, won.Hedge)
		assert.Equal(t, 1, primary.Calls())
		assert.Equal(t, 1, secondary.Calls())
		hedges := log.kinds(event.Hedge)
		require.Len(t, hedges, 1)
		assert.Equal(t, "primary", hedges[0].Upstream)
		assert.Equal(t, "secondary", hedges[0].Target)
		assert.Equal(t, 2, hedges[0].Attempt)
		var marked int
		for _, e := range log.kinds(event.Attempt) {
			if e.Hedge {
				marked++
				assert.Equal(t, "secondary", e.Upstream)
			}
		}
		assert.Equal(t, 1, marked)
		assertNothingHeld(t, c)
	})
}

// One-shot: the first complete response wins, whichever attempt sent it.
func TestHedgedCompleteFirstAnswerWins(t *testing.T) {
	for name, tc := range map[string]struct {
		primary, secondary time.Duration
		winner             string
		took               time.Duration
	}{
		"hedge wins":   {primary: time.Hour, secondary: 200 * time.Millisecond, winner: "secondary", took: 1200 * time.Millisecond},
		"primary wins": {primary: 1500 * time.Millisecond, secondary: 5 * time.Second, winner: "primary", took: 1500 * time.Millisecond},
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				primary := fake.New(fake.Reply("from primary").Latency(tc.primary).Usage(10, 3).Forever())
				secondary := fake.New(fake.Reply("from secondary").Latency(tc.secondary).Usage(10, 3).Forever())
				limits := llmclient.Limits{TPM: 100_000}
				c := newClient(t, withLimits("primary", primary, limits), withLimits("secondary", secondary, limits),
					hedging(time.Second))
				var resp *llmclient.Response
				var err error
				d := elapsed(func() { resp, err = c.Complete(context.Background(), chatReq("m")) })
				require.NoError(t, err)
				assert.Equal(t, tc.took, d)
				assert.Equal(t, tc.winner, resp.Upstream)
				assert.Equal(t, "from "+tc.winner, resp.Text)
				require.Len(t, resp.Attempts, 2)
				assert.Equal(t, []string{"primary", "secondary"}, upstreamsOf(resp.Attempts), "the trace is in attempt order")
				assert.Equal(t, 1, resp.Attempts[0].Number)
				assert.True(t, resp.Attempts[1].Hedge)
				for _, a := range resp.Attempts {
					if a.Upstream == tc.winner {
						assert.Equal(t, failure.None, a.Class)
					} else {
						assert.Equal(t, failure.Canceled, a.Class)
						assert.ErrorIs(t, a.Err, context.Canceled)
					}
				}
				assertNothingHeld(t, c)
			})
		})
	}
}

// An answer before the delay sends no hedge.
func TestNoHedgeBeforeTheDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		primary := fake.New(fake.Reply("ok").Latency(900 * time.Millisecond).Forever())
		secondary := fake.New(fake.Reply("ok").Forever())
		c := newClient(t, up("primary", primary), up("secondary", secondary), hedging(time.Second))
		for range 5 {
			resp, err := c.Complete(context.Background(), chatReq("m"))
			require.NoError(t, err)
			assert.Equal(t, "primary", resp.Upstream)
			assert.Len(t, resp.Attempts, 1)
		}
		assert.Zero(t, secondary.Calls())
	})
}

// One of the two fails first: the call waits for the other.
func TestHedgeFailureWaitsForTheOther(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		primary := fake.New(fake.Fail(500).Latency(1500 * time.Millisecond).Forever())
		secondary := fake.New(fake.Reply("ok").Latency(time.Second).Forever())
		c := newClient(t, up("primary", primary), up("secondary", secondary), hedging(time.Second))
		var resp *llmclient.Response
		var err error
		d := elapsed(func() { resp, err = c.Complete(context.Background(), chatReq("m")) })
		require.NoError(t, err)
		assert.Equal(t, 2*time.Second, d)
		assert.Equal(t, "secondary", resp.Upstream)
		require.Len(t, resp.Attempts, 2)
		assert.Equal(t, failure.ServerError, resp.Attempts[0].Class)
		assert.Equal(t, 500, resp.Attempts[0].Status)
		assert.True(t, resp.Attempts[1].Hedge)
		assert.Equal(t, 1, primary.Calls(), "the primary's failure is not retried while the hedge is in flight")
		assertNothingHeld(t, c)
	})

	// Both fail: the call goes on from the hedge's upstream, as from any failure there.
	synctest.Test(t, func(t *testing.T) {
		primary := fake.New(fake.Reply("late").Latency(time.Hour).Forever())
		secondary := fake.New(fake.Fail(400).Code("invalid_request_error").Latency(100 * time.Millisecond).Forever())
		c := newClient(t, up("primary", primary), up("secondary", secondary), hedging(time.Second))
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := c.Complete(ctx, chatReq("m"))
		var e *llmclient.Error
		require.ErrorAs(t, err, &e)
		assert.Equal(t, failure.BadRequest, e.Class, "the hedge's bad request ends the call")
		assert.Equal(t, 1, secondary.Calls())
		assertNothingHeld(t, c)
	})
}

// A hedge spends the hedged upstream's retry budget: with none left, no hedge is sent,
// and the hedges of many calls stay within the budget.
func TestHedgesSpendTheRetryBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		primary := fake.New(fake.Reply("slow").Latency(3 * time.Second).Forever())
		secondary := fake.New(fake.Reply("fast").Forever())
		c := newClient(t, up("primary", primary), up("secondary", secondary), hedging(time.Second),
			llmclient.WithRetryBudget(0, 0, 10*time.Second))
		resp, err := c.Complete(context.Background(), chatReq("m"))
		require.NoError(t, err)
		assert.Equal(t, "primary", resp.Upstream)
		assert.Zero(t, secondary.Calls())
	})
	synctest.Test(t, func(t *testing.T) {
		primary := fake.New(fake.Reply("slow").Latency(3 * time.Second).Forever())
		secondary := fake.New(fake.Reply("fast").Forever())
		c := newClient(t, up("primary", primary), up("secondary", secondary), hedging(time.Second),
			llmclient.WithRetryBudget(0.2, 3, time.Minute))
		var wg sync.WaitGroup
		for range 100 {
			wg.Go(func() {
				_, err := c.Complete(context.Background(), chatReq("m"))
				assert.NoError(t, err)
			})
		}
		wg.Wait()
		assert.Equal(t, 100, primary.Calls(), "every call starts on the primary")
		assert.LessOrEqual(t, secondary.Calls(), 3+20, "hedges ≤ floor + ratio × calls")
		assert.GreaterOrEqual(t, secondary.Calls(), 3)
		assertNothingHeld(t, c)
	})
}

// CallOptions turn hedging on for one call, or off.
func TestHedgeCallOptions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		primary := fake.New(fake.Reply("slow").Latency(3 * time.Second).Forever())
		secondary := fake.New(fake.Reply("fast").Forever())
		c := newClient(t, up("primary", primary), up("secondary", secondary))
		ctx := llmclient.WithCallOptions(context.Background(), llmclient.CallOptions{
			Hedge: &routing.Hedge{On: true, Delay: 100 * time.Millisecond}})
		var resp *llmclient.Response
		var err error
		d := elapsed(func() { resp, err = c.Complete(ctx, chatReq("m")) })
		require.NoError(t, err)
		assert.Equal(t, "secondary", resp.Upstream)
		assert.Equal(t, 100*time.Millisecond, d)

		resp, err = c.Complete(context.Background(), chatReq("m"))
		require.NoError(t, err)
		assert.Equal(t, "primary", resp.Upstream, "no hedging without the call option")
	})
	synctest.Test(t, func(t *testing.T) {
		primary := fake.New(fake.Reply("slow").Latency(3 * time.Second).Forever())
		secondary := fake.New(fake.Reply("fast").Forever())
		c := newClient(t, up("primary", primary), up("secondary", secondary), hedging(100*time.Millisecond))
		ctx := llmclient.WithCallOptions(context.Background(), llmclient.CallOptions{Hedge: &routing.Hedge{}})
		resp, err := c.Complete(ctx, chatReq("m"))
		require.NoError(t, err)
		assert.Equal(t, "primary", resp.Upstream, "the zero Hedge turns it off")
		ctx = llmclient.WithCallOptions(context.Background(), llmclient.CallOptions{NoFailover: true})
		resp, err = c.Complete(ctx, chatReq("m"))
		require.NoError(t, err)
		assert.Equal(t, "primary", resp.Upstream, "NoFailover keeps the call on its upstream")
		assert.Zero(t, secondary.Calls())
	})
}

// Without a Delay, the hedge waits for the upstream's observed 95th percentile once it has
// seen enough calls, 2s before.
func TestHedgeDelayFollowsObservedLatency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		primary := fake.New(fake.Reply("late").Latency(time.Hour).Times(1),
			fake.Reply("ok").Latency(100*time.Millisecond).Times(30),
			fake.Reply("late").Latency(time.Hour).Forever())
		secondary := fake.New(fake.Reply("fast").Forever())
		c := newClient(t, up("primary", primary), up("secondary", secondary), hedging(0))
		var resp *llmclient.Response
		var err error
		d := elapsed(func() { resp, err = c.Complete(context.Background(), chatReq("m")) })
		require.NoError(t, err)
		assert.Equal(t, "secondary", resp.Upstream)
		assert.Equal(t, 2*time.Second, d, "no percentile yet: the default delay")
		for range 30 {
			resp, err = c.Complete(context.Background(), chatReq("m"))
			require.NoError(t, err)
			require.Equal(t, "primary", resp.Upstream)
		}
		d = elapsed(func() { resp, err = c.Complete(context.Background(), chatReq("m")) })
		require.NoError(t, err)
		assert.Equal(t, "secondary", resp.Upstream)
		// 100 ms falls in the log2 bucket [67 ms, 134 ms): its upper bound is the p95.
		assert.Equal(t, time.Duration(1<<27), d)
	})
}

// A hedge only goes with headroom: not to an upstream whose breaker is open or whose
// limiter cannot admit at once.
func TestHedgeNeedsHeadroom(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		primary := fake.New(fake.Reply("slow").Latency(3 * time.Second).Forever())
		secondary := fake.New(fake.Reply("fast").Forever())
		c := newClient(t, up("primary", primary), withLimits("secondary", secondary, llmclient.Limits{RPM: 1}),
			hedging(time.Second))
		// The secondary's one request a minute goes to a call of its own.
		ctx := llmclient.WithCallOptions(context.Background(), llmclient.CallOptions{Pin: []string{"secondary"}})
		_, err := c.Complete(ctx, chatReq("m"))
		require.NoError(t, err)
		resp, err := c.Complete(context.Background(), chatReq("m"))
		require.NoError(t, err)
		assert.Equal(t, "primary", resp.Upstream, "the hedge did not wait for the secondary's limiter")
		assert.Equal(t, 1, secondary.Calls())
		require.Len(t, resp.Attempts, 2)
		assert.True(t, resp.Attempts[1].Local, "the refused hedge is recorded as a local refusal")
		assertNothingHeld(t, c)
	})
}

// The caller's cancellation ends both attempts; a panicking observer on the hedge event
// reaches the caller with nothing held and no goroutine left (goleak in TestMain).
func TestHedgeCancelAndPanic(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		primary := fake.New(fake.Reply("late").Latency(time.Hour).Forever())
		secondary := fake.New(fake.Reply("late").Latency(time.Hour).Forever())
		c := newClient(t, up("primary", primary), up("secondary", secondary), hedging(time.Second))
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(3*time.Second, cancel)
		_, err := c.Complete(ctx, chatReq("m"))
		var e *llmclient.Error
		require.ErrorAs(t, err, &e)
		assert.Equal(t, failure.Canceled, e.Class)
		assert.Equal(t, 1, secondary.Calls())
		assertNothingHeld(t, c)
	})
	synctest.Test(t, func(t *testing.T) {
		primary := fake.New(fake.Reply("late").Latency(time.Hour).Forever())
		secondary := fake.New(fake.Reply("fast").Forever())
		observer := func(_ context.Context, e llmclient.Event) {
			if e.Kind == event.Hedge {
				panic("observer bug")
			}
		}
		c := newClient(t, up("primary", primary), up("secondary", secondary), hedging(time.Second),
			llmclient.WithObserver(observer))
		assert.PanicsWithValue(t, "observer bug", func() { _, _ = c.Complete(context.Background(), chatReq("m")) })
		assertNothingHeld(t, c)
	})
}
