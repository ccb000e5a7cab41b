// Package dialect holds what a vendor adapter declares about its wire format beside
// the llmclient.Dialect and llmclient.Provider interfaces: the API operations it
// recognizes ([Shape]), whether a model continues a partial assistant answer
// ([Prefiller]), and the pieces of a streamed tool call ([ToolCallDelta], in
// llmclient.Chunk). Users of the Client rarely name these; adapter authors do.
package dialect

// Prefiller is an optional capability of a Provider: whether a model continues a
// trailing assistant message (a prefill) rather than rejecting it. Stream continuation
// asks it before sending a partial answer as a prefill; a Provider without it is
// assumed not to accept one. provider/anthropic implements it (earlier Claude models
// accept a prefill; current ones answer it with a 400). Implementations must be safe for
// concurrent use.
type Prefiller interface {
	AcceptsPrefill(model string) bool
}

// Shape names an API operation a Dialect recognizes, such as openai.ShapeChatCompletions
// or anthropic.ShapeMessages: each dialect defines its own. The transport only compares
// shapes, to fail a call over to upstreams that speak the same one.
type Shape string

// ToolCallDelta is a fragment of a streamed tool call. Fragments with the same Index belong
// to the same call; ID and Name arrive on the first fragment, Arguments accumulate.
type ToolCallDelta struct {
	Index     int
	ID        string
	Name      string
	Arguments string
}
