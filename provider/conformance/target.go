package conformance

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/llmclient/llmclient"
)

// Target is an adapter under test. Set exactly one of Wire, for an adapter that speaks
// HTTP, and Script, for one that does not (such as provider/fake). A Target is read-only
// once passed to Run; its Wire or Script must be safe for concurrent use, although Run
// calls them from one goroutine at a time.
type Target struct {
	// Name names the adapter in test names and in the Client's upstream name.
	Name string
	// Wire renders the vendor's wire format for an HTTP adapter.
	Wire Wire
	// Script plays replies for an adapter that makes no HTTP calls.
	Script Script
	// KnownGaps lists cases the adapter is known to fail, each excluded with a log line
	// until the adapter is fixed. Run reports an entry that names no case, and an entry
	// whose case passes, as a test failure, so the list cannot go stale.
	KnownGaps []KnownGap
	// SignsToolCalls says the vendor attaches Reply.Signature to the tool calls it makes
	// and must receive it back when the conversation is replayed (Gemini 3 thought
	// signatures); RunConversation then checks that it comes back, whichever vendors the
	// conversation visited in between.
	SignsToolCalls bool
	// Embed is the vendor's embeddings wire format, for RunEmbed; nil when the adapter
	// has no embeddings (its Provider then need not implement llmclient.Embedder).
	Embed EmbedWire
}

// KnownGap excludes one case of Run for one Target.
type KnownGap struct {
	// Case is the case's name below the target: "<scenario>/<mode>", such as
	// "stream/error_event_after_first_token/client".
	Case string
	// Why describes the adapter bug, with a reference to where it is tracked.
	Why string
}

// Wire is the vendor's documented HTTP wire format, for one adapter. Implementations must
// be safe for concurrent use.
type Wire interface {
	// NewProvider builds the adapter pointed at baseURL (an http URL without a trailing
	// slash, standing for the vendor's API root, as the adapter's own base-URL option takes
	// it), sending its requests with client and authenticating with apiKey when a Call
	// carries no key of its own.
	NewProvider(baseURL string, client *http.Client, apiKey string) (llmclient.Provider, error)
	// Decode reads a request the adapter sent (its body already read) and reports what it
	// carried. It returns an error when the request is not in the vendor's documented
	// shape: wrong method, path or credential header, or a body that does not decode.
	Decode(r *http.Request, body []byte) (*Seen, error)
	// Render returns the vendor's HTTP response for reply r to a request like req: the
	// status, headers and JSON body, or the event stream when req.Stream is set. It returns
	// an error wrapping ErrNotApplicable when the vendor cannot produce r; Run then skips
	// the scenario for this target. A Wire should echo req.APIKey in the message of its
	// KindAuth error, as a careless vendor or proxy might, so the suite proves that the
	// adapter keeps keys out of errors.
	Render(r *Reply, req *Seen) (*WireResponse, error)
}

// Script drives an adapter that makes no HTTP calls. Implementations must be safe for
// concurrent use.
type Script interface {
	// Render reports the HTTP status the adapter's answer to reply r stands for (the
	// error's Status for a Fail, 200 for answers and in-band stream errors), or an error
	// wrapping ErrNotApplicable when the adapter cannot produce r. The request's Stream
	// field is set by Run; the adapter need not report it.
	Render(r *Reply, req *Seen) (status int, err error)
	// NewProvider builds the adapter. For each call it receives, it must call serve with
	// what the call carried, and answer with the reply serve returns. serve returns an
	// error when the case has no reply left for the call; the adapter fails the call with it.
	NewProvider(serve func(req *Seen) (*Reply, error), apiKey string) (llmclient.Provider, error)
}

// Seen is what an upstream understood of one request, decoded from the vendor's format.
type Seen struct {
	// Stream is true when the request asked for a streamed response.
	Stream bool
	// Model is the model the request named.
	Model string
	// APIKey is the credential the request carried.
	APIKey string
	// Tools are the names of the tools the request declared.
	Tools []string
	// ToolCalls are the assistant tool calls the request replayed from earlier turns. ID
	// holds what the vendor links a result to its call by: the call id, or for vendors
	// that link by name (Gemini), the function name.
	ToolCalls []llmclient.ToolCall
	// ToolResults are the tool results the request carried.
	ToolResults []ToolResult
	// System is the text of the system prompt the request carried, its parts joined with
	// "\n". Checked by RunConversation.
	System string
	// Images counts the image parts the request carried, wherever they were (user
	// messages, tool results, moved parts). Checked by RunConversation.
	Images int
	// Signatures are the opaque per-call tokens the request replayed (Gemini thought
	// signatures), for targets with SignsToolCalls. Checked by RunConversation.
	Signatures []string
}

// ToolResult is one tool result as the vendor received it.
type ToolResult struct {
	// Ref is what links the result to its call: the call id, or the function name for
	// vendors that link by name. It must equal the ID of a ToolCall in the same request.
	Ref string
	// Content is the result's text, or its JSON when the vendor takes an object.
	Content string
}

// WireResponse is one HTTP response of an upstream.
type WireResponse struct {
	Status int
	Header http.Header
	Body   []byte
}

// ErrNotApplicable marks a reply the vendor cannot produce, such as a Retry-After header
// from a vendor that only puts its wait in the body.
var ErrNotApplicable = errors.New("conformance: not applicable")

// NotApplicable returns an error wrapping ErrNotApplicable that says why.
func NotApplicable(why string) error {
	return fmt.Errorf("%w: %s", ErrNotApplicable, why)
}

// JSON returns a response with status and v encoded as its JSON body, with
// Content-Type application/json. v may be a string or []byte holding JSON already.
func JSON(status int, v any) *WireResponse {
	return &WireResponse{
		Status: status,
		Header: http.Header{"Content-Type": {"application/json"}},
		Body:   marshal(v),
	}
}

// Event is one server-sent event.
type Event struct {
	// Name is the event's type ("event:" line); empty for none.
	Name string
	// Data is the event's data: a string or []byte is sent as it is, anything else as
	// its JSON encoding. A nil Data with an empty Name is sent as a ": keep-alive" comment.
	Data any
}

// SSE returns a 200 response with Content-Type text/event-stream carrying events.
func SSE(events ...Event) *WireResponse {
	var b strings.Builder
	for _, e := range events {
		if e.Name == "" && e.Data == nil {
			b.WriteString(": keep-alive\n\n")
			continue
		}
		if e.Name != "" {
			b.WriteString("event: ")
			b.WriteString(e.Name)
			b.WriteByte('\n')
		}
		for _, line := range strings.Split(string(marshal(e.Data)), "\n") {
			b.WriteString("data: ")
			b.WriteString(line)
			b.WriteByte('\n')
		}
		b.WriteByte('\n')
	}
	return &WireResponse{
		Status: http.StatusOK,
		Header: http.Header{"Content-Type": {"text/event-stream"}, "Cache-Control": {"no-cache"}},
		Body:   []byte(b.String()),
	}
}

// marshal returns v as JSON, passing strings and byte slices through.
func marshal(v any) []byte {
	switch v := v.(type) {
	case string:
		return []byte(v)
	case []byte:
		return v
	}
	b, err := json.Marshal(v)
	if err != nil {
		// Only unsupported values (channels, funcs) get here: a bug in the Wire.
		panic("conformance: cannot encode response body: " + err.Error())
	}
	return b
}
