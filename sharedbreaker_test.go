package llmclient_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/breaker"
	"github.com/llmclient/llmclient/limitstore"
	"github.com/llmclient/llmclient/provider/fake"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Breaker state shared by the Clients that share a store.

// replica is one Client of a service: its own view of the primary and a backup.
func replica(t *testing.T, store limitstore.Store, primary *fake.Provider, extra ...llmclient.Option) *llmclient.Client {
	opts := append([]llmclient.Option{
		up("primary", primary), up("backup", fake.New(fake.Reply("backup").Forever())),
		llmclient.WithLimitStore(store), llmclient.WithSharedBreakers("primary"), llmclient.WithMaxAttempts(1),
		llmclient.WithBreaker(breaker.Config{ConsecutiveFailures: 2, OpenTimeout: 30 * time.Second, SuccessesToClose: 1}),
	}, extra...)
	return newClient(t, opts...)
}

func TestSharedBreakerOpensOnEveryReplica(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := limitstore.NewMemory()
		downOnA := fake.New(fake.Fail(500).Forever())
		a := replica(t, store, downOnA)
		fineOnB := fake.New(fake.Reply("primary").Forever())
		b := replica(t, store, fineOnB)

		for range 2 {
			resp, err := a.Complete(context.Background(), chatReq("m"))
			require.NoError(t, err)
			assert.Equal(t, "backup", resp.Upstream)
		}
		require.Equal(t, breaker.Open, a.Breaker("primary").State())

		resp, err := b.Complete(context.Background(), chatReq("m"))
		require.NoError(t, err)
		assert.Equal(t, "backup", resp.Upstream, "B honours A's trip")
		assert.Zero(t, fineOnB.Calls())
		require.NotEmpty(t, resp.Attempts)
		assert.ErrorIs(t, resp.Attempts[0].Err, llmclient.ErrCircuitOpen)
		assert.Equal(t, breaker.Closed, b.Breaker("primary").State(), "B's own breaker counted nothing")

		late := fake.New(fake.Reply("primary").Forever())
		c := replica(t, store, late)
		resp, err = c.Complete(context.Background(), chatReq("m"))
		require.NoError(t, err)
		assert.Equal(t, "backup", resp.Upstream, "a replica started later sees the trip")
		assert.Zero(t, late.Calls())

		// A closes its breaker (an operator reset): B, which saw the trip, frees the
		// upstream once it asks the store again, within a second.
		require.NoError(t, a.ResetBreaker("primary"))
		resp, err = b.Complete(context.Background(), chatReq("m"))
		require.NoError(t, err)
		assert.Equal(t, "backup", resp.Upstream, "B holds the trip it saw for up to a second")
		time.Sleep(time.Second)
		resp, err = b.Complete(context.Background(), chatReq("m"))
		require.NoError(t, err)
		assert.Equal(t, "primary", resp.Upstream, "B asked again: the trip is cleared")

		// A trips again; the open period ends on its own.
		for range 2 {
			_, err := a.Complete(context.Background(), chatReq("m"))
			require.NoError(t, err)
		}
		resp, err = b.Complete(context.Background(), chatReq("m"))
		require.NoError(t, err)
		assert.Equal(t, "backup", resp.Upstream)
		time.Sleep(30 * time.Second)
		resp, err = b.Complete(context.Background(), chatReq("m"))
		require.NoError(t, err)
		assert.Equal(t, "primary", resp.Upstream, "the open period ended")
	})
}

func TestSharedBreakerClosedByProbeClearsTheTrip(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := limitstore.NewMemory()
		flaky := fake.New(fake.Fail(500).Times(2), fake.Reply("primary").Forever())
		a := replica(t, store, flaky)
		for range 2 {
			_, err := a.Complete(context.Background(), chatReq("m"))
			require.NoError(t, err)
		}
		time.Sleep(30 * time.Second) // half-open: the next call probes and succeeds
		resp, err := a.Complete(context.Background(), chatReq("m"))
		require.NoError(t, err)
		assert.Equal(t, "primary", resp.Upstream)
		require.Equal(t, breaker.Closed, a.Breaker("primary").State())
		left, err := store.(limitstore.Breakers).BreakerOpen(context.Background(), "primary")
		require.NoError(t, err)
		assert.Zero(t, left, "the trip is cleared")

		// A trip is recorded again, then an operator reset on A clears it for everyone.
		require.NoError(t, store.(limitstore.Breakers).TripBreaker(context.Background(), "primary", time.Hour))
		require.NoError(t, a.ResetBreaker("primary"))
		fresh := fake.New(fake.Reply("primary").Forever())
		b := replica(t, store, fresh)
		resp, err = b.Complete(context.Background(), chatReq("m"))
		require.NoError(t, err)
		assert.Equal(t, "primary", resp.Upstream)
	})
}

func TestSharedBreakerOnlyNamedUpstreams(t *testing.T) {
	store := limitstore.NewMemory()
	require.NoError(t, store.(limitstore.Breakers).TripBreaker(context.Background(), "backup", time.Hour))
	p := fake.New(fake.Fail(500).Forever())
	c := replica(t, store, p)
	resp, err := c.Complete(context.Background(), chatReq("m"))
	require.NoError(t, err)
	assert.Equal(t, "backup", resp.Upstream, "backup is not shared: a record for it changes nothing")
}

// downStore is a store whose breaker records cannot be reached.
type downStore struct{ limitstore.Store }

func (downStore) TripBreaker(context.Context, string, time.Duration) error { return errors.New("down") }
func (downStore) BreakerOpen(context.Context, string) (time.Duration, error) {
	return time.Hour, errors.New("down")
}
func (downStore) ResetBreaker(context.Context, string) error { return errors.New("down") }

func TestSharedBreakerFailsOpen(t *testing.T) {
	p := fake.New(fake.Reply("primary").Forever())
	c := replica(t, downStore{limitstore.NewMemory()}, p)
	for range 3 {
		resp, err := c.Complete(context.Background(), chatReq("m"))
		require.NoError(t, err)
		assert.Equal(t, "primary", resp.Upstream, "an unreachable store leaves the local breaker to decide")
	}
}

func TestSharedBreakerValidation(t *testing.T) {
	p := fake.New(fake.Reply("ok").Forever())
	_, err := llmclient.New(up("a", p), llmclient.WithSharedBreakers())
	assert.ErrorContains(t, err, "limitstore.Breakers", "no store")
	_, err = llmclient.New(up("a", p), llmclient.WithLimitStore(limitstore.NewMemory()), llmclient.WithSharedBreakers("zz"))
	assert.ErrorContains(t, err, `unknown upstream "zz"`)
	type plain struct{ limitstore.Store } // hides the memory store's Breakers
	_, err = llmclient.New(up("a", p), llmclient.WithLimitStore(plain{limitstore.NewMemory()}), llmclient.WithSharedBreakers())
	assert.ErrorContains(t, err, "limitstore.Breakers")
}
