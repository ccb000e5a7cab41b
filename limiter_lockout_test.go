package llmclient_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/provider/fake"
)

// TestLimiterShortAnswersDoNotLockTheKeyOut: an upstream that answers one token in
// 200 ms, callers with 30 s deadlines and the default output reservation. The time per
// token of one-token answers is not what a call takes: every call is served, none is
// refused by the expected service time.
func TestLimiterShortAnswersDoNotLockTheKeyOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := fake.New(fake.Reply("ok").Usage(12, 1).Latency(200 * time.Millisecond).Forever())
		c := overflowClient(t, p, llmclient.Limits{TPM: 600_000})
		for i := range 20 {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			_, err := c.Complete(ctx, chatReq("m"))
			cancel()
			if err != nil {
				t.Fatalf("call %d: %v", i, err)
			}
		}
		if n := len(p.Requests()); n != 20 {
			t.Fatalf("%d upstream calls, want 20", n)
		}
	})
}

// TestLimiterStaleServiceTimeIsProbed: an upstream whose first calls took 40 s (callers
// with ten minutes to go) and that then answers in 200 ms. Callers with 30 s deadlines are
// refused at first (the upstream's calls were seen to take longer), but no call confirms
// that estimate any more: it decays, one call at a time is let through to try it, and
// within a bounded time every call is served again.
func TestLimiterStaleServiceTimeIsProbed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := fake.New(fake.Reply("slow").Usage(12, 400).Latency(40*time.Second).Times(4),
			fake.Reply("ok").Usage(12, 400).Latency(200*time.Millisecond).Forever())
		c := overflowClient(t, p, llmclient.Limits{TPM: 600_000})
		for range 4 {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			_, err := c.Complete(ctx, chatReq("m"))
			cancel()
			if err != nil {
				t.Fatal(err)
			}
		}
		start := time.Now()
		var lastRefusal time.Duration
		refused := 0
		for time.Since(start) < 5*time.Minute {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			_, err := c.Complete(ctx, chatReq("m"))
			cancel()
			switch {
			case errors.Is(err, llmclient.ErrRateLimited):
				refused++
				lastRefusal = time.Since(start)
			case err != nil:
				t.Fatalf("after %v: %v", time.Since(start), err)
			}
			time.Sleep(time.Second)
		}
		t.Logf("%d refusals, the last after %v", refused, lastRefusal)
		if lastRefusal > time.Minute {
			t.Fatalf("calls were still refused after %v: the stale estimate never came down", lastRefusal)
		}
	})
}

// TestLimiterSlowUpstreamIsProbedOneCallAtATime: an upstream whose calls take 40 s and
// callers with 30 s deadlines. The estimate is confirmed by every call let through (each
// ends at its deadline), so calls go on being refused locally, and while the estimate is
// tried no more than one call at a time reaches the upstream.
func TestLimiterSlowUpstreamIsProbedOneCallAtATime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := fake.New(fake.Reply("slow").Usage(12, 400).Latency(40 * time.Second).Forever())
		c := overflowClient(t, p, llmclient.Limits{TPM: 600_000}, llmclient.WithMaxAttempts(1))
		for range 4 {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			_, err := c.Complete(ctx, chatReq("m"))
			cancel()
			if err != nil {
				t.Fatal(err)
			}
		}
		before := len(p.Requests())
		var refused atomic.Int64
		var wg sync.WaitGroup
		for range 300 { // a call a second for five minutes, each on its own
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				_, err := c.Complete(ctx, chatReq("m"))
				if errors.Is(err, llmclient.ErrRateLimited) {
					refused.Add(1)
				}
			})
			time.Sleep(time.Second)
		}
		wg.Wait()
		calls := len(p.Requests()) - before
		t.Logf("%d refused, %d upstream calls", refused.Load(), calls)
		if calls > 20 {
			t.Fatalf("%d of 300 calls reached an upstream whose calls cannot finish in time", calls)
		}
		if refused.Load() < 250 {
			t.Fatalf("only %d of 300 calls refused locally", refused.Load())
		}
	})
}
