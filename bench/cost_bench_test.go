package bench

import (
	"context"
	"testing"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/budget"
	"github.com/llmclient/llmclient/finish"
	"github.com/llmclient/llmclient/pricing"
)

// usageNoop answers at once with a usage report, as a vendor does: what pricing prices.
type usageNoop struct{}

func (usageNoop) Complete(context.Context, *llmclient.Call) (*llmclient.Response, error) {
	return &llmclient.Response{Text: "ok", FinishReason: finish.Stop,
		Usage: llmclient.Usage{InputTokens: 12, OutputTokens: 2, TotalTokens: 14}}, nil
}

func (usageNoop) Stream(context.Context, *llmclient.Call) (llmclient.ProviderStream, error) {
	return nil, llmclient.ErrUnsupported
}

var pricedReq = &llmclient.Request{Model: "gpt-4o-mini", MaxTokens: 256,
	Messages: []llmclient.Message{llmclient.UserMessage("Say hello.")}}

// newPricedClient is section 1's Client (two keys, RPM/TPM/concurrency limits, breaker,
// retry budget) on an upstream priced under OpenAI's prices in the shipped table.
func newPricedClient(b *testing.B, opts ...llmclient.Option) *llmclient.Client {
	c, err := llmclient.New(append(opts, llmclient.WithUpstream(llmclient.Upstream{
		Name: "a", Provider: usageNoop{}, Keys: []string{"k1", "k2"}, PriceProvider: "openai",
		Limits: llmclient.Limits{RPM: 1 << 40, TPM: 1 << 50, MaxConcurrent: 1 << 20},
	}))...)
	if err != nil {
		b.Fatal(err)
	}
	return c
}

// BenchmarkCompleteCost is Complete without pricing (before and after the price table is
// loaded in the process), with pricing from the shipped table
// (a lookup and a cost per attempt, the call's sum), and with pricing and one daily
// client-wide budget (a period from the cached window, a reservation and a settle in the
// in-memory ledger). The cap is never reached.
func BenchmarkCompleteCost(b *testing.B) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		opts []llmclient.Option
	}{
		{"without-table", nil},
		{"without", nil},
		{"pricing", []llmclient.Option{llmclient.WithPricing(nil)}},
		{"pricing-budget", []llmclient.Option{llmclient.WithBudget(budget.Budget{
			Name: "daily", Window: budget.Daily(nil), Cap: pricing.MaxMoney, Soft: []float64{0.8}})}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			if tc.name != "without-table" {
				// The table stays loaded for the process: every case but the first
				// measures beside its 4.5 MiB, which the garbage collector scans.
				pricing.Default()
			}
			c := newPricedClient(b, tc.opts...)
			if _, err := c.Complete(ctx, pricedReq); err != nil { // parse the table, warm the lookup cache
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				resp, err := c.Complete(ctx, pricedReq)
				if err != nil {
					b.Fatal(err)
				}
				if tc.opts != nil && !resp.Cost.Known {
					b.Fatal("the call has no cost")
				}
			}
		})
	}
}
