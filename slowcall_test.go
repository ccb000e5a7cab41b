package llmclient_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/breaker"
	"github.com/llmclient/llmclient/event"
	"github.com/llmclient/llmclient/provider/fake"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Slow calls count. An upstream whose P95 latency passes 10 s over 30 s is degraded:
// the breaker's slow-call rule says the same, separately from
// its error ratio, and the group's next upstream takes over.
func TestSlowCallsOpenTheBreaker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		primary := fake.New(fake.Reply("slow").Latency(12 * time.Second).Forever())
		secondary := fake.New(fake.Reply("fast").Forever())
		var log eventLog
		c := newClient(t, up("primary", primary), up("secondary", secondary), llmclient.WithObserver(log.observe),
			llmclient.WithBreaker(breaker.Config{Window: 30 * time.Second, Buckets: 3, MinRequests: 5,
				SlowCall: 10 * time.Second, SlowCallRatio: 0.05}))
		var wg sync.WaitGroup
		for range 5 { // at once, so that the five are in one 30 s window
			wg.Go(func() {
				resp, err := c.Complete(context.Background(), chatReq("m"))
				if assert.NoError(t, err) {
					assert.Equal(t, "primary", resp.Upstream, "a slow answer is still an answer")
				}
			})
		}
		wg.Wait()
		require.Len(t, log.kinds(event.Breaker), 1)
		assert.Equal(t, breaker.Open, log.kinds(event.Breaker)[0].To)
		resp, err := c.Complete(context.Background(), chatReq("m"))
		require.NoError(t, err)
		assert.Equal(t, "secondary", resp.Upstream)
		assert.Equal(t, 5, primary.Calls())
	})
}

// Calls under the threshold never count as slow, however many.
func TestFastCallsNeverCountAsSlow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		primary := fake.New(fake.Reply("ok").Latency(9 * time.Second).Forever())
		c := newClient(t, up("primary", primary),
			llmclient.WithBreaker(breaker.Config{MinRequests: 5, SlowCall: 10 * time.Second, SlowCallRatio: 0.05}))
		for range 20 {
			_, err := c.Complete(context.Background(), chatReq("m"))
			require.NoError(t, err)
		}
		assert.Equal(t, breaker.Closed, c.Snapshot().Upstreams[0].Breaker.State)
		assert.Zero(t, c.Snapshot().Upstreams[0].Breaker.Slow)
	})
}

// A stream is slow by its time to first token: the default threshold is a minute, the
// default ratio 80%.
func TestSlowStreamsOpenTheBreaker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		primary := fake.New(fake.Stream("late").StallFirst(70 * time.Second).Forever())
		c := newClient(t, up("primary", primary), llmclient.WithBreaker(breaker.Config{MinRequests: 3}),
			llmclient.WithFirstTokenTimeout(2*time.Minute))
		var wg sync.WaitGroup
		for range 3 {
			wg.Go(func() {
				s, err := c.Stream(context.Background(), chatReq("m"))
				if !assert.NoError(t, err) {
					return
				}
				for s.Next() {
				}
				assert.NoError(t, s.Err())
				assert.NoError(t, s.Close())
			})
		}
		wg.Wait()
		_, err := c.Stream(context.Background(), chatReq("m"))
		var e *llmclient.Error
		require.ErrorAs(t, err, &e)
		assert.ErrorIs(t, err, llmclient.ErrCircuitOpen)
		assert.Equal(t, 3, primary.Calls())
	})
}

// A hedge that wins against a hung upstream does not hide it from the breaker: the
// attempt it beat, canceled after running longer than the slow-call threshold, counts as
// slow, so the slow-call rule opens the hung upstream's breaker and later calls skip it
// instead of paying the hedge delay every time.
func TestHedgeLoserSlowerThanTheThresholdCountsAsSlow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hung := fake.New(fake.Reply("late").Latency(time.Hour).Forever())
		healthy := fake.New(fake.Reply("ok").Latency(100 * time.Millisecond).Forever())
		var log eventLog
		c := newClient(t, up("primary", hung), up("secondary", healthy), hedging(2*time.Second),
			llmclient.WithObserver(log.observe),
			llmclient.WithBreaker(breaker.Config{Window: time.Minute, Buckets: 6, MinRequests: 5,
				SlowCall: time.Second, SlowCallRatio: 0.5}))
		for range 5 {
			resp, err := c.Complete(context.Background(), chatReq("m"))
			require.NoError(t, err)
			assert.Equal(t, "secondary", resp.Upstream)
		}
		assert.Equal(t, 5, hung.Calls())
		assert.Equal(t, breaker.Open, c.Snapshot().Upstreams[0].Breaker.State, "five slow losers in a row")
		start := time.Now()
		resp, err := c.Complete(context.Background(), chatReq("m"))
		require.NoError(t, err)
		assert.Equal(t, "secondary", resp.Upstream)
		assert.Equal(t, 100*time.Millisecond, time.Since(start), "no hedge delay: the hung upstream is skipped")
		assert.Equal(t, 5, hung.Calls())
		assertNothingHeld(t, c)
	})
}

// A loser canceled before the threshold says nothing of its upstream's speed.
func TestHedgeLoserFasterThanTheThresholdIsNotSlow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		slowish := fake.New(fake.Reply("late").Latency(time.Hour).Forever())
		healthy := fake.New(fake.Reply("ok").Latency(100 * time.Millisecond).Forever())
		c := newClient(t, up("primary", slowish), up("secondary", healthy), hedging(2*time.Second),
			llmclient.WithBreaker(breaker.Config{Window: time.Minute, Buckets: 6, MinRequests: 5,
				SlowCall: 10 * time.Second, SlowCallRatio: 0.5}))
		for range 8 {
			_, err := c.Complete(context.Background(), chatReq("m"))
			require.NoError(t, err)
		}
		assert.Equal(t, breaker.Closed, c.Snapshot().Upstreams[0].Breaker.State)
		assert.Zero(t, c.Snapshot().Upstreams[0].Breaker.Slow)
		assertNothingHeld(t, c)
	})
}

// The same for streams: a stalled stream beaten by its hedge, cut after waiting longer than
// the first-token threshold, counts as slow.
func TestHedgedStallBeyondFirstTokenThresholdCountsAsSlow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		stalled := fake.New(fake.Stream("late").StallFirst(time.Hour).Forever())
		healthy := fake.New(fake.Stream("o", "k").StallFirst(100 * time.Millisecond).Forever())
		c := newClient(t, up("primary", stalled), up("secondary", healthy), hedging(time.Second),
			llmclient.WithBreaker(breaker.Config{Window: time.Minute, Buckets: 6, MinRequests: 5,
				SlowFirstToken: 500 * time.Millisecond, SlowCallRatio: 0.5}))
		for range 5 {
			s, err := c.Stream(context.Background(), chatReq("m"))
			require.NoError(t, err)
			for s.Next() {
			}
			require.NoError(t, s.Err())
			require.NoError(t, s.Close())
			assert.Equal(t, "secondary", s.Response().Upstream)
		}
		assert.Equal(t, breaker.Open, c.Snapshot().Upstreams[0].Breaker.State)
		assertNothingHeld(t, c)
	})
}
