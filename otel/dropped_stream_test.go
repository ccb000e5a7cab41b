package otel_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/cache"
	"github.com/llmclient/llmclient/finish"
	"github.com/llmclient/llmclient/provider/fake"
)

// collected collects garbage until the rig has n spans called name, for a second at most.
func collected(r *rig, name string, n int) []tracetest.SpanStub {
	for i := 0; i < 100 && len(r.named(name)) < n; i++ {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	return r.named(name)
}

// A stream dropped without Close ends its call span once the collector finds it: the
// Client's own (its cleanup ends the call), and one that inner middleware made (a cache's
// replay, llmclient.StreamOf), which no event ends and which used to keep its span open
// for good.
func TestDroppedStreamEndsCallSpan(t *testing.T) {
	t.Run("client", func(t *testing.T) {
		r := newRig(t)
		c := r.client(t, llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: fake.New(fake.Stream("a", "b", "c").Usage(3, 2).Forever())}))
		func() {
			s, err := c.Stream(context.Background(), chatReq("m"))
			require.NoError(t, err)
			require.True(t, s.Next())
		}()
		calls := collected(r, "chat m", 1)
		require.Len(t, calls, 1, "spans: %v", r.names())
		a := attrs(calls[0].Attributes)
		require.Equal(t, "canceled", a["error.type"])
		require.Equal(t, int64(1), a["llmclient.chunks"], "ended by the Client's event.Call")
		require.Len(t, r.childrenOf(calls[0]), 1, "the attempt")
	})
	t.Run("replay", func(t *testing.T) {
		r := newRig(t)
		replay := func(next llmclient.Handler) llmclient.Handler {
			return llmclient.HandlerFuncs{CompleteFunc: next.Complete,
				StreamFunc: func(ctx context.Context, req *llmclient.Request) (*llmclient.Stream, error) {
					return llmclient.StreamOf([]llmclient.Chunk{{Text: "cached"}, {FinishReason: finish.Stop}}, nil), nil
				}}
		}
		c, err := llmclient.New(llmclient.WithObserver(r.tel.Observe), llmclient.WithMiddleware(r.tel.Middleware),
			llmclient.WithMiddleware(replay), llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: fake.New()}))
		require.NoError(t, err)
		func() {
			_, err := c.Stream(context.Background(), chatReq("m"))
			require.NoError(t, err)
		}()
		calls := collected(r, "chat m", 1)
		require.Len(t, calls, 1, "spans: %v", r.names())
		require.Equal(t, codes.Error, calls[0].Status.Code)
		require.Equal(t, "canceled", attrs(calls[0].Attributes)["error.type"])
	})
	t.Run("cache hit", func(t *testing.T) {
		r := newRig(t)
		store, err := cache.NewMemory(cache.MemoryConfig{MaxEntries: 10})
		require.NoError(t, err)
		ch, err := cache.New(store)
		require.NoError(t, err)
		c := r.client(t, llmclient.WithMiddleware(ch.Middleware()),
			llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: fake.New(fake.Stream("hi", "there").Forever())}))
		s, err := c.Stream(context.Background(), chatReq("m"))
		require.NoError(t, err)
		for s.Next() {
		}
		require.NoError(t, s.Close())
		require.Len(t, r.named("chat m"), 1)
		func() {
			s, err := c.Stream(context.Background(), chatReq("m")) // answered by the cache
			require.NoError(t, err)
			require.True(t, s.Next())
		}()
		require.Len(t, collected(r, "chat m", 2), 2, "spans: %v", r.names())
	})
}
