package llmclient_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/budget"
	"github.com/llmclient/llmclient/pricing"
	"github.com/llmclient/llmclient/provider/anthropic"
	"github.com/llmclient/llmclient/provider/gemini"
	"github.com/llmclient/llmclient/provider/openai"
)

// TestAbsurdUsageIsNeverAKnownZero: a usage report whose counts add past the largest int
// (Anthropic's input plus cache reads and writes, Gemini's candidates plus thoughts, a
// total left out) saturates in the adapter, and is then beyond what the Client takes as a
// report (2^30 tokens): it is never priced as a negative count, a known $0, and the
// budget counts the Client's estimate.
func TestAbsurdUsageIsNeverAKnownZero(t *testing.T) {
	const huge = "9223372036854775807"
	for _, tc := range []struct {
		name, body string
		provider   func(url string) (llmclient.Provider, error)
	}{
		{"anthropic", `{"id":"m1","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":"hi"}],"stop_reason":"end_turn",` +
			`"usage":{"input_tokens":` + huge + `,"cache_read_input_tokens":` + huge + `,"cache_creation_input_tokens":` + huge + `,"output_tokens":` + huge + `}}`,
			func(url string) (llmclient.Provider, error) {
				return anthropic.New(anthropic.WithBaseURL(url), anthropic.WithAPIKey("k"))
			}},
		{"gemini", `{"candidates":[{"content":{"role":"model","parts":[{"text":"hi"}]},"finishReason":"STOP"}],"modelVersion":"m",` +
			`"usageMetadata":{"promptTokenCount":` + huge + `,"candidatesTokenCount":` + huge + `,"thoughtsTokenCount":` + huge + `}}`,
			func(url string) (llmclient.Provider, error) {
				return gemini.New(gemini.WithBaseURL(url), gemini.WithAPIKey("k"))
			}},
		{"openai", `{"id":"c1","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],` +
			`"usage":{"prompt_tokens":` + huge + `,"completion_tokens":` + huge + `}}`,
			func(url string) (llmclient.Provider, error) { return openai.New(openai.WithBaseURL(url)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write([]byte(tc.body))
			}))
			defer srv.Close()
			p, err := tc.provider(srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			m := priced(t, "m", pricing.Dollar, pricing.Dollar, 0)
			c := newClient(t, pricedUp("u", p, m), llmclient.WithBudget(budget.Budget{Name: "day", Cap: pricing.MaxMoney}))
			resp, err := c.Complete(context.Background(), chatReq("m"))
			if err != nil {
				t.Fatal(err)
			}
			u := resp.Usage
			if u.InputTokens < 0 || u.OutputTokens < 0 || u.TotalTokens < 0 || u.CachedInputTokens < 0 || u.CacheWriteTokens < 0 || u.ReasoningTokens < 0 {
				t.Fatalf("usage wrapped negative: %+v", u)
			}
			if resp.Cost.Known && resp.Cost.Amount <= 0 {
				t.Fatalf("an absurd report priced at %+v", resp.Cost)
			}
			st, err := c.Budget(context.Background(), "day", "")
			if err != nil || st.Spent <= 0 || st.Reserved != 0 {
				t.Fatalf("budget %+v, %v: the call counted nothing", st, err)
			}
		})
	}
}
