package llmclient_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/event"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/finish"
	"github.com/llmclient/llmclient/provider/fake"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type traceKey struct{}

// The observer gets the caller's context and, on every event of a call, the call's ID,
// its metadata and its partition; two calls have different IDs.
func TestObserverKnowsItsCall(t *testing.T) {
	a := fake.New(fake.Fail(503), fake.Reply("ok").Forever())
	var mu sync.Mutex
	type seen struct {
		kind      event.Kind
		trace     any
		id        uint64
		tenant    string
		partition string
	}
	var got []seen
	c := newClient(t, up("a", a), llmclient.WithBackoff(1, 1),
		llmclient.WithPartitionLimits("tenant", llmclient.Limits{MaxConcurrent: 5}),
		llmclient.WithObserver(func(ctx context.Context, e llmclient.Event) {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, seen{e.Kind, ctx.Value(traceKey{}), e.CallID, e.Metadata["tenant"], e.Partition})
		}))
	for i, trace := range []string{"trace-1", "trace-2"} {
		req := chatReq("m")
		req.Metadata = map[string]string{"tenant": "acme"}
		ctx := context.WithValue(context.Background(), traceKey{}, trace)
		_, err := c.Complete(ctx, req)
		require.NoError(t, err, i)
	}
	// Call 1: a failed and a successful attempt, then the call's end; call 2: one attempt
	// and the call's end.
	kinds := []event.Kind{event.Attempt, event.Attempt, event.Call,
		event.Attempt, event.Call}
	require.Len(t, got, len(kinds))
	for i, s := range got {
		assert.Equal(t, kinds[i], s.kind, i)
	}
	var attempts []seen
	for _, s := range got {
		if s.kind == event.Attempt {
			attempts = append(attempts, s)
		}
	}
	assert.Equal(t, got[0].id, got[2].id, "the call's end has the call's ID")
	got = attempts
	for i, s := range got {
		assert.Equal(t, event.Attempt, s.kind)
		assert.Equal(t, "acme", s.tenant)
		assert.Equal(t, "acme", s.partition)
		assert.NotZero(t, s.id)
		want := "trace-1"
		if i == 2 {
			want = "trace-2"
		}
		assert.Equal(t, want, s.trace, "the caller's context reaches the observer")
	}
	assert.Equal(t, got[0].id, got[1].id, "one call, one ID")
	assert.NotEqual(t, got[1].id, got[2].id)
}

// event.Call reports each call once, with its final class, attempts, duration and usage;
// for a stream, its time to first token and per chunk.
func TestEventCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := fake.New(fake.Fail(500), fake.Reply("ok").Usage(10, 2).Latency(time.Second),
			fake.Stream("a", "b", "c").StallFirst(2*time.Second).ChunkDelay(time.Second).Usage(5, 3),
			fake.Fail(400))
		var log eventLog
		c := newClient(t, up("a", a), llmclient.WithBackoff(time.Second, time.Second), llmclient.WithObserver(log.observe))
		_, err := c.Complete(context.Background(), chatReq("m"))
		require.NoError(t, err)
		s, err := c.Stream(context.Background(), chatReq("m"))
		require.NoError(t, err)
		for s.Next() {
		}
		require.NoError(t, s.Err())
		_, err = c.Complete(context.Background(), chatReq("m"))
		require.Error(t, err)

		calls := log.kinds(event.Call)
		require.Len(t, calls, 3)
		one, stream, bad := calls[0], calls[1], calls[2]
		assert.Equal(t, failure.None, one.Class)
		assert.Equal(t, 2, one.Attempt)
		assert.InDelta(t, float64(2*time.Second), float64(one.Latency), float64(600*time.Millisecond), "backoff ~1s ±50% + 1s latency")
		assert.Equal(t, 10, one.InputTokens)
		assert.Equal(t, "a", one.Upstream)
		assert.Equal(t, finish.Stop, one.FinishReason)

		assert.Equal(t, failure.None, stream.Class)
		assert.Equal(t, 2*time.Second, stream.TimeToFirstToken)
		assert.Equal(t, 4*time.Second, stream.Latency)
		assert.Equal(t, 4, stream.Chunks, "three content chunks and the finish chunk")
		assert.Equal(t, 2*time.Second/3, stream.TimePerChunk)
		assert.Equal(t, 5, stream.InputTokens)
		assert.Equal(t, finish.Stop, stream.FinishReason)

		assert.Equal(t, failure.BadRequest, bad.Class)
		assert.Equal(t, 400, bad.Status)
		assert.Error(t, bad.Err)
	})
}
