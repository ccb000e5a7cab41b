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
	"github.com/llmclient/llmclient/provider/fake"
)

// A stream cut after its first chunks and continued on another upstream is one call: one
// call span with two attempt spans under it, the continuation as a span event on the call
// span, and the usage of both attempts summed on the span and in the token metric; the
// time to first chunk is the first attempt's, when the caller got its first chunk.
func TestContinuedStream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t)
		a := fake.New(fake.StreamChunks(
			llmclient.Chunk{Text: "one "},
			llmclient.Chunk{Text: "two ", Usage: &llmclient.Usage{InputTokens: 10, OutputTokens: 2, TotalTokens: 12}},
			llmclient.Chunk{Text: "three"},
		).StallFirst(time.Second).CutAfter(2))
		b := fake.New(fake.Stream("one ", "two ", "three").StallFirst(3*time.Second).Usage(14, 3))
		c := r.client(t, llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: a}),
			llmclient.WithUpstream(llmclient.Upstream{Name: "b", Provider: b}))
		ctx, root := r.root(context.Background())

		s, err := c.Stream(ctx, chatReq("m"))
		require.NoError(t, err)
		text := ""
		for s.Next() {
			text += s.Current().Text
		}
		require.NoError(t, s.Err())
		s.Close()
		root.End()
		require.Equal(t, "one two three", text)

		call := r.one(t, "chat m")
		assert.Equal(t, codes.Unset, call.Status.Code)
		ca := attrs(call.Attributes)
		assert.Equal(t, int64(2), ca["llmclient.attempts"])
		assert.Equal(t, int64(24), ca["gen_ai.usage.input_tokens"], "both attempts' input")
		assert.Equal(t, int64(5), ca["gen_ai.usage.output_tokens"], "both attempts' output")
		assert.Equal(t, 1.0, ca["llmclient.time_to_first_chunk"], "the first attempt's first chunk")
		kids := r.childrenOf(call)
		require.Len(t, kids, 2)
		assert.Equal(t, "attempt a", kids[0].Name)
		assert.Equal(t, "stream_interrupted", attrs(kids[0].Attributes)["error.type"])
		assert.Equal(t, "attempt b", kids[1].Name)
		assert.NotContains(t, attrs(kids[1].Attributes), "error.type")
		var cont []map[string]any
		for _, ev := range call.Events {
			if ev.Name == "llmclient.continuation" {
				cont = append(cont, attrs(ev.Attributes))
			}
		}
		require.Len(t, cont, 1, "events: %v", call.Events)
		assert.Equal(t, "a", cont[0]["llmclient.upstream"])
		assert.Equal(t, "b", cont[0]["llmclient.target"])
		assert.Equal(t, "stream_interrupted", cont[0]["error.type"])
		assert.Equal(t, "restart", cont[0]["llmclient.action"])

		ms := r.collect(t)
		var in, out int64
		for _, p := range histI(t, ms, "gen_ai.client.token.usage") {
			switch setAttrs(p.Attributes)["gen_ai.token.type"] {
			case "input":
				in += p.Sum
			case "output":
				out += p.Sum
			}
		}
		assert.Equal(t, int64(24), in)
		assert.Equal(t, int64(5), out)
		f := histF(t, ms, "gen_ai.client.operation.time_to_first_chunk")
		require.Len(t, f, 1)
		assert.Equal(t, time.Second.Seconds(), f[0].Sum)
		conts := sumI(t, ms, "llmclient.client.continuations")
		require.Len(t, conts, 1)
		assert.Equal(t, int64(1), conts[0].Value)
		assert.Equal(t, "a", setAttrs(conts[0].Attributes)["llmclient.upstream"])
	})
}
