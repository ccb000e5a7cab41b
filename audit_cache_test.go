package llmclient_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/breaker"
	"github.com/llmclient/llmclient/budget"
	"github.com/llmclient/llmclient/cache"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/limitstore"
	"github.com/llmclient/llmclient/pricing"
	"github.com/llmclient/llmclient/provider/fake"
	"github.com/llmclient/llmclient/ratelimit"
	"github.com/llmclient/llmclient/routing"
)

// TestAuditCacheHitMeetsSpentBudgetAndOpenBreaker: docs/cache.md says a hit "has no
// Attempts, and its Cost is a known $0"; the cache is middleware, outside every layer
// (README's layer drawing). So a hit is served while the budget is at its cap and the
// only upstream is forced open, spends nothing, and reaches no upstream; a miss in the
// same state is refused by the budget or the breaker.
func TestAuditCacheHitMeetsSpentBudgetAndOpenBreaker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store, err := cache.NewMemory(cache.MemoryConfig{MaxBytes: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		ca, err := cache.New(store)
		if err != nil {
			t.Fatal(err)
		}
		m := priced(t, "m", pricing.Dollar, 4*pricing.Dollar, 0)
		p := fake.New(exactUsage().Forever())
		perCall := costOf(t, m, pricing.Tokens{Input: llmclient.EstimatePromptTokens(nil, budgetReq()), Output: 250}, time.Now())
		c := newClient(t, pricedUp("a", p, m), llmclient.WithMiddleware(ca.Middleware()),
			llmclient.WithBudget(budget.Budget{Name: "cap", Cap: perCall}))
		if _, err := c.Complete(context.Background(), budgetReq()); err != nil {
			t.Fatalf("first call, within the cap: %v", err)
		}
		other := budgetReq()
		other.Messages = []llmclient.Message{llmclient.UserMessage("Say goodbye.")}
		if _, err := c.Complete(context.Background(), other); !errors.Is(err, budget.ErrExceeded) {
			t.Fatalf("a miss at the cap: %v, want budget.ErrExceeded", err)
		}
		before, err := c.Budget(context.Background(), "cap", "")
		if err != nil {
			t.Fatal(err)
		}
		if err := c.ForceBreakerOpen("a"); err != nil {
			t.Fatal(err)
		}
		resp, err := c.Complete(context.Background(), budgetReq())
		if err != nil {
			t.Fatalf("a hit at the cap with the breaker forced open: %v", err)
		}
		if len(resp.Attempts) != 0 || !resp.Cost.Known || resp.Cost.Amount != 0 || resp.Text != "ok" {
			t.Errorf("hit: %d attempts, cost %+v, text %q; want none, a known $0, the cached text", len(resp.Attempts), resp.Cost, resp.Text)
		}
		after, err := c.Budget(context.Background(), "cap", "")
		if err != nil {
			t.Fatal(err)
		}
		if after.Spent != before.Spent || after.Reserved != 0 {
			t.Errorf("budget after the hit: spent %v reserved %v, before %v", after.Spent, after.Reserved, before.Spent)
		}
		if p.Calls() != 1 {
			t.Errorf("the upstream was called %d times, want once", p.Calls())
		}
	})
}

// TestAuditCacheAffinityLeavesAnUpstreamTrippedElsewhere: affinity makes "the usual
// choice instead" when the ranked upstream cannot serve, its breaker "tripped elsewhere"
// included: once another replica sharing the store trips it, this replica's calls with
// that prefix go to the other upstream without calling it, and come back once the trip is
// cleared.
func TestAuditCacheAffinityLeavesAnUpstreamTrippedElsewhere(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := limitstore.NewMemory()
		prompt := strings.Repeat("a long shared system prompt ", 20)
		req := func() *llmclient.Request {
			r := chatReq("chat")
			r.Messages[0] = llmclient.UserMessage(prompt)
			return r
		}
		replica := func(fail string) (*llmclient.Client, map[string]*fake.Provider) {
			ps := map[string]*fake.Provider{}
			opts := []llmclient.Option{llmclient.WithLimitStore(store), llmclient.WithSharedBreakers(), llmclient.WithCacheAffinity(64),
				llmclient.WithMaxAttempts(1), llmclient.WithModelGroup("chat", "x", "y"), llmclient.WithRouting("chat", routing.Weighted),
				llmclient.WithBreaker(breaker.Config{ConsecutiveFailures: 2, OpenTimeout: time.Hour, SuccessesToClose: 1})}
			for _, n := range []string{"x", "y"} {
				p := fake.New(fake.Reply(n).Forever())
				if n == fail {
					p = fake.New(fake.Fail(500).Forever())
				}
				ps[n] = p
				opts = append(opts, up(n, p))
			}
			return newClient(t, opts...), ps
		}
		b, onB := replica("")
		resp, err := b.Complete(context.Background(), req())
		if err != nil {
			t.Fatal(err)
		}
		ranked := resp.Upstream
		for range 5 {
			if resp, err := b.Complete(context.Background(), req()); err != nil || resp.Upstream != ranked {
				t.Fatalf("affinity: %v, err %v; want every call on %s", upstreamOf(resp), err, ranked)
			}
		}
		a, _ := replica(ranked)
		for range 4 {
			_, _ = a.Complete(context.Background(), req())
		}
		if a.Breaker(ranked).State() != breaker.Open {
			t.Fatalf("a's breaker on %s did not open", ranked)
		}
		before := onB[ranked].Calls()
		for range 5 {
			if resp, err := b.Complete(context.Background(), req()); err != nil || resp.Upstream == ranked {
				t.Errorf("during the trip elsewhere: %v, err %v; want the other upstream", upstreamOf(resp), err)
			}
		}
		if n := onB[ranked].Calls() - before; n != 0 {
			t.Errorf("b called the tripped upstream %d times", n)
		}
		if err := a.ResetBreaker(ranked); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		if resp, err := b.Complete(context.Background(), req()); err != nil || resp.Upstream != ranked {
			t.Errorf("after the trip is cleared: %v, err %v; want %s again", upstreamOf(resp), err, ranked)
		}
	})
}

// TestAuditContinuationMeetsABudgetAtItsCap: a stream's continuation runs "within … the
// cost rules", and a continuation that fails ends the stream as any call ends, with its
// last attempt's error (here the budget's refusal), its cause joined with the original
// interruption, and Error.Partial holding what the caller received: with the budget spent
// by the first attempt, nothing more is called.
func TestAuditContinuationMeetsABudgetAtItsCap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := priced(t, "m", pricing.Dollar, 4*pricing.Dollar, 0)
		p := fake.New(fake.Stream("one ", "two ", "three").Usage(llmclient.EstimatePromptTokens(nil, budgetReq()), 250).CutAfter(2),
			fake.Stream("one ", "two ", "three").Forever())
		perCall := costOf(t, m, pricing.Tokens{Input: llmclient.EstimatePromptTokens(nil, budgetReq()), Output: 250}, time.Now())
		c := newClient(t, pricedUp("a", p, m), llmclient.WithBudget(budget.Budget{Name: "cap", Cap: perCall}))
		s, err := c.Stream(context.Background(), budgetReq())
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		text, err := readAll(s)
		var e *llmclient.Error
		if text != "one two " || !errors.As(err, &e) || e.Class != failure.BudgetExceeded || !errors.Is(err, budget.ErrExceeded) {
			t.Fatalf("text %q, err %v (class %v); want the partial answer and the budget's refusal", text, err, llmclient.ClassOf(err))
		}
		if e.Partial == nil || e.Partial.Text != "one two " || !strings.Contains(e.Error(), "continuing a stream that broke") {
			t.Errorf("Partial %+v, message %q; want what the caller received and the interruption named", e.Partial, e.Error())
		}
		if p.Calls() != 1 {
			t.Errorf("%d upstream calls, want 1", p.Calls())
		}
	})
}

// TestAuditCacheStreamHitAtTheCap: "A stream served from the cache replays the recorded
// chunks one by one. A hit has no Attempts, and its Cost is a known $0." A stream repeated
// while the budget is at its cap and the only upstream is forced open is served chunk by
// chunk from the cache; its Response is Cached, with no attempts and a known $0, the
// budget's spend does not move and the upstream is not called.
func TestAuditCacheStreamHitAtTheCap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store, err := cache.NewMemory(cache.MemoryConfig{MaxBytes: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		ca, err := cache.New(store)
		if err != nil {
			t.Fatal(err)
		}
		m := priced(t, "m", pricing.Dollar, 4*pricing.Dollar, 0)
		prompt := llmclient.EstimatePromptTokens(nil, budgetReq())
		p := fake.New(fake.Stream("one ", "two ", "three").Usage(prompt, 250).Forever())
		perCall := costOf(t, m, pricing.Tokens{Input: prompt, Output: 250}, time.Now())
		c := newClient(t, pricedUp("a", p, m), llmclient.WithMiddleware(ca.Middleware()),
			llmclient.WithBudget(budget.Budget{Name: "cap", Cap: perCall}))
		stream := func() (chunks []string, resp *llmclient.Response, err error) {
			s, err := c.Stream(context.Background(), budgetReq())
			if err != nil {
				return nil, nil, err
			}
			defer s.Close()
			for s.Next() {
				if txt := s.Current().Text; txt != "" {
					chunks = append(chunks, txt)
				}
			}
			return chunks, s.Response(), s.Err()
		}
		first, resp, err := stream()
		if err != nil || resp.Cached || !resp.Cost.Known || resp.Cost.Amount != perCall {
			t.Fatalf("first stream: %q, %+v, %v; want an upstream answer costing %v", first, resp, err, perCall)
		}
		if err := c.ForceBreakerOpen("a"); err != nil {
			t.Fatal(err)
		}
		before, err := c.Budget(context.Background(), "cap", "")
		if err != nil {
			t.Fatal(err)
		}
		if !before.Hard {
			t.Fatalf("budget before the hit: %+v, want it refusing at its cap", before)
		}
		again, resp, err := stream()
		if err != nil {
			t.Fatalf("a stream hit at the cap with the breaker forced open: %v", err)
		}
		if strings.Join(again, "|") != strings.Join(first, "|") || len(again) != 3 {
			t.Errorf("replayed chunks %q, want the recorded %q one by one", again, first)
		}
		if !resp.Cached || len(resp.Attempts) != 0 || !resp.Cost.Known || resp.Cost.Estimated || resp.Cost.Amount != 0 {
			t.Errorf("hit: cached %v, %d attempts, cost %+v; want a cached answer, none, a known $0", resp.Cached, len(resp.Attempts), resp.Cost)
		}
		after, err := c.Budget(context.Background(), "cap", "")
		if err != nil {
			t.Fatal(err)
		}
		if after.Spent != before.Spent || after.Reserved != 0 {
			t.Errorf("budget after the hit: spent %v reserved %v, before %v", after.Spent, after.Reserved, before.Spent)
		}
		if p.Calls() != 1 {
			t.Errorf("the upstream was called %d times, want once", p.Calls())
		}
	})
}

// TestAuditCacheKeyIgnoresWhatDoesNotReachTheAnswer: the key is "not Metadata, Priority"
// and PromptCacheKey "is not part of the response cache's key"; the model as the caller
// names it is. Through a Client with cache affinity on (where PromptCacheKey also picks the
// upstream), repeats that differ only in those fields are hits, and another model name is
// a miss.
func TestAuditCacheKeyIgnoresWhatDoesNotReachTheAnswer(t *testing.T) {
	store, err := cache.NewMemory(cache.MemoryConfig{MaxBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	ca, err := cache.New(store)
	if err != nil {
		t.Fatal(err)
	}
	x, y := fake.New(fake.Reply("x").Forever()), fake.New(fake.Reply("y").Forever())
	c := newClient(t, up("x", x), up("y", y), llmclient.WithModelGroup("chat", "x", "y"),
		llmclient.WithRouting("chat", routing.Weighted), llmclient.WithCacheAffinity(64),
		llmclient.WithMiddleware(ca.Middleware()))
	req := func(mod func(*llmclient.Request)) *llmclient.Request {
		r := chatReq("chat")
		r.PromptCacheKey = "tenant-1"
		r.Metadata = map[string]string{"tenant": "t1"}
		mod(r)
		return r
	}
	first, err := c.Complete(context.Background(), req(func(*llmclient.Request) {}))
	if err != nil || first.Cached {
		t.Fatalf("first call: %+v, %v", first, err)
	}
	for name, mod := range map[string]func(*llmclient.Request){
		"PromptCacheKey":    func(r *llmclient.Request) { r.PromptCacheKey = "tenant-2" },
		"no PromptCacheKey": func(r *llmclient.Request) { r.PromptCacheKey = "" },
		"Metadata":          func(r *llmclient.Request) { r.Metadata = map[string]string{"tenant": "t2", "trace": "z"} },
		"Priority":          func(r *llmclient.Request) { r.Priority = ratelimit.Batch },
	} {
		resp, err := c.Complete(context.Background(), req(mod))
		if err != nil || !resp.Cached || resp.Text != first.Text || len(resp.Attempts) != 0 {
			t.Errorf("%s changed: %+v, %v; want a hit with %q", name, resp, err, first.Text)
		}
	}
	if n := x.Calls() + y.Calls(); n != 1 {
		t.Errorf("%d upstream calls after the repeats, want 1", n)
	}
	resp, err := c.Complete(context.Background(), req(func(r *llmclient.Request) { r.Model = "x" }))
	if err != nil || resp.Cached {
		t.Errorf("another model name: %+v, %v; want a miss", resp, err)
	}
	if n := x.Calls() + y.Calls(); n != 2 {
		t.Errorf("%d upstream calls after another model name, want 2", n)
	}
}
