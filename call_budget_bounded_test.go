package llmclient_test

// Without a context deadline, the call budget (WithCallBudget, 10m by default) bounds
// every wait of a call: a huge Retry-After, a hung upstream, the limiter's queue, a slot
// held by a hung call, a hedge, a cache join.

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/cache"
	"github.com/llmclient/llmclient/provider/fake"
	"github.com/llmclient/llmclient/routing"
)

// budgetResult is the outcome of a call made on another goroutine.
type budgetResult struct {
	err error
	at  time.Duration
}

func goCall(f func() (*llmclient.Response, error)) <-chan budgetResult {
	ch := make(chan budgetResult, 1)
	start := time.Now()
	go func() {
		_, err := f()
		ch <- budgetResult{err: err, at: time.Since(start)}
	}()
	return ch
}

func callWithin(ch <-chan budgetResult, d time.Duration) (budgetResult, bool) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case r := <-ch:
		return r, true
	case <-t.C:
		return budgetResult{}, false
	}
}

func callBounded(t *testing.T, bound time.Duration, f func() (*llmclient.Response, error)) budgetResult {
	t.Helper()
	ch := goCall(f)
	r, ok := callWithin(ch, 24*time.Hour)
	if !ok {
		t.Fatalf("still blocked after 24h (want within %v)", bound)
	}
	if r.at > bound {
		t.Errorf("returned after %v (err %v); want within %v", r.at, r.err, bound)
	}
	return r
}

func TestCallBudgetHugeRetryAfterBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := fake.New(fake.Fail(429).RetryAfter(1000 * time.Hour).Forever())
		c := newClient(t, up("a", p, "k"))
		callBounded(t, 10*time.Minute, func() (*llmclient.Response, error) { return c.Complete(context.Background(), chatReq("m")) })
	})
}

func TestCallBudgetHungUpstreamBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := fake.New(fake.Reply("ok").Latency(1000 * time.Hour).Forever())
		c := newClient(t, up("a", p, "k"), up("b", fake.New(fake.Reply("ok").Latency(1000*time.Hour).Forever()), "k"),
			llmclient.WithModelGroup("m", "a", "b"))
		callBounded(t, 10*time.Minute, func() (*llmclient.Response, error) { return c.Complete(context.Background(), chatReq("m")) })
	})
}

func TestCallBudgetLimiterQueueBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := fake.New(fake.Reply("ok").Forever())
		c := newClient(t, llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: p, Keys: []string{"k"},
			Limits: llmclient.Limits{RPM: 1}}))
		var chs []<-chan budgetResult
		for range 50 {
			chs = append(chs, goCall(func() (*llmclient.Response, error) { return c.Complete(context.Background(), chatReq("m")) }))
		}
		for _, ch := range chs {
			r, ok := callWithin(ch, 24*time.Hour)
			if !ok {
				t.Fatalf("a queued call still blocked after 24h")
			}
			if r.at > 10*time.Minute {
				t.Errorf("a queued call returned after %v", r.at)
			}
		}
	})
}

func TestCallBudgetSlotHeldByHungCallBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := fake.New(fake.Reply("ok").Latency(1000 * time.Hour).Forever())
		c := newClient(t, llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: p, Keys: []string{"k"},
			Limits: llmclient.Limits{MaxConcurrent: 1}}))
		ch1 := goCall(func() (*llmclient.Response, error) { return c.Complete(context.Background(), chatReq("m")) })
		time.Sleep(time.Second)
		callBounded(t, 10*time.Minute+time.Second, func() (*llmclient.Response, error) {
			return c.Complete(context.Background(), chatReq("m"))
		})
		<-ch1
	})
}

func TestCallBudgetHedgeBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pa := fake.New(fake.Reply("ok").Latency(1000 * time.Hour).Forever())
		pb := fake.New(fake.Reply("ok").Latency(1000 * time.Hour).Forever())
		c := newClient(t, up("a", pa, "k"), up("b", pb, "k"), llmclient.WithModelGroup("m", "a", "b"),
			llmclient.WithHedging("m", routing.Hedge{On: true}))
		callBounded(t, 10*time.Minute, func() (*llmclient.Response, error) { return c.Complete(context.Background(), chatReq("m")) })
	})
}

func TestCallBudgetCacheDedupJoinBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, err := cache.NewMemory(cache.MemoryConfig{})
		if err != nil {
			t.Fatal(err)
		}
		cc, err := cache.New(st, cache.WithDedup(true))
		if err != nil {
			t.Fatal(err)
		}
		p := fake.New(fake.Reply("ok").Latency(1000 * time.Hour).Forever())
		c := newClient(t, up("a", p, "k"), llmclient.WithMiddleware(cc.Middleware()))
		ch1 := goCall(func() (*llmclient.Response, error) { return c.Complete(context.Background(), chatReq("m")) })
		time.Sleep(time.Minute)
		callBounded(t, 10*time.Minute, func() (*llmclient.Response, error) { return c.Complete(context.Background(), chatReq("m")) })
		<-ch1
		ctx := cache.WithIdempotencyKey(context.Background(), "job-1")
		ch2 := goCall(func() (*llmclient.Response, error) { return c.Complete(ctx, chatReq("m")) })
		time.Sleep(time.Minute)
		callBounded(t, 10*time.Minute, func() (*llmclient.Response, error) { return c.Complete(ctx, chatReq("m")) })
		<-ch2
	})
}
