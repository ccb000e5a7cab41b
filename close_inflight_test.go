package llmclient_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/limitstore"
	"github.com/llmclient/llmclient/provider/fake"
)

// Client.Close: "Calls in flight are not interrupted: they finish with their own
// deadlines, retries and failovers". An Embed call in flight at Close, whose later
// batches have not started yet, must still finish.
func TestCloseLetsAnEmbedInFlightFinish(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := fake.New(fake.Embedding(8).Latency(10 * time.Second).Forever())
		a.SetMaxEmbedBatch(1)
		c := newClient(t, up("a", a, "k1"))
		go func() {
			time.Sleep(5 * time.Second) // the first of three batches is in flight
			_ = c.Close()
		}()
		resp, err := c.Embed(context.Background(), &llmclient.EmbedRequest{Model: "m", Input: []string{"x", "y", "z"}, Concurrency: 1})
		if err != nil {
			t.Fatalf("an Embed in flight at Close failed: %v (upstream calls %d)", err, a.Calls())
		}
		if len(resp.Vectors) != 3 {
			t.Fatalf("%d vectors", len(resp.Vectors))
		}
	})
}

// blockingFlushStore is a limit store whose Flush waits until release is closed, whatever
// its context.
type blockingFlushStore struct {
	limitstore.Store
	release chan struct{}
}

func (s *blockingFlushStore) Flush(ctx context.Context) error {
	<-s.release
	return nil
}

// Client.Close: "flushes each store given to the Client that buffers writes ..., waiting
// at most 5 s for them" (operations.md: "stores that buffer are flushed (at most 5 s)").
func TestCloseWaitsAtMostFiveSecondsForAFlush(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &blockingFlushStore{Store: limitstore.NewMemory(), release: make(chan struct{})}
		defer close(store.release)
		c := newClient(t, up("a", fake.New(fake.Reply("ok").Forever()), "k1"), llmclient.WithLimitStore(store))
		done := make(chan struct{})
		go func() {
			_ = c.Close()
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(time.Minute):
			t.Fatalf("Close still waiting for a store's Flush after a minute")
		}
	})
}
