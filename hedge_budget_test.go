package llmclient_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/provider/fake"
	"github.com/stretchr/testify/assert"
)

// A hedge the retry budget refuses at the last moment (another call's hedge took the one
// retry left between the check that sent it and its call) is a local refusal, not a
// failure of the request: it never cancels the attempt it hedges, whatever the decision
// for its class says, and a call whose only error it is still returns an *Error, never a
// nil one (which Complete dereferenced: a panic).
func TestHedgeRefusedByTheRetryBudgetLeavesThePrimary(t *testing.T) {
	for range 20 { // the refusal needs two hedges checked before either is sent
		synctest.Test(t, func(t *testing.T) {
			primary := fake.New(fake.Reply("primary").Latency(time.Second).Forever())
			secondary := fake.New(fake.Reply("secondary").Latency(time.Hour).Forever())
			c := newClient(t, up("primary", primary), up("secondary", secondary), hedging(100*time.Millisecond),
				llmclient.WithRetryBudget(0, 1, time.Minute),
				llmclient.WithDecision(failure.Unavailable, llmclient.Decision{Retry: true}))
			var wg sync.WaitGroup
			for range 8 {
				wg.Go(func() {
					resp, err := c.Complete(context.Background(), chatReq("m"))
					if assert.NoError(t, err) {
						assert.Equal(t, "primary", resp.Upstream)
					}
				})
			}
			wg.Wait()
			assert.Equal(t, 8, primary.Calls())
			assert.LessOrEqual(t, secondary.Calls(), 1, "the budget's one retry")
			assertNothingHeld(t, c)
		})
	}
}
