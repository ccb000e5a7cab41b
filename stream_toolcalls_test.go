package llmclient_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/dialect"
	"github.com/llmclient/llmclient/finish"
	"github.com/llmclient/llmclient/provider/fake"
)

// Parallel tool calls whose deltas interleave (index 0, 1, 2, then 0 again) assemble by
// index. Before, the third call's arrival moved the first two in memory with their
// argument builders, and the next delta for call 0 panicked in the caller's goroutine
// ("strings: illegal use of non-zero Builder copied by value").
func TestStreamInterleavedToolCalls(t *testing.T) {
	delta := func(ix int, id, name, args string) llmclient.Chunk {
		return llmclient.Chunk{ToolCalls: []dialect.ToolCallDelta{{Index: ix, ID: id, Name: name, Arguments: args}}}
	}
	p := fake.New(fake.StreamChunks(
		delta(0, "c0", "get_weather", `{"city":`),
		delta(1, "c1", "get_time", `{"tz":`),
		delta(2, "c2", "get_news", `{}`),
		delta(0, "", "", `"Oslo"}`),
		delta(1, "", "", `"CET"}`),
		llmclient.Chunk{FinishReason: finish.ToolCalls},
	))
	c := newClient(t, llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: p}))
	s, err := c.Stream(context.Background(), chatReq("m"))
	require.NoError(t, err)
	defer s.Close()
	for s.Next() {
	}
	require.NoError(t, s.Err())
	assert.Equal(t, []llmclient.ToolCall{
		{ID: "c0", Name: "get_weather", Arguments: `{"city":"Oslo"}`},
		{ID: "c1", Name: "get_time", Arguments: `{"tz":"CET"}`},
		{ID: "c2", Name: "get_news", Arguments: `{}`},
	}, s.Response().ToolCalls)
}
