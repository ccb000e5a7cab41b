package llmclient_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/limitstore"
	"github.com/llmclient/llmclient/provider/fake"
	"github.com/llmclient/llmclient/ratelimit"
)

// TestLimitsChangeWithMaxConcurrentKeepsWhatTheBucketsOwe: a change of MaxConcurrent
// gives the key new slots, but its request bucket keeps what it owes: after the minute's
// five requests are spent, lowering RPM to 4 together with MaxConcurrent admits nothing
// more at once (a new state with full buckets let four more through). On a shared store
// the lowered RPM applies too.
func TestLimitsChangeWithMaxConcurrentKeepsWhatTheBucketsOwe(t *testing.T) {
	for _, shared := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			opts := []llmclient.Option{llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: fake.New(fake.Reply("ok").Forever()), Keys: []string{"k1"},
				Limits: llmclient.Limits{RPM: 5, RequestBurst: 5, MaxConcurrent: 10}}), llmclient.WithLimiterMode(ratelimit.FailFast)}
			if shared {
				opts = append(opts, llmclient.WithLimitStore(limitstore.NewMemory()))
			}
			c := newClient(t, opts...)
			for i := range 5 {
				if _, err := c.Complete(context.Background(), chatReq("m")); err != nil {
					t.Fatalf("shared=%v: call %d within RPM: %v", shared, i, err)
				}
			}
			if _, err := c.Complete(context.Background(), chatReq("m")); !errors.Is(err, llmclient.ErrRateLimited) {
				t.Fatalf("shared=%v: sixth call before the change: %v, want ErrRateLimited", shared, err)
			}
			if err := c.Update(llmclient.SetLimits("a", llmclient.Limits{RPM: 4, RequestBurst: 4, MaxConcurrent: 5})); err != nil {
				t.Fatal(err)
			}
			if _, err := c.Complete(context.Background(), chatReq("m")); !errors.Is(err, llmclient.ErrRateLimited) {
				t.Errorf("shared=%v: a call right after lowering RPM with MaxConcurrent: %v, want ErrRateLimited (the bucket was spent)", shared, err)
			}
			time.Sleep(13 * time.Second) // one request's refill at 5 RPM, not yet at 4
			if _, err := c.Complete(context.Background(), chatReq("m")); !errors.Is(err, llmclient.ErrRateLimited) {
				t.Errorf("shared=%v: a call 13 s after lowering RPM to 4: %v, want ErrRateLimited (15 s a request)", shared, err)
			}
			time.Sleep(18 * time.Second) // the deficit of 5 stays owed under a burst of 4: level -1, refilled by 30 s
			if _, err := c.Complete(context.Background(), chatReq("m")); err != nil {
				t.Errorf("shared=%v: a call 31 s after lowering RPM to 4: %v", shared, err)
			}
		})
	}
}
