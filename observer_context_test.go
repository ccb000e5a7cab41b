package llmclient_test

import (
	"context"
	"sync"
	"testing"

	"github.com/llmclient/llmclient"
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
		kind      llmclient.EventKind
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
	require.Len(t, got, 3) // a failed and a successful attempt, then one attempt
	for i, s := range got {
		assert.Equal(t, llmclient.EventAttempt, s.kind)
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
