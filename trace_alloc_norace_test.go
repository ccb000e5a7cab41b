//go:build !race

package llmclient_test

import (
	"context"
	"testing"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/stretchr/testify/require"
)

// A call through every layer (a key pool, RPM, TPM and concurrency limits, the breaker,
// retry with its budget) that its first attempt serves allocates nothing of its own: the
// adapter's response is the one allocation. A call whose context has no deadline also
// pays for the timer that bounds it by its time budget (WithCallBudget). (Not under
// -race, whose sync.Pool drops objects at random.)
func TestCompleteAllocatesOnlyTheResponse(t *testing.T) {
	c := newClient(t, llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: freshOK{}, Keys: []string{"k1", "k2"},
		Limits: llmclient.Limits{RPM: 1 << 40, TPM: 1 << 50, MaxConcurrent: 1 << 20}}))
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	req := chatReq("m")
	_, err := c.Complete(ctx, req)
	require.NoError(t, err)
	n := testing.AllocsPerRun(200, func() {
		if _, err := c.Complete(ctx, req); err != nil {
			t.Fatal(err)
		}
	})
	require.LessOrEqual(t, n, 1.0, "allocations per call beyond the adapter's response")
	n = testing.AllocsPerRun(200, func() {
		if _, err := c.Complete(context.Background(), req); err != nil {
			t.Fatal(err)
		}
	})
	require.LessOrEqual(t, n, 6.0, "allocations per call without a deadline: the response, the time budget's context and the attempt's timer")
}
