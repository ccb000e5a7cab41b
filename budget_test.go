package llmclient_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/budget"
	"github.com/llmclient/llmclient/event"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/limitstore"
	"github.com/llmclient/llmclient/pricing"
	"github.com/llmclient/llmclient/provider/fake"
)

// budgetReq is a request whose reservation is known: its prompt estimate and 250 output
// tokens at most.
func budgetReq() *llmclient.Request {
	r := chatReq("m")
	r.MaxTokens = 250
	return r
}

// exactUsage is a reply whose usage is what budgetReq reserves: its reservation is its
// cost, so a budget admits exactly cap / cost calls.
func exactUsage() *fake.ReplyStep {
	return fake.Reply("ok").Usage(llmclient.EstimatePromptTokens(nil, budgetReq()), 250)
}

func budgetEvents(l *eventLog) (soft, hard []llmclient.Event) {
	for _, e := range l.kinds(event.Budget) {
		if e.Budget.Hard {
			hard = append(hard, e)
		} else {
			soft = append(soft, e)
		}
	}
	return soft, hard
}

// TestBudgetRunawayLoop: a loop of 10,000 calls stops at the daily hard cap with one
// event.Budget for the cap and one for the soft threshold; after midnight the next day's
// budget admits calls again, and the soft event fires once in that window too. Virtual
// time: the loop takes hours of it.
func TestBudgetRunawayLoop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := priced(t, "m", pricing.Dollar, 4*pricing.Dollar, 0)
		p := fake.New(exactUsage().Latency(time.Second).Forever())
		var log eventLog
		c := newClient(t, pricedUp("a", p, m), llmclient.WithObserver(log.observe),
			llmclient.WithBudget(budget.Budget{Name: "daily", Cap: pricing.Dollar, Soft: []float64{0.8}}))
		perCall := costOf(t, m, pricing.Tokens{Input: llmclient.EstimatePromptTokens(nil, budgetReq()), Output: 250}, time.Now())
		wantCalls := int(pricing.Dollar / perCall)

		run := func(n int) (ok, refused int, last *llmclient.Error) {
			for range n {
				resp, err := c.Complete(context.Background(), budgetReq())
				if err == nil {
					if resp.Cost.Amount != perCall {
						t.Fatalf("a call cost %v, want %v", resp.Cost, perCall)
					}
					ok++
					continue
				}
				var e *llmclient.Error
				if !errors.As(err, &e) || e.Class != failure.BudgetExceeded || !errors.Is(err, budget.ErrExceeded) {
					t.Fatalf("call %d: %v, want budget_exceeded", ok+refused, err)
				}
				if e.Attempts[0].Cost != (pricing.Cost{Known: true}) || !e.Cost.Known || e.Cost.Amount != 0 {
					t.Fatalf("a refused call costs nothing: %+v / %+v", e.Attempts[0].Cost, e.Cost)
				}
				refused++
				last = e
			}
			return ok, refused, last
		}
		ok, refused, last := run(10_000)
		if ok != wantCalls || refused != 10_000-wantCalls || p.Calls() != wantCalls {
			t.Fatalf("%d calls went through, %d refused, %d reached the provider; want %d through", ok, refused, p.Calls(), wantCalls)
		}
		midnight := time.Date(2000, 1, 2, 0, 0, 0, 0, time.UTC)
		if last.AdmitAfter != midnight.Sub(time.Now()) || last.AdmitAfter <= 0 {
			t.Fatalf("AdmitAfter %v, want the time to midnight, %v", last.AdmitAfter, midnight.Sub(time.Now()))
		}
		st, err := c.Budget(context.Background(), "daily", "")
		if err != nil || st.Spent != pricing.Money(wantCalls)*perCall || st.Reserved != 0 || st.Spent > st.Cap {
			t.Fatalf("Budget = %+v, %v", st, err)
		}
		soft, hard := budgetEvents(&log)
		if len(soft) != 1 || len(hard) != 1 {
			t.Fatalf("%d soft and %d hard events, want one of each", len(soft), len(hard))
		}
		if s := soft[0].Budget; s.Fraction != 0.8 || s.Spent < pricing.Dollar*8/10 || s.Spent >= pricing.Dollar*8/10+perCall ||
			!s.End.Equal(midnight) {
			t.Fatalf("soft event: %+v", s)
		}
		if h := hard[0]; h.Class != failure.BudgetExceeded || h.Budget.Fraction != 1 || h.Upstream != "a" {
			t.Fatalf("hard event: %+v %+v", h, h.Budget)
		}

		time.Sleep(last.AdmitAfter) // the next day
		ok, refused, _ = run(wantCalls + 10)
		if ok != wantCalls || refused != 10 {
			t.Fatalf("the next day: %d through, %d refused, want %d and 10", ok, refused, wantCalls)
		}
		soft, hard = budgetEvents(&log)
		if len(soft) != 2 || len(hard) != 2 || !soft[1].Budget.Start.Equal(midnight) {
			t.Fatalf("after two days: %d soft and %d hard events, want two of each", len(soft), len(hard))
		}
	})
}

// TestBudgetScopes: budgets count what their scope names: a partition (named by
// metadata, each with its own cap), an upstream, a model.
func TestBudgetScopes(t *testing.T) {
	m := priced(t, "m", pricing.Dollar, 4*pricing.Dollar, 0)
	perCall := costOf(t, m, pricing.Tokens{Input: llmclient.EstimatePromptTokens(nil, budgetReq()), Output: 250}, time.Now())
	for _, tc := range []struct {
		name  string
		scope budget.Scope
		// calls go to upstream/model for partition; want tells whether each is admitted.
		calls []struct{ model, team string }
		want  []bool
	}{
		{"each partition", budget.EachPartition("team"),
			[]struct{ model, team string }{{"m", "a"}, {"m", "a"}, {"m", "b"}, {"m", ""}, {"m", ""}},
			[]bool{true, false, true, true, true}},
		{"one partition", budget.Partition("a"),
			[]struct{ model, team string }{{"m", "b"}, {"m", "b"}, {"m", "a"}, {"m", "a"}},
			[]bool{true, true, true, false}},
		{"upstream", budget.Upstream("one"),
			[]struct{ model, team string }{{"m", ""}, {"m", ""}, {"m2", ""}, {"m2", ""}},
			[]bool{true, false, true, true}},
		{"model", budget.Model("m2"),
			[]struct{ model, team string }{{"m", ""}, {"m", ""}, {"m2", ""}, {"m2", ""}},
			[]bool{true, true, true, false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := budget.Budget{Name: "b", Scope: tc.scope, Cap: perCall} // one call each
			if tc.scope.Kind == budget.ScopePartition && tc.scope.Name != "" {
				b.Scope.MetadataKey = "team"
			}
			one := fake.New(exactUsage().Forever())
			two := fake.New(exactUsage().Forever())
			c := newClient(t,
				llmclient.WithUpstream(llmclient.Upstream{Name: "one", Provider: one, Models: map[string]string{"m": "m"},
					Prices: map[string]*pricing.Model{"": m}}),
				llmclient.WithUpstream(llmclient.Upstream{Name: "two", Provider: two, Models: map[string]string{"m2": "m2"},
					Prices: map[string]*pricing.Model{"": m}}),
				llmclient.WithBudget(b))
			for i, call := range tc.calls {
				req := budgetReq()
				req.Model = call.model
				if call.team != "" {
					req.Metadata = map[string]string{"team": call.team}
				}
				_, err := c.Complete(context.Background(), req)
				if got := err == nil; got != tc.want[i] {
					t.Fatalf("call %d (%+v): err %v, want admitted %v", i, call, err, tc.want[i])
				}
				if err != nil && llmclient.ClassOf(err) != failure.BudgetExceeded {
					t.Fatalf("call %d: %v", i, err)
				}
			}
		})
	}
}

// TestBudgetReroute: at the cap, a budget with Reroute moves calls to the economy group
// instead of refusing them; the economy calls are counted but admitted past the cap.
func TestBudgetReroute(t *testing.T) {
	flagship := priced(t, "big", 10*pricing.Dollar, 40*pricing.Dollar, 0)
	economy := priced(t, "small", pricing.Dollar/10, pricing.Dollar/10*4, 0)
	big := fake.New(exactUsage().Forever())
	small := fake.New(exactUsage().Forever())
	perBig := costOf(t, flagship, pricing.Tokens{Input: llmclient.EstimatePromptTokens(nil, budgetReq()), Output: 250}, time.Now())
	var log eventLog
	c := newClient(t, pricedUp("big", big, flagship), pricedUp("small", small, economy),
		llmclient.WithModelGroup("m", "big"), llmclient.WithModelGroup("economy", "small"),
		llmclient.WithObserver(log.observe),
		llmclient.WithBudget(budget.Budget{Name: "flagship", Scope: budget.Client(), Cap: 2 * perBig, Reroute: "economy"}))
	var ups []string
	for range 5 {
		resp, err := c.Complete(context.Background(), budgetReq())
		if err != nil {
			t.Fatal(err)
		}
		ups = append(ups, resp.Upstream)
		if resp.Upstream == "small" && (!resp.Fallback || len(resp.Attempts) != 2 || resp.Attempts[0].Class != failure.BudgetExceeded) {
			t.Fatalf("a rerouted call: %+v", resp.Attempts)
		}
	}
	if fmt.Sprint(ups) != "[big big small small small]" {
		t.Fatalf("upstreams %v", ups)
	}
	st, _ := c.Budget(context.Background(), "flagship", "")
	if st.Spent <= 2*perBig {
		t.Fatalf("the rerouted calls are counted: spent %v", st.Spent)
	}
	_, hard := budgetEvents(&log)
	if len(hard) != 1 || hard[0].Budget.Reroute != "economy" {
		t.Fatalf("hard events %+v", hard)
	}
}

// TestBudgetRolling: a rolling window frees what its oldest slices spent as they leave.
func TestBudgetRolling(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := priced(t, "m", pricing.Dollar, 4*pricing.Dollar, 0)
		perCall := costOf(t, m, pricing.Tokens{Input: llmclient.EstimatePromptTokens(nil, budgetReq()), Output: 250}, time.Now())
		c := newClient(t, pricedUp("a", fake.New(exactUsage().Forever()), m),
			llmclient.WithBudget(budget.Budget{Name: "hour", Window: budget.Rolling(time.Hour), Cap: 3 * perCall}))
		call := func() error { _, err := c.Complete(context.Background(), budgetReq()); return err }
		for i := range 3 {
			if err := call(); err != nil {
				t.Fatalf("call %d: %v", i, err)
			}
			time.Sleep(10 * time.Minute)
		}
		err := call()
		var e *llmclient.Error
		if !errors.As(err, &e) || e.Class != failure.BudgetExceeded {
			t.Fatalf("a fourth call within the hour: %v", err)
		}
		// The first call's slice leaves the window an hour after it began.
		if e.AdmitAfter <= 0 || e.AdmitAfter > 31*time.Minute {
			t.Fatalf("AdmitAfter %v, want about half an hour", e.AdmitAfter)
		}
		time.Sleep(e.AdmitAfter)
		if err := call(); err != nil {
			t.Fatalf("after the first call left the window: %v", err)
		}
		if err := call(); err == nil {
			t.Fatal("only one call's worth left the window")
		}
	})
}

// TestBudgetUnpriced: a budget treats calls it cannot price as configured: refused by
// default, admitted uncounted, or charged a fixed amount.
func TestBudgetUnpriced(t *testing.T) {
	for _, tc := range []struct {
		name   string
		policy budget.Unpriced
		cost   pricing.Money
		want   []bool
	}{
		{"refuse", budget.UnpricedRefuse, 0, []bool{false, false}},
		{"allow", budget.UnpricedAllow, 0, []bool{true, true, true}},
		{"charge", budget.UnpricedCharge, pricing.Dollar, []bool{true, true, false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := fake.New(fake.Reply("ok").Usage(10, 10).Forever())
			c := newClient(t, up("a", p), llmclient.WithBudget(budget.Budget{
				Name: "b", Cap: 2 * pricing.Dollar, Unpriced: tc.policy, UnpricedCost: tc.cost}))
			for i, want := range tc.want {
				resp, err := c.Complete(context.Background(), chatReq("no-such-model-anywhere"))
				if (err == nil) != want {
					t.Fatalf("call %d: %v, want admitted %v", i, err, want)
				}
				if err != nil {
					wantErr := budget.ErrExceeded
					if tc.policy == budget.UnpricedRefuse {
						wantErr = budget.ErrNoPrice
					}
					wantClass := failure.BudgetExceeded
					if tc.policy == budget.UnpricedRefuse {
						wantClass = failure.Unpriced
					}
					if !errors.Is(err, wantErr) || llmclient.ClassOf(err) != wantClass {
						t.Fatalf("call %d: %v, want %v", i, err, wantErr)
					}
					continue
				}
				if resp.Cost.Known {
					t.Fatalf("an unpriced call's cost is unknown: %+v", resp.Cost)
				}
			}
			if tc.policy == budget.UnpricedRefuse && p.Calls() != 0 {
				t.Fatalf("%d calls reached the provider", p.Calls())
			}
		})
	}
}

// TestBudgetSharedMemoryStore: four Clients in one process sharing a memory store share
// a budget: together they overspend it by at most one in-flight reservation's overrun
// each, and use it up. Each call costs more than it reserved (a prompt twice its
// estimate), the worst case for the bound.
func TestBudgetSharedMemoryStore(t *testing.T) {
	store := limitstore.NewMemory()
	testSharedBudget(t, func(int) limitstore.Store { return store })
}

// testSharedBudget runs four Clients, each on its own goroutine with one call in flight,
// on the stores storeFor returns, against one budget; see TestBudgetSharedMemoryStore.
func testSharedBudget(t *testing.T, storeFor func(replica int) limitstore.Store) {
	m := priced(t, "m", pricing.Dollar, 4*pricing.Dollar, 0)
	prompt := llmclient.EstimatePromptTokens(nil, budgetReq())
	reserved := costOf(t, m, pricing.Tokens{Input: prompt, Output: 250}, time.Now())
	actual := costOf(t, m, pricing.Tokens{Input: 2 * prompt, Output: 250}, time.Now())
	overrun := actual - reserved
	const replicas, capCalls = 4, 200
	limit := pricing.Money(capCalls) * reserved
	b := budget.Budget{Name: "shared", Cap: limit, Soft: []float64{0.5}}

	var wg sync.WaitGroup
	var mu sync.Mutex
	var total pricing.Money
	var soft int
	clients := make([]*llmclient.Client, replicas)
	for i := range replicas {
		var obs = func(_ context.Context, e llmclient.Event) {
			if e.Kind == event.Budget && !e.Budget.Hard {
				mu.Lock()
				soft++
				mu.Unlock()
			}
		}
		clients[i] = newClient(t, pricedUp("a", fake.New(fake.Reply("ok").Usage(2*prompt, 250).Forever()), m),
			llmclient.WithLimitStore(storeFor(i)), llmclient.WithBudget(b), llmclient.WithObserver(obs))
	}
	for _, c := range clients {
		wg.Go(func() {
			for range 10 * capCalls { // a budget that never refuses fails, rather than hangs
				resp, err := c.Complete(context.Background(), budgetReq())
				if err != nil {
					if !errors.Is(err, budget.ErrExceeded) {
						t.Error(err)
					}
					return
				}
				mu.Lock()
				total += resp.Cost.Amount
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	st, err := clients[0].Budget(context.Background(), "shared", "")
	if err != nil {
		t.Fatal(err)
	}
	if st.Spent != total || st.Reserved != 0 {
		t.Fatalf("the store counted %v spent and %v reserved; the calls cost %v", st.Spent, st.Reserved, total)
	}
	if bound := limit + replicas*overrun; total > bound {
		t.Fatalf("spent %v, more than the cap %v plus one overrun (%v) per replica", total, limit, overrun)
	}
	if total < limit-actual {
		t.Fatalf("spent %v: the cap %v was not used up", total, limit)
	}
	if soft != 1 {
		t.Fatalf("%d soft events across the replicas, want 1", soft)
	}
}

// TestBudgetValidation tries every numeric input at 0, negative, NaN, huge and the
// largest value: each is a clear error from New or works as documented.
func TestBudgetValidation(t *testing.T) {
	p := fake.New()
	base := func(mod func(*budget.Budget)) llmclient.Option {
		b := budget.Budget{Name: "b", Cap: pricing.Dollar}
		mod(&b)
		return llmclient.WithBudget(b)
	}
	for _, tc := range []struct {
		name string
		opts []llmclient.Option
		want string // "" for no error
	}{
		{"fine", []llmclient.Option{base(func(*budget.Budget) {})}, ""},
		{"largest cap", []llmclient.Option{base(func(b *budget.Budget) { b.Cap = pricing.MaxMoney })}, ""},
		{"zero cap", []llmclient.Option{base(func(b *budget.Budget) { b.Cap = 0 })}, "Cap"},
		{"negative cap", []llmclient.Option{base(func(b *budget.Budget) { b.Cap = -1 })}, "Cap"},
		{"no name", []llmclient.Option{base(func(b *budget.Budget) { b.Name = "" })}, "Name"},
		{"soft zero", []llmclient.Option{base(func(b *budget.Budget) { b.Soft = []float64{0} })}, "soft"},
		{"soft negative", []llmclient.Option{base(func(b *budget.Budget) { b.Soft = []float64{-0.5} })}, "soft"},
		{"soft NaN", []llmclient.Option{base(func(b *budget.Budget) { b.Soft = []float64{nan()} })}, "soft"},
		{"soft one", []llmclient.Option{base(func(b *budget.Budget) { b.Soft = []float64{1} })}, "soft"},
		{"soft huge", []llmclient.Option{base(func(b *budget.Budget) { b.Soft = []float64{1e300} })}, "soft"},
		{"soft twice", []llmclient.Option{base(func(b *budget.Budget) { b.Soft = []float64{0.5, 0.5000000001} })}, "twice"},
		{"too many soft", []llmclient.Option{base(func(b *budget.Budget) { b.Soft = []float64{.1, .2, .3, .4, .5, .6, .7, .8, .9} })}, "soft thresholds"},
		{"rolling zero", []llmclient.Option{base(func(b *budget.Budget) { b.Window = budget.Rolling(0) })}, "rolling"},
		{"rolling negative", []llmclient.Option{base(func(b *budget.Budget) { b.Window = budget.Rolling(-time.Hour) })}, "rolling"},
		{"rolling huge", []llmclient.Option{base(func(b *budget.Budget) { b.Window = budget.Rolling(1<<63 - 1) })}, "rolling"},
		{"unpriced cost without charge", []llmclient.Option{base(func(b *budget.Budget) { b.UnpricedCost = 1 })}, "UnpricedCost"},
		{"charge without cost", []llmclient.Option{base(func(b *budget.Budget) { b.Unpriced = budget.UnpricedCharge })}, "UnpricedCost"},
		{"charge negative", []llmclient.Option{base(func(b *budget.Budget) {
			b.Unpriced, b.UnpricedCost = budget.UnpricedCharge, -1
		})}, "UnpricedCost"},
		{"unknown policy", []llmclient.Option{base(func(b *budget.Budget) { b.Unpriced = 9 })}, "Unpriced"},
		{"unknown reroute", []llmclient.Option{base(func(b *budget.Budget) { b.Reroute = "nope" })}, "reroutes"},
		{"unknown upstream", []llmclient.Option{base(func(b *budget.Budget) { b.Scope = budget.Upstream("nope") })}, "unknown upstream"},
		{"model without name", []llmclient.Option{base(func(b *budget.Budget) { b.Scope = budget.Model("") })}, "Name"},
		{"unknown scope", []llmclient.Option{base(func(b *budget.Budget) { b.Scope.Kind = 9 })}, "scope"},
		{"twice", []llmclient.Option{base(func(*budget.Budget) {}), base(func(*budget.Budget) {})}, "twice"},
		{"65 budgets", manyBudgets(65), "at most 64"},
		{"64 budgets", manyBudgets(64), ""},
		{"charge MaxMoney", []llmclient.Option{base(func(b *budget.Budget) {
			b.Unpriced, b.UnpricedCost = budget.UnpricedCharge, pricing.MaxMoney
		})}, ""},
		{"ratio zero", []llmclient.Option{llmclient.WithCostFailover("", budget.Failover{})}, "MaxRatio"},
		{"ratio negative", []llmclient.Option{llmclient.WithCostFailover("", budget.Failover{MaxRatio: -1})}, "MaxRatio"},
		{"ratio NaN", []llmclient.Option{llmclient.WithCostFailover("", budget.Failover{MaxRatio: nan()})}, "MaxRatio"},
		{"ratio infinite", []llmclient.Option{llmclient.WithCostFailover("", budget.Failover{MaxRatio: inf()})}, "MaxRatio"},
		{"ratio huge", []llmclient.Option{llmclient.WithCostFailover("", budget.Failover{MaxRatio: 1e300})}, "MaxRatio"},
		{"ratio tiny", []llmclient.Option{llmclient.WithCostFailover("", budget.Failover{MaxRatio: 1e-9})}, "MaxRatio"},
		{"ratio of a million", []llmclient.Option{llmclient.WithCostFailover("", budget.Failover{MaxRatio: 1e6})}, ""},
		{"failover unknown group", []llmclient.Option{llmclient.WithCostFailover("nope", budget.Failover{MaxRatio: 2})}, "unknown model group"},
		{"nil price", []llmclient.Option{llmclient.WithUpstream(llmclient.Upstream{Name: "z", Provider: p,
			Prices: map[string]*pricing.Model{"m": nil}})}, "nil"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := llmclient.New(append([]llmclient.Option{up("a", p)}, tc.opts...)...)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("New: %v", err)
			case tc.want != "" && (err == nil || !contains(err.Error(), tc.want)):
				t.Fatalf("New: %v, want an error about %q", err, tc.want)
			}
		})
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

func manyBudgets(n int) []llmclient.Option {
	opts := make([]llmclient.Option, n)
	for i := range opts {
		opts[i] = llmclient.WithBudget(budget.Budget{Name: fmt.Sprint("b", i), Cap: pricing.Dollar})
	}
	return opts
}
func nan() float64 { return math.NaN() }
func inf() float64 { return math.Inf(1) }
