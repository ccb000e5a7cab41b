package estimate

// Estimator counts the tokens a text costs for a model. The limiter uses it, once per
// call, to charge a request's prompt against the key's tokens-per-minute bucket before the
// upstream has said what it really cost; the real usage is reconciled afterwards.
//
// Implementations must be safe for concurrent use and fast: CountTokens runs on the
// calling goroutine before every limited call. estimate.Heuristic is the default; the
// package tokenizer/tiktoken has an exact one for OpenAI's encodings.
type Estimator interface {
	// CountTokens returns the number of tokens of text for model, the request's Model
	// (a model or model group name). It must not return a negative number.
	CountTokens(model, text string) int
}
