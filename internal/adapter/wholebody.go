package adapter

import (
	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/dialect"
)

// ResponseChunk returns a whole response as the one chunk that carries all of it: its
// id, model, text, reasoning, refusal, tool calls (indexed in order), finish reason and
// usage. A stream that got a one-shot body instead of events (a server or proxy that
// ignored the stream flag) replays it so.
func ResponseChunk(r *llmclient.Response) llmclient.Chunk {
	c := llmclient.Chunk{
		ID: r.ID, Model: r.Model, Text: r.Text, Reasoning: r.Reasoning, Refusal: r.Refusal,
		FinishReason: r.FinishReason, RawFinishReason: r.RawFinishReason,
	}
	if n := len(r.ToolCalls); n > 0 {
		c.ToolCalls = make([]dialect.ToolCallDelta, n)
		for i, tc := range r.ToolCalls {
			c.ToolCalls[i] = dialect.ToolCallDelta{Index: i, ID: tc.ID, Name: tc.Name, Arguments: tc.Arguments}
		}
	}
	if r.Usage != (llmclient.Usage{}) {
		u := r.Usage
		c.Usage = &u
	}
	return c
}
