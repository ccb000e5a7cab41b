package llmclient_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/budget"
	"github.com/llmclient/llmclient/event"
	"github.com/llmclient/llmclient/pricing"
	"github.com/llmclient/llmclient/provider/fake"
	"github.com/llmclient/llmclient/provider/openai"
)

// answeredAs is an upstream that answers every call under another model name than the
// one sent, as OpenAI answers "gpt-4o" as "gpt-4o-2024-08-06".
type answeredAs struct {
	llmclient.Provider
	model string
}

func (p answeredAs) Complete(ctx context.Context, call *llmclient.Call) (*llmclient.Response, error) {
	resp, err := p.Provider.Complete(ctx, call)
	if resp != nil {
		resp.Model = p.model
	}
	return resp, err
}

func (p answeredAs) Stream(ctx context.Context, call *llmclient.Call) (llmclient.ProviderStream, error) {
	s, err := p.Provider.Stream(ctx, call)
	if err != nil {
		return nil, err
	}
	return renamedStream{s, p.model}, nil
}

type renamedStream struct {
	llmclient.ProviderStream
	model string
}

func (s renamedStream) Recv() (llmclient.Chunk, error) {
	ch, err := s.ProviderStream.Recv()
	if ch.Model != "" {
		ch.Model = s.model
	}
	return ch, err
}

// TestOwnPricesWinForEveryNameAnswered: an upstream's own price for the model sent
// prices the call whatever name the response gives, even one the table prices (at list
// price) — in Complete, Stream and the transport, and so in a budget's count.
func TestOwnPricesWinForEveryNameAnswered(t *testing.T) {
	list, ok := pricing.Default().Lookup("openai", "gpt-4o-2024-08-06")
	if !ok {
		t.Fatal("gpt-4o-2024-08-06 is not in the snapshot")
	}
	listIn, _ := pricing.Default().Lookup("openai", "gpt-4o")
	own := priced(t, "gpt-4o", 5*pricing.Dollar, 20*pricing.Dollar, 128_000) // twice gpt-4o's list price
	free := priced(t, "gpt-4o", 0, 0, 128_000)                               // self-hosted
	tok := pricing.Tokens{Input: 1000, Output: 500}
	now := time.Now()
	if costOf(t, list, tok, now) == costOf(t, own, tok, now) || listIn == nil {
		t.Fatal("the test needs an own price unlike the list price")
	}
	for _, tc := range []struct {
		name   string
		prices map[string]*pricing.Model
		want   *pricing.Model
	}{
		{"own rate for the name sent", map[string]*pricing.Model{"gpt-4o": own}, own},
		{"own default", map[string]*pricing.Model{"": own}, own},
		{"self-hosted at zero", map[string]*pricing.Model{"gpt-4o": free}, free},
		{"own rate for the name answered", map[string]*pricing.Model{"gpt-4o": free, "gpt-4o-2024-08-06": own}, own},
		{"no own price for either: the table's for the name answered", map[string]*pricing.Model{"gpt-4o-mini": own}, list},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := costOf(t, tc.want, tok, now)
			t.Run("complete", func(t *testing.T) {
				p := answeredAs{fake.New(fake.Reply("hi").Usage(1000, 500).Forever()), "gpt-4o-2024-08-06"}
				c := newClient(t, llmclient.WithUpstream(llmclient.Upstream{Name: "oai", Provider: p, Prices: tc.prices}))
				resp, err := c.Complete(context.Background(), chatReq("gpt-4o"))
				if err != nil {
					t.Fatal(err)
				}
				if resp.Model != "gpt-4o-2024-08-06" || !resp.Cost.Known || resp.Cost.Amount != want || resp.Cost.Model != tc.want {
					t.Fatalf("model %q, cost %+v, want %v at %v", resp.Model, resp.Cost, want, tc.want)
				}
			})
			t.Run("stream", func(t *testing.T) {
				p := answeredAs{fake.New(fake.Stream("h", "i").Usage(1000, 500).Forever()), "gpt-4o-2024-08-06"}
				c := newClient(t, llmclient.WithUpstream(llmclient.Upstream{Name: "oai", Provider: p, Prices: tc.prices}))
				s, err := c.Stream(context.Background(), chatReq("gpt-4o"))
				if err != nil {
					t.Fatal(err)
				}
				for s.Next() {
				}
				_ = s.Close()
				if err := s.Err(); err != nil {
					t.Fatal(err)
				}
				if got := s.Response().Cost; !got.Known || got.Amount != want || got.Model != tc.want {
					t.Fatalf("cost %+v, want %v at %v", got, want, tc.want)
				}
			})
			t.Run("transport", func(t *testing.T) {
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
					w.Header().Set("Content-Type", "application/json")
					_, _ = w.Write([]byte(`{"id":"c1","object":"chat.completion","model":"gpt-4o-2024-08-06","choices":[{"index":0,` +
						`"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1000,"completion_tokens":500,"total_tokens":1500}}`))
				}))
				defer srv.Close()
				op, err := openai.New(openai.WithBaseURL(srv.URL + "/v1"))
				if err != nil {
					t.Fatal(err)
				}
				var log eventLog
				c := newClient(t, llmclient.WithObserver(log.observe),
					llmclient.WithUpstream(llmclient.Upstream{Name: "oai", Provider: op, Prices: tc.prices}))
				req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/chat/completions", strings.NewReader(chatBody))
				req.Header.Set("Content-Type", "application/json")
				resp, err := c.Transport(nil).RoundTrip(req)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := readBody(t, resp); err != nil {
					t.Fatal(err)
				}
				calls := log.kinds(event.Call)
				if len(calls) != 1 || !calls[0].Cost.Known || calls[0].Cost.Amount != want || calls[0].Cost.Model != tc.want {
					t.Fatalf("call events %+v, want a cost of %v at %v", calls, want, tc.want)
				}
			})
		})
	}
}

// embedAnsweredAs is an embedding upstream that answers under another model name than
// the one sent.
type embedAnsweredAs struct {
	*fake.Provider
	model string
}

func (p embedAnsweredAs) Embed(ctx context.Context, call *llmclient.EmbedCall) (*llmclient.EmbedResponse, error) {
	resp, err := p.Provider.Embed(ctx, call)
	if resp != nil {
		resp.Model = p.model
	}
	return resp, err
}

// TestEmbedOwnPricesWinForTheNameAnswered: Embed prices by the same rule: the
// upstream's own price for the model sent, not the table's for the dated name answered.
func TestEmbedOwnPricesWinForTheNameAnswered(t *testing.T) {
	if _, ok := pricing.Default().Lookup("openai", "text-embedding-3-small"); !ok {
		t.Fatal("text-embedding-3-small is not in the snapshot")
	}
	own := priced(t, "text-embedding-3-small", 7*pricing.Dollar, 0, 0)
	p := embedAnsweredAs{fake.New(fake.Embedding(8).Usage(1000).Forever()), "text-embedding-3-small"}
	c := newClient(t, llmclient.WithUpstream(llmclient.Upstream{Name: "emb", Provider: p, PriceProvider: "openai",
		Prices: map[string]*pricing.Model{"my-embedder": own}}))
	resp, err := c.Embed(context.Background(), &llmclient.EmbedRequest{Model: "my-embedder", Input: []string{"a", "b"}})
	if err != nil {
		t.Fatal(err)
	}
	want := costOf(t, own, pricing.Tokens{Input: 1000}, time.Now())
	if !resp.Cost.Known || resp.Cost.Amount != want || resp.Cost.Model != own {
		t.Fatalf("cost %+v, want %v at the own price", resp.Cost, want)
	}
}

// TestBudgetCountsOwnPricesOfRenamedAnswers: a budget sized for four calls at the
// upstream's own rate admits four, not the seven that list price would let through.
func TestBudgetCountsOwnPricesOfRenamedAnswers(t *testing.T) {
	own := priced(t, "gpt-4o", 5*pricing.Dollar, 20*pricing.Dollar, 128_000)
	// Reported usage equal to the reservation: the prompt estimate and MaxTokens.
	req := chatReq("gpt-4o")
	req.MaxTokens = 500
	in := llmclient.EstimatePromptTokens(nil, req)
	one := costOf(t, own, pricing.Tokens{Input: in, Output: 500}, time.Now())
	p := answeredAs{fake.New(fake.Reply("hi").Usage(in, 500).Forever()), "gpt-4o-2024-08-06"}
	c := newClient(t, llmclient.WithUpstream(llmclient.Upstream{Name: "oai", Provider: p, Prices: map[string]*pricing.Model{"gpt-4o": own}}),
		llmclient.WithBudget(budget.Budget{Name: "day", Cap: 4*one + one/2}))
	served := 0
	for range 10 {
		_, err := c.Complete(context.Background(), req)
		if err == nil {
			served++
			continue
		}
		if !errors.Is(err, budget.ErrExceeded) {
			t.Fatal(err)
		}
	}
	if served != 4 {
		t.Fatalf("%d calls served, the cap holds 4", served)
	}
	st, err := c.Budget(context.Background(), "day", "")
	if err != nil || st.Spent != 4*one {
		t.Fatalf("budget %+v, %v: want %v spent", st, err, 4*one)
	}
}
