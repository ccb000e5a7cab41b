package llmclient_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/budget"
	"github.com/llmclient/llmclient/cache"
	"github.com/llmclient/llmclient/pricing"
	"github.com/llmclient/llmclient/provider/fake"
)

// TestAuditCacheHitMeetsSpentBudgetAndOpenBreaker: docs/cache.md says a hit "has no
// Attempts, and its Cost is a known $0"; the cache is middleware, outside every layer
// (README's layer drawing). So a hit is served while the budget is at its cap and the
// only upstream is forced open, spends nothing, and reaches no upstream; a miss in the
// same state is refused by the budget or the breaker.
func TestAuditCacheHitMeetsSpentBudgetAndOpenBreaker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store, err := cache.NewMemory(cache.MemoryConfig{MaxBytes: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		ca, err := cache.New(store)
		if err != nil {
			t.Fatal(err)
		}
		m := priced(t, "m", pricing.Dollar, 4*pricing.Dollar, 0)
		p := fake.New(exactUsage().Forever())
		perCall := costOf(t, m, pricing.Tokens{Input: llmclient.EstimatePromptTokens(nil, budgetReq()), Output: 250}, time.Now())
		c := newClient(t, pricedUp("a", p, m), llmclient.WithMiddleware(ca.Middleware()),
			llmclient.WithBudget(budget.Budget{Name: "cap", Cap: perCall}))
		if _, err := c.Complete(context.Background(), budgetReq()); err != nil {
			t.Fatalf("first call, within the cap: %v", err)
		}
		other := budgetReq()
		other.Messages = []llmclient.Message{llmclient.UserMessage("Say goodbye.")}
		if _, err := c.Complete(context.Background(), other); !errors.Is(err, budget.ErrExceeded) {
			t.Fatalf("a miss at the cap: %v, want budget.ErrExceeded", err)
		}
		before, err := c.Budget(context.Background(), "cap", "")
		if err != nil {
			t.Fatal(err)
		}
		if err := c.ForceBreakerOpen("a"); err != nil {
			t.Fatal(err)
		}
		resp, err := c.Complete(context.Background(), budgetReq())
		if err != nil {
			t.Fatalf("a hit at the cap with the breaker forced open: %v", err)
		}
		if len(resp.Attempts) != 0 || !resp.Cost.Known || resp.Cost.Amount != 0 || resp.Text != "ok" {
			t.Errorf("hit: %d attempts, cost %+v, text %q; want none, a known $0, the cached text", len(resp.Attempts), resp.Cost, resp.Text)
		}
		after, err := c.Budget(context.Background(), "cap", "")
		if err != nil {
			t.Fatal(err)
		}
		if after.Spent != before.Spent || after.Reserved != 0 {
			t.Errorf("budget after the hit: spent %v reserved %v, before %v", after.Spent, after.Reserved, before.Spent)
		}
		if p.Calls() != 1 {
			t.Errorf("the upstream was called %d times, want once", p.Calls())
		}
	})
}
