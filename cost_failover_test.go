package llmclient_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/breaker"
	"github.com/llmclient/llmclient/budget"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/pricing"
	"github.com/llmclient/llmclient/provider/fake"
)

// TestCostFailover: a group may fail over only to upstreams at most MaxRatio times the
// price of its first one; with WhenOpen, to costlier ones while the first's breaker is
// open. The seed's incident: a transient error on the economy model moved traffic to
// the flagship and multiplied the bill.
func TestCostFailover(t *testing.T) {
	mini := priced(t, "mini", pricing.Dollar/10, pricing.Dollar/10*4, 0)
	twice := priced(t, "twice", pricing.Dollar/10*2, pricing.Dollar/10*8, 0)
	flagship := priced(t, "flagship", 3*pricing.Dollar, 12*pricing.Dollar, 0)
	for _, tc := range []struct {
		name  string
		rule  budget.Failover
		open  bool // the first upstream's failure trips its breaker
		route string
		want  string // the upstream that answers, or "" for a refusal
	}{
		{"within the ratio", budget.Failover{MaxRatio: 2}, false, "twice", "twice"},
		{"beyond the ratio", budget.Failover{MaxRatio: 3}, false, "flagship", ""},
		{"beyond the ratio, breaker closed", budget.Failover{MaxRatio: 3, WhenOpen: true}, false, "flagship", ""},
		{"beyond the ratio, breaker open", budget.Failover{MaxRatio: 3, WhenOpen: true}, true, "flagship", "flagship"},
		{"unpriced target", budget.Failover{MaxRatio: 3}, false, "unpriced", ""},
		{"unpriced target allowed", budget.Failover{MaxRatio: 3, AllowUnpriced: true}, false, "unpriced", "unpriced"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			first := fake.New(fake.Fail(500).Forever())
			second := fake.New(fake.Reply("ok").Usage(10, 10).Forever())
			prices := map[string]*pricing.Model{"twice": twice, "flagship": flagship}
			secondUp := llmclient.Upstream{Name: tc.route, Provider: second, Models: map[string]string{"chat": "other-model"}}
			if m := prices[tc.route]; m != nil {
				secondUp.Prices = map[string]*pricing.Model{"": m}
			}
			bc := breaker.DefaultConfig()
			if tc.open {
				bc.ConsecutiveFailures = 1
			}
			c := newClient(t,
				llmclient.WithUpstream(llmclient.Upstream{Name: "mini", Provider: first, Models: map[string]string{"chat": "mini"},
					Prices: map[string]*pricing.Model{"": mini}}),
				llmclient.WithUpstream(secondUp),
				llmclient.WithModelGroup("chat", "mini", tc.route),
				llmclient.WithMaxAttempts(1),
				llmclient.WithBreaker(bc),
				llmclient.WithCostFailover("chat", tc.rule))
			req := chatReq("chat")
			resp, err := c.Complete(context.Background(), req)
			if tc.want != "" {
				if err != nil || resp.Upstream != tc.want {
					t.Fatalf("got %v, %v; want an answer from %s", resp, err, tc.want)
				}
				if tc.open != (c.Breaker("mini").State() == breaker.Open) {
					t.Fatalf("mini's breaker is %v", c.Breaker("mini").State())
				}
				return
			}
			var e *llmclient.Error
			if !errors.As(err, &e) || !errors.Is(err, budget.ErrCostlyFailover) || e.Class != failure.Unavailable {
				t.Fatalf("err = %v, want a refused failover", err)
			}
			if second.Calls() != 0 {
				t.Fatalf("the costlier upstream was called %d times", second.Calls())
			}
			if n := len(e.Attempts); n != 2 || !e.Attempts[1].Local || e.Attempts[0].Class != failure.ServerError {
				t.Fatalf("trace %+v", e.Attempts)
			}
		})
	}
}

// TestContextWindowPreCheck: a request that cannot fit its model's window goes straight
// to the context fallback without a call; without one it returns context_length at once.
// A request within a tenth of the window is left to the upstream.
func TestContextWindowPreCheck(t *testing.T) {
	req := func() *llmclient.Request {
		return &llmclient.Request{Model: "m", Messages: []llmclient.Message{llmclient.UserMessage(strings.Repeat("lorem ipsum ", 400))}}
	}
	prompt := llmclient.EstimatePromptTokens(nil, req())
	if prompt < 400 {
		t.Fatalf("prompt estimate %d", prompt)
	}
	small := priced(t, "small", pricing.Dollar, pricing.Dollar, prompt/2)
	large := priced(t, "large", 2*pricing.Dollar, 2*pricing.Dollar, 1000*prompt)
	edge := priced(t, "edge", pricing.Dollar, pricing.Dollar, prompt-prompt/20) // the estimate 5% over
	over := priced(t, "over", pricing.Dollar, pricing.Dollar, prompt-prompt/8)  // 14% over
	for _, tc := range []struct {
		name     string
		first    *pricing.Model
		fallback bool
		want     string // upstream that answers, "" for context_length
	}{
		{"to the fallback", small, true, "large"},
		{"no fallback", small, false, ""},
		{"within the estimate's error", edge, false, "first"},
		{"beyond the estimate's error", over, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			first := fake.New(fake.Reply("ok").Forever())
			second := fake.New(fake.Reply("big").Forever())
			opts := []llmclient.Option{pricedUp("first", first, tc.first), pricedUp("large", second, large),
				llmclient.WithModelGroup("m", "first")}
			if tc.fallback {
				opts = append(opts, llmclient.WithContextFallback("large"))
			}
			c := newClient(t, opts...)
			resp, err := c.Complete(context.Background(), req())
			if tc.want == "" {
				var e *llmclient.Error
				if !errors.As(err, &e) || e.Class != failure.ContextLength || !errors.Is(err, llmclient.ErrContextWindow) ||
					!e.Attempts[0].Local || first.Calls() != 0 {
					t.Fatalf("err = %v (calls %d), want a local context_length", err, first.Calls())
				}
				return
			}
			if err != nil || resp.Upstream != tc.want {
				t.Fatalf("got %v, %v; want %s", resp, err, tc.want)
			}
			if tc.want == "large" && (first.Calls() != 0 || resp.Attempts[0].Class != failure.ContextLength) {
				t.Fatalf("the small model was called %d times; trace %+v", first.Calls(), resp.Attempts)
			}
		})
	}
}

// TestContextTrim: the hook shortens a request that does not fit; the shorter request is
// sent, the caller's is not modified.
func TestContextTrim(t *testing.T) {
	long := &llmclient.Request{Model: "m", Messages: []llmclient.Message{
		llmclient.UserMessage(fmt.Sprintf("%0500d", 0)), llmclient.UserMessage("now?")}}
	short := &llmclient.Request{Model: "m", Messages: long.Messages[1:]}
	window := llmclient.EstimatePromptTokens(nil, short) + 10
	m := priced(t, "m", pricing.Dollar, pricing.Dollar, window)
	p := fake.New(fake.Reply("ok").Forever())
	var gotMax int
	c := newClient(t, pricedUp("a", p, m), llmclient.WithContextTrim(func(_ context.Context, req *llmclient.Request, maxPrompt int) *llmclient.Request {
		gotMax = maxPrompt
		cp := *req
		cp.Messages = cp.Messages[len(cp.Messages)-1:]
		return &cp
	}))
	if _, err := c.Complete(context.Background(), long); err != nil {
		t.Fatal(err)
	}
	sent := p.Requests()[0].Request
	if len(sent.Messages) != 1 || len(long.Messages) != 2 || gotMax != window {
		t.Fatalf("sent %d messages (caller's %d), hook saw %d, want 1, 2, %d", len(sent.Messages), len(long.Messages), gotMax, window)
	}
}

// WhenOpen lets a call move to a costlier upstream whenever the first upstream cannot
// serve — drained by the operator or tripped by another replica, not only open here.
func TestCostFailoverWhenFirstCannotServe(t *testing.T) {
	mini := priced(t, "mini", pricing.Dollar/10, pricing.Dollar/10*4, 0)
	flagship := priced(t, "flagship", 3*pricing.Dollar, 12*pricing.Dollar, 0)
	for _, state := range []string{"drained", "forced open"} {
		t.Run(state, func(t *testing.T) {
			first := fake.New(fake.Reply("mini").Forever())
			second := fake.New(fake.Reply("ok").Usage(10, 10).Forever())
			c := newClient(t,
				llmclient.WithUpstream(llmclient.Upstream{Name: "mini", Provider: first, Models: map[string]string{"chat": "mini"},
					Prices: map[string]*pricing.Model{"": mini}}),
				llmclient.WithUpstream(llmclient.Upstream{Name: "flagship", Provider: second, Models: map[string]string{"chat": "flagship"},
					Prices: map[string]*pricing.Model{"": flagship}}),
				llmclient.WithModelGroup("chat", "mini", "flagship"),
				llmclient.WithCostFailover("chat", budget.Failover{MaxRatio: 3, WhenOpen: true}))
			if state == "drained" {
				if err := c.Drain("mini", true); err != nil {
					t.Fatal(err)
				}
			} else if err := c.ForceBreakerOpen("mini"); err != nil {
				t.Fatal(err)
			}
			for range 3 {
				resp, err := c.Complete(context.Background(), chatReq("chat"))
				if err != nil || resp.Upstream != "flagship" {
					t.Fatalf("got %v, %v; want an answer from flagship while mini cannot serve", resp, err)
				}
			}
		})
	}
}
