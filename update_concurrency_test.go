package llmclient_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/provider/fake"
)

// A call queued for the only concurrency slot when Update raises MaxConcurrent is admitted
// on the new limits at once, not when the long call holding the old slot ends.
func TestUpdateRaisedConcurrencyAdmitsQueuedCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := fake.New(fake.Reply("slow").Latency(9*time.Minute), fake.Reply("ok").Forever())
		c := newClient(t, llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: p, Keys: []string{"k1"},
			Limits: llmclient.Limits{MaxConcurrent: 1}}), llmclient.WithCallBudget(0))
		slow := make(chan error, 1)
		go func() {
			_, err := c.Complete(context.Background(), chatReq("m"))
			slow <- err
		}()
		synctest.Wait()
		start := time.Now()
		queued := make(chan time.Duration, 1)
		go func() {
			if _, err := c.Complete(context.Background(), chatReq("m")); err != nil {
				t.Errorf("queued call: %v", err)
			}
			queued <- time.Since(start)
		}()
		synctest.Wait()
		if err := c.Update(llmclient.SetLimits("a", llmclient.Limits{MaxConcurrent: 10})); err != nil {
			t.Fatal(err)
		}
		if d := <-queued; d > time.Second {
			t.Errorf("call queued before MaxConcurrent was raised to 10 admitted after %v", d)
		}
		if err := <-slow; err != nil {
			t.Errorf("slow call: %v", err)
		}
	})
}
