package llmclient

import (
	"context"
	"net/http"

	"github.com/llmclient/llmclient/dialect"
	"github.com/llmclient/llmclient/finish"
	"github.com/llmclient/llmclient/ratelimit"
)

// Provider is a vendor adapter: it turns a Request into the vendor's HTTP call and the
// vendor's answer into a Response, a stream of Chunks, or an *Error with its Class.
//
// Adapters translate and map errors only: they hold no retry, limiting or logging policy.
// A Provider must be safe for concurrent use.
type Provider interface {
	// Complete makes one one-shot call. A vendor error response is returned as an *Error
	// with Class, Status, vendor fields, RetryAfter and RateLimits set; transport failures
	// are returned as they are and classified by the Client.
	Complete(ctx context.Context, call *Call) (*Response, error)
	// Stream opens one streaming call. It returns once the response headers arrive; a
	// non-2xx status is returned as an *Error, like Complete. Providers without streaming
	// return an error wrapping ErrUnsupported.
	Stream(ctx context.Context, call *Call) (ProviderStream, error)
}

// Call is what the Client hands an adapter for one attempt.
type Call struct {
	// Request is the caller's request. Adapters must not modify it.
	Request *Request
	// Model is the upstream's name for the model (after the upstream's model mapping).
	Model string
	// APIKey is the key chosen from the upstream's pool; empty when the upstream has no
	// pool, in which case the adapter uses its own configured key.
	APIKey string
	// Notes is where adapters append notes on how they translated the request (a clamped
	// parameter, a remapped id); the Client copies them into Attempt.Notes.
	Notes []string
	// Headers are extra HTTP headers for this call (CallOptions.Headers), set on the
	// vendor request after the adapter's own and before its credential. Adapters must not
	// modify them.
	Headers http.Header
}

// ProviderStream is an open streaming response.
type ProviderStream interface {
	// Recv returns the next chunk. It returns io.EOF after the vendor's end marker
	// ([DONE], message_stop, a final finish reason); a stream that ends without one
	// returns an error wrapping io.ErrUnexpectedEOF. An error event inside the stream is
	// returned as an *Error with its Class.
	Recv() (Chunk, error)
	// Close releases the connection. It is safe to call more than once and concurrently
	// with Recv, which it unblocks.
	Close() error
}

// RateLimitedStream is implemented by a ProviderStream whose response headers were read
// for the upstream's quota. RateLimits returns what they reported when the stream opened,
// nil when they carried no report. The Client feeds it to the key's limiter as the stream
// opens, as it does a one-shot Response's RateLimits (a key without declared limits
// follows its upstream's headers whatever the call's shape), and returns it in the
// stream's Response. A ProviderStream that does not implement it says nothing either way.
type RateLimitedStream interface {
	ProviderStream
	RateLimits() *ratelimit.Status
}

// Chunk is one increment of a streamed response.
type Chunk struct {
	Text      string
	Reasoning string
	ToolCalls []dialect.ToolCallDelta
	// FinishReason is set on the chunk that ends the generation.
	FinishReason    finish.Reason
	RawFinishReason string
	Refusal         string
	// Usage is set on the chunk that reports token usage, usually the last.
	Usage *Usage
	// ID and Model are set on chunks that carry the response id and model name.
	ID    string
	Model string
	// KeepAlive marks an adapter-level keep-alive (an SSE comment or ping event) that
	// carries no data. The Client consumes these; callers never see them.
	KeepAlive bool
}

// HasContent reports whether c carries a content token: text, reasoning, a refusal or a
// tool-call delta that carries part of a call (an id, a name or arguments). The first
// such chunk commits a stream, and only such chunks are progress for its idle timeout: a
// delta that carries nothing, like an id or a role alone, is not.
func (c *Chunk) HasContent() bool {
	return c.Text != "" || c.Reasoning != "" || c.Refusal != "" || (len(c.ToolCalls) > 0 && carriesCalls(c.ToolCalls))
}
