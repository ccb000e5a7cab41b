package llmclient_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/budget"
	"github.com/llmclient/llmclient/event"
	"github.com/llmclient/llmclient/pricing"
	"github.com/llmclient/llmclient/provider/openai"
)

// largeChatBody is a gpt-4o chat completion over the 1 KiB replay limit the tests set.
var largeChatBody = `{"model":"gpt-4o","messages":[{"role":"user","content":"` + strings.Repeat("x", 2048) + `"}]}`

// postLarge sends largeChatBody through rt: with GetBody (an in-memory body, which the
// transport can recreate) or without (a body it can only send once).
func postLarge(t *testing.T, rt http.RoundTripper, url string, getBody bool) *http.Response {
	t.Helper()
	var body io.Reader = strings.NewReader(largeChatBody)
	if !getBody {
		body = io.MultiReader(body) // no GetBody, no ContentLength
	}
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, url, body)
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	resp, err := rt.RoundTrip(req)
	require.NoError(t, err)
	_, _ = readBody(t, resp)
	return resp
}

// A chat completion whose body is too large for the transport to read (over
// WithMaxReplayBody) is of a shape the dialect prices, whatever model it names: no budget
// refuses it as unpriced before the call, and every budget counts what its answer cost —
// the cost its event.Call reports, never less — whatever its Unpriced policy.
func TestTransportBudgetsCountABodyTooLargeToRead(t *testing.T) {
	for _, pol := range []budget.Unpriced{budget.UnpricedRefuse, budget.UnpricedAllow, budget.UnpricedCharge} {
		for _, getBody := range []bool{true, false} {
			name := pol.String() + "/sent once"
			if getBody {
				name = pol.String() + "/GetBody"
			}
			t.Run(name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					up := newScript(ok(chatOK))
					bud := budget.Budget{Name: "d", Cap: pricing.Dollar, Unpriced: pol}
					if pol == budget.UnpricedCharge {
						bud.UnpricedCost = pricing.Cent
					}
					var log eventLog
					c := newClient(t, oaiUpstream(t, "a", "http://a.test/v1"), llmclient.WithBudget(bud), llmclient.WithObserver(log.observe))
					rt := c.Transport(memTransport{up}, llmclient.WithMaxReplayBody(1024))

					resp := postLarge(t, rt, "http://a.test/v1/chat/completions", getBody)
					require.Equal(t, 200, resp.StatusCode, resp.Header.Get("X-Llmclient-Class"))
					require.Equal(t, 1, up.count())
					calls := log.kinds(event.Call)
					require.Len(t, calls, 1)
					cost := calls[0].Cost
					require.True(t, cost.Known, "gpt-4o's answer is priced")
					require.Positive(t, cost.Amount)
					st, err := c.Budget(context.Background(), "d", "")
					require.NoError(t, err)
					assert.Equal(t, cost.Amount, st.Spent, "the budget counts what the call cost")
					assert.Zero(t, st.Reserved)
				})
			})
		}
	}
}

// A budget at its cap refuses a body too large to read, before any call, although its
// cost is not known before the call: exactly at the cap as above it.
func TestTransportBudgetAtItsCapRefusesABodyTooLargeToRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// What one call costs, on a Client of its own.
		up := newScript(ok(chatOK))
		var log eventLog
		c := newClient(t, oaiUpstream(t, "a", "http://a.test/v1"),
			llmclient.WithBudget(budget.Budget{Name: "d", Cap: pricing.Dollar}), llmclient.WithObserver(log.observe))
		resp := postLarge(t, c.Transport(memTransport{up}, llmclient.WithMaxReplayBody(1024)), "http://a.test/v1/chat/completions", true)
		require.Equal(t, 200, resp.StatusCode, resp.Header.Get("X-Llmclient-Class"))
		calls := log.kinds(event.Call)
		require.Len(t, calls, 1)
		cost := calls[0].Cost.Amount
		require.Positive(t, cost)

		// A cap of exactly that: the first call fills it, the second is refused.
		up = newScript(ok(chatOK))
		c = newClient(t, oaiUpstream(t, "a", "http://a.test/v1"), llmclient.WithBudget(budget.Budget{Name: "d", Cap: cost}))
		rt := c.Transport(memTransport{up}, llmclient.WithMaxReplayBody(1024))
		resp = postLarge(t, rt, "http://a.test/v1/chat/completions", true)
		require.Equal(t, 200, resp.StatusCode, resp.Header.Get("X-Llmclient-Class"))
		resp = postLarge(t, rt, "http://a.test/v1/chat/completions", true)
		assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
		assert.Equal(t, "budget_exceeded", resp.Header.Get("X-Llmclient-Class"))
		assert.Equal(t, 1, up.count(), "refused without a call")
		st, err := c.Budget(context.Background(), "d", "")
		require.NoError(t, err)
		assert.Equal(t, cost, st.Spent)
	})
}

// A body too large to read cannot have its model renamed: a budget's Reroute group whose
// upstream knows the model under another name does not get it, with the caller's model
// name, on its account.
func TestTransportDoesNotRerouteABodyItCannotRename(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := newScript(ok(chatOK)), newScript(ok(chatOKmini))
		mem := memTransport{hostMux{"a.test": a, "b.test": b}}
		pa, err := openai.New(openai.WithBaseURL("http://a.test/v1"))
		require.NoError(t, err)
		pb, err := openai.New(openai.WithBaseURL("http://b.test/v1"))
		require.NoError(t, err)
		c := newClient(t,
			llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: pa, Keys: []string{"ka"}}),
			llmclient.WithUpstream(llmclient.Upstream{Name: "b", Provider: pb, Keys: []string{"kb"},
				Models: map[string]string{"economy": "gpt-4o-mini"}}),
			llmclient.WithModelGroup("economy", "b"),
			llmclient.WithBudget(budget.Budget{Name: "d", Cap: pricing.Picodollar, Reroute: "economy"}))
		rt := c.Transport(mem, llmclient.WithMaxReplayBody(1024))
		resp := postLarge(t, rt, "http://a.test/v1/chat/completions", true)
		assert.Equal(t, 200, resp.StatusCode, "the first call fits under the cap")
		resp = postLarge(t, rt, "http://a.test/v1/chat/completions", true)
		assert.NotEqual(t, 200, resp.StatusCode)
		assert.Equal(t, 1, a.count())
		assert.Zero(t, b.count(), "b would get gpt-4o, not its gpt-4o-mini")
	})
}
