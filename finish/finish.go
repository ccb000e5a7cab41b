// Package finish names why a model stopped answering ([Reason]), normalized across
// vendors: llmclient.Response.FinishReason and llmclient.Chunk.FinishReason hold one.
//
//	if resp.FinishReason == finish.Length {
//		// the answer was cut at MaxTokens
//	}
package finish

// Reason says why the model stopped, normalized across vendors.
type Reason string

// The normalized finish reasons. Response.RawFinishReason keeps the vendor's own word.
const (
	None          Reason = ""
	Stop          Reason = "stop"
	Length        Reason = "length"
	ToolCalls     Reason = "tool_calls"
	ContentFilter Reason = "content_filter"
	Refusal       Reason = "refusal"
	Other         Reason = "other"
)
