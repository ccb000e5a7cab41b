package llmclient_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/event"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/finish"
	"github.com/llmclient/llmclient/pricing"
	"github.com/llmclient/llmclient/provider/fake"
)

// priced returns a model priced by hand, per million tokens, with a context window.
func priced(t testing.TB, id string, in, out pricing.Money, window int) *pricing.Model {
	t.Helper()
	m, err := pricing.NewModel(pricing.Spec{ID: id, ContextWindow: window,
		Price: pricing.Price{Input: pricing.PerMTok(in), Output: pricing.PerMTok(out)}})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// pricedUp registers an upstream whose every model costs m.
func pricedUp(name string, p llmclient.Provider, m *pricing.Model) llmclient.Option {
	return llmclient.WithUpstream(llmclient.Upstream{Name: name, Provider: p,
		Prices: map[string]*pricing.Model{"": m}})
}

func costOf(t testing.TB, m *pricing.Model, tok pricing.Tokens, at time.Time) pricing.Money {
	t.Helper()
	c, err := m.Cost(tok, at)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestCostFromTheShippedTable prices a call through the embedded snapshot: the fake
// provider has no base URL, so "gpt-4o-mini" finds OpenAI by its name; cached and
// reasoning tokens are billed at their rates.
func TestCostFromTheShippedTable(t *testing.T) {
	usage := llmclient.Usage{InputTokens: 12_000, CachedInputTokens: 8000, OutputTokens: 700, ReasoningTokens: 300, TotalTokens: 12_700}
	p := fake.New(fake.Reply("hi").ReportUsage(usage))
	var log eventLog
	c := newClient(t, up("openai", p), llmclient.WithPricing(nil), llmclient.WithObserver(log.observe))
	resp, err := c.Complete(context.Background(), chatReq("gpt-4o-mini"))
	if err != nil {
		t.Fatal(err)
	}
	m, ok := pricing.Default().Lookup("openai", "gpt-4o-mini")
	if !ok {
		t.Fatal("gpt-4o-mini is not in the snapshot")
	}
	want := costOf(t, m, pricing.Tokens{Input: 12_000, CacheRead: 8000, Output: 700, Reasoning: 300}, resp.Attempts[0].Start)
	// By hand: 4,000 × $0.15 + 8,000 × $0.075 + 700 × $0.60 per million tokens.
	if want != 1_620_000_000 {
		t.Fatalf("the snapshot's gpt-4o-mini prices changed: %v", want)
	}
	got := resp.Cost
	if !got.Known || got.Estimated || got.Amount != want || got.Model != m {
		t.Fatalf("Response.Cost = %+v, want %v from %v", got, want, m)
	}
	if a := resp.Attempts[0].Cost; a != got {
		t.Fatalf("Attempt.Cost = %+v, want %+v", a, got)
	}
	if evs := log.kinds(event.Attempt); len(evs) != 1 || evs[0].Cost != got {
		t.Fatalf("EventAttempt costs: %+v", evs)
	}
	if evs := log.kinds(event.Call); len(evs) != 1 || evs[0].Cost != got {
		t.Fatalf("EventCall costs: %+v", evs)
	}
	if s := got.String(); s != "$0.00162" {
		t.Fatalf("String = %q", s)
	}
}

// TestCostUnknownModel: a model without a price has an unknown cost, never $0.
func TestCostUnknownModel(t *testing.T) {
	p := fake.New(fake.Reply("hi").Usage(10, 5))
	c := newClient(t, up("local", p), llmclient.WithPricing(nil))
	resp, err := c.Complete(context.Background(), chatReq("my-own-finetune-v3"))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Cost.Known || resp.Cost.Amount != 0 || resp.Cost.String() != "unknown" {
		t.Fatalf("Cost = %+v (%v), want unknown", resp.Cost, resp.Cost)
	}
}

// TestCostWithoutPricing: without pricing every cost is unknown.
func TestCostWithoutPricing(t *testing.T) {
	c := newClient(t, up("a", fake.New(fake.Reply("hi").Usage(10, 5))))
	resp, err := c.Complete(context.Background(), chatReq("gpt-4o-mini"))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Cost != (pricing.Cost{}) || resp.Attempts[0].Cost != (pricing.Cost{}) {
		t.Fatalf("Cost = %+v / %+v, want the zero (unknown) Cost", resp.Cost, resp.Attempts[0].Cost)
	}
}

// TestCostUpstreamPrices: an upstream's own prices come before the table: a self-hosted
// model at zero, a negotiated rate for one model, the table for the others.
func TestCostUpstreamPrices(t *testing.T) {
	free := priced(t, "llama", 0, 0, 0)
	list, _ := pricing.Default().Lookup("openai", "gpt-4o")
	deal, err := list.WithPrice(pricing.Price{Input: pricing.PerMTok(2 * pricing.Dollar), Output: pricing.PerMTok(8 * pricing.Dollar)})
	if err != nil {
		t.Fatal(err)
	}
	p := fake.New(fake.Reply("hi").Usage(1_000_000, 1_000_000).Forever())
	c := newClient(t,
		llmclient.WithUpstream(llmclient.Upstream{Name: "local", Provider: p, Models: map[string]string{"llama": "llama"},
			Prices: map[string]*pricing.Model{"": free}}),
		llmclient.WithUpstream(llmclient.Upstream{Name: "openai", Provider: p, PriceProvider: "openai",
			Prices: map[string]*pricing.Model{"gpt-4o": deal}}),
	)
	for _, tc := range []struct {
		model string
		want  pricing.Money
	}{
		{"llama", 0},
		{"gpt-4o", 10 * pricing.Dollar}, // $2 + $8: the negotiated rate
		{"gpt-4o-mini", 15*pricing.Cent + 60*pricing.Cent}, // the table's
	} {
		resp, err := c.Complete(context.Background(), chatReq(tc.model))
		if err != nil {
			t.Fatal(err)
		}
		if !resp.Cost.Known || resp.Cost.Amount != tc.want {
			t.Errorf("%s: Cost %+v, want %v", tc.model, resp.Cost, tc.want)
		}
	}
}

// TestCostOfFailedAttempts: attempts that fail can still bill. A one-shot attempt that
// timed out after the request was sent bills its estimate (prompt plus the largest
// output); an error response bills nothing; the call's cost is the sum.
func TestCostOfFailedAttempts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := priced(t, "m", pricing.Dollar, 2*pricing.Dollar, 0)
		p := fake.New(
			fake.Reply("late").Usage(50, 50).Latency(time.Minute), // times out: the vendor bills it anyway
			fake.Fail(503),
			fake.Reply("ok").Usage(40, 10),
		)
		c := newClient(t, pricedUp("a", p, m), llmclient.WithAttemptTimeout(10*time.Second),
			llmclient.WithBackoff(time.Millisecond, time.Millisecond))
		req := chatReq("m")
		req.MaxTokens = 100
		resp, err := c.Complete(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Attempts) != 3 {
			t.Fatalf("attempts: %+v", resp.Attempts)
		}
		timedOut, failed, ok := resp.Attempts[0].Cost, resp.Attempts[1].Cost, resp.Attempts[2].Cost
		prompt := llmclient.EstimatePromptTokens(nil, req)
		wantTimeout := costOf(t, m, pricing.Tokens{Input: prompt, Output: 100}, time.Now())
		if resp.Attempts[0].Class != failure.Timeout || !timedOut.Known || !timedOut.Estimated || timedOut.Amount != wantTimeout {
			t.Errorf("timed-out attempt: %v %+v, want an estimate of %v", resp.Attempts[0].Class, timedOut, wantTimeout)
		}
		if !failed.Known || failed.Estimated || failed.Amount != 0 {
			t.Errorf("503 attempt: %+v, want a known $0", failed)
		}
		wantOK := costOf(t, m, pricing.Tokens{Input: 40, Output: 10}, time.Now())
		if !ok.Known || ok.Estimated || ok.Amount != wantOK {
			t.Errorf("successful attempt: %+v, want %v", ok, wantOK)
		}
		if resp.Cost.Amount != wantTimeout+wantOK || !resp.Cost.Known || !resp.Cost.Estimated {
			t.Errorf("call: %+v, want ~%v", resp.Cost, wantTimeout+wantOK)
		}
	})
}

// TestCostOnErrors: a call that fails carries its cost on the error: a filtered answer
// with its usage, and a stream cut after its first tokens with the usage it reported.
func TestCostOnErrors(t *testing.T) {
	m := priced(t, "m", pricing.Dollar, 2*pricing.Dollar, 0)
	t.Run("filtered", func(t *testing.T) {
		p := fake.New(fake.Reply("").Finish(finish.ContentFilter).Usage(30, 7))
		c := newClient(t, pricedUp("a", p, m))
		_, err := c.Complete(context.Background(), chatReq("m"))
		var e *llmclient.Error
		if !errors.As(err, &e) || e.Class != failure.ContentFiltered {
			t.Fatalf("err = %v", err)
		}
		want := costOf(t, m, pricing.Tokens{Input: 30, Output: 7}, e.Attempts[0].Start)
		if !e.Cost.Known || e.Cost.Amount != want || e.Attempts[0].Cost.Amount != want {
			t.Fatalf("Error.Cost = %+v, attempt %+v, want %v", e.Cost, e.Attempts[0].Cost, want)
		}
	})
	t.Run("stream cut", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			p := fake.New(fake.Stream("a", "b", "c").Usage(20, 3).CutAfter(2))
			var log eventLog
			c := newClient(t, pricedUp("a", p, m), llmclient.WithObserver(log.observe), llmclient.WithStreamContinuation(false))
			s, err := c.Stream(context.Background(), chatReq("m"))
			if err != nil {
				t.Fatal(err)
			}
			for s.Next() {
			}
			var e *llmclient.Error
			if !errors.As(s.Err(), &e) || e.Class != failure.StreamInterrupted {
				t.Fatalf("err = %v", s.Err())
			}
			s.Close()
			if !e.Cost.Known || e.Cost.Amount <= 0 || len(e.Attempts) != 1 || e.Attempts[0].Cost != e.Cost {
				t.Fatalf("Error.Cost = %+v, attempts %+v", e.Cost, e.Attempts)
			}
			calls := log.kinds(event.Call)
			if len(calls) != 1 || calls[0].Cost != e.Cost {
				t.Fatalf("EventCall: %+v", calls)
			}
		})
	})
}

// TestCostStreamAtItsEnd: a stream's cost is known at its end, from the usage of its
// last chunk.
func TestCostStreamAtItsEnd(t *testing.T) {
	m := priced(t, "m", pricing.Dollar, 2*pricing.Dollar, 0)
	p := fake.New(fake.Stream("Hel", "lo").Usage(100, 2))
	c := newClient(t, pricedUp("a", p, m))
	s, err := c.Stream(context.Background(), chatReq("m"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for s.Next() {
	}
	if s.Err() != nil {
		t.Fatal(s.Err())
	}
	resp := s.Response()
	want := costOf(t, m, pricing.Tokens{Input: 100, Output: 2}, resp.Attempts[0].Start)
	if !resp.Cost.Known || resp.Cost.Estimated || resp.Cost.Amount != want {
		t.Fatalf("Cost = %+v, want %v", resp.Cost, want)
	}
}
