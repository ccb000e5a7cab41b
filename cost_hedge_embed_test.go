package llmclient_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/budget"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/pricing"
	"github.com/llmclient/llmclient/provider/fake"
)

// TestCostHedgeLoserBills: the attempt that lost a hedged call's race was sent, so the
// vendor may have generated its answer and bills it. Its cost is on its Attempt (an
// estimate: the prompt and the largest output the request allowed, as for a timeout),
// in the call's cost, and counted by the budget.
func TestCostHedgeLoserBills(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := priced(t, "m", pricing.Dollar, 4*pricing.Dollar, 0)
		slow := fake.New(fake.Reply("late").Usage(40, 250).Latency(10 * time.Second).Forever())
		quick := fake.New(fake.Reply("ok").Usage(30, 20).Latency(time.Second).Forever())
		c := newClient(t, pricedUp("slow", slow, m), pricedUp("quick", quick, m), hedging(2*time.Second),
			llmclient.WithBudget(budget.Budget{Name: "day", Cap: pricing.Dollar}))
		req := budgetReq()
		resp, err := c.Complete(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.Upstream != "quick" || len(resp.Attempts) != 2 {
			t.Fatalf("answered by %s, trace %+v", resp.Upstream, resp.Attempts)
		}
		lost, won := resp.Attempts[0], resp.Attempts[1]
		if lost.Class != failure.Canceled || lost.Local || !won.Hedge {
			t.Fatalf("trace: %+v", resp.Attempts)
		}
		wantLost := costOf(t, m, pricing.Tokens{Input: llmclient.EstimatePromptTokens(nil, req), Output: req.MaxTokens}, time.Now())
		if !lost.Cost.Known || !lost.Cost.Estimated || lost.Cost.Amount != wantLost {
			t.Fatalf("the loser's cost %+v, want ~%v", lost.Cost, wantLost)
		}
		wantWon := costOf(t, m, pricing.Tokens{Input: 30, Output: 20}, time.Now())
		if !won.Cost.Known || won.Cost.Estimated || won.Cost.Amount != wantWon {
			t.Fatalf("the winner's cost %+v, want %v", won.Cost, wantWon)
		}
		if resp.Cost.Amount != wantLost+wantWon || !resp.Cost.Estimated {
			t.Fatalf("the call's cost %+v, want ~%v", resp.Cost, wantLost+wantWon)
		}
		st, err := c.Budget(context.Background(), "day", "")
		if err != nil || st.Spent != wantLost+wantWon || st.Reserved != 0 {
			t.Fatalf("budget %+v, %v: want %v spent, nothing reserved", st, err, wantLost+wantWon)
		}
	})
}

// TestCostHedgeLoserStreamBills: a streaming loser stops generating when its connection
// closes: it bills its prompt.
func TestCostHedgeLoserStreamBills(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := priced(t, "m", pricing.Dollar, 4*pricing.Dollar, 0)
		stall := fake.New(fake.Stream("late").StallFirst(time.Hour).Forever())
		quick := fake.New(fake.Stream("o", "k").Usage(30, 2).StallFirst(100 * time.Millisecond).Forever())
		c := newClient(t, pricedUp("stall", stall, m), pricedUp("quick", quick, m), hedging(time.Second))
		req := budgetReq()
		s, err := c.Stream(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		for s.Next() {
		}
		if err := s.Err(); err != nil {
			t.Fatal(err)
		}
		s.Close()
		resp := s.Response()
		lost := resp.Attempts[0]
		want := costOf(t, m, pricing.Tokens{Input: llmclient.EstimatePromptTokens(nil, req)}, time.Now())
		if lost.Class != failure.Canceled || !lost.Cost.Known || !lost.Cost.Estimated || lost.Cost.Amount != want {
			t.Fatalf("the stalled loser: %v %+v, want ~%v", lost.Class, lost.Cost, want)
		}
		if won := costOf(t, m, pricing.Tokens{Input: 30, Output: 2}, time.Now()); resp.Cost.Amount != want+won {
			t.Fatalf("the call's cost %+v, want ~%v", resp.Cost, want+won)
		}
	})
}

// TestCostEmbed: an embedding call costs its input tokens at the model's input price,
// from the shipped table: summed over its batches, estimated when the vendor reports no
// usage; its inputs together may exceed the model's context window (it bounds each
// input). A budget counts it.
func TestCostEmbed(t *testing.T) {
	in := make([]string, 10)
	for i := range in {
		in[i] = "an input of a few words"
	}
	m, ok := pricing.Default().Lookup("openai", "text-embedding-3-small")
	if !ok || m.ContextWindow() == 0 {
		t.Fatal("text-embedding-3-small is not in the snapshot with a window")
	}
	t.Run("reported usage", func(t *testing.T) {
		p := fake.New(fake.Embedding(4).Usage(3000).Forever())
		p.SetMaxEmbedBatch(3)
		c := newClient(t, openaiUp(p), llmclient.WithPricing(nil),
			llmclient.WithBudget(budget.Budget{Name: "day", Cap: pricing.Dollar}))
		req := &llmclient.EmbedRequest{Model: "text-embedding-3-small", Input: in}
		resp, err := c.Embed(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Attempts) != 4 {
			t.Fatalf("%d attempts, want 4 batches", len(resp.Attempts))
		}
		per := costOf(t, m, pricing.Tokens{Input: 3000}, time.Now()) // 3000 × $0.02/MTok = $0.00006
		if per != 60*pricing.Microdollar {
			t.Fatalf("the snapshot's price changed: %v", per)
		}
		for _, at := range resp.Attempts {
			if !at.Cost.Known || at.Cost.Estimated || at.Cost.Amount != per {
				t.Fatalf("batch %d costs %+v, want %v", at.Batch, at.Cost, per)
			}
		}
		if !resp.Cost.Known || resp.Cost.Amount != 4*per {
			t.Fatalf("Cost %+v, want %v", resp.Cost, 4*per)
		}
		st, _ := c.Budget(context.Background(), "day", "")
		if st.Spent != 4*per || st.Reserved != 0 {
			t.Fatalf("budget %+v", st)
		}
	})
	t.Run("estimated", func(t *testing.T) {
		p := fake.New(fake.Embedding(4).Usage(0).Forever())
		c := newClient(t, openaiUp(p), llmclient.WithPricing(nil))
		resp, err := c.Embed(context.Background(), &llmclient.EmbedRequest{Model: "text-embedding-3-small", Input: in})
		if err != nil {
			t.Fatal(err)
		}
		want := costOf(t, m, pricing.Tokens{Input: resp.Usage.InputTokens}, time.Now())
		if !resp.Usage.Estimated || !resp.Cost.Known || !resp.Cost.Estimated || resp.Cost.Amount != want || want <= 0 {
			t.Fatalf("Cost %+v for estimated usage %+v, want ~%v", resp.Cost, resp.Usage, want)
		}
	})
	t.Run("failed", func(t *testing.T) {
		p := fake.New(fake.Fail(400))
		c := newClient(t, openaiUp(p), llmclient.WithPricing(nil))
		_, err := c.Embed(context.Background(), &llmclient.EmbedRequest{Model: "text-embedding-3-small", Input: in})
		var e *llmclient.Error
		if !errors.As(err, &e) || !e.Cost.Known || e.Cost.Amount != 0 {
			t.Fatalf("err %v, cost %+v: an error response bills nothing", err, e)
		}
	})
}

// openaiUp is an upstream priced under OpenAI's prices: the fake has no base URL to find
// them by, and embedding model names do not name their vendor.
func openaiUp(p llmclient.Provider) llmclient.Option {
	return llmclient.WithUpstream(llmclient.Upstream{Name: "openai", Provider: p, PriceProvider: "openai"})
}
