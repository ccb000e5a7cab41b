package llmclient_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/breaker"
	"github.com/llmclient/llmclient/budget"
	"github.com/llmclient/llmclient/cache"
	"github.com/llmclient/llmclient/event"
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
		ca := memoryCache(t)
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
		expectHitSpentNothing(t, c, before, p)
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
		ca := memoryCache(t)
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
		expectHitSpentNothing(t, c, before, p)
	})
}

// TestAuditCacheKeyIgnoresWhatDoesNotReachTheAnswer: the key is "not Metadata, Priority or
// the context's CallOptions", and PromptCacheKey "is not part of the response cache's
// key"; the model as the caller names it is. Through a Client with cache affinity on
// (where PromptCacheKey also picks the upstream), repeats that differ only in those are
// hits, even one pinned to the other upstream with an extra header, and another model
// name is a miss.
func TestAuditCacheKeyIgnoresWhatDoesNotReachTheAnswer(t *testing.T) {
	ca := memoryCache(t)
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
	other := "x"
	if first.Upstream == "x" {
		other = "y"
	}
	ctx := llmclient.WithCallOptions(context.Background(), llmclient.CallOptions{Pin: []string{other},
		Headers: http.Header{"Anthropic-Beta": {"some-beta"}}})
	if resp, err := c.Complete(ctx, req(func(*llmclient.Request) {})); err != nil || !resp.Cached || resp.Text != first.Text {
		t.Errorf("CallOptions pinning %s with a header: %+v, %v; want a hit with %q", other, resp, err, first.Text)
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

// TestAuditCacheDedupIsSeenOnce: with de-duplication, "each caller's copy carries the
// shared call's Attempts and Cost (… events and metrics see it once)". Five identical
// calls in flight together make one upstream call; every caller gets its attempts and
// cost, and the observer sees one call event, carrying that cost once.
func TestAuditCacheDedupIsSeenOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ca := memoryCache(t, cache.WithDedup(true))
		m := priced(t, "m", pricing.Dollar, 2*pricing.Dollar, 0)
		p := fake.New(fake.Reply("ok").Latency(time.Second).Usage(100, 50).Forever())
		var log eventLog
		c := newClient(t, pricedUp("a", p, m), llmclient.WithMiddleware(ca.Middleware()), llmclient.WithObserver(log.observe))
		one := costOf(t, m, pricing.Tokens{Input: 100, Output: 50}, time.Now())
		resps := make([]*llmclient.Response, 5)
		var wg sync.WaitGroup
		for i := range resps {
			wg.Go(func() {
				resp, err := c.Complete(context.Background(), chatReq("m"))
				if err != nil {
					t.Error(err)
					return
				}
				resps[i] = resp
			})
		}
		wg.Wait()
		if p.Calls() != 1 {
			t.Fatalf("%d upstream calls, want one shared", p.Calls())
		}
		for i, r := range resps {
			if r == nil || len(r.Attempts) != 1 || r.Attempts[0].Cost.Amount != one || !r.Cost.Known || r.Cost.Amount != one {
				t.Errorf("caller %d: %+v; want the shared call's one attempt and cost %v", i, r, one)
			}
		}
		calls := log.kinds(event.Call)
		if len(calls) != 1 || calls[0].Cost.Amount != one {
			t.Errorf("%d call events (%+v), want one carrying %v", len(calls), calls, one)
		}
	})
}

// TestAuditCacheStreamsAreNotShared: "Streams are not shared" by de-duplication: two
// identical streams in flight together each make their own upstream call, and each gets
// the whole answer.
func TestAuditCacheStreamsAreNotShared(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ca := memoryCache(t, cache.WithDedup(true))
		p := fake.New(fake.Stream("one ", "two").ChunkDelay(time.Second).Forever())
		c := newClient(t, up("a", p), llmclient.WithMiddleware(ca.Middleware()))
		texts := make([]string, 2)
		var wg sync.WaitGroup
		for i := range texts {
			wg.Go(func() {
				s, err := c.Stream(context.Background(), chatReq("m"))
				if err != nil {
					t.Error(err)
					return
				}
				defer s.Close()
				text, err := readAll(s)
				if err != nil {
					t.Error(err)
				}
				texts[i] = text
			})
		}
		wg.Wait()
		if p.Calls() != 2 || texts[0] != "one two" || texts[1] != "one two" {
			t.Errorf("%d upstream calls, texts %q; want two calls, each stream the whole answer", p.Calls(), texts)
		}
	})
}

// TestAuditCacheIdempotencyWindowDefault: the first call under an idempotency key "runs on
// past its caller's timeout (up to WithIdempotencyTTL, 10 min by default)". With the
// default, a call whose caller left after 1s and that answers at 9m50s is joined by a
// repeat at 9m, which gets its answer with no second upstream call; a call that would
// answer at 10m30s is stopped at its window's end, so a repeat at 10m20s makes a new call.
func TestAuditCacheIdempotencyWindowDefault(t *testing.T) {
	run := func(t *testing.T, latency, repeatAt time.Duration) (string, int) {
		var text string
		var calls int
		synctest.Test(t, func(t *testing.T) {
			ca := memoryCache(t, cache.WithTTL(0)) // the exact cache off: only the key answers
			p := fake.New(fake.Reply("first").Latency(latency), fake.Reply("second"))
			c := newClient(t, up("a", p), llmclient.WithMaxAttempts(1), llmclient.WithMiddleware(ca.Middleware()))
			keyed := cache.WithIdempotencyKey(context.Background(), "job-1")
			ctx, cancel := context.WithTimeout(keyed, time.Second)
			_, err := c.Complete(ctx, chatReq("m"))
			cancel()
			if llmclient.ClassOf(err) != failure.Timeout {
				t.Fatalf("the first caller: %v, want a timeout", err)
			}
			time.Sleep(repeatAt - time.Second)
			resp, err := c.Complete(keyed, chatReq("m"))
			if err != nil {
				t.Fatalf("the repeat: %v", err)
			}
			text, calls = resp.Text, p.Calls()
			synctest.Wait()
		})
		return text, calls
	}
	if text, calls := run(t, 9*time.Minute+50*time.Second, 9*time.Minute); text != "first" || calls != 1 {
		t.Errorf("answer at 9m50s, repeat at 9m: %q after %d calls; want the first call's answer, one call", text, calls)
	}
	if text, calls := run(t, 10*time.Minute+30*time.Second, 10*time.Minute+20*time.Second); text != "second" || calls != 2 {
		t.Errorf("answer due at 10m30s, repeat at 10m20s: %q after %d calls; want a new call", text, calls)
	}
	if cache.DefaultIdempotencyTTL != 10*time.Minute {
		t.Errorf("DefaultIdempotencyTTL = %v, documented as 10 min", cache.DefaultIdempotencyTTL)
	}
}

// TestAuditCacheDocumentedBounds: the semantic index's documented defaults (10,000
// questions, 64 MiB) and the largest embedding kept (65,536 dimensions) are the package's.
func TestAuditCacheDocumentedBounds(t *testing.T) {
	if cache.DefaultMaxSemanticEntries != 10_000 || cache.DefaultMaxSemanticBytes != 64<<20 || cache.MaxEmbeddingDimensions != 65_536 {
		t.Errorf("entries %d, bytes %d, dimensions %d; documented 10,000, 64 MiB, 65,536",
			cache.DefaultMaxSemanticEntries, cache.DefaultMaxSemanticBytes, cache.MaxEmbeddingDimensions)
	}
}

// TestAuditCacheAffinityLeavesEmbeddingsAlone: "Embeddings have no affinity" (docs/cost.md;
// Transport requests have it, TestTransportCacheAffinity). On one Client with cache affinity on, chat calls sharing a long prompt all
// start on one upstream of their weighted group, while embeddings of one long text spread
// over both upstreams of theirs, as the weighted choice does without affinity.
func TestAuditCacheAffinityLeavesEmbeddingsAlone(t *testing.T) {
	long := strings.Repeat("a long shared text ", 20)
	ex, ey := fake.New(fake.Embedding(4).Forever()), fake.New(fake.Embedding(4).Forever())
	cx, cy := fake.New(fake.Reply("x").Forever()), fake.New(fake.Reply("y").Forever())
	c := newClient(t, up("ex", ex), up("ey", ey), up("cx", cx), up("cy", cy),
		llmclient.WithModelGroup("emb", "ex", "ey"), llmclient.WithRouting("emb", routing.Weighted),
		llmclient.WithModelGroup("chat", "cx", "cy"), llmclient.WithRouting("chat", routing.Weighted),
		llmclient.WithCacheAffinity(64))
	for range 40 {
		req := chatReq("chat")
		req.Messages[0] = llmclient.UserMessage(long)
		if _, err := c.Complete(context.Background(), req); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Embed(context.Background(), &llmclient.EmbedRequest{Model: "emb", Input: []string{long}}); err != nil {
			t.Fatal(err)
		}
	}
	if cx.Calls() != 0 && cy.Calls() != 0 {
		t.Errorf("chat calls %d on cx and %d on cy; want every one on the upstream affinity ranks first", cx.Calls(), cy.Calls())
	}
	if ex.Calls() == 0 || ey.Calls() == 0 {
		t.Errorf("embeddings %d on ex and %d on ey; want both used", ex.Calls(), ey.Calls())
	}
}

// memoryCache returns a response cache over a 1 MiB memory store, with opts.
func memoryCache(t *testing.T, opts ...cache.Option) *cache.Cache {
	t.Helper()
	store, err := cache.NewMemory(cache.MemoryConfig{MaxBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	ca, err := cache.New(store, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

// expectHitSpentNothing fails unless budget "cap" of c is where it was before a cache hit
// (spend unchanged, nothing reserved) and p was called once (by the miss that filled it).
func expectHitSpentNothing(t *testing.T, c *llmclient.Client, before budget.Status, p *fake.Provider) {
	t.Helper()
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
}
