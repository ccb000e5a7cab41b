package anthropic

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/dialect"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/finish"
	"github.com/llmclient/llmclient/internal/adapter"
	"github.com/llmclient/llmclient/internal/httpx"
	"github.com/llmclient/llmclient/internal/sse"
	"github.com/llmclient/llmclient/ratelimit"
)

// errClosed is returned by Recv after Close.
var errClosed = fmt.Errorf("anthropic: stream closed: %w", net.ErrClosed)

// streamEvent is the union of the Messages stream events' data.
type streamEvent struct {
	Type         string        `json:"type"`
	Message      *wireResponse `json:"message"`
	Index        int           `json:"index"`
	ContentBlock *wireOutBlock `json:"content_block"`
	Delta        *wireDelta    `json:"delta"`
	Usage        *wireUsage    `json:"usage"`
	Error        *wireError    `json:"error"`
}

// wireDelta is a content_block_delta's delta or a message_delta's delta.
type wireDelta struct {
	Type        string `json:"type"`
	Text        string `json:"text"`
	PartialJSON string `json:"partial_json"`
	Thinking    string `json:"thinking"`
	StopReason  string `json:"stop_reason"`
}

// openTool is a tool_use block between its content_block_start and content_block_stop.
// Blocks stream one after another, so one is enough. Only its input_json_delta events are
// tool-call deltas: a server_tool_use block (web_search, code_execution…) streams its
// input the same way, and the API runs that tool itself, as a one-shot response's
// server-tool blocks are not tool calls either.
type openTool struct {
	open    bool
	index   int
	input   string // content_block_start's input, for a block that sends no input_json_delta
	gotArgs bool   // an input_json_delta with JSON text arrived
}

// stream reads a Messages event stream:
//
//	message_start → (content_block_start → content_block_delta* → content_block_stop)* →
//	message_delta → message_stop, with ping and error events anywhere.
type stream struct {
	body   io.ReadCloser
	src    httpx.EndReader // body, as the decoder reads it
	cancel context.CancelFunc
	dec    *sse.Decoder
	status int
	header http.Header
	key    string

	start  wireUsage     // usage from message_start
	tool   openTool      // the tool_use block being streamed, if any
	stop   bool          // a message_delta carried a stop_reason
	skips  adapter.Skips // malformed events skipped, once a good event was read
	err    error         // sticky: io.EOF after message_stop, or the failure
	closed atomic.Bool
	once   sync.Once

	// drain: Close reads the body on to its end after message_stop (see Close); set for
	// Provider.Stream, whose stream owns the connection's body. The Transport's decoder
	// reads through a body the Transport closes, and leaves it alone.
	drain bool
	ended atomic.Bool // message_stop, an error event or a one-shot body was read: set by Recv
}

func newStream(resp *http.Response, cancel context.CancelFunc, key string) *stream {
	s := &stream{
		body:   resp.Body,
		src:    httpx.EndReader{R: resp.Body},
		cancel: cancel,
		status: resp.StatusCode,
		header: resp.Header,
		key:    key,
	}
	s.dec = sse.NewDecoder(&s.src, 0)
	s.dec.AcceptRawJSON() // a one-shot body sent instead of events: see wholeBody
	return s
}

// Format prints the stream as "anthropic.stream{Status: <code>}" for every verb, so that
// no verb prints the key it holds for redaction.
func (s *stream) Format(f fmt.State, _ rune) {
	_, _ = fmt.Fprintf(f, "anthropic.stream{Status: %d}", s.status)
}

// Recv returns the next chunk: ID and model (message_start), text, reasoning and tool-call
// deltas, the finish reason with usage (message_delta), or a keep-alive (ping, SSE
// comment). It returns io.EOF after message_stop, an *llmclient.Error for an error event,
// and an error wrapping io.ErrUnexpectedEOF when the stream ends before message_stop. An
// event whose data is empty is read from its name alone ("event: ping" with an empty data
// line is a keep-alive, not a broken stream). An event whose data is not valid JSON is an
// *llmclient.Error of class server_error. Once a good event was read (message_start, a
// content block event or message_delta), an event whose data starts as a JSON object but
// does not parse (a proxy or CDN rewrote it) is skipped instead, up to
// adapter.MaxSkippedEvents (8) per stream (SkippedEvents counts them), unless it is named
// message_start, message_delta, message_stop or error, which carry the start, the end or a
// failure; the next one fails the stream, its message saying how many were skipped. A
// skipped event never hides the end: without message_stop the stream is still cut, and a
// message_stop after skipped events but without a stop_reason is an error wrapping
// io.ErrUnexpectedEOF, not a clean end. A tool_use block that streams no input (a tool
// without parameters) gets its start's input, "{}", as arguments at its
// content_block_stop, as a one-shot response has them. A server tool's blocks
// (server_tool_use, whose input streams as input_json_delta too, and its result blocks)
// yield nothing, as they are left out of a one-shot response. A one-shot body sent instead of
// events is answered as wholeBody says. Errors are sticky. Recv is not safe for concurrent
// use with itself; Close may be called at any time.
func (s *stream) Recv() (llmclient.Chunk, error) {
	if s.err != nil {
		return llmclient.Chunk{}, s.err
	}
	for {
		ev, err := s.dec.Next()
		if err != nil {
			s.err = s.readError(err)
			return llmclient.Chunk{}, s.err
		}
		if ev.Comment {
			return llmclient.Chunk{KeepAlive: true}, nil
		}
		if ev.Raw {
			s.ended.Store(true) // the whole answer: nothing after it is the caller's
			c, err := s.wholeBody(ev.Data)
			switch {
			case err != nil:
				s.err = err
			case c.FinishReason == finish.None: // incomplete, like a stream without message_stop
				s.err = fmt.Errorf("anthropic: one-shot body without a stop_reason: %w", io.ErrUnexpectedEOF)
			default:
				s.err = io.EOF
			}
			return c, err
		}
		c, ok, err := s.handle(ev.Type, ev.Data)
		if err != nil {
			s.err = err
			return llmclient.Chunk{}, err
		}
		if ok {
			return c, nil
		}
		if s.err != nil { // message_stop
			return llmclient.Chunk{}, s.err
		}
	}
}

// readError turns a decoder error into the stream's error.
func (s *stream) readError(err error) error {
	switch {
	case s.closed.Load():
		return errClosed
	case err == io.EOF:
		return fmt.Errorf("anthropic: stream ended before message_stop: %w", io.ErrUnexpectedEOF)
	case errors.Is(err, sse.ErrEventTooLarge):
		// An event over the size limit is the upstream's fault: retried, failed over.
		return &llmclient.Error{Class: failure.ServerError, Message: "anthropic: stream event too large", Err: err}
	}
	return &adapter.NetError{Pkg: "anthropic", Op: "reading stream", Err: err}
}

// handle interprets one event. ok is false for events that carry nothing for the caller;
// message_stop sets s.err to io.EOF.
func (s *stream) handle(name string, data []byte) (c llmclient.Chunk, ok bool, err error) {
	var ev streamEvent
	if len(bytes.TrimSpace(data)) > 0 { // an event with an empty data line is its name alone
		if err := json.Unmarshal(data, &ev); err != nil {
			if skippable(name) && adapter.StartsObject(data) && s.skips.Skip() {
				return c, false, nil // a proxy or CDN rewrote it: the stream goes on
			}
			return c, false, s.skips.Note(s.malformed(data, fmt.Errorf("malformed %q event: %w", name, err)))
		}
	}
	typ := ev.Type
	if typ == "" {
		typ = name
	}
	switch typ {
	case "message_start", "content_block_start", "content_block_delta", "content_block_stop", "message_delta":
		s.skips.Good()
	}
	switch typ {
	case "ping":
		return llmclient.Chunk{KeepAlive: true}, true, nil
	case "error":
		return c, false, s.eventError(data)
	case "message_start":
		if ev.Message == nil {
			return c, false, s.malformed(data, errors.New("message_start without message"))
		}
		s.start = ev.Message.Usage
		return llmclient.Chunk{ID: ev.Message.ID, Model: ev.Message.Model}, true, nil
	case "content_block_start":
		b := ev.ContentBlock
		if b == nil {
			return c, false, nil
		}
		switch b.Type {
		case "tool_use":
			c.ToolCalls = []dialect.ToolCallDelta{{Index: ev.Index, ID: adapter.UnpatternID(b.ID), Name: b.Name}}
			s.tool = openTool{open: true, index: ev.Index, input: toolInput(b.Input)}
		case "text":
			c.Text = b.Text
		case "thinking":
			c.Reasoning = b.Thinking
		}
	case "content_block_delta":
		d := ev.Delta
		if d == nil {
			return c, false, nil
		}
		switch d.Type {
		case "text_delta":
			c.Text = d.Text
		case "thinking_delta":
			c.Reasoning = d.Thinking
		case "input_json_delta":
			// Only the open tool_use block's input is a tool call's: another block's
			// (server_tool_use, or one whose start was skipped) would be a call without
			// id or name.
			if d.PartialJSON != "" && s.tool.open && s.tool.index == ev.Index {
				c.ToolCalls = []dialect.ToolCallDelta{{Index: ev.Index, Arguments: d.PartialJSON}}
				s.tool.gotArgs = true
			}
		}
	case "content_block_stop":
		if t := s.tool; t.open && t.index == ev.Index {
			s.tool.open = false
			if !t.gotArgs {
				// A tool without parameters streams no input (or only ""): its arguments are
				// the start's input, "{}", as a one-shot response has them.
				c.ToolCalls = []dialect.ToolCallDelta{{Index: t.index, Arguments: t.input}}
			}
		}
	case "message_delta":
		if ev.Delta != nil && ev.Delta.StopReason != "" {
			s.stop = true
			c.RawFinishReason = ev.Delta.StopReason
			c.FinishReason = finishReason(ev.Delta.StopReason)
		}
		if ev.Usage != nil {
			u := usage(*ev.Usage, &s.start)
			c.Usage = &u
		}
		return c, c.FinishReason != "" || c.Usage != nil, nil
	case "message_stop":
		s.err = io.EOF
		s.ended.Store(true)
		if n := s.skips.Count(); n > 0 && !s.stop {
			// A skipped event may have been the message_delta: the end is not known.
			s.err = fmt.Errorf("anthropic: message_stop without a stop_reason after %d malformed events skipped: %w", n, io.ErrUnexpectedEOF)
		}
		return c, false, nil
	}
	return c, c.HasContent(), nil
}

// skippable reports whether a malformed event named name may be skipped: not one that
// carries the start, the end or a failure.
func skippable(name string) bool {
	switch name {
	case "message_start", "message_delta", "message_stop", "error":
		return false
	}
	return true
}

// SkippedEvents returns the number of malformed events skipped so far. It is safe for
// concurrent use.
func (s *stream) SkippedEvents() int { return s.skips.Count() }

// wholeBody answers a bare JSON value found instead of an event: a server or proxy that
// ignored "stream": true and sent a one-shot body, whatever its Content-Type. A Message is
// returned as one chunk that carries all of it (the stream then ends, as an interruption
// when it has no stop_reason), an error body as
// the classified error an error event would be, anything else as malformed.
func (s *stream) wholeBody(data []byte) (llmclient.Chunk, error) {
	var head struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return llmclient.Chunk{}, s.malformed(data, fmt.Errorf("malformed JSON body: %w", err))
	}
	switch head.Type {
	case "error":
		return llmclient.Chunk{}, s.eventError(data)
	case "message":
		resp, err := parseResponse(data)
		if err != nil {
			return llmclient.Chunk{}, s.malformed(data, err)
		}
		return adapter.ResponseChunk(resp), nil
	}
	return llmclient.Chunk{}, s.malformed(data, fmt.Errorf("JSON body of type %q instead of an event stream", head.Type))
}

// malformed reports an event that is not a usable one, with the call's key redacted from
// the start of its data that the message quotes.
func (s *stream) malformed(data []byte, why error) *llmclient.Error {
	e := malformed(s.status, s.header, data, why)
	e.Redact(s.key)
	return e
}

// eventError classifies an error event. It arrived after a 2xx status, so the error type
// alone decides; an unknown type is a server error, since the upstream failed after
// accepting the request.
func (s *stream) eventError(data []byte) error {
	s.ended.Store(true) // the upstream ends the body after it: Close lets it, as after message_stop
	e := classifyAt(s.status, s.header, data, time.Now())
	if e.Class == failure.Unknown {
		e.Class = failure.ServerError
	}
	e.Redact(s.key)
	return e
}

// Close releases the connection. It is idempotent and unblocks a concurrent Recv.
//
// After message_stop (or an error event), the body's own end (the chunked terminator the
// server writes after the last event) may still be on its way, and closing the body
// before a read reaches it makes net/http close the connection instead of reusing it;
// so Close first reads the body on, within httpx.CloseAfterEnd's bounds (4 KiB, 10 ms),
// which an upstream that holds the body open cannot stretch, and only then cancels the
// request, which would close the connection too. Nothing else reads the body then: Recv
// reads no more after the end.
func (s *stream) Close() error {
	s.once.Do(func() {
		s.closed.Store(true)
		if s.drain && s.ended.Load() && !s.src.Done {
			_ = httpx.CloseAfterEnd(s.body)
			s.cancel()
			return
		}
		s.cancel()
		_ = s.body.Close()
	})
	return nil
}

// toolInput is a tool_use block's input as ToolCall arguments: the JSON text, "{}" when it
// is absent or null.
func toolInput(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return "{}"
	}
	return string(raw)
}

// AcceptsPrefill reports whether model continues a trailing assistant message (a
// prefill) rather than rejecting it, for llmclient's stream continuation
// (dialect.Prefiller): the Claude 3 family and the first Claude 4 models (Sonnet 4,
// Opus 4 and 4.1) do; later models answer a prefill with a 400, and so are assumed to for
// any name not listed. llmclient.WithPrefill overrides it per upstream.
func (p *Provider) AcceptsPrefill(model string) bool {
	for _, prefix := range prefillModels {
		if strings.HasPrefix(model, prefix) {
			return true
		}
	}
	return false
}

// prefillModels are the model-name prefixes of the Claude models known to accept a prefill.
var prefillModels = []string{"claude-3", "claude-sonnet-4-0", "claude-sonnet-4-2025", "claude-opus-4-0",
	"claude-opus-4-1", "claude-opus-4-2025"}

// RateLimits returns the quota the stream's response headers reported (ParseRateLimits,
// reset times from now), nil when they carried none: llmclient.RateLimitedStream.
func (s *stream) RateLimits() *ratelimit.Status { return parseRateLimits(s.header, time.Now()) }
