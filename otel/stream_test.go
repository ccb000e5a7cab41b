package otel_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/codes"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/finish"
	"github.com/llmclient/llmclient/provider/fake"
)

// A stream that retries before its first token: its span ends when the stream does,
// after Stream returned; time to first chunk counts from the call's start.
func TestStream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t)
		p := fake.New(fake.Fail(503), fake.Stream("a", "b", "c").StallFirst(2*time.Second).ChunkDelay(time.Second).Usage(5, 3))
		c := r.client(t, llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: p}),
			llmclient.WithBackoff(time.Second, time.Second))
		ctx, root := r.root(context.Background())
		t0 := time.Now()
		s, err := c.Stream(ctx, chatReq("m"))
		require.NoError(t, err)
		ttfc := time.Since(t0)
		assert.Empty(t, r.named("chat m"), "the call span is still open")
		require.Len(t, r.named("attempt a"), 1, "the failed attempt")
		for s.Next() {
		}
		require.NoError(t, s.Err())
		s.Close()
		root.End()

		call := r.one(t, "chat m")
		assert.Equal(t, r.one(t, "caller").SpanContext.SpanID(), call.Parent.SpanID())
		assert.Equal(t, t0, call.StartTime)
		assert.Equal(t, t0.Add(ttfc+2*time.Second), call.EndTime, "a second for each chunk after the first")
		ca := attrs(call.Attributes)
		assert.Equal(t, ttfc.Seconds(), ca["llmclient.time_to_first_chunk"])
		assert.Equal(t, int64(4), ca["llmclient.chunks"])
		assert.Equal(t, int64(5), ca["gen_ai.usage.input_tokens"])
		assert.Equal(t, []string{"stop"}, ca["gen_ai.response.finish_reasons"])
		assert.Equal(t, codes.Unset, call.Status.Code)
		kids := r.childrenOf(call)
		require.Len(t, kids, 2)
		assert.Equal(t, "overloaded", attrs(kids[0].Attributes)["error.type"])
		assert.Equal(t, 2.0, attrs(kids[1].Attributes)["llmclient.time_to_first_chunk"], "the attempt's own")
		assert.Equal(t, call.EndTime, kids[1].EndTime)

		ms := r.collect(t)
		f := histF(t, ms, "gen_ai.client.operation.time_to_first_chunk")
		require.Len(t, f, 1)
		assert.Equal(t, ttfc.Seconds(), f[0].Sum)
		assert.Equal(t, durationBuckets, f[0].Bounds)
		pc := histF(t, ms, "gen_ai.client.operation.time_per_output_chunk")
		require.Len(t, pc, 1)
		assert.Equal(t, uint64(3), pc[0].Count, "every chunk after the first")
		assert.InDelta(t, 2.0, pc[0].Sum, 1e-6, "the time from the first chunk to the end")
		d := histF(t, ms, "gen_ai.client.operation.duration")
		require.Len(t, d, 1)
		assert.Equal(t, call.EndTime.Sub(call.StartTime).Seconds(), d[0].Sum)
	})
}

// A stream cut after its first token ends its span with the interruption; one closed
// early ends it as canceled, from Close.
func TestStreamInterruption(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t)
		p := fake.New(fake.Stream("a", "b", "c").CutAfter(1), fake.Stream("x", "y", "z").ChunkDelay(time.Second))
		// Continuation off: the cut is the stream's end, as the span must show.
		c := r.client(t, llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: p}), llmclient.WithStreamContinuation(false))
		s, err := c.Stream(context.Background(), chatReq("m"))
		require.NoError(t, err)
		for s.Next() {
		}
		require.Equal(t, failure.StreamInterrupted, llmclient.ClassOf(s.Err()))
		s.Close()

		s, err = c.Stream(context.Background(), chatReq("m"))
		require.NoError(t, err)
		require.True(t, s.Next())
		s.Close()

		calls := r.named("chat m")
		require.Len(t, calls, 2)
		cut, closed := calls[0], calls[1]
		assert.Equal(t, codes.Error, cut.Status.Code)
		assert.Equal(t, "stream_interrupted", attrs(cut.Attributes)["error.type"])
		kids := r.childrenOf(cut)
		require.Len(t, kids, 1)
		assert.Equal(t, "stream_interrupted", attrs(kids[0].Attributes)["error.type"])
		assert.Equal(t, "canceled", attrs(closed.Attributes)["error.type"])

		ms := r.collect(t)
		d := wrapHF(histF(t, ms, "gen_ai.client.operation.duration"))
		assert.Len(t, matching(d, map[string]any{"error.type": "stream_interrupted"}), 1)
		assert.Len(t, matching(d, map[string]any{"error.type": "canceled"}), 1)
		f := histF(t, ms, "gen_ai.client.operation.time_to_first_chunk")
		var n uint64
		for _, p := range f {
			n += p.Count
		}
		assert.Equal(t, uint64(2), n, "both streams had a first chunk")
	})
}

// A stream that inner middleware answers (a cache's replay) ends its span when it ends.
func TestStreamFromMiddleware(t *testing.T) {
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
	s, err := c.Stream(context.Background(), chatReq("m"))
	require.NoError(t, err)
	assert.Empty(t, r.named("chat m"))
	for s.Next() {
	}
	require.NoError(t, s.Err())
	call := r.one(t, "chat m")
	assert.Equal(t, []string{"stop"}, attrs(call.Attributes)["gen_ai.response.finish_reasons"])
	assert.Empty(t, r.childrenOf(call))
	s.Close()
	assert.Len(t, r.named("chat m"), 1, "ended once")
}
