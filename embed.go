package llmclient

import (
	"context"
	"net/http"

	"github.com/llmclient/llmclient/pricing"
	"github.com/llmclient/llmclient/ratelimit"
)

// EmbedRequest asks for one embedding vector per input text, independent of vendor.
//
// The Client never modifies an EmbedRequest; adapters must not either.
type EmbedRequest struct {
	// Model names the embedding model or model group. Upstreams may map it to their own
	// model name.
	Model string
	// Input holds the texts to embed, in order; the response has one vector per text, in
	// the same order. Vendors reject empty texts.
	Input []string
	// Dimensions asks for vectors of this length, for models that can shorten theirs
	// (OpenAI text-embedding-3 dimensions, Gemini outputDimensionality). 0 means the
	// model's own length.
	Dimensions int
	// TaskType is Gemini's taskType hint (for example "RETRIEVAL_QUERY" or
	// "RETRIEVAL_DOCUMENT"); "" leaves the model's default. Vendors without one ignore it.
	TaskType string
	// Metadata is per-request information for the Client (partition keys, tracing). It is
	// not sent upstream.
	Metadata map[string]string
	// Priority selects the admission share under limits. Default ratelimit.Interactive.
	Priority ratelimit.Priority
	// Extra holds vendor fields the common type lacks, merged into the top level of the
	// JSON request body like Request.Extra.
	Extra map[string]any
	// Concurrency bounds the batches of one Client.Embed call in flight at once. 0 means
	// 4; it must not be negative. It is not sent upstream.
	Concurrency int
}

// EmbedResponse is the result of a successful embedding call.
type EmbedResponse struct {
	// Model is the model that answered, as the upstream names it.
	Model string
	// Vectors holds one vector per input text, in input order.
	Vectors [][]float32
	// Usage counts the input tokens (OutputTokens stays 0). An adapter leaves it zero when
	// the vendor reports none (Gemini's embedContent does not); Client.Embed then fills in
	// its own estimate of the inputs, marked Estimated.
	Usage Usage
	// RateLimits is the upstream's view of the key's quota, read from response headers,
	// when the adapter reads them (provider/openai does); nil otherwise.
	RateLimits *ratelimit.Status
	// Upstream names the upstream that served the response; for Client.Embed, the one
	// that served its first batch.
	Upstream string
	// Attempts is the trace of every attempt the call made, the successful one last; for
	// Client.Embed, the traces of its batches in batch order (see Attempt.Batch).
	Attempts []Attempt
	// Fallback is true when a batch was served by an upstream other than the first one its
	// route tried.
	Fallback bool
	// Cost is what the call cost, every attempt of every batch together (see WithPricing
	// and pricing.Cost): the input tokens at the embedding model's input price, estimated
	// when the vendor reported no usage. Unknown without pricing or without a price for
	// the model.
	Cost pricing.Cost
}

// EmbedCall is what the Client hands an Embedder for one attempt: one batch of at most
// MaxEmbedBatch inputs.
type EmbedCall struct {
	// Request is the caller's request, or the part of it in this batch. Adapters must not
	// modify it.
	Request *EmbedRequest
	// Model is the upstream's name for the model (after the upstream's model mapping).
	Model string
	// APIKey is the key chosen from the upstream's pool; empty when the upstream has no
	// pool, in which case the adapter uses its own configured key.
	APIKey string
	// Notes is where adapters append notes on how they translated the request, as in
	// Call.Notes.
	Notes []string
	// Headers are extra HTTP headers for this call (CallOptions.Headers), as in
	// Call.Headers. Adapters must not modify them.
	Headers http.Header
}

// Embedder is an optional capability of a Provider: embedding texts. The Client asserts
// it on each upstream's Provider; upstreams whose Provider does not implement it cannot
// serve Client.Embed. provider/openai, provider/gemini and provider/fake implement it.
// Implementations must be safe for concurrent use.
type Embedder interface {
	// Embed makes one embedding call for every input of call.Request, which holds at most
	// MaxEmbedBatch inputs. Errors follow Provider.Complete: a vendor error response is an
	// *Error with its Class, a request the adapter cannot send an *Error of class
	// failure.BadRequest (wrapping ErrUnsupported when another upstream might take it).
	Embed(ctx context.Context, call *EmbedCall) (*EmbedResponse, error)
	// MaxEmbedBatch is the largest number of inputs one Embed call takes; the Client
	// splits larger requests into batches of at most this many.
	MaxEmbedBatch() int
}
