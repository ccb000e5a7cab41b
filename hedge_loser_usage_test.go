package llmclient_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/budget"
	"github.com/llmclient/llmclient/pricing"
	"github.com/llmclient/llmclient/provider/fake"
)

// uncancelable is an adapter whose answer, once under way, is not stopped by the
// cancellation of its context: what a real HTTP answer already read looks like when a
// hedged call's winner cancels it a moment too late.
type uncancelable struct{ *fake.Provider }

func (u uncancelable) Complete(ctx context.Context, call *llmclient.Call) (*llmclient.Response, error) {
	return u.Provider.Complete(context.WithoutCancel(ctx), call)
}

// The losing attempt of a hedged call that still answers (its answer was under way when
// the winner canceled it) is settled under the one usage rule (usageReported) like a
// winner: a count above 2^30 tokens is no report, and the estimate stands for it. Here
// the loser reports 2^40 output tokens: it must neither spend the budget's cap nor make
// the next call on its upstream wait.
func TestHedgeLoserImplausibleUsageIsNotBilled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		huge := llmclient.Usage{InputTokens: 10, OutputTokens: 1 << 40, TotalTokens: 1<<40 + 10}
		m := priced(t, "m", pricing.Dollar, 4*pricing.Dollar, 0)
		slow := uncancelable{fake.New(fake.Reply("late").ReportUsage(huge).Latency(5 * time.Second).Forever())}
		quick := fake.New(fake.Reply("ok").Usage(30, 20).Latency(time.Second).Forever())
		c := newClient(t,
			llmclient.WithUpstream(llmclient.Upstream{Name: "slow", Provider: slow,
				Prices: map[string]*pricing.Model{"": m}, Limits: llmclient.Limits{TPM: 1_000_000}}),
			pricedUp("quick", quick, m), hedging(time.Second),
			llmclient.WithBudget(budget.Budget{Name: "day", Cap: 100 * pricing.Dollar}))
		resp, err := c.Complete(context.Background(), budgetReq())
		if err != nil {
			t.Fatal(err)
		}
		st, _ := c.Budget(context.Background(), "day", "")
		t.Logf("loser: usage %+v cost %v; budget spent %v of cap %v", resp.Attempts[0].Usage, resp.Attempts[0].Cost, st.Spent, st.Cap)
		if st.Spent > pricing.Dollar {
			t.Errorf("the budget was charged %v for one call: the loser's 2^40-token report was billed", st.Spent)
		}
		// The next call, pinned to the loser's upstream, should go at once.
		ctx, cancel := context.WithTimeout(llmclient.WithCallOptions(context.Background(),
			llmclient.CallOptions{Pin: []string{"slow"}, NoFailover: true}), time.Minute)
		defer cancel()
		slow.Reset()
		if _, err := c.Complete(ctx, budgetReq()); err != nil {
			t.Errorf("next call on the loser's upstream: %v", err)
		}
	})
}

// The same loser without pricing: the limiter's reconciliation follows the same rule, so
// the report does not lock the key's token bucket.
func TestHedgeLoserImplausibleUsageDoesNotLockTheKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		huge := llmclient.Usage{InputTokens: 10, OutputTokens: 1 << 40, TotalTokens: 1<<40 + 10}
		slow := uncancelable{fake.New(fake.Reply("late").ReportUsage(huge).Latency(5 * time.Second).Forever())}
		quick := fake.New(fake.Reply("ok").Usage(30, 20).Latency(time.Second).Forever())
		c := newClient(t,
			llmclient.WithUpstream(llmclient.Upstream{Name: "slow", Provider: slow, Limits: llmclient.Limits{TPM: 1_000_000}}),
			up("quick", quick), hedging(time.Second))
		if _, err := c.Complete(context.Background(), budgetReq()); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(llmclient.WithCallOptions(context.Background(),
			llmclient.CallOptions{Pin: []string{"slow"}, NoFailover: true}), time.Minute)
		defer cancel()
		slow.Reset()
		var err error
		d := elapsed(func() { _, err = c.Complete(ctx, budgetReq()) })
		if err != nil || d > 10*time.Second {
			t.Errorf("next call on the loser's upstream: %v after %v", err, d)
		}
	})
}

// A loser that reports nothing (every count 0) is billed its estimate, not a known $0
// (docs/cost.md: one lying answer cannot cost a known $0).
func TestHedgeLoserEmptyUsageIsNotAKnownZero(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := priced(t, "m", pricing.Dollar, 4*pricing.Dollar, 0)
		slow := uncancelable{fake.New(fake.Reply("late").ReportUsage(llmclient.Usage{}).Latency(5 * time.Second).Forever())}
		quick := fake.New(fake.Reply("ok").Usage(30, 20).Latency(time.Second).Forever())
		c := newClient(t, pricedUp("slow", slow, m), pricedUp("quick", quick, m), hedging(time.Second))
		resp, err := c.Complete(context.Background(), budgetReq())
		if err != nil {
			t.Fatal(err)
		}
		lost := resp.Attempts[0]
		if lost.Cost.Known && !lost.Cost.Estimated && lost.Cost.Amount == 0 {
			t.Errorf("the loser, which was sent and answered, costs a known exact $0: %+v (usage %+v)", lost.Cost, lost.Usage)
		}
	})
}
