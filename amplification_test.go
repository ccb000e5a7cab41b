package llmclient_test

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/provider/fake"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// runConcurrently sends n requests at once and returns how many succeeded.
func runConcurrently(c *llmclient.Client, n int) (ok int) {
	var wg sync.WaitGroup
	var succeeded atomic.Int64
	for range n {
		wg.Go(func() {
			if _, err := c.Complete(context.Background(), chatReq("m")); err == nil {
				succeeded.Add(1)
			}
		})
	}
	wg.Wait()
	return int(succeeded.Load())
}

func TestAmplificationTotalOutageIsBoundedByRetryBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := fake.New(fake.Fail(500).Forever())
		c := newClient(t, up("a", p))
		ok := runConcurrently(c, 1000)
		assert.Zero(t, ok)
		limit := int((1+0.3)*1000) + 10 // the default budget: ratio 0.3, floor 10
		assert.LessOrEqual(t, p.Calls(), limit, "upstream attempts for 1,000 logical requests")
		t.Logf("1,000 requests against a dead upstream: %d upstream attempts (bound %d)", p.Calls(), limit)
	})
}

func TestAmplificationTotalOutageAcrossFailover(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := fake.New(fake.Fail(500).Forever())
		b := fake.New(fake.Fail(503).Forever())
		c := newClient(t, up("a", a), up("b", b))
		runConcurrently(c, 1000)
		limit := int((1+0.3)*1000) + 10 // the default budget: ratio 0.3, floor 10
		assert.LessOrEqual(t, a.Calls()+b.Calls(), limit, "failover counts against the same budget")
	})
}

func TestAmplificationTransientErrorsAreAbsorbed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(1, 2))
		var mu sync.Mutex
		p := fake.New(fake.Func(func(*llmclient.Call) fake.Step {
			mu.Lock()
			fail := rng.Float64() < 0.2
			mu.Unlock()
			if fail {
				return fake.Fail(503).Latency(200 * time.Millisecond)
			}
			return fake.Reply("ok").Latency(200 * time.Millisecond)
		}).Forever())
		c := newClient(t, up("a", p))
		ok := runConcurrently(c, 1000)
		assert.GreaterOrEqual(t, ok, 990, "at least 99%% succeed")
		perRequest := float64(p.Calls()) / 1000
		assert.LessOrEqual(t, perRequest, 1.3)
		t.Logf("20%% random 503s: %d/1000 succeeded with %.3f attempts per request", ok, perRequest)
	})
}

func TestKeyPoolCoolingKeyIsNotReachedBeforeItsTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const retryAfter = 20 * time.Second
		var mu sync.Mutex
		var cooledAt []time.Time // when each 429 from key 1 was answered
		var k1Calls []time.Time
		p := fake.New(fake.Func(func(call *llmclient.Call) fake.Step {
			if call.APIKey != "k1" {
				return fake.Reply("ok").Latency(100 * time.Millisecond)
			}
			mu.Lock()
			k1Calls = append(k1Calls, time.Now())
			mu.Unlock()
			time.AfterFunc(50*time.Millisecond, func() {
				mu.Lock()
				cooledAt = append(cooledAt, time.Now())
				mu.Unlock()
			})
			return fake.Fail(429).RetryAfter(retryAfter).Latency(50 * time.Millisecond)
		}).Forever())
		c := newClient(t, up("a", p, "k1", "k2", "k3"))
		start := time.Now()
		var wg sync.WaitGroup
		var failed atomic.Int64
		waves := []time.Duration{0, 10 * time.Second, 25 * time.Second} // 3 waves of 100 concurrent requests
		for i := range 300 {
			wg.Go(func() {
				time.Sleep(waves[i%3])
				if _, err := c.Complete(context.Background(), chatReq("m")); err != nil {
					failed.Add(1)
				}
			})
		}
		wg.Wait()
		synctest.Wait() // let the last AfterFunc record its time
		mu.Lock()
		defer mu.Unlock()
		assert.Zero(t, failed.Load(), "no request fails while other keys are free")
		require.NotEmpty(t, cooledAt)
		for _, call := range k1Calls {
			for _, cooled := range cooledAt {
				if call.After(cooled) && call.Before(cooled.Add(retryAfter)) {
					t.Errorf("key 1 called at %v, inside the cooldown from %v", call, cooled)
				}
			}
		}
		// Wave 1 reaches key 1 before its first 429 is seen, wave 2 never does, wave 3 does again.
		var wave2 int
		for _, call := range k1Calls {
			if at := call.Sub(start); at >= 5*time.Second && at < 20*time.Second {
				wave2++
			}
		}
		assert.Zero(t, wave2, "no call reaches key 1 during its cooldown")
		assert.Greater(t, len(k1Calls), 1)
		t.Logf("key 1 was called %d times across 3 waves of 100 concurrent requests", len(k1Calls))
	})
}
