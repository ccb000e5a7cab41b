package pricing_test

import (
	"fmt"
	"time"

	"github.com/llmclient/llmclient/pricing"
)

// A planning estimate: 10,000 calls a day of 1,500 prompt and 500 output tokens, 70% on
// gpt-4o-mini and 30% on Claude Sonnet 4.5, at the snapshot's prices.
func ExamplePlan() {
	prices := pricing.Default()
	mini, _ := prices.Lookup("openai", "gpt-4o-mini")
	sonnet, _ := prices.Lookup("anthropic", "claude-sonnet-4-5")

	est, err := pricing.Plan(pricing.Workload{
		CallsPerDay: 10_000,
		PerCall:     pricing.Tokens{Input: 1500, Output: 500},
		Mix:         []pricing.Share{{Model: mini, Fraction: 0.7}, {Model: sonnet, Fraction: 0.3}},
		Day:         time.Date(2025, 9, 1, 0, 0, 0, 0, time.UTC),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, l := range est.Lines {
		fmt.Printf("%-28s %3.0f%%  %v/call  %v/day  %v/month\n", l.Model, 100*l.Fraction, l.PerCall, l.Daily, l.Monthly)
	}
	fmt.Printf("total: %v/day, %v/month\n", est.Daily, est.Monthly)
	// Output:
	// openai/gpt-4o-mini            70%  $0.000525/call  $3.675/day  $110.25/month
	// anthropic/claude-sonnet-4-5   30%  $0.012/call  $36.00/day  $1080.00/month
	// total: $39.675/day, $1190.25/month
}

// Pricing one call: look the model up once, then cost each call's usage at its time.
func ExampleModel_Cost() {
	m, ok := pricing.Default().Lookup("anthropic", "claude-sonnet-4-5-20250929")
	if !ok {
		fmt.Println("cost unknown") // never a silent $0
		return
	}
	cost, err := m.Cost(pricing.Tokens{Input: 10_000, CacheRead: 6000, CacheWrite: 2000, Output: 500},
		time.Date(2025, 9, 1, 12, 0, 0, 0, time.UTC))
	fmt.Println(m, cost, err)
	// Output: anthropic/claude-sonnet-4-5 $0.0228 <nil>
}

// A self-hosted model priced at zero, and a negotiated rate for a model of the snapshot.
func ExampleNewModel() {
	local, _ := pricing.NewModel(pricing.Spec{
		ID:    "llama-3.1-8b",
		Price: pricing.Price{Input: pricing.PerMTok(0), Output: pricing.PerMTok(0)},
	})
	list, _ := pricing.Default().Lookup("openai", "gpt-4o")
	negotiated, _ := list.WithPrice(pricing.Price{
		Input:     pricing.PerMTok(2 * pricing.Dollar),
		CacheRead: pricing.PerMTok(1 * pricing.Dollar),
		Output:    pricing.PerMTok(8 * pricing.Dollar),
	})
	at := time.Date(2025, 9, 1, 12, 0, 0, 0, time.UTC)
	call := pricing.Tokens{Input: 1500, Output: 500}
	for _, m := range []*pricing.Model{local, list, negotiated} {
		cost, _ := m.Cost(call, at)
		fmt.Println(m, cost)
	}
	// Output:
	// llama-3.1-8b $0.00
	// openai/gpt-4o $0.00875
	// openai/gpt-4o $0.007
}
