package llmclient_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/budget"
	"github.com/llmclient/llmclient/event"
	"github.com/llmclient/llmclient/pricing"
)

// hostileUsages are usage objects a lying or broken upstream may answer a gpt-4o call
// with; in and out are the counts the Client takes from one, both 0 for a report it must
// not take, whose call then costs the Client's estimate.
var hostileUsages = []struct {
	name, usage string
	in, out     int
}{
	{"negative", `{"prompt_tokens":-5,"completion_tokens":-1000000}`, 0, 0},
	{"negative input", `{"prompt_tokens":-5,"completion_tokens":3,"total_tokens":-2}`, 0, 0},
	{"fractional", `{"prompt_tokens":5.7,"completion_tokens":3,"total_tokens":8.7}`, 5, 3},
	{"1e18", `{"prompt_tokens":1e18,"completion_tokens":1}`, 0, 0},
	{"-1e18", `{"prompt_tokens":1,"completion_tokens":-1e18}`, 0, 0},
	{"MaxInt64", `{"prompt_tokens":9223372036854775807,"completion_tokens":9223372036854775807}`, 0, 0},
	{"beyond int64", `{"prompt_tokens":92233720368547758070,"completion_tokens":1}`, 0, 0},
	{"above 2^30", `{"prompt_tokens":1073741825,"completion_tokens":1}`, 0, 0},
	{"a string", `{"prompt_tokens":"5","completion_tokens":3}`, 0, 0},
}

// chatWithUsage is a gpt-4o answer carrying usage (none when usage is "").
func chatWithUsage(usage string) string {
	body := `{"id":"c1","object":"chat.completion","model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]`
	if usage != "" {
		body += `,"usage":` + usage
	}
	return body + `}`
}

// hostileClient is a Client priced from the embedded table, with a budget, whose one
// OpenAI upstream answers every call with body.
func hostileClient(t *testing.T, body string) (*llmclient.Client, *script, *eventLog, string) {
	t.Helper()
	up := newScript(ok(body))
	srv := httptest.NewServer(up)
	t.Cleanup(srv.Close)
	log := new(eventLog)
	c := newClient(t, append(fast(), oaiUpstream(t, "oai", srv.URL+"/v1"), llmclient.WithObserver(log.observe),
		llmclient.WithPricing(nil), llmclient.WithBudget(budget.Budget{Name: "day", Cap: 100 * pricing.Dollar}))...)
	return c, up, log, srv.URL
}

// checkHostileSpend fails t unless the call was made once, its attempt event carries
// usage and cost as want says, and the budget spent that cost.
func checkHostileSpend(t *testing.T, c *llmclient.Client, up *script, log *eventLog, want pricing.Cost, in, out int) {
	t.Helper()
	if n := up.count(); n != 1 {
		t.Fatalf("%d upstream calls, want 1", n)
	}
	attempts := log.kinds(event.Attempt)
	if len(attempts) != 1 || attempts[0].Cost.Amount != want.Amount || attempts[0].Cost.Known != want.Known ||
		attempts[0].Cost.Estimated != want.Estimated || attempts[0].InputTokens < 0 || attempts[0].OutputTokens < 0 {
		t.Fatalf("attempt events %+v; want one costing %+v", attempts, want)
	}
	if in != 0 && (attempts[0].InputTokens != in || attempts[0].OutputTokens != out) {
		t.Fatalf("attempt event usage in=%d out=%d, want %d and %d", attempts[0].InputTokens, attempts[0].OutputTokens, in, out)
	}
	st, err := c.Budget(context.Background(), "day", "")
	if err != nil || st.Spent != want.Amount || st.Reserved != 0 {
		t.Fatalf("budget %+v, %v: want %v spent", st, err, want.Amount)
	}
}

// TestHostileUsageComplete: a one-shot answer whose usage cannot be the call's (a negative
// count, 1e18, beyond int64, above 2^30 tokens, not a number) is served once, never
// failed and retried, and costs what an answer without usage costs: the Client's
// estimate, marked estimated, in the response, the attempt event and the budget, never a
// known $0 nor a budget's cap. A fractional count is read truncated, as the transport
// reads it.
func TestHostileUsageComplete(t *testing.T) {
	m, found := pricing.Default().Lookup("openai", "gpt-4o")
	if !found {
		t.Fatal("gpt-4o is not in the snapshot")
	}
	c, _, _, _ := hostileClient(t, chatWithUsage(""))
	base, err := c.Complete(context.Background(), chatReq("gpt-4o"))
	if err != nil || !base.Usage.Estimated || !base.Cost.Estimated || !base.Cost.Known || base.Cost.Amount <= 0 {
		t.Fatalf("without usage: %+v, %v", base, err)
	}
	for _, tc := range hostileUsages {
		t.Run(tc.name, func(t *testing.T) {
			c, up, log, _ := hostileClient(t, chatWithUsage(tc.usage))
			resp, err := c.Complete(context.Background(), chatReq("gpt-4o"))
			if err != nil {
				t.Fatalf("Complete: %v", err)
			}
			if resp.Text != "hi" {
				t.Fatalf("text %q", resp.Text)
			}
			u := resp.Usage
			want := base.Cost
			if tc.in != 0 {
				want = pricing.Cost{Amount: costOf(t, m, pricing.Tokens{Input: tc.in, Output: tc.out}, time.Now()), Known: true}
				if u.InputTokens != tc.in || u.OutputTokens != tc.out || u.Estimated {
					t.Fatalf("usage %+v, want %d in and %d out as reported", u, tc.in, tc.out)
				}
			} else if u != base.Usage {
				t.Fatalf("usage %+v, want the estimate %+v", u, base.Usage)
			}
			if resp.Cost.Amount != want.Amount || resp.Cost.Known != want.Known || resp.Cost.Estimated != want.Estimated {
				t.Fatalf("cost %+v, want %+v", resp.Cost, want)
			}
			checkHostileSpend(t, c, up, log, want, tc.in, tc.out)
		})
	}
}

// TestHostileUsageTransport: the Transport reads and takes a one-shot body's usage by the
// same rules as Complete: an impossible one (1e18 included, which it used to bill) is
// priced as a body without usage (the Client's estimate, marked estimated), a fractional
// count is truncated; the caller gets the body as the upstream sent it, after one call.
func TestHostileUsageTransport(t *testing.T) {
	m, found := pricing.Default().Lookup("openai", "gpt-4o")
	if !found {
		t.Fatal("gpt-4o is not in the snapshot")
	}
	call := func(t *testing.T, c *llmclient.Client, srvURL string) string {
		t.Helper()
		resp, err := post(t, context.Background(), c.Transport(nil), srvURL+"/v1/chat/completions", chatBody)
		if err != nil {
			t.Fatal(err)
		}
		body, err := readBody(t, resp)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d, %v", resp.StatusCode, err)
		}
		return body
	}
	baseClient, _, baseLog, baseURL := hostileClient(t, chatWithUsage(""))
	call(t, baseClient, baseURL)
	attempts := baseLog.kinds(event.Attempt)
	if len(attempts) != 1 || !attempts[0].Cost.Known || !attempts[0].Cost.Estimated || attempts[0].Cost.Amount <= 0 {
		t.Fatalf("without usage: attempts %+v", attempts)
	}
	estimate := attempts[0].Cost
	for _, tc := range hostileUsages {
		t.Run(tc.name, func(t *testing.T) {
			body := chatWithUsage(tc.usage)
			c, up, log, url := hostileClient(t, body)
			if got := call(t, c, url); got != body {
				t.Fatalf("body %q, want the upstream's %q", got, body)
			}
			want := pricing.Cost{Amount: estimate.Amount, Known: true, Estimated: true}
			if tc.in != 0 {
				want = pricing.Cost{Amount: costOf(t, m, pricing.Tokens{Input: tc.in, Output: tc.out}, time.Now()), Known: true}
			}
			checkHostileSpend(t, c, up, log, want, tc.in, tc.out)
		})
	}
}

// TestHostileUsageStream: a stream whose usage chunk cannot be the call's is settled as a
// stream without usage: the response's usage is the Client's estimate, its cost estimated
// and counted by the budget, and no chunk hands the caller a negative count.
func TestHostileUsageStream(t *testing.T) {
	for _, usage := range []string{`{"prompt_tokens":-5,"completion_tokens":-1000000}`, `{"prompt_tokens":1e18,"completion_tokens":1}`} {
		up := newScript(sseStep(ev{data: roleChunk}, ev{data: chunk("hi")}, ev{data: stopChunk},
			ev{data: `data: {"id":"s1","object":"chat.completion.chunk","model":"gpt-4o","choices":[],"usage":` + usage + "}\n\n"}, ev{data: done}))
		srv := httptest.NewServer(up)
		var log eventLog
		c := newClient(t, append(fast(), oaiUpstream(t, "oai", srv.URL+"/v1"), llmclient.WithObserver(log.observe),
			llmclient.WithPricing(nil), llmclient.WithBudget(budget.Budget{Name: "day", Cap: 100 * pricing.Dollar}))...)
		s, err := c.Stream(context.Background(), chatReq("gpt-4o"))
		if err != nil {
			t.Fatal(err)
		}
		for s.Next() {
			if u := s.Current().Usage; u != nil && (u.InputTokens < 0 || u.OutputTokens < 0 || u.InputTokens > 1<<30) {
				t.Fatalf("%s: a chunk's usage %+v", usage, u)
			}
		}
		if err := s.Err(); err != nil {
			t.Fatal(err)
		}
		resp := s.Response()
		if u := resp.Usage; !u.Estimated || u.InputTokens <= 0 || u.OutputTokens != 1 {
			t.Fatalf("%s: usage %+v, want the estimate", usage, u)
		}
		if !resp.Cost.Known || !resp.Cost.Estimated || resp.Cost.Amount <= 0 {
			t.Fatalf("%s: cost %+v, want an estimated one", usage, resp.Cost)
		}
		checkHostileSpend(t, c, up, &log, resp.Cost, 0, 0)
		srv.Close()
	}
}
