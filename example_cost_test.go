package llmclient_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/budget"
	"github.com/llmclient/llmclient/event"
	"github.com/llmclient/llmclient/pricing"
	"github.com/llmclient/llmclient/provider/fake"
)

// The cost of a call, from the embedded price table; a model the table does not know
// has an unknown cost, never $0.
func ExampleWithPricing() {
	p := fake.New(fake.Reply("Hello!").Usage(12_000, 700).Forever())
	c, _ := llmclient.New(llmclient.WithUpstream(llmclient.Upstream{Name: "openai", Provider: p, PriceProvider: "openai"}),
		llmclient.WithPricing(nil))
	resp, _ := c.Complete(context.Background(), &llmclient.Request{Model: "gpt-4o-mini",
		Messages: []llmclient.Message{llmclient.UserMessage("Say hello.")}})
	fmt.Println(resp.Cost, resp.Attempts[0].Cost.Model)
	resp, _ = c.Complete(context.Background(), &llmclient.Request{Model: "my-finetune",
		Messages: []llmclient.Message{llmclient.UserMessage("Say hello.")}})
	fmt.Println(resp.Cost)
	// Output:
	// $0.00222 openai/gpt-4o-mini
	// unknown
}

// A daily budget: at its cap, calls are refused before any upstream call, with the
// class budget_exceeded; the soft threshold is an event.
func ExampleWithBudget() {
	// Output at $1,000 per million tokens: 400 of them cost $0.40, what a call with
	// MaxTokens 400 reserves.
	m, _ := pricing.NewModel(pricing.Spec{ID: "m", Price: pricing.Price{Input: pricing.PerMTok(0),
		Output: pricing.PerMTok(1000 * pricing.Dollar)}})
	p := fake.New(fake.Reply("ok").Usage(5, 400).Forever())
	c, _ := llmclient.New(
		llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: p, Prices: map[string]*pricing.Model{"": m}}),
		llmclient.WithBudget(budget.Budget{Name: "daily", Cap: pricing.Dollar, Soft: []float64{0.5}}),
		llmclient.WithObserver(func(_ context.Context, e llmclient.Event) {
			if e.Kind == event.Budget {
				fmt.Printf("budget %s at %v: %v of %v spent\n", e.Budget.Name, e.Budget.Fraction, e.Budget.Spent, e.Budget.Cap)
			}
		}))
	req := &llmclient.Request{Model: "m", MaxTokens: 400, Messages: []llmclient.Message{llmclient.UserMessage("Go on.")}}
	for i := range 4 {
		resp, err := c.Complete(context.Background(), req)
		if errors.Is(err, budget.ErrExceeded) {
			fmt.Println("call", i+1, llmclient.ClassOf(err))
			continue
		}
		fmt.Println("call", i+1, resp.Cost)
	}
	// Output:
	// call 1 $0.40
	// budget daily at 0.5: $0.80 of $1.00 spent
	// call 2 $0.40
	// budget daily at 1: $0.80 of $1.00 spent
	// call 3 budget_exceeded
	// call 4 budget_exceeded
}
