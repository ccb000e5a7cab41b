package llmclient_test

import (
	"context"
	"testing"
	"testing/synctest"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/budget"
	"github.com/llmclient/llmclient/pricing"
	"github.com/llmclient/llmclient/provider/fake"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Under budget.UnpricedCharge an unpriced attempt counts its UnpricedCost "like a priced
// one": an error response, which vendors do not bill, counts nothing, so retries through
// an outage do not eat the cap. Two 503s and one answer spend one UnpricedCost.
func TestUnpricedChargeCountsNoErrorResponse(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := fake.New(fake.Fail(503).Times(2), fake.Reply("ok").Usage(10, 10).Forever())
		c := newClient(t, up("a", p), llmclient.WithBackoff(1, 2), llmclient.WithBudget(budget.Budget{
			Name: "b", Cap: 10 * pricing.Dollar, Unpriced: budget.UnpricedCharge, UnpricedCost: pricing.Dollar}))
		resp, err := c.Complete(context.Background(), chatReq("no-such-model-anywhere"))
		require.NoError(t, err)
		require.Len(t, resp.Attempts, 3)
		for _, a := range resp.Attempts[:2] {
			assert.True(t, a.Cost.Known, "a 503 costs a known $0")
			assert.Zero(t, a.Cost.Amount)
		}
		st, err := c.Budget(context.Background(), "b", "")
		require.NoError(t, err)
		assert.Equal(t, pricing.Dollar, st.Spent)
		assert.Zero(t, st.Reserved)
	})
}
