package llmclient_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/budget"
	"github.com/llmclient/llmclient/event"
	"github.com/llmclient/llmclient/pricing"
)

// TestCostTransport: in transport mode the caller gets the vendor's own response, so the
// cost is on the events: the attempt and the call priced from the usage the upstream
// reported, and counted by a budget. A 503 before it is a known $0.
func TestCostTransport(t *testing.T) {
	up := newScript(status(503, err503), ok(chatOK))
	srv := httptest.NewServer(up)
	defer srv.Close()
	var log eventLog
	c := newClient(t, append(fast(), oaiUpstream(t, "oai", srv.URL+"/v1"), llmclient.WithObserver(log.observe),
		llmclient.WithPricing(nil), llmclient.WithBudget(budget.Budget{Name: "day", Cap: pricing.Dollar}))...)
	req, err := http.NewRequest(http.MethodPost, srv.URL+"/v1/chat/completions", strings.NewReader(chatBody))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Transport(nil).RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := readBody(t, resp); err != nil {
		t.Fatal(err)
	}
	// chatOK: gpt-4o, 5 prompt and 1 completion tokens; the request named the model too.
	m, ok := pricing.Default().Lookup("openai", "gpt-4o")
	if !ok {
		t.Fatal("gpt-4o is not in the snapshot")
	}
	want := costOf(t, m, pricing.Tokens{Input: 5, Output: 1}, time.Now())
	attempts := log.kinds(event.Attempt)
	if len(attempts) != 2 || attempts[0].Cost != (pricing.Cost{Known: true, Model: m}) || attempts[1].Cost.Amount != want || !attempts[1].Cost.Known {
		t.Fatalf("attempt costs: %+v", attempts)
	}
	calls := log.kinds(event.Call)
	if len(calls) != 1 || calls[0].Cost.Amount != want || !calls[0].Cost.Known {
		t.Fatalf("call costs: %+v", calls)
	}
	st, err := c.Budget(context.Background(), "day", "")
	if err != nil || st.Spent != want || st.Reserved != 0 {
		t.Fatalf("budget %+v, %v: want %v", st, err, want)
	}
	if _, err := c.Budget(context.Background(), "no-such-budget", ""); err == nil || !strings.Contains(err.Error(), "no budget") {
		t.Fatalf("an unknown budget: %v", err)
	}
}
