package llmclient_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/provider/fake"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A slow, hung or cooling upstream never eats the caller's deadline.

// A primary that hangs, a healthy secondary, a 10 s deadline and default options: every
// call is answered, within the primary's half of the budget plus the secondary's
// latency, whatever the retry budget allows.
func TestHungPrimaryNeverEatsTheDeadline(t *testing.T) {
	for name, opts := range map[string][]llmclient.Option{
		"default budget": nil,
		"no budget":      {llmclient.WithRetryBudget(0, 0, 10*time.Second)},
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				primary := fake.New(fake.Reply("late").Latency(time.Hour).Forever())
				secondary := fake.New(fake.Reply("ok").Latency(200 * time.Millisecond).Forever())
				c := newClient(t, append(opts, up("primary", primary), up("secondary", secondary))...)
				var wg sync.WaitGroup
				for range 20 {
					wg.Go(func() {
						ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
						defer cancel()
						var resp *llmclient.Response
						var err error
						d := elapsed(func() { resp, err = c.Complete(ctx, chatReq("m")) })
						if !assert.NoError(t, err) {
							return
						}
						assert.Equal(t, "secondary", resp.Upstream)
						assert.LessOrEqual(t, d, 5*time.Second+200*time.Millisecond)
					})
					time.Sleep(time.Second)
				}
				wg.Wait()
				// The primary's timeouts opened its breaker: later calls skip it.
				assert.Less(t, primary.Calls(), 20)
			})
		})
	}
}

// The same for a stream that stalls before its first token.
func TestStallingPrimaryStreamFailsOverWithinItsShare(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		primary := fake.New(fake.Stream("late").StallFirst(time.Hour).Forever())
		secondary := fake.New(fake.Stream("o", "k").StallFirst(300 * time.Millisecond).Forever())
		c := newClient(t, up("primary", primary), up("secondary", secondary))
		ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
		defer cancel()
		var s *llmclient.Stream
		var err error
		d := elapsed(func() { s, err = c.Stream(ctx, chatReq("m")) })
		require.NoError(t, err)
		defer s.Close()
		assert.Equal(t, 4*time.Second+300*time.Millisecond, d, "half of 8 s on the primary, then the secondary")
		for s.Next() {
		}
		require.NoError(t, s.Err())
		assert.Equal(t, "secondary", s.Response().Upstream)
	})
}

// Retry-After: 20 on every key of the primary: the call is served by the secondary at
// once, and so is the next one, while the primary's keys cool down.
func TestCoolingPrimaryMovesToSecondaryAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		primary := fake.New(fake.Fail(429).RetryAfter(20 * time.Second).Code("rate_limit_exceeded").Forever())
		secondary := fake.New(fake.Reply("ok").Forever())
		c := newClient(t, up("primary", primary, "k1", "k2"), up("secondary", secondary))
		for i := range 3 {
			var resp *llmclient.Response
			var err error
			d := elapsed(func() { resp, err = c.Complete(context.Background(), chatReq("m")) })
			require.NoError(t, err)
			assert.Equal(t, time.Duration(0), d, "call %d waited", i)
			assert.Equal(t, "secondary", resp.Upstream)
		}
		assert.Equal(t, 2, primary.Calls(), "each key was called once, then left to cool")
	})
}
