package llmclient_test

import (
	"context"
	"net/http"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/budget"
	"github.com/llmclient/llmclient/pricing"
	"github.com/llmclient/llmclient/provider/openai"
)

const chatOKmini = `{"id":"c2","object":"chat.completion","model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":1,"total_tokens":6}}`

// An upstream that a fallback brings into a call — a budget's Reroute group, or a fallback
// group (WithGroupFallback) — maps the fallback group's name, not the request's model. The
// transport takes it as Complete does: the call goes there under that upstream's name for
// the fallback group, with the upstream's own key and none of the caller's credentials.
func TestTransportFollowsFallbackGroups(t *testing.T) {
	for _, how := range []string{"budget reroute", "group fallback"} {
		t.Run(how, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				a, b := newScript(status(503, err503)), newScript(ok(chatOKmini))
				mem := memTransport{hostMux{"a.test": a, "b.test": b}}
				prov := func(base string) llmclient.Provider {
					p, err := openai.New(openai.WithBaseURL(base), openai.WithHTTPClient(&http.Client{Transport: mem}))
					require.NoError(t, err)
					return p
				}
				opts := []llmclient.Option{
					llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: prov("http://a.test/v1"), Keys: []string{"ka"},
						Models: map[string]string{"gpt-4o": "gpt-4o"}}),
					llmclient.WithUpstream(llmclient.Upstream{Name: "b", Provider: prov("http://b.test/v1"), Keys: []string{"kb"},
						Models: map[string]string{"economy": "gpt-4o-mini"}}),
					llmclient.WithModelGroup("gpt-4o", "a"), llmclient.WithModelGroup("economy", "b"),
					llmclient.WithMaxAttempts(1),
				}
				if how == "budget reroute" {
					// A cap below the gpt-4o estimate: every call is refused on a and
					// rerouted, before any call to a.
					a.steps = []func(http.ResponseWriter, *http.Request){ok(chatOK)}
					opts = append(opts, llmclient.WithBudget(budget.Budget{Name: "d", Cap: pricing.Dollar / 10000, Reroute: "economy"}))
				} else {
					opts = append(opts, llmclient.WithGroupFallback("gpt-4o", "economy"))
				}
				c := newClient(t, opts...)
				rt := c.Transport(mem)

				// Complete on the same Client and upstreams is served by b as gpt-4o-mini.
				r := chatReq("gpt-4o")
				r.MaxTokens = 100
				cr, err := c.Complete(context.Background(), r)
				require.NoError(t, err)
				require.Equal(t, "b", upstreamOf(cr))
				require.Equal(t, "gpt-4o-mini", cr.Model)

				nb := b.count()
				resp, err := post(t, context.Background(), rt, "http://a.test/v1/chat/completions",
					`{"model":"gpt-4o","max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`,
					"Authorization", "Bearer sk-caller")
				require.NoError(t, err)
				body, _ := readBody(t, resp)
				require.Equal(t, 200, resp.StatusCode, "%s: %s", resp.Header.Get("X-Llmclient-Class"), body)
				got := b.requests()
				require.Len(t, got, nb+1, "b serves the transport's call")
				assert.JSONEq(t, `{"model":"gpt-4o-mini","max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`, got[nb].Body)
				assert.Equal(t, "Bearer kb", got[nb].Header.Get("Authorization"), "b's own key, never the caller's")
			})
		})
	}
}
