package llmclient_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/budget"
	"github.com/llmclient/llmclient/pricing"
	"github.com/llmclient/llmclient/provider/fake"
)

// TestRollingBudgetCountsCallsLongerThanTheWindow: under Rolling(1m) a call that takes
// 70 s counts when it is settled, though the slice it reserved in has left the window;
// the short calls after it get what is left of the cap, not the whole cap.
func TestRollingBudgetCountsCallsLongerThanTheWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := priced(t, "m", 0, pricing.Dollar, 0) // $1 per million output tokens, input free
		p := fake.New(fake.Reply("slow").Latency(70*time.Second).Usage(10, 1000), fake.Reply("ok").Usage(10, 400).Forever())
		c := newClient(t, pricedUp("u", p, m), llmclient.WithBudget(budget.Budget{Name: "minute",
			Window: budget.Rolling(time.Minute), Cap: 1_500 * pricing.Dollar / 1_000_000}))
		long := chatReq("m")
		long.MaxTokens = 1000 // $0.001
		resp, err := c.Complete(context.Background(), long)
		if err != nil {
			t.Fatal(err)
		}
		if resp.Cost.Amount != pricing.Dollar/1000 {
			t.Fatalf("the long call cost %v", resp.Cost)
		}
		st, err := c.Budget(context.Background(), "minute", "")
		if err != nil || st.Spent != pricing.Dollar/1000 || st.Reserved != 0 {
			t.Fatalf("after the long call: %+v, %v; want $0.001 spent", st, err)
		}
		short := chatReq("m")
		short.MaxTokens = 400 // $0.0004
		served, spent := 0, pricing.Money(0)
		for range 5 {
			resp, err := c.Complete(context.Background(), short)
			if errors.Is(err, budget.ErrExceeded) {
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			served++
			spent += resp.Cost.Amount
			time.Sleep(time.Second)
		}
		if served != 1 || pricing.Dollar/1000+spent > 1_500*pricing.Dollar/1_000_000 {
			t.Fatalf("%d short calls served within the minute (%v), the cap leaves room for 1", served, spent)
		}
	})
}
