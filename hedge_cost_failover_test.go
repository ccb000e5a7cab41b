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
	"github.com/llmclient/llmclient/routing"
)

// WithCostFailover applies to hedges too: with hedging on the same group, the hedge stays
// off an upstream priced beyond the ratio, and the call is served (every call used to
// panic: the hedged pair's estimates were read before its first upstream was known).
func TestHedgingWithCostFailover(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cheap := priced(t, "m", pricing.Dollar, pricing.Dollar, 0)
		dear := priced(t, "m", 100*pricing.Dollar, 100*pricing.Dollar, 0)
		a := fake.New(fake.Reply("a").Latency(5 * time.Second).Forever())
		b := fake.New(fake.Reply("b").Forever())
		c := newClient(t, pricedUp("cheap", a, cheap), pricedUp("dear", b, dear),
			llmclient.WithModelGroup("g", "cheap", "dear"),
			llmclient.WithHedging("g", routing.Hedge{On: true, Delay: time.Second}),
			llmclient.WithCostFailover("g", budget.Failover{MaxRatio: 2}))
		var resp *llmclient.Response
		var err error
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Fatalf("Complete panicked: %v", p)
				}
			}()
			resp, err = c.Complete(context.Background(), chatReq("g"))
		}()
		if err != nil {
			t.Fatal(err)
		}
		if b.Calls() != 0 || resp.Upstream != "cheap" {
			t.Fatalf("hedged to a 100x upstream: %s, dear calls %d, trace %+v", resp.Upstream, b.Calls(), resp.Attempts)
		}
	})
}

// The same through Embed, whose batches run the same hedged loop.
func TestEmbedHedgingWithCostFailover(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := priced(t, "m", pricing.Dollar, 0, 0)
		a := fake.New(fake.Embedding(8).Latency(5 * time.Second).Forever())
		b := fake.New(fake.Embedding(8).Forever())
		c := newClient(t, pricedUp("a", a, m), pricedUp("b", b, m), hedging(time.Second),
			llmclient.WithCostFailover("", budget.Failover{MaxRatio: 2}))
		defer func() {
			if p := recover(); p != nil {
				t.Fatalf("Embed panicked: %v", p)
			}
		}()
		if _, err := c.Embed(context.Background(), &llmclient.EmbedRequest{Model: "m", Input: []string{"x"}}); err != nil {
			t.Fatal(err)
		}
	})
}
