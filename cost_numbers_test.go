package llmclient_test

import (
	"context"
	"errors"
	"math"
	"os"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/budget"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/pricing"
	"github.com/llmclient/llmclient/provider/fake"
)

// TestCostTimeOfDay: an attempt is priced at the price in force when it was sent:
// DeepSeek's shipped standard rate from 00:30 to 16:30 UTC, its off-peak discount
// otherwise. Virtual time starts at midnight UTC.
func TestCostTimeOfDay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := fake.New(fake.Reply("hi").Usage(1_000_000, 1_000_000).Forever())
		c := newClient(t, llmclient.WithUpstream(llmclient.Upstream{Name: "ds", Provider: p, PriceProvider: "deepseek"}))
		call := func() pricing.Cost {
			resp, err := c.Complete(context.Background(), chatReq("deepseek-chat"))
			if err != nil {
				t.Fatal(err)
			}
			return resp.Cost
		}
		// Upstream.PriceProvider alone does not turn pricing on: there is no price then.
		if got := call(); got.Known {
			t.Fatalf("without pricing: %v", got)
		}
		c = newClient(t, llmclient.WithUpstream(llmclient.Upstream{Name: "ds", Provider: p, PriceProvider: "deepseek"}),
			llmclient.WithPricing(nil))
		offPeak := 135*pricing.Microdollar*1000 + 550*pricing.Microdollar*1000 // $0.135 + $0.55
		standard := 270*pricing.Microdollar*1000 + 1100*pricing.Microdollar*1000
		if got := call(); got.Amount != offPeak || !got.Known {
			t.Fatalf("at 00:00 UTC: %v, want the off-peak %v", got, offPeak)
		}
		time.Sleep(10 * time.Hour)
		if got := call(); got.Amount != standard {
			t.Fatalf("at 10:00 UTC: %v, want the standard %v", got, standard)
		}
		time.Sleep(7 * time.Hour)
		if got := call(); got.Amount != offPeak {
			t.Fatalf("at 17:00 UTC: %v, want the off-peak %v", got, offPeak)
		}
	})
}

// TestCostOfExtremeUsage: whatever an upstream reports, the cost is defined: a report
// with a negative count, or a total above 2^30 tokens, is not taken (the Client's
// estimate prices the call, marked estimated, never a known $0 nor a cap's worth), parts
// larger than their totals are cut to them, and amounts saturate at pricing.MaxMoney
// instead of overflowing.
func TestCostOfExtremeUsage(t *testing.T) {
	m := priced(t, "m", pricing.Dollar, 2*pricing.Dollar, 0)
	cached, err := m.WithPrice(pricing.Price{Input: pricing.PerMTok(pricing.Dollar), CacheRead: pricing.PerMTok(pricing.Dollar / 10),
		Output: pricing.PerMTok(2 * pricing.Dollar)})
	if err != nil {
		t.Fatal(err)
	}
	const estimated = -1 // the Client's estimate of the call
	for _, tc := range []struct {
		name  string
		usage llmclient.Usage
		want  pricing.Money
	}{
		{"negative", llmclient.Usage{InputTokens: -5, OutputTokens: -1, TotalTokens: 1}, estimated},
		{"cache reads beyond the input", llmclient.Usage{InputTokens: 1_000_000, CachedInputTokens: math.MaxInt, OutputTokens: 0, TotalTokens: 1},
			pricing.Dollar / 10},
		{"reasoning beyond the output", llmclient.Usage{InputTokens: 0, OutputTokens: 1_000_000, ReasoningTokens: math.MaxInt, TotalTokens: 1},
			2 * pricing.Dollar},
		{"at the bound", llmclient.Usage{InputTokens: 1 << 30, OutputTokens: 1 << 30, TotalTokens: 1 << 30}, 3 << 30 * pricing.Microdollar},
		{"above the bound", llmclient.Usage{InputTokens: 1<<30 + 1, OutputTokens: 1, TotalTokens: 1 << 30}, estimated},
		{"MaxInt", llmclient.Usage{InputTokens: math.MaxInt, OutputTokens: math.MaxInt, TotalTokens: math.MaxInt}, estimated},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := fake.New(fake.Reply("hi").ReportUsage(tc.usage))
			c := newClient(t, pricedUp("a", p, cached))
			resp, err := c.Complete(context.Background(), chatReq("m"))
			if err != nil {
				t.Fatal(err)
			}
			if tc.want == estimated {
				u := resp.Usage
				want := costOf(t, cached, pricing.Tokens{Input: u.InputTokens, Output: u.OutputTokens}, time.Now())
				if !u.Estimated || u.InputTokens <= 0 || u.OutputTokens != 1 || !resp.Cost.Known || !resp.Cost.Estimated || resp.Cost.Amount != want {
					t.Fatalf("Usage %+v, Cost %+v; want the estimate, priced at %v", u, resp.Cost, want)
				}
				return
			}
			if !resp.Cost.Known || resp.Cost.Estimated || resp.Cost.Amount != tc.want {
				t.Fatalf("Cost %+v, want %v", resp.Cost, tc.want)
			}
		})
	}
}

// TestCostOfHugeRequests: a request whose MaxTokens is MaxInt, or whose prompt the
// estimate cannot fit, is refused before any call with a clear error, never an
// overflow: the budget's estimate saturates and exceeds any cap (AdmitAfter 0: no
// window will fit it), and the context window check says by how much.
func TestCostOfHugeRequests(t *testing.T) {
	t.Run("budget", func(t *testing.T) {
		p := fake.New(fake.Reply("hi").Forever())
		c := newClient(t, pricedUp("a", p, priced(t, "m", pricing.Dollar, pricing.Dollar, 0)),
			llmclient.WithBudget(budget.Budget{Name: "b", Cap: 1000 * pricing.Dollar}),
			llmclient.WithBudget(budget.Budget{Name: "max", Cap: pricing.MaxMoney}))
		req := chatReq("m")
		req.MaxTokens = math.MaxInt
		_, err := c.Complete(context.Background(), req)
		var e *llmclient.Error
		if !errors.As(err, &e) || e.Class != failure.BudgetExceeded || !errors.Is(err, budget.ErrExceeded) || e.AdmitAfter != 0 {
			t.Fatalf("err %v (%+v), want budget_exceeded that never fits", err, e)
		}
		if p.Calls() != 0 {
			t.Fatal("the provider was called")
		}
		// Under a cap of MaxMoney the saturated estimate fits exactly: the call reserves
		// the whole cap, and is reconciled to its real cost.
		c = newClient(t, pricedUp("a", p, priced(t, "m", pricing.Dollar, pricing.Dollar, 0)),
			llmclient.WithBudget(budget.Budget{Name: "max", Cap: pricing.MaxMoney}))
		resp, err := c.Complete(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		st, err := c.Budget(context.Background(), "max", "")
		if err != nil || st.Spent != resp.Cost.Amount || st.Reserved != 0 {
			t.Fatalf("budget %+v, %v; the call cost %v", st, err, resp.Cost)
		}
	})
	t.Run("window", func(t *testing.T) {
		p := fake.New(fake.Reply("hi").Forever())
		c := newClient(t, pricedUp("a", p, priced(t, "m", pricing.Dollar, pricing.Dollar, 128_000)))
		req := chatReq("m")
		req.MaxTokens = math.MaxInt
		_, err := c.Complete(context.Background(), req)
		if !errors.Is(err, llmclient.ErrContextWindow) || llmclient.ClassOf(err) != failure.ContextLength || p.Calls() != 0 {
			t.Fatalf("err %v, calls %d", err, p.Calls())
		}
	})
}

// TestContextTrimNil: a hook that returns nil, or a request still too long, leaves the
// pre-check to refuse it; the hook sees at least 0 prompt tokens when MaxTokens alone
// exceeds the window.
func TestContextTrimNil(t *testing.T) {
	m := priced(t, "m", pricing.Dollar, pricing.Dollar, 100)
	p := fake.New(fake.Reply("ok").Forever())
	seen := -1
	c := newClient(t, pricedUp("a", p, m), llmclient.WithContextTrim(func(_ context.Context, req *llmclient.Request, maxPrompt int) *llmclient.Request {
		seen = maxPrompt
		return nil
	}))
	req := chatReq("m")
	req.MaxTokens = 1000
	_, err := c.Complete(context.Background(), req)
	if !errors.Is(err, llmclient.ErrContextWindow) || seen != 0 || p.Calls() != 0 {
		t.Fatalf("err %v, hook saw %d, calls %d", err, seen, p.Calls())
	}
}

// TestCostFromAUserTable: WithPricing takes a table loaded from a file of the
// genai-prices shape, with tiers above a prompt size: the whole prompt selects the tier.
func TestCostFromAUserTable(t *testing.T) {
	dir := t.TempDir()
	path := dir + "/prices.json"
	const data = `[{"id":"acme","name":"Acme","api_pattern":"https://api\\.acme\\.test","models":[
{"id":"acme-large","match":{"starts_with":"acme-large"},"context_window":200000,
 "prices":{"input_mtok":{"base":2,"tiers":[{"start":100000,"price":4}]},"output_mtok":8}}]}]`
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	tb, err := pricing.LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		in   int
		want pricing.Money
	}{
		{100_000, 100_000*2*pricing.Microdollar + 1000*8*pricing.Microdollar},
		{100_001, 100_001*4*pricing.Microdollar + 1000*8*pricing.Microdollar}, // the tier above applies to every token
	} {
		p := fake.New(fake.Reply("hi").Usage(tc.in, 1000))
		c := newClient(t, llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: p, PriceProvider: "acme"}),
			llmclient.WithPricing(tb))
		resp, err := c.Complete(context.Background(), chatReq("acme-large-2"))
		if err != nil {
			t.Fatal(err)
		}
		if !resp.Cost.Known || resp.Cost.Amount != tc.want || resp.Cost.Model.ID() != "acme-large" {
			t.Errorf("%d prompt tokens: %+v, want %v", tc.in, resp.Cost, tc.want)
		}
	}
}
