package llmclient_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/budget"
	"github.com/llmclient/llmclient/event"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/finish"
	"github.com/llmclient/llmclient/limitstore"
	"github.com/llmclient/llmclient/pricing"
	"github.com/llmclient/llmclient/provider/fake"
)

// TestAuditCostLocalRefusalIsAKnownZero: docs/cost.md says a local refusal is "a known $0",
// and a budget's refusal is failure.BudgetExceeded wrapping budget.ErrExceeded with
// Error.AdmitAfter saying when the window leaves room. With a rolling hour whose whole cap
// the first call spent, the second call is refused before any call, costs a known $0 on
// the error and on its one local attempt, and is admitted again after AdmitAfter.
func TestAuditCostLocalRefusalIsAKnownZero(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := priced(t, "m", pricing.Dollar, 4*pricing.Dollar, 0)
		p := fake.New(exactUsage().Forever())
		perCall := costOf(t, m, pricing.Tokens{Input: llmclient.EstimatePromptTokens(nil, budgetReq()), Output: 250}, time.Now())
		c := newClient(t, pricedUp("a", p, m),
			llmclient.WithBudget(budget.Budget{Name: "hour", Window: budget.Rolling(time.Hour), Cap: perCall}))
		resp, err := c.Complete(context.Background(), budgetReq())
		if err != nil || !resp.Cost.Known || resp.Cost.Amount != perCall {
			t.Fatalf("first call: %+v, %v; want a known %v", resp, err, perCall)
		}
		_, err = c.Complete(context.Background(), budgetReq())
		var e *llmclient.Error
		if !errors.As(err, &e) || e.Class != failure.BudgetExceeded || !errors.Is(err, budget.ErrExceeded) {
			t.Fatalf("second call: %v, want budget_exceeded wrapping budget.ErrExceeded", err)
		}
		if !e.Cost.Known || e.Cost.Estimated || e.Cost.Amount != 0 {
			t.Errorf("the refusal's cost %+v, want a known $0", e.Cost)
		}
		if len(e.Attempts) != 1 || !e.Attempts[0].Local || !e.Attempts[0].Cost.Known || e.Attempts[0].Cost.Amount != 0 {
			t.Errorf("the refusal's attempts %+v, want one local attempt at a known $0", e.Attempts)
		}
		if e.AdmitAfter <= 0 || e.AdmitAfter > time.Hour {
			t.Fatalf("AdmitAfter %v, want within the rolling hour", e.AdmitAfter)
		}
		if p.Calls() != 1 {
			t.Errorf("%d upstream calls, want 1", p.Calls())
		}
		time.Sleep(e.AdmitAfter)
		if _, err := c.Complete(context.Background(), budgetReq()); err != nil {
			t.Errorf("after AdmitAfter (%v): %v, want the call admitted", e.AdmitAfter, err)
		}
	})
}

// TestAuditCostUnpricedWithoutABudgetIsUnknown: "no price means Cost{} (unknown), never a
// silent $0" — with no budget, a model no table prices is served, and its response, its
// attempt and its call event carry an unknown cost.
func TestAuditCostUnpricedWithoutABudgetIsUnknown(t *testing.T) {
	p := fake.New(fake.Reply("ok").Usage(10, 10).Forever())
	var log eventLog
	c := newClient(t, up("a", p), llmclient.WithPricing(nil), llmclient.WithObserver(log.observe))
	resp, err := c.Complete(context.Background(), chatReq("no-such-model-anywhere"))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Cost != (pricing.Cost{}) || len(resp.Attempts) != 1 || resp.Attempts[0].Cost != (pricing.Cost{}) {
		t.Errorf("cost %+v, attempts %+v; want Cost{} everywhere", resp.Cost, resp.Attempts)
	}
	if s := resp.Cost.String(); s != "unknown" {
		t.Errorf("Cost.String() = %q, want \"unknown\"", s)
	}
	calls := log.kinds(event.Call)
	if len(calls) != 1 || calls[0].Cost != (pricing.Cost{}) {
		t.Errorf("call events %+v, want one with Cost{}", calls)
	}
}

// TestAuditCostReservationUsesReservedOutputWithoutMaxTokens: each attempt "reserves its
// estimate — the prompt plus MaxTokens (else WithReservedOutput) at that upstream's price —
// before any call", and one that does not fit is refused before any call. A request with
// no MaxTokens under WithReservedOutput(1000) fits a cap of exactly the prompt plus 1,000
// output tokens and is refused under a cap one output token smaller; a request with
// MaxTokens reserves that instead, however large WithReservedOutput is.
func TestAuditCostReservationUsesReservedOutputWithoutMaxTokens(t *testing.T) {
	m := priced(t, "m", pricing.Dollar, 4*pricing.Dollar, 0)
	noMax := chatReq("m")
	prompt := llmclient.EstimatePromptTokens(nil, noMax)
	call := func(limit pricing.Money, req *llmclient.Request) (int, error) {
		p := fake.New(fake.Reply("ok").Usage(prompt, 10).Forever())
		c := newClient(t, pricedUp("a", p, m), llmclient.WithReservedOutput(1000),
			llmclient.WithBudget(budget.Budget{Name: "cap", Cap: limit}))
		_, err := c.Complete(context.Background(), req)
		return p.Calls(), err
	}
	fits := costOf(t, m, pricing.Tokens{Input: prompt, Output: 1000}, time.Now())
	if n, err := call(fits, noMax); err != nil || n != 1 {
		t.Errorf("cap = prompt + 1,000 output: %v, %d calls; want the call admitted", err, n)
	}
	short := costOf(t, m, pricing.Tokens{Input: prompt, Output: 999}, time.Now())
	if n, err := call(short, noMax); !errors.Is(err, budget.ErrExceeded) || n != 0 {
		t.Errorf("cap = prompt + 999 output: %v, %d calls; want budget.ErrExceeded before any call", err, n)
	}
	withMax := budgetReq() // MaxTokens 250
	capped := costOf(t, m, pricing.Tokens{Input: llmclient.EstimatePromptTokens(nil, withMax), Output: 250}, time.Now())
	if n, err := call(capped, withMax); err != nil || n != 1 {
		t.Errorf("MaxTokens 250 under WithReservedOutput(1000), cap = prompt + 250: %v, %d calls; want admitted", err, n)
	}
}

// TestAuditCostFailoverRatioBindsOnlyFailover: a refused cost-aware failover is
// "unavailable wrapping budget.ErrCostlyFailover"; "context and content fallbacks and a
// budget's Reroute are not bound by it". With a group of mini and a flagship 30× its
// price under MaxRatio 3: a server error on mini is not failed over to the flagship, but a
// prompt beyond mini's window goes to the flagship as context fallback, a filtered answer
// as content fallback, and a call refused at a budget's cap by its Reroute.
func TestAuditCostFailoverRatioBindsOnlyFailover(t *testing.T) {
	long := &llmclient.Request{Model: "chat", Messages: []llmclient.Message{llmclient.UserMessage(strings.Repeat("lorem ipsum ", 400))}}
	prompt := llmclient.EstimatePromptTokens(nil, long)
	for _, tc := range []struct {
		name  string
		first fake.Step
		req   *llmclient.Request
		opts  []llmclient.Option
		want  string // the upstream that answers, "" for a refused failover
	}{
		{"failover", fake.Fail(500).Forever(), chatReq("chat"), nil, ""},
		{"context fallback", fake.Reply("ok").Usage(10, 10).Forever(), long, []llmclient.Option{llmclient.WithContextFallback("flagship")}, "flagship"},
		{"content fallback", fake.Reply("").Finish(finish.ContentFilter).Usage(10, 10).Forever(), chatReq("chat"),
			[]llmclient.Option{llmclient.WithContentFallback("flagship")}, "flagship"},
		{"reroute", fake.Reply("ok").Usage(10, 10).Forever(), chatReq("chat"), []llmclient.Option{llmclient.WithModelGroup("premium", "flagship"),
			llmclient.WithBudget(budget.Budget{Name: "cheap", Scope: budget.Upstream("mini"), Cap: 1, Reroute: "premium"})}, "flagship"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				mini := priced(t, "mini", pricing.Dollar/10, pricing.Dollar/10*4, prompt/2)
				flagship := priced(t, "flagship", 3*pricing.Dollar, 12*pricing.Dollar, 0)
				first := fake.New(tc.first)
				second := fake.New(fake.Reply("big").Usage(10, 10).Forever())
				opts := append([]llmclient.Option{
					llmclient.WithUpstream(llmclient.Upstream{Name: "mini", Provider: first, Prices: map[string]*pricing.Model{"": mini}}),
					llmclient.WithUpstream(llmclient.Upstream{Name: "flagship", Provider: second, Prices: map[string]*pricing.Model{"": flagship}}),
					llmclient.WithModelGroup("chat", "mini", "flagship"), llmclient.WithMaxAttempts(1),
					llmclient.WithCostFailover("chat", budget.Failover{MaxRatio: 3})}, tc.opts...)
				c := newClient(t, opts...)
				resp, err := c.Complete(context.Background(), tc.req)
				if tc.want == "" {
					var e *llmclient.Error
					if !errors.As(err, &e) || e.Class != failure.Unavailable || !errors.Is(err, budget.ErrCostlyFailover) || second.Calls() != 0 {
						t.Fatalf("err %v, %d flagship calls; want a refused failover (unavailable, ErrCostlyFailover), none", err, second.Calls())
					}
					return
				}
				if err != nil || resp.Upstream != tc.want || second.Calls() != 1 {
					t.Fatalf("%+v, %v, %d flagship calls; want an answer from %s", resp, err, second.Calls(), tc.want)
				}
			})
		})
	}
}

// TestAuditCostFirstRefusalReportedOnceAcrossClients: event.Budget reports "the first
// refusal of a window, once across every Client sharing the budget". Two Clients sharing
// one limit store and one budget, each refused several times at its cap, report one hard
// event between them, and both read the budget as Hard with Fraction 1.
func TestAuditCostFirstRefusalReportedOnceAcrossClients(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := limitstore.NewMemory()
		m := priced(t, "m", pricing.Dollar, 4*pricing.Dollar, 0)
		perCall := costOf(t, m, pricing.Tokens{Input: llmclient.EstimatePromptTokens(nil, budgetReq()), Output: 250}, time.Now())
		var log eventLog
		replica := func() (*llmclient.Client, *fake.Provider) {
			p := fake.New(exactUsage().Forever())
			return newClient(t, pricedUp("a", p, m), llmclient.WithLimitStore(store), llmclient.WithObserver(log.observe),
				llmclient.WithBudget(budget.Budget{Name: "shared", Cap: 2 * perCall})), p
		}
		a, pa := replica()
		b, pb := replica()
		for _, c := range []*llmclient.Client{a, b} {
			if _, err := c.Complete(context.Background(), budgetReq()); err != nil {
				t.Fatal(err)
			}
		}
		for range 3 {
			for _, c := range []*llmclient.Client{a, b} {
				if _, err := c.Complete(context.Background(), budgetReq()); !errors.Is(err, budget.ErrExceeded) {
					t.Fatalf("past the shared cap: %v, want budget.ErrExceeded", err)
				}
			}
		}
		if n := pa.Calls() + pb.Calls(); n != 2 {
			t.Errorf("%d upstream calls, want the 2 the shared cap allows", n)
		}
		if _, hard := budgetEvents(&log); len(hard) != 1 {
			t.Errorf("%d hard budget events across both Clients, want 1", len(hard))
		}
		for _, c := range []*llmclient.Client{a, b} {
			if st, err := c.Budget(context.Background(), "shared", ""); err != nil || !st.Hard || st.Fraction != 1 {
				t.Errorf("status %+v, %v; want Hard and Fraction 1", st, err)
			}
		}
	})
}

// TestAuditCostBudgetStatusWhileRerouting: a budget whose Reroute moves calls past its cap
// is read as at its cap: c.Budget says Hard, Fraction 1, while its calls are rerouted.
func TestAuditCostBudgetStatusWhileRerouting(t *testing.T) {
	flagship := priced(t, "big", 10*pricing.Dollar, 40*pricing.Dollar, 0)
	economy := priced(t, "small", pricing.Dollar/10, pricing.Dollar/10*4, 0)
	big, small := fake.New(exactUsage().Forever()), fake.New(exactUsage().Forever())
	perBig := costOf(t, flagship, pricing.Tokens{Input: llmclient.EstimatePromptTokens(nil, budgetReq()), Output: 250}, time.Now())
	c := newClient(t, pricedUp("big", big, flagship), pricedUp("small", small, economy),
		llmclient.WithModelGroup("m", "big"), llmclient.WithModelGroup("economy", "small"),
		llmclient.WithBudget(budget.Budget{Name: "flagship", Scope: budget.Upstream("big"), Cap: perBig, Reroute: "economy"}))
	for i := range 3 {
		resp, err := c.Complete(context.Background(), budgetReq())
		if err != nil {
			t.Fatal(err)
		}
		if want := map[bool]string{true: "big", false: "small"}[i == 0]; resp.Upstream != want {
			t.Fatalf("call %d on %s, want %s", i, resp.Upstream, want)
		}
		st, err := c.Budget(context.Background(), "flagship", "")
		if err != nil {
			t.Fatal(err)
		}
		if i > 0 && (!st.Hard || st.Fraction != 1) {
			t.Errorf("after rerouted call %d: %+v, want Hard and Fraction 1", i, st)
		}
	}
}

// TestAuditCostStreamCutWithoutUsageIsEstimated: "a stream cut mid-way costs what it
// reported or the Client's estimate of it". A stream cut after two chunks that reported
// no usage ends with an error whose cost, and its attempt's, is a known estimate: the
// prompt plus some output, less than the prompt plus MaxTokens that a timeout bills.
func TestAuditCostStreamCutWithoutUsageIsEstimated(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := priced(t, "m", pricing.Dollar, 4*pricing.Dollar, 0)
		p := fake.New(fake.Stream("one ", "two ", "three").CutAfter(2))
		c := newClient(t, pricedUp("a", p, m), llmclient.WithMaxAttempts(1))
		req := chatReq("m")
		req.MaxTokens = 1000
		s, err := c.Stream(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		text, err := readAll(s)
		var e *llmclient.Error
		if text != "one two " || !errors.As(err, &e) {
			t.Fatalf("text %q, err %v; want the partial answer and an *Error", text, err)
		}
		prompt := llmclient.EstimatePromptTokens(nil, req)
		floor := costOf(t, m, pricing.Tokens{Input: prompt}, time.Now())
		ceiling := costOf(t, m, pricing.Tokens{Input: prompt, Output: 1000}, time.Now())
		if !e.Cost.Known || !e.Cost.Estimated || e.Cost.Amount <= floor || e.Cost.Amount >= ceiling {
			t.Errorf("cost %+v, want a known estimate above the prompt's %v and below the prompt plus MaxTokens, %v", e.Cost, floor, ceiling)
		}
		if len(e.Attempts) != 1 || e.Attempts[0].Cost != e.Cost {
			t.Errorf("attempts %+v, want one carrying the call's cost %+v", e.Attempts, e.Cost)
		}
	})
}

// TestAuditCostCanceledAfterSendBillsTheMaximum: "a timeout or cancellation after the
// request was sent … costs the prompt plus the largest output allowed, marked estimated".
// A caller that cancels 1s into a call its upstream answers after a minute gets an error
// whose cost, and its attempt's, is the estimate of the prompt plus MaxTokens.
func TestAuditCostCanceledAfterSendBillsTheMaximum(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := priced(t, "m", pricing.Dollar, 4*pricing.Dollar, 0)
		p := fake.New(fake.Reply("late").Usage(10, 10).Latency(time.Minute))
		c := newClient(t, pricedUp("a", p, m))
		req := budgetReq() // MaxTokens 250
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(time.Second, cancel)
		_, err := c.Complete(ctx, req)
		var e *llmclient.Error
		if !errors.As(err, &e) || !errors.Is(err, context.Canceled) {
			t.Fatalf("err %v, want the caller's cancellation", err)
		}
		want := costOf(t, m, pricing.Tokens{Input: llmclient.EstimatePromptTokens(nil, req), Output: 250}, time.Now())
		if !e.Cost.Known || !e.Cost.Estimated || e.Cost.Amount != want {
			t.Errorf("cost %+v, want a known estimate of %v", e.Cost, want)
		}
		if len(e.Attempts) != 1 || e.Attempts[0].Cost != e.Cost {
			t.Errorf("attempts %+v, want one carrying the call's cost", e.Attempts)
		}
		synctest.Wait()
	})
}
