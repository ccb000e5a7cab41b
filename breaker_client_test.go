package llmclient_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient/breaker"
	"github.com/llmclient/llmclient/event"
	"github.com/llmclient/llmclient/failure"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/provider/fake"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The breaker as the Client uses it: it opens on failures that count, rejects without a
// call while open, probes with exactly N requests, and ignores 429, 400 and cancellations.

func TestClientBreakerOpensAndRejectsWithoutCalling(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := fake.New(fake.Fail(500).Forever())
		var log eventLog
		c := newClient(t, up("a", p), llmclient.WithMaxAttempts(1), llmclient.WithObserver(log.observe))
		for range 10 {
			_, err := c.Complete(context.Background(), chatReq("m"))
			assert.Equal(t, failure.ServerError, llmclient.ClassOf(err))
		}
		assert.Equal(t, breaker.Open, c.Breaker("a").State())
		require.Len(t, log.kinds(event.Breaker), 1)

		_, err := c.Complete(context.Background(), chatReq("m"))
		assert.Equal(t, failure.Unavailable, llmclient.ClassOf(err))
		assert.ErrorIs(t, err, llmclient.ErrCircuitOpen)
		assert.Contains(t, err.Error(), "circuit breaker open", "the error says so when the only upstream is open")
		assert.Equal(t, 10, p.Calls(), "no call while open")
	})
}

func TestClientBreakerHalfOpenAdmitsExactlyNProbes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var failing atomic.Bool
		failing.Store(true)
		p := fake.New(fake.Func(func(*llmclient.Call) fake.Step {
			if failing.Load() {
				return fake.Fail(500)
			}
			return fake.Reply("ok").Latency(time.Second)
		}).Forever())
		c := newClient(t, up("a", p), llmclient.WithMaxAttempts(1),
			llmclient.WithBreaker(breaker.Config{HalfOpenProbes: 3, OpenTimeout: 15 * time.Second}))
		for range 10 {
			c.Complete(context.Background(), chatReq("m"))
		}
		require.Equal(t, breaker.Open, c.Breaker("a").State())
		before := p.Calls()

		time.Sleep(15 * time.Second)
		failing.Store(false)
		var wg sync.WaitGroup
		var ok, rejected atomic.Int64
		for range 100 {
			wg.Go(func() {
				_, err := c.Complete(context.Background(), chatReq("m"))
				switch {
				case err == nil:
					ok.Add(1)
				case llmclient.ClassOf(err) == failure.Unavailable:
					rejected.Add(1)
				}
			})
		}
		wg.Wait()
		assert.Equal(t, int64(3), ok.Load(), "exactly 3 probes reach the upstream")
		assert.Equal(t, int64(97), rejected.Load())
		assert.Equal(t, before+3, p.Calls())
		assert.Equal(t, breaker.Closed, c.Breaker("a").State(), "successful probes close it")
	})
}

func TestClientBreakerReopensLongerAfterFailedProbe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := fake.New(fake.Fail(500).Forever())
		c := newClient(t, up("a", p), llmclient.WithMaxAttempts(1))
		for range 10 {
			c.Complete(context.Background(), chatReq("m"))
		}
		time.Sleep(15 * time.Second)
		c.Complete(context.Background(), chatReq("m")) // the probe fails
		assert.Equal(t, breaker.Open, c.Breaker("a").State())
		time.Sleep(15 * time.Second)
		assert.Equal(t, breaker.Open, c.Breaker("a").State(), "open for 30s now")
		time.Sleep(15 * time.Second)
		assert.Equal(t, breaker.HalfOpen, c.Breaker("a").State())
	})
}

func TestClientBreakerIgnoresRateLimitsBadRequestsAndCancels(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := fake.New(
			fake.Fail(429).Times(30),
			fake.Fail(400).Times(30),
			fake.Reply("slow").Latency(time.Minute).Times(30),
		)
		c := newClient(t, up("a", p), llmclient.WithMaxAttempts(1))
		for range 60 {
			c.Complete(context.Background(), chatReq("m"))
			time.Sleep(2 * time.Second) // past the key's cooldown after a 429
		}
		for i := range 30 {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			if i%2 == 1 {
				time.AfterFunc(500*time.Millisecond, cancel)
			}
			_, err := c.Complete(ctx, chatReq("m"))
			cancel()
			require.Error(t, err)
		}
		assert.Equal(t, breaker.Closed, c.Breaker("a").State())
		assert.Equal(t, 90, p.Calls())
	})
}
