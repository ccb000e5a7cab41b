package llmclient_test

import (
	"context"
	"github.com/llmclient/llmclient/limitstore"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/provider/fake"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Two replicas share one limit store: a 429 seen by one pauses the key for the other,
// which moves to its next key at once instead of calling the paused one or waiting.
func TestSharedStorePauseMovesOtherReplicasToAnotherKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := limitstore.NewMemory()
		script := func() *fake.Provider {
			return fake.New(fake.Func(func(call *llmclient.Call) fake.Step {
				if call.APIKey == "k1" {
					return fake.Fail(429).RetryAfter(20 * time.Second)
				}
				return fake.Reply("ok")
			}).Forever())
		}
		pa, pb := script(), script()
		replica := func(p *fake.Provider) *llmclient.Client {
			return newClient(t, llmclient.WithLimitStore(store), llmclient.WithUpstream(llmclient.Upstream{
				Name: "vendor", Provider: p, Keys: []string{"k1", "k2"}, Limits: llmclient.Limits{RPM: 600},
			}))
		}
		a, b := replica(pa), replica(pb)

		resp, err := a.Complete(context.Background(), chatReq("m"))
		require.NoError(t, err)
		assert.Equal(t, []string{"key#1", "key#2"}, []string{resp.Attempts[0].Key, resp.Attempts[1].Key})

		var d time.Duration
		d = elapsed(func() { resp, err = b.Complete(context.Background(), chatReq("m")) })
		require.NoError(t, err)
		assert.Zero(t, d, "no wait for the paused key")
		for _, r := range pb.Requests() {
			assert.NotEqual(t, "k1", r.APIKey, "replica b never calls the key replica a saw paused")
		}
		require.Len(t, resp.Attempts, 1)
		assert.Equal(t, "key#2", resp.Attempts[0].Key)
	})
}
