package llmclient_test

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient/limitstore"

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

// sharedReplicas returns two Clients (replicas) that share store, each with its own
// provider built by script, serving keys k1 and k2 under limits l.
func sharedReplicas(t *testing.T, store limitstore.Store, l llmclient.Limits, keys []string, script func() *fake.Provider) (a, b *llmclient.Client, pa, pb *fake.Provider) {
	t.Helper()
	pa, pb = script(), script()
	replica := func(p *fake.Provider) *llmclient.Client {
		return newClient(t, llmclient.WithLimitStore(store), llmclient.WithUpstream(llmclient.Upstream{
			Name: "vendor", Provider: p, Keys: keys, Limits: l}))
	}
	return replica(pa), replica(pb), pa, pb
}

// An eviction seen by one replica (a 401 on k1) is shared through the store, also when
// the keys have no Limits: the other replica never calls k1.
func TestSharedStoreEvictionWithoutLimits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		script := func() *fake.Provider {
			return fake.New(fake.Func(func(call *llmclient.Call) fake.Step {
				if call.APIKey == "k1" {
					return fake.Fail(401)
				}
				return fake.Reply("ok")
			}).Forever())
		}
		a, b, _, pb := sharedReplicas(t, limitstore.NewMemory(), llmclient.Limits{}, []string{"k1", "k2"}, script)
		resp, err := a.Complete(context.Background(), chatReq("m"))
		require.NoError(t, err)
		require.Equal(t, []string{"key#1", "key#2"}, []string{resp.Attempts[0].Key, resp.Attempts[1].Key})
		for range 5 {
			resp, err = b.Complete(context.Background(), chatReq("m"))
			require.NoError(t, err)
			assert.Len(t, resp.Attempts, 1)
		}
		for _, r := range pb.Requests() {
			assert.NotEqual(t, "k1", r.APIKey, "replica b called the key replica a saw evicted")
		}
	})
}

// A 429 pause seen by one replica is shared through the store without Limits: the
// other replica moves to its next key at once; with a single key it waits the pause out
// when the deadline allows, and is refused at once when it does not.
func TestSharedStorePauseWithoutLimits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var paused atomic.Bool
		paused.Store(true)
		script := func() *fake.Provider {
			return fake.New(fake.Func(func(call *llmclient.Call) fake.Step {
				if call.APIKey == "k1" && paused.Load() {
					return fake.Fail(429).RetryAfter(20 * time.Second)
				}
				return fake.Reply("ok")
			}).Forever())
		}
		// Two keys: replica b goes to k2 without waiting and without calling k1.
		a, b, _, pb := sharedReplicas(t, limitstore.NewMemory(), llmclient.Limits{}, []string{"k1", "k2"}, script)
		_, err := a.Complete(context.Background(), chatReq("m"))
		require.NoError(t, err)
		var resp *llmclient.Response
		d := elapsed(func() { resp, err = b.Complete(context.Background(), chatReq("m")) })
		require.NoError(t, err)
		assert.Zero(t, d, "no wait for the paused key")
		assert.Equal(t, "key#2", resp.Attempts[0].Key)
		for _, r := range pb.Requests() {
			assert.NotEqual(t, "k1", r.APIKey)
		}

		// One key: replica b waits for the pause within its deadline, or is refused at once.
		a, b, _, pb = sharedReplicas(t, limitstore.NewMemory(), llmclient.Limits{}, []string{"k1"}, script)
		_, err = a.Complete(context.Background(), chatReq("m"))
		require.Error(t, err)
		short, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		d = elapsed(func() { _, err = b.Complete(short, chatReq("m")) })
		require.ErrorIs(t, err, llmclient.ErrNoKey)
		assert.Zero(t, d, "a pause that does not fit the deadline is refused at once")
		assert.Empty(t, pb.Requests())
		paused.Store(false)
		d = elapsed(func() { _, err = b.Complete(context.Background(), chatReq("m")) })
		require.NoError(t, err)
		assert.InDelta(t, float64(20*time.Second), float64(d), float64(time.Second), "waited the shared pause out")
	})
}
