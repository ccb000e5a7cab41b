package llmclient_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/finish"
	"github.com/llmclient/llmclient/pricing"
	"github.com/llmclient/llmclient/provider/fake"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A stream that ends content-filtered carries the call's cost and trace in its error,
// whether the caller read its end or the read-ahead did while the caller was away.
func TestFilteredStreamErrorCarriesItsCost(t *testing.T) {
	for _, away := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			m := priced(t, "m", pricing.Dollar, 4*pricing.Dollar, 0)
			p := fake.New(fake.Stream("a", "b").Finish(finish.ContentFilter).Usage(10, 2))
			c := newClient(t, pricedUp("a", p, m))
			s, err := c.Stream(context.Background(), budgetReq())
			require.NoError(t, err)
			defer s.Close()
			require.True(t, s.Next())
			if away {
				time.Sleep(3 * time.Minute) // the read-ahead reads the end meanwhile
			}
			for s.Next() {
			}
			var e *llmclient.Error
			require.ErrorAs(t, s.Err(), &e)
			assert.Equal(t, failure.ContentFiltered, e.Class)
			assert.NotEmpty(t, e.Attempts, "away %v", away)
			assert.True(t, e.Cost.Known, "away %v: the error carries the call's cost", away)
			assert.Positive(t, e.Cost.Amount, "away %v", away)
		})
	}
}
