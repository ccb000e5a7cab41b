package llmclient

import (
	"net/http"

	"github.com/llmclient/llmclient/dialect"
	"github.com/llmclient/llmclient/ratelimit"
)

// Dialect is an optional capability of a Provider: what the Client's transport
// (Client.Transport) must know of the provider's wire format to protect raw HTTP calls
// made by other SDKs. The transport asserts it on each upstream's Provider; upstreams
// whose Provider does not implement it are not reachable through the transport.
//
// provider/openai, provider/anthropic and provider/gemini implement it. Implementations
// must be safe for concurrent use.
type Dialect interface {
	// BaseURL is the API base URL the provider sends to, for example
	// "https://api.openai.com/v1". The transport routes a request whose URL lies under it
	// (same scheme and host, path prefix on a segment boundary) to the provider's
	// upstream, and rewrites it onto another upstream's base URL on failover.
	BaseURL() string
	// Inspect recognizes an API request by method and by path below BaseURL (with a
	// leading slash and no query). It reports false for paths the dialect does not know;
	// the transport then still classifies their errors with ClassifyError and retries
	// them, but does not estimate tokens, guard streams or fail over. body is the whole
	// request body, or nil when the transport could not buffer it; a body that is not the
	// expected JSON still yields the shape, with what could be read. The returned
	// Request may share body's memory: the transport never modifies body.
	Inspect(method, path string, body []byte) (APICall, bool)
	// Authorize sets the authentication headers of an outgoing request for key, removing
	// any other credential header of the dialect. An empty key means the provider's own
	// configured key, or none. It returns the credential it set ("" for none), which the
	// transport redacts from everything it returns.
	Authorize(h http.Header, key string) string
	// ClassifyError turns an error response — status, headers and at most 1 MiB of body —
	// into an *Error with its Class, vendor fields, Retry-After and RateLimits.
	ClassifyError(status int, h http.Header, body []byte) *Error
	// RateLimits reads the quota headers of a successful response; nil when there are none.
	RateLimits(h http.Header) *ratelimit.Status
	// NewStream decodes the streaming response of a call of the given shape, reading
	// resp.Body: content chunks, keep-alives, in-band error events as *Error values, io.EOF
	// after the vendor's end marker and an error wrapping io.ErrUnexpectedEOF when the body
	// ends before it. The transport reads it only to learn when the first content token
	// arrives and how the stream ends; the bytes themselves go to the caller unchanged.
	NewStream(shape dialect.Shape, resp *http.Response) ProviderStream
}

// APICall is what a Dialect reads from a raw API request.
type APICall struct {
	// Shape is the API operation.
	Shape dialect.Shape
	// Stream is true when the response will be an event stream.
	Stream bool
	// NoOutput is true for operations that generate no tokens (embeddings): the limiter
	// then reserves no output for them.
	NoOutput bool
	// TokenIDs counts the input the request sends as token ids rather than text (OpenAI
	// embeddings accept both); they are charged as they are, on top of Request's estimate.
	TokenIDs int
	// Request carries the call's model, its output bound (MaxTokens) and, for token
	// estimation only, its text: messages, tools and response format. It is never sent.
	Request Request
}

// UsageReader is an optional capability of a Dialect: reading what a one-shot response
// body, read whole by the transport, says about its cost. With pricing on (WithPricing),
// the transport prices such an attempt from it; without it, or when ok is false (a shape
// it does not parse, a body that is not the expected JSON), the attempt is priced from the
// Client's estimate, and so it is when the usage is not one the Client takes (see Usage).
// The adapters of provider/openai, provider/anthropic and provider/gemini implement it,
// reading each count as their typed responses do. It must not keep body and must be safe
// for concurrent use.
type UsageReader interface {
	ReadUsage(shape dialect.Shape, body []byte) (usage Usage, model string, ok bool)
}
