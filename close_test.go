package llmclient_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/limitstore"
	"github.com/llmclient/llmclient/provider/fake"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Close lets calls in flight and open streams finish, refuses every call that begins
// afterwards with ErrClosed, and may be called again.
func TestCloseFinishesCallsInFlightAndRefusesNewOnes(t *testing.T) {
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	p := holdOn("sk-held", started, release)
	s := fake.New(fake.Reply("streamed").Forever())
	var log eventLog
	c := newClient(t, llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: p, Keys: []string{"sk-held"},
		Models: map[string]string{"m": "m"}}), llmclient.WithUpstream(llmclient.Upstream{Name: "s", Provider: s,
		Models: map[string]string{"streamy": "streamy"}}), llmclient.WithObserver(log.observe))
	done := make(chan error, 1)
	go func() {
		_, err := c.Complete(context.Background(), chatReq("m"))
		done <- err
	}()
	<-started
	st, err := c.Stream(context.Background(), chatReq("streamy"))
	require.NoError(t, err)

	require.NoError(t, c.Close())
	require.NoError(t, c.Close(), "Close is idempotent")

	_, err = c.Complete(context.Background(), chatReq("m"))
	require.ErrorIs(t, err, llmclient.ErrClosed)
	assert.Equal(t, failure.Unavailable, llmclient.ClassOf(err))
	_, err = c.Stream(context.Background(), chatReq("streamy"))
	require.ErrorIs(t, err, llmclient.ErrClosed)
	_, err = c.Embed(context.Background(), &llmclient.EmbedRequest{Model: "m", Input: []string{"x"}})
	require.ErrorIs(t, err, llmclient.ErrClosed)

	for st.Next() {
	}
	require.NoError(t, st.Err(), "an open stream reads to its end")
	require.NoError(t, st.Close())
	close(release)
	require.NoError(t, <-done, "a call in flight finishes")
	assert.Equal(t, 1, p.Calls())
	assert.Zero(t, c.InFlight("a"))
}

// flushingStore is a limit store that buffers: Close flushes it.
type flushingStore struct {
	limitstore.Store
	flushed atomic.Int32
	fail    error
}

func (s *flushingStore) Flush(context.Context) error {
	s.flushed.Add(1)
	return s.fail
}

func TestCloseFlushesStoresOnce(t *testing.T) {
	store := &flushingStore{Store: limitstore.NewMemory()}
	c := newClient(t, up("a", fake.New(fake.Reply("ok").Forever()), "sk-one"), llmclient.WithLimitStore(store))
	_, err := c.Complete(context.Background(), chatReq("m"))
	require.NoError(t, err)
	require.NoError(t, c.Close())
	require.NoError(t, c.Close())
	assert.Equal(t, int32(1), store.flushed.Load())

	failing := &flushingStore{Store: limitstore.NewMemory(), fail: errors.New("store away")}
	c2 := newClient(t, up("a", fake.New(fake.Reply("ok").Forever()), "sk-one"), llmclient.WithLimitStore(failing))
	err = c2.Close()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "store away")
	require.NoError(t, c2.Close(), "a second Close reports nothing more")
}
