package llmclient_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/budget"
	"github.com/llmclient/llmclient/cache"
	"github.com/llmclient/llmclient/pricing"
	"github.com/llmclient/llmclient/provider/fake"
)

// TestSharedCallIsCountedOnce: identical calls in flight together share one upstream
// call (cache.WithDedup), which the budget counts once; every caller's Response carries
// that call's Cost, and a repeat served from the cache costs a known $0 and counts
// nothing.
func TestSharedCallIsCountedOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := priced(t, "m", pricing.Dollar, 2*pricing.Dollar, 0)
		p := fake.New(fake.Reply("ok").Latency(time.Second).Usage(100, 50).Forever())
		store, err := cache.NewMemory(cache.MemoryConfig{})
		if err != nil {
			t.Fatal(err)
		}
		cc, err := cache.New(store, cache.WithDedup(true))
		if err != nil {
			t.Fatal(err)
		}
		c := newClient(t, pricedUp("u", p, m), llmclient.WithMiddleware(cc.Middleware()),
			llmclient.WithBudget(budget.Budget{Name: "day", Cap: pricing.Dollar}))
		one := costOf(t, m, pricing.Tokens{Input: 100, Output: 50}, time.Now())
		var wg sync.WaitGroup
		costs := make([]pricing.Cost, 5)
		for i := range costs {
			wg.Go(func() {
				resp, err := c.Complete(context.Background(), chatReq("m"))
				if err != nil {
					t.Error(err)
					return
				}
				costs[i] = resp.Cost
			})
		}
		wg.Wait()
		if p.Calls() != 1 {
			t.Fatalf("%d upstream calls, want one shared", p.Calls())
		}
		for i, cost := range costs {
			if !cost.Known || cost.Amount != one {
				t.Fatalf("caller %d got cost %+v, want the shared call's %v", i, cost, one)
			}
		}
		resp, err := c.Complete(context.Background(), chatReq("m"))
		if err != nil || !resp.Cached || !resp.Cost.Known || resp.Cost.Amount != 0 {
			t.Fatalf("a repeat: %+v, %v; want a cache hit at a known $0", resp, err)
		}
		st, err := c.Budget(context.Background(), "day", "")
		if err != nil || st.Spent != one || st.Reserved != 0 {
			t.Fatalf("budget %+v, %v: want the one call's %v", st, err, one)
		}
	})
}
