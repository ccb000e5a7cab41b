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
)

// A request whose shape the dialect does not know (legacy completions, images) can cost
// money: a budget's unpriced policy applies to it (the default refuses it, without a
// call), unless the transport is told to pass such requests. Reads (GET) cost nothing
// and pass.
func TestTransportUnknownShapesAreBudgetedAsUnpriced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		up := newScript(ok(`{"id":"x"}`))
		c := newClient(t, oaiUpstream(t, "oai", "http://oai.test/v1"),
			llmclient.WithPricing(nil), llmclient.WithBudget(budget.Budget{Name: "day", Cap: pricing.Dollar}))
		rt := c.Transport(memTransport{up})
		for _, path := range []string{"/v1/completions", "/v1/images/generations"} {
			resp, err := post(t, context.Background(), rt, "http://oai.test"+path, `{"model":"gpt-3.5-turbo-instruct","prompt":"hi"}`)
			require.NoError(t, err)
			_, _ = readBody(t, resp)
			assert.Equal(t, http.StatusForbidden, resp.StatusCode, path)
			assert.Equal(t, "unpriced", resp.Header.Get("X-Llmclient-Class"), path)
		}
		assert.Zero(t, up.count(), "refused without a call")

		req, err := http.NewRequest(http.MethodGet, "http://oai.test/v1/models", nil)
		require.NoError(t, err)
		resp, err := rt.RoundTrip(req)
		require.NoError(t, err)
		_, _ = readBody(t, resp)
		assert.Equal(t, 200, resp.StatusCode, "a read costs nothing")

		pass := c.Transport(memTransport{up}, llmclient.WithPassUnpriced(true))
		resp, err = post(t, context.Background(), pass, "http://oai.test/v1/completions", `{"model":"gpt-3.5-turbo-instruct","prompt":"hi"}`)
		require.NoError(t, err)
		_, _ = readBody(t, resp)
		assert.Equal(t, 200, resp.StatusCode, "passed by choice")
		assert.Equal(t, 2, up.count())
	})
}
