package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/dialect"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/internal/adapter"
	"github.com/llmclient/llmclient/internal/httpx"
	"github.com/llmclient/llmclient/internal/jsonx"
	"github.com/llmclient/llmclient/internal/sse"
	"github.com/llmclient/llmclient/ratelimit"
)

// responsesStream decodes a Responses API event stream: "event: response.…" events whose
// data repeats the type. It serves two readers.
//
// For Provider.Stream with WithResponsesAPI (typed), Recv returns:
//
//   - the response id and model with "response.created";
//   - Text for response.output_text.delta, Refusal for response.refusal.delta, Reasoning
//     for response.reasoning_summary_text.delta and response.reasoning_text.delta, and
//     ToolCalls for a function call: its call id and name with response.output_item.added,
//     its arguments with response.function_call_arguments.delta (custom tool calls alike),
//     indexed by output_index;
//   - an empty Chunk for every other event (in_progress, …done, tool progress, other
//     deltas such as audio), so that each one counts as activity;
//   - the usage and finish reason with "response.completed" or "response.incomplete"
//     (completed with function calls is finish.ToolCalls, with a refusal finish.Refusal;
//     incomplete for max_output_tokens finish.Length, for content_filter
//     finish.ContentFilter), then io.EOF;
//   - Chunk{KeepAlive: true} for SSE comments and ping events.
//
// For the transport's stream guard (not typed), every other "….delta" event (audio, code)
// is reported as Text too, so that it counts as content.
//
// Either way, an "error" event or "response.failed" is an *llmclient.Error classified like
// an error body (server_error when nothing more is known), with the call's key redacted;
// a body that ends before a terminal event is an error wrapping io.ErrUnexpectedEOF. A
// one-shot Response body sent instead of events is returned as one chunk, then io.EOF, or
// as its classified error (see wholeBody).
//
// An event whose data is not JSON is an *llmclient.Error of class server_error ("openai:
// malformed stream event"). Once an event was decoded, one whose data starts as a JSON
// object but does not parse (a proxy or CDN rewrote it) is skipped instead, up to
// adapter.MaxSkippedEvents (8) per stream (SkippedEvents counts them), unless it is named
// "error" or "response.failed"; the next one fails the stream, its message saying how many
// were skipped. A skipped event never hides the end: without response.completed or
// response.incomplete the stream is still cut.
//
// Recv is not safe for concurrent use with itself; Close may be called at any time.
type responsesStream struct {
	body   io.ReadCloser
	src    httpx.EndReader // body, as the decoder reads it
	status int
	header http.Header
	dec    *sse.Decoder
	typed  bool
	key    string
	calls  bool // a function call item was seen
	refuse bool // a refusal delta was seen
	skips  adapter.Skips
	err    error

	ended     atomic.Bool // response.completed or .incomplete, or a one-shot body, was read
	closed    atomic.Bool
	closeOnce sync.Once
}

func newResponsesStream(resp *http.Response, typed bool, key string) *responsesStream {
	s := &responsesStream{body: resp.Body, src: httpx.EndReader{R: resp.Body}, status: resp.StatusCode,
		header: resp.Header, typed: typed, key: key}
	s.dec = newDecoder(&s.src)
	return s
}

// respEvent is the part of a Responses API event the stream reads.
type respEvent struct {
	Type        string          `json:"type"`
	Delta       json.RawMessage `json:"delta"`
	OutputIndex int             `json:"output_index"`
	Item        *struct {
		Type   string `json:"type"`
		CallID string `json:"call_id"`
		Name   string `json:"name"`
	} `json:"item"`
	Response *respResponse `json:"response"`
	// The fields of an "error" event.
	Code    json.RawMessage `json:"code"`
	Message json.RawMessage `json:"message"`
	Param   json.RawMessage `json:"param"`
	Error   json.RawMessage `json:"error"`
}

// respUsage is the Responses API's usage object; its counts are read as ccUsage's.
type respUsage struct {
	InputTokens        jsonx.Count `json:"input_tokens"`
	OutputTokens       jsonx.Count `json:"output_tokens"`
	TotalTokens        jsonx.Count `json:"total_tokens"`
	InputTokensDetails struct {
		CachedTokens     jsonx.Count `json:"cached_tokens"`
		CacheWriteTokens jsonx.Count `json:"cache_write_tokens"`
	} `json:"input_tokens_details"`
	OutputTokensDetails struct {
		ReasoningTokens jsonx.Count `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
}

// Format prints the stream as "openai.responsesStream{Status: <code>}" for every verb, so
// that no verb prints the key it holds for redaction.
func (s *responsesStream) Format(f fmt.State, _ rune) {
	formatStream(f, "openai.responsesStream", s.status)
}

// Recv returns the next event's chunk; see responsesStream.
func (s *responsesStream) Recv() (llmclient.Chunk, error) {
	if s.err != nil {
		return llmclient.Chunk{}, s.err
	}
	for {
		if s.closed.Load() {
			s.err = errStreamClosed
			return llmclient.Chunk{}, s.err
		}
		ev, err := s.dec.Next()
		if err != nil {
			s.err = s.readError(err)
			return llmclient.Chunk{}, s.err
		}
		if ev.Comment {
			return llmclient.Chunk{KeepAlive: true}, nil
		}
		if ev.Raw {
			return s.wholeBody(ev.Data)
		}
		data := bytes.TrimSpace(ev.Data)
		if len(data) == 0 {
			if ev.Type == "error" || ev.Type == "response.failed" {
				s.err = s.inBand(bareFailure(ev.Type))
				return llmclient.Chunk{}, s.err
			}
			continue
		}
		if ev.Type == "ping" || ev.Type == "keepalive" {
			return llmclient.Chunk{KeepAlive: true}, nil
		}
		var e respEvent
		if err := json.Unmarshal(data, &e); err != nil {
			if ev.Type != "error" && ev.Type != "response.failed" && adapter.StartsObject(data) && s.skips.Skip() {
				continue // a proxy or CDN rewrote it: the stream goes on
			}
			s.err = s.skips.Note(&llmclient.Error{Class: failure.ServerError, Status: s.status,
				Message: "openai: malformed stream event", RequestID: requestID(s.header), Err: err})
			return llmclient.Chunk{}, s.err
		}
		s.skips.Good()
		typ := e.Type
		if typ == "" {
			typ = ev.Type
		}
		c, err := s.event(typ, &e, data)
		if err != nil {
			s.err = err
			return llmclient.Chunk{}, err
		}
		return c, nil
	}
}

// SkippedEvents returns the number of malformed events skipped so far. It is safe for
// concurrent use.
func (s *responsesStream) SkippedEvents() int { return s.skips.Count() }

// event interprets one event.
func (s *responsesStream) event(typ string, e *respEvent, data []byte) (llmclient.Chunk, error) {
	var c llmclient.Chunk
	switch {
	case typ == "error":
		return c, s.inBand(errorEventBody(e, data))
	case typ == "response.failed":
		body := []byte(`{"error":{"message":"response failed"}}`)
		if r := e.Response; r != nil && len(bytes.TrimSpace(r.Error)) > 0 && !bytes.Equal(bytes.TrimSpace(r.Error), []byte("null")) {
			body = append(append([]byte(`{"error":`), r.Error...), '}')
		}
		return c, s.inBand(body)
	case typ == "response.created":
		if r := e.Response; r != nil {
			c.ID, c.Model = r.ID, r.Model
		}
		return c, nil
	case typ == "response.completed", typ == "response.incomplete":
		s.err = io.EOF
		s.ended.Store(true)
		status := strings.TrimPrefix(typ, "response.")
		reason := ""
		if r := e.Response; r != nil {
			c.ID, c.Model = r.ID, r.Model
			if d := r.IncompleteDetails; d != nil {
				reason = d.Reason
			}
			if u := r.Usage; u != nil {
				usage := u.usage()
				c.Usage = &usage
			}
		}
		c.FinishReason, c.RawFinishReason = responsesFinish(status, reason, s.calls, s.refuse)
		return c, nil
	case typ == "response.output_item.added":
		if it := e.Item; it != nil && (it.Type == "function_call" || it.Type == "custom_tool_call") {
			s.calls = true
			c.ToolCalls = []dialect.ToolCallDelta{{Index: e.OutputIndex, ID: it.CallID, Name: it.Name}}
		}
		return c, nil
	case strings.HasSuffix(typ, ".delta"):
		var d string
		if json.Unmarshal(e.Delta, &d) != nil || d == "" {
			return c, nil
		}
		switch typ {
		case "response.output_text.delta":
			c.Text = d
		case "response.refusal.delta":
			s.refuse = true
			c.Refusal = d
		case "response.reasoning_text.delta", "response.reasoning_summary_text.delta":
			c.Reasoning = d
		case "response.function_call_arguments.delta", "response.custom_tool_call_input.delta":
			c.ToolCalls = []dialect.ToolCallDelta{{Index: e.OutputIndex, Arguments: d}}
		default:
			if !s.typed {
				c.Text = d // audio, code…: content for the guard, not text for a caller
			}
		}
	}
	return c, nil
}

// errorEventBody returns an error event as an error body: {"error":{…}} as it is, or the
// flat {"type":"error","code","message","param"} of the Responses API rewrapped.
func errorEventBody(e *respEvent, data []byte) []byte {
	if len(bytes.TrimSpace(e.Error)) > 0 && bytes.TrimSpace(e.Error)[0] == '{' {
		return data
	}
	field := func(raw json.RawMessage) json.RawMessage {
		if len(bytes.TrimSpace(raw)) == 0 {
			return json.RawMessage("null")
		}
		return raw
	}
	b, err := json.Marshal(map[string]map[string]json.RawMessage{"error": {
		"code": field(e.Code), "message": field(e.Message), "param": field(e.Param),
	}})
	if err != nil {
		return data
	}
	return b
}

// inBand classifies an error that arrived in the stream, after HTTP 200.
func (s *responsesStream) inBand(body []byte) error {
	return streamError(errorFromBody(s.status, s.header, body), s.key)
}

// wholeBody answers a bare JSON value found instead of an event, as chunkStream.wholeBody
// does (see replayBody); for the transport's guard, the chunk's text is the answer.
func (s *responsesStream) wholeBody(data []byte) (llmclient.Chunk, error) {
	c, end, ok := replayBody(parseResponsesBody, s.status, s.header, data, s.key)
	s.ended.Store(true)
	if s.err = end; !ok {
		return c, end
	}
	return c, nil
}

func (s *responsesStream) readError(err error) error {
	switch {
	case s.closed.Load():
		return errStreamClosed
	case err == io.EOF:
		return fmt.Errorf("openai: responses stream ended before response.completed: %w", io.ErrUnexpectedEOF)
	case errors.Is(err, sse.ErrEventTooLarge):
		// An event over the size limit is the upstream's fault: retried, failed over.
		return &llmclient.Error{Class: failure.ServerError, Message: "openai: stream event too large", Err: err}
	}
	return &adapter.NetError{Pkg: "openai", Op: "reading stream", Err: err}
}

// Close closes the response body, after the terminal event as chunkStream.Close does for a
// typed stream (the Transport's decoder leaves the body to the Transport). It is idempotent
// and safe to call concurrently with Recv.
func (s *responsesStream) Close() error {
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		_ = closeBody(s.body, s.typed && s.ended.Load() && !s.src.Done)
	})
	return nil
}

// RateLimits returns the quota the stream's response headers reported (ParseRateLimits,
// reset times from now), nil when they carried none: llmclient.RateLimitedStream.
func (s *responsesStream) RateLimits() *ratelimit.Status {
	return ParseRateLimits(s.header, time.Now())
}
