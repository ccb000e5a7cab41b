package llmclient_test

import (
	"context"
	"errors"
	"testing"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/budget"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/pricing"
	"github.com/llmclient/llmclient/provider/fake"
)

// TestBudgetStatusWhileRefusing: Client.Budget reports the soft fraction reached, and
// Hard with Fraction 1 while the budget refuses calls at its cap — as the events do.
func TestBudgetStatusWhileRefusing(t *testing.T) {
	m := priced(t, "m", 0, pricing.Dollar, 0)
	req := chatReq("m")
	req.MaxTokens = 1000 // $0.001 a call
	p := fake.New(fake.Reply("ok").Usage(5, 1000).Times(2), fake.Reply("ok").Usage(5, 100).Forever())
	c := newClient(t, pricedUp("a", p, m), llmclient.WithBudget(budget.Budget{Name: "day", Cap: 2500 * pricing.Dollar / 1_000_000,
		Soft: []float64{0.3, 0.6}}))
	status := func() budget.Status {
		t.Helper()
		st, err := c.Budget(context.Background(), "day", "")
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	if st := status(); st.Hard || st.Fraction != 0 {
		t.Fatalf("before any call: %+v", st)
	}
	for range 2 {
		if _, err := c.Complete(context.Background(), req); err != nil {
			t.Fatal(err)
		}
	}
	if st := status(); st.Hard || st.Fraction != 0.6 || st.Spent != pricing.Dollar/500 {
		t.Fatalf("at $0.002 of $0.0025: %+v, want Fraction 0.6, not Hard", st)
	}
	for range 3 {
		if _, err := c.Complete(context.Background(), req); !errors.Is(err, budget.ErrExceeded) {
			t.Fatalf("over the cap: %v", err)
		}
		if st := status(); !st.Hard || st.Fraction != 1 {
			t.Fatalf("while calls are refused at the cap: %+v, want Hard and Fraction 1", st)
		}
	}
	// A smaller call still fits: the budget admits again, and is no longer refusing.
	small := chatReq("m")
	small.MaxTokens = 100
	if _, err := c.Complete(context.Background(), small); err != nil {
		t.Fatal(err)
	}
	if st := status(); st.Hard || st.Fraction != 0.6 {
		t.Fatalf("after an admitted call: %+v", st)
	}
}

// TestUnpricedModelHasItsOwnClass: a budget that cannot price a model refuses it with
// failure.Unpriced, not failure.BudgetExceeded, so that an alert on spent money does not fire
// for a newly deployed model; the call still fails over to an upstream that prices it.
func TestUnpricedModelHasItsOwnClass(t *testing.T) {
	p := fake.New(fake.Reply("ok").Usage(10, 10).Forever())
	c := newClient(t, up("a", p), llmclient.WithBudget(budget.Budget{Name: "b", Cap: pricing.Dollar}))
	_, err := c.Complete(context.Background(), chatReq("no-such-model-anywhere"))
	var e *llmclient.Error
	if !errors.As(err, &e) || e.Class != failure.Unpriced || !errors.Is(err, budget.ErrNoPrice) ||
		llmclient.ClassOf(err) != failure.Unpriced || e.Class.String() != "unpriced" {
		t.Fatalf("err %v, want class unpriced wrapping budget.ErrNoPrice", err)
	}
	if p.Calls() != 0 {
		t.Fatalf("%d calls reached the provider", p.Calls())
	}
	if d := llmclient.DefaultDecision(failure.Unpriced); !d.Failover || d.Retry {
		t.Fatalf("DefaultDecision(unpriced) = %+v, want failover only", d)
	}

	q := fake.New(fake.Reply("ok").Usage(10, 10).Forever())
	c = newClient(t, up("a", p), pricedUp("b", q, priced(t, "x", pricing.Dollar, pricing.Dollar, 0)),
		llmclient.WithBudget(budget.Budget{Name: "b", Cap: pricing.Dollar}))
	resp, err := c.Complete(context.Background(), chatReq("no-such-model-anywhere"))
	if err != nil || resp.Upstream != "b" || resp.Attempts[0].Class != failure.Unpriced {
		t.Fatalf("%v, %+v: want the call served by b after a refusal of class unpriced on a", err, resp)
	}
}
