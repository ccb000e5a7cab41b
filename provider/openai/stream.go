package openai

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/dialect"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/finish"
	"github.com/llmclient/llmclient/internal/adapter"
	"github.com/llmclient/llmclient/internal/httpx"
	"github.com/llmclient/llmclient/internal/jsonscan"
	"github.com/llmclient/llmclient/internal/sse"
	"github.com/llmclient/llmclient/ratelimit"
)

// maxStreamEvent bounds one event of a stream (a data line, or the joined data lines of one
// event): sse.DefaultMaxEventSize, 4 MiB.
const maxStreamEvent = sse.DefaultMaxEventSize

// chunkStream decodes a Chat Completions event stream into Chunks.
//
// Recv is not safe for concurrent use with itself; Close may be called at any time from
// any goroutine, and unblocks a Recv waiting on the network by closing the body.
type chunkStream struct {
	body   io.ReadCloser
	src    httpx.EndReader // body, as the decoder reads it
	status int
	header http.Header
	dec    *sse.Decoder
	sc     jsonscan.Scanner
	data   []byte // the event being decoded, for in-band errors and raw arguments

	id, model string        // the previous chunk's values, reused when equal so they do not allocate
	refused   bool          // a refusal delta was seen: a later "stop" is reported as finish.Refusal
	finished  bool          // a finish reason was seen: the end of the body is then a clean end
	skips     adapter.Skips // malformed events skipped, once a chunk was decoded
	key       string        // the call's API key, redacted from in-band error messages
	err       error         // sticky: io.EOF after [DONE], or the failure

	// drain: Close reads the body on to its end after the end marker (see closeBody);
	// set for Provider.Stream, whose stream owns the connection's body. The Transport's
	// decoder reads through a body the Transport closes, and leaves it alone.
	drain     bool
	ended     atomic.Bool // the stream's end was read ([DONE], an in-band error or a one-shot body): set by Recv
	closed    atomic.Bool
	closeOnce sync.Once
	closeErr  error
}

// errStreamClosed is returned by Recv after Close.
var errStreamClosed = fmt.Errorf("openai: stream closed: %w", net.ErrClosed)

// newChunkStream returns the ProviderStream for a 2xx streaming response; it owns resp.Body.
//
// Recv returns one Chunk per data event that carries something (text, reasoning, refusal,
// tool-call deltas, a finish reason, usage, or the response id and model); events that carry
// nothing, such as Azure's leading prompt_filter_results chunk, are skipped. An SSE comment
// or an "event: ping" is returned as Chunk{KeepAlive: true}; other named events (Chat
// Completions sends none; a proxy might) are skipped. "data: [DONE]" ends the stream with
// io.EOF.
//
// Errors, all sticky:
//   - an in-band error (a data line with a top-level "error" object, an "object":"error"
//     body, or an "event: error") is returned as the *llmclient.Error errorFromBody makes of
//     it; when the body does not say more, its class is failure.ServerError, since the
//     upstream failed after accepting the request;
//   - the body ending before [DONE] and before any finish reason: an error wrapping
//     io.ErrUnexpectedEOF (after a finish reason, the end of the body is a clean io.EOF:
//     the generation was complete, and some compatible servers never send [DONE]);
//   - a read failure: the transport's error, wrapped, for the Client to classify;
//   - an event over 4 MiB: an error wrapping sse.ErrEventTooLarge;
//   - a data line that is not a JSON object: an *llmclient.Error of class failure.ServerError
//     with the message "openai: malformed stream chunk: <start of the line>", wrapping the
//     *jsonscan.SyntaxError (the same decision parseResponse makes for a garbage body).
//     Once a chunk was decoded, a data line that starts as a JSON object but does not
//     parse (a proxy or CDN rewrote it) is skipped instead, up to adapter.MaxSkippedEvents (8) per
//     stream (SkippedEvents counts them); the next one fails the stream. A skipped event
//     never hides the end: without [DONE] or a finish reason the stream is still cut.
//
// A one-shot body sent instead of events (a bare JSON value outside any event: a server
// or proxy that ignored "stream": true) is read as parseResponse reads it: a completion
// is returned as one chunk that carries all of it, then io.EOF (an error wrapping
// io.ErrUnexpectedEOF when it has no finish reason); an error body is its classified
// error (for example quota_exhausted), not an interruption.
func newChunkStream(resp *http.Response) *chunkStream {
	s := &chunkStream{
		body:   resp.Body,
		src:    httpx.EndReader{R: resp.Body},
		status: resp.StatusCode,
		header: resp.Header,
	}
	s.dec = newDecoder(&s.src)
	return s
}

// newDecoder returns the event decoder of a stream: it also returns a bare JSON value
// outside any event (sse.Decoder.AcceptRawJSON), which a stream answers with wholeBody.
func newDecoder(body io.Reader) *sse.Decoder {
	dec := sse.NewDecoder(body, maxStreamEvent)
	dec.AcceptRawJSON()
	return dec
}

// Format prints the stream as "openai.chunkStream{Status: <code>}" for every verb, so that
// no verb prints the key it holds for redaction.
func (s *chunkStream) Format(f fmt.State, _ rune) { formatStream(f, "openai.chunkStream", s.status) }

// formatStream writes a stream's printed form: its type and the response status.
func formatStream(f fmt.State, name string, status int) {
	_, _ = fmt.Fprintf(f, "%s{Status: %d}", name, status)
}

// Recv returns the next chunk; see newChunkStream.
func (s *chunkStream) Recv() (llmclient.Chunk, error) {
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
		switch ev.Type {
		case "", "message", "error":
		case "ping":
			return llmclient.Chunk{KeepAlive: true}, nil
		default:
			// Chat Completions sends no named events; a proxy's own events are not ours.
			continue
		}
		data := bytes.TrimSpace(ev.Data)
		switch {
		case ev.Type == "error":
			if len(data) == 0 {
				data = bareFailure(ev.Type)
			}
			s.err = s.inBandError(data)
			return llmclient.Chunk{}, s.err
		case len(data) == 0:
			continue
		case string(data) == "[DONE]":
			s.err = io.EOF
			s.ended.Store(true)
			return llmclient.Chunk{}, io.EOF
		}
		c, err := s.decode(data)
		if err != nil {
			var se *jsonscan.SyntaxError
			if errors.As(err, &se) && s.skips.Skip() {
				continue // a proxy or CDN rewrote it: the stream goes on
			}
			s.err = s.skips.Note(err)
			return llmclient.Chunk{}, err
		}
		s.skips.Good()
		if c.Refusal != "" {
			s.refused = true
		}
		if s.refused && c.FinishReason == finish.Stop {
			// OpenAI ends a refusal with "stop"; say what happened, as parseResponse does.
			c.FinishReason = finish.Refusal
		}
		if c.FinishReason != finish.None {
			s.finished = true
		}
		if c.HasContent() || c.FinishReason != finish.None || c.Usage != nil || c.ID != "" || c.Model != "" {
			return c, nil
		}
	}
}

// SkippedEvents returns the number of malformed events skipped so far. It is safe for
// concurrent use.
func (s *chunkStream) SkippedEvents() int { return s.skips.Count() }

// Close closes the response body. It is idempotent and safe to call concurrently with Recv.
// After the end marker it first lets the body reach its end, for at most 10 ms, so that
// the connection is reused (see closeBody).
func (s *chunkStream) Close() error {
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		s.closeErr = closeBody(s.body, s.drain && s.ended.Load() && !s.src.Done)
	})
	return s.closeErr
}

// closeBody closes a stream's body. After the stream's end, when no read has reached the
// body's own end yet (ended), that end, the chunked terminator the server writes after the
// end marker, may still be on its way: closing the body before a read reaches it makes
// net/http close the connection instead of reusing it, so the body is first read on,
// within httpx.CloseAfterEnd's bounds (4 KiB, 10 ms), which an upstream that holds the
// body open cannot stretch. Nothing else reads the body then: Recv reads no more after
// the end.
func closeBody(body io.ReadCloser, ended bool) error {
	if ended {
		return httpx.CloseAfterEnd(body)
	}
	return body.Close()
}

// readError turns the SSE decoder's error into Recv's error.
func (s *chunkStream) readError(err error) error {
	switch {
	case err == io.EOF && s.finished:
		// Some compatible servers omit [DONE]; a finish reason already ended the generation,
		// and a cut after it loses only the usage chunk.
		return io.EOF
	case err == io.EOF:
		return fmt.Errorf("openai: stream ended without [DONE]: %w", io.ErrUnexpectedEOF)
	case errors.Is(err, sse.ErrEventTooLarge):
		// An event over the size limit is the upstream's fault: retried, failed over.
		return &llmclient.Error{Class: failure.ServerError, Message: "openai: stream event too large", Err: err}
	case s.closed.Load():
		return errStreamClosed
	}
	return &adapter.NetError{Pkg: "openai", Op: "reading stream", Err: err}
}

// wholeBody answers a bare JSON value found instead of an event: a server or proxy that
// ignored "stream": true and sent a one-shot body, whatever its Content-Type. See
// replayBody.
func (s *chunkStream) wholeBody(data []byte) (llmclient.Chunk, error) {
	c, end, ok := replayBody(parseResponse, s.status, s.header, data, s.key)
	s.ended.Store(true) // the whole answer was read: nothing after it is the caller's
	if s.err = end; !ok {
		return c, end
	}
	return c, nil
}

// bodyParser reads a one-shot body: parseResponse or parseResponsesBody.
type bodyParser func(status int, h http.Header, body []byte, now time.Time) (*llmclient.Response, *llmclient.Error)

// replayBody reads with parse a one-shot body sent in place of an event stream. A
// response becomes one chunk that carries all of it, after which the stream ends with end:
// io.EOF, or an error wrapping io.ErrUnexpectedEOF when the body has no finish reason (like
// an event stream without its end marker). An error body (such as insufficient_quota, or
// an error object in an array) becomes the classified error a one-shot call gets,
// instead of an interruption: it is end, and ok is false.
func replayBody(parse bodyParser, status int, h http.Header, data []byte, key string) (c llmclient.Chunk, end error, ok bool) {
	if data[0] == '[' { // an error object in an array (Gemini's OpenAI-compatible endpoint)
		return llmclient.Chunk{}, streamError(errorFromBody(status, h, data), key), false
	}
	resp, e := parse(status, h, data, time.Now())
	if e != nil {
		return llmclient.Chunk{}, streamError(e, key), false
	}
	end = io.EOF
	if resp.FinishReason == finish.None {
		end = fmt.Errorf("openai: one-shot body without a finish reason: %w", io.ErrUnexpectedEOF)
	}
	return adapter.ResponseChunk(resp), end, true
}

// streamError finishes an error found in a stream after HTTP 200 (an error event, or an
// error body sent in place of the events): a server_error when it says nothing known,
// since the upstream failed after accepting the request, with key redacted.
func streamError(e *llmclient.Error, key string) error {
	if e.Class == failure.None || e.Class == failure.Unknown {
		e.Class = failure.ServerError
	}
	e.Redact(key)
	return e
}

// bareFailure is the error body of a failure event (typ "error" or "response.failed")
// whose data is empty: a failure even though it says nothing more.
func bareFailure(typ string) []byte {
	return []byte(`{"error":{"message":"` + typ + ` event without data"}}`)
}

// inBandError turns an error event received after HTTP 200 into an *llmclient.Error.
func (s *chunkStream) inBandError(data []byte) error {
	s.ended.Store(true) // the upstream ends the body after it: Close lets it, as after [DONE]
	return streamError(errorFromBody(s.status, s.header, data), s.key)
}

// malformedChunk returns the error for a data line that is not a valid chunk: like a
// garbage one-shot body under a success status (see parseResponse), it comes from a broken
// server or proxy, a transient fault, so it is failure.ServerError.
func (s *chunkStream) malformedChunk(data []byte, err error) error {
	e := &llmclient.Error{
		Class:     failure.ServerError,
		Status:    s.status,
		Message:   "openai: malformed stream chunk: " + httpx.Snippet(data, 64),
		RequestID: requestID(s.header),
		Err:       err,
	}
	e.Redact(s.key) // the message quotes the start of the line
	return e
}

// decode parses one chunk: {"id","model","choices":[{"index","delta":{…},"finish_reason"}],
// "usage"}. Unknown members are skipped.
func (s *chunkStream) decode(data []byte) (llmclient.Chunk, error) {
	var c llmclient.Chunk
	sc := &s.sc
	sc.Reset(data)
	s.data = data
	if sc.Peek() != jsonscan.Object {
		return c, s.malformedChunk(data, errors.New("not a JSON object"))
	}
	inBandErr := false
	for more := sc.Object(); more; more = sc.More() {
		switch string(sc.Key()) {
		case "id":
			c.ID = s.internID(sc.Str())
		case "model":
			c.Model = s.internModel(sc.Str())
		case "choices":
			s.choices(&c)
		case "usage":
			if !sc.Null() {
				c.Usage = s.usage()
			}
		case "error":
			switch sc.Peek() {
			case jsonscan.Null:
				sc.Skip()
			case jsonscan.String:
				inBandErr = len(sc.Str()) > 0
			default:
				inBandErr = true
				sc.Skip()
			}
		case "object":
			inBandErr = inBandErr || string(s.optStr()) == "error"
		default:
			sc.Skip()
		}
	}
	sc.End()
	if err := sc.Err(); err != nil {
		return llmclient.Chunk{}, s.malformedChunk(data, err)
	}
	if inBandErr {
		return llmclient.Chunk{}, s.inBandError(data)
	}
	return c, nil
}

// choices reads the choices array into c. Only the choice with index 0 is kept: a Chunk has
// no choice index, and requests with n > 1 are not supported by the stream.
func (s *chunkStream) choices(c *llmclient.Chunk) {
	sc := &s.sc
	if sc.Null() {
		return
	}
	for more := sc.Array(); more; more = sc.More() {
		var ch llmclient.Chunk
		index := int64(0)
		for m := s.object(); m; m = sc.More() {
			switch string(sc.Key()) {
			case "index":
				index = sc.Int()
			case "delta", "message":
				s.delta(&ch)
			case "finish_reason":
				ch.RawFinishReason = internFinish(sc.Str())
				ch.FinishReason = normalizeFinishReason(ch.RawFinishReason)
			default:
				sc.Skip()
			}
		}
		if index == 0 {
			c.Text, c.Reasoning, c.Refusal, c.ToolCalls = ch.Text, ch.Reasoning, ch.Refusal, ch.ToolCalls
			c.FinishReason, c.RawFinishReason = ch.FinishReason, ch.RawFinishReason
		}
	}
}

// object opens an object, treating null as an empty one.
func (s *chunkStream) object() bool {
	if s.sc.Null() {
		return false
	}
	return s.sc.Object()
}

// delta reads a choice's delta.
func (s *chunkStream) delta(ch *llmclient.Chunk) {
	sc := &s.sc
	for more := s.object(); more; more = sc.More() {
		switch string(sc.Key()) {
		case "content":
			if sc.Peek() == jsonscan.Array {
				s.contentParts(ch)
			} else {
				ch.Text = string(sc.Str())
			}
		case "reasoning_content":
			// Takes precedence over "reasoning" when a vendor sends both.
			if r := s.optStr(); len(r) > 0 {
				ch.Reasoning = string(r)
			}
		case "reasoning":
			if r := s.optStr(); len(r) > 0 && ch.Reasoning == "" {
				ch.Reasoning = string(r)
			}
		case "refusal":
			ch.Refusal = string(sc.Str())
		case "tool_calls":
			s.toolCalls(ch)
		case "function_call": // the legacy single function call
			d := dialect.ToolCallDelta{}
			s.function(&d)
			ch.ToolCalls = append(ch.ToolCalls, d)
		default:
			sc.Skip()
		}
	}
}

// optStr reads a string, skipping a value of another type (some vendors put objects in
// fields that others use for strings) and returning nil for it.
func (s *chunkStream) optStr() []byte {
	switch s.sc.Peek() {
	case jsonscan.String, jsonscan.Null:
		return s.sc.Str()
	}
	s.sc.Skip()
	return nil
}

// contentParts reads content sent as an array of parts (Mistral): "text" parts add to Text,
// "thinking" parts (whose "thinking" member is itself an array of text parts) to Reasoning.
func (s *chunkStream) contentParts(ch *llmclient.Chunk) {
	sc := &s.sc
	var text, reasoning []byte
	for more := sc.Array(); more; more = sc.More() {
		if sc.Peek() != jsonscan.Object {
			sc.Skip()
			continue
		}
		for m := sc.Object(); m; m = sc.More() {
			switch string(sc.Key()) {
			case "text":
				text = append(text, s.optStr()...)
			case "thinking":
				if sc.Peek() != jsonscan.Array {
					reasoning = append(reasoning, s.optStr()...)
					continue
				}
				for a := sc.Array(); a; a = sc.More() {
					for o := s.object(); o; o = sc.More() {
						if string(sc.Key()) == "text" {
							reasoning = append(reasoning, s.optStr()...)
						} else {
							sc.Skip()
						}
					}
				}
			default:
				sc.Skip()
			}
		}
	}
	ch.Text += string(text)
	ch.Reasoning += string(reasoning)
}

// toolCalls reads delta.tool_calls. A delta without "index" takes its position in the array.
func (s *chunkStream) toolCalls(ch *llmclient.Chunk) {
	sc := &s.sc
	if sc.Null() {
		return
	}
	pos := 0
	for more := sc.Array(); more; more = sc.More() {
		d := dialect.ToolCallDelta{Index: pos}
		for m := s.object(); m; m = sc.More() {
			switch string(sc.Key()) {
			case "index":
				d.Index = int(sc.Int())
			case "id":
				d.ID = string(sc.Str())
			case "function":
				s.function(&d)
			default:
				sc.Skip()
			}
		}
		ch.ToolCalls = append(ch.ToolCalls, d)
		pos++
	}
}

// function reads {"name","arguments"} into d. Arguments sent as a JSON object instead of a
// string (some compatible servers do) are kept as their JSON text.
func (s *chunkStream) function(d *dialect.ToolCallDelta) {
	sc := &s.sc
	for more := s.object(); more; more = sc.More() {
		switch string(sc.Key()) {
		case "name":
			d.Name = string(sc.Str())
		case "arguments":
			if k := sc.Peek(); k == jsonscan.Object || k == jsonscan.Array {
				start := sc.Offset()
				sc.Skip()
				if sc.Err() == nil {
					d.Arguments = string(s.data[start:sc.Offset()])
				}
			} else {
				d.Arguments = string(sc.Str())
			}
		default:
			sc.Skip()
		}
	}
}

// usage reads a usage object, including the cache writes and DeepSeek's
// prompt_cache_hit_tokens, as
// usageObject reads a one-shot answer's (its counts by jsonscan.Scanner.Count).
func (s *chunkStream) usage() *llmclient.Usage {
	sc := &s.sc
	u := &llmclient.Usage{}
	cacheHit := 0
	for more := sc.Object(); more; more = sc.More() {
		switch string(sc.Key()) {
		case "prompt_tokens":
			u.InputTokens = sc.Count()
		case "completion_tokens":
			u.OutputTokens = sc.Count()
		case "total_tokens":
			u.TotalTokens = sc.Count()
		case "prompt_cache_hit_tokens":
			cacheHit = sc.Count()
		case "prompt_tokens_details":
			for m := s.object(); m; m = sc.More() {
				switch string(sc.Key()) {
				case "cached_tokens":
					u.CachedInputTokens = sc.Count()
				case "cache_write_tokens":
					u.CacheWriteTokens = sc.Count()
				default:
					sc.Skip()
				}
			}
		case "completion_tokens_details":
			for m := s.object(); m; m = sc.More() {
				if string(sc.Key()) == "reasoning_tokens" {
					u.ReasoningTokens = sc.Count()
				} else {
					sc.Skip()
				}
			}
		default:
			sc.Skip()
		}
	}
	if u.CachedInputTokens <= 0 { // as usageObject: cached_tokens when it counts some
		u.CachedInputTokens = cacheHit
	}
	if u.TotalTokens == 0 {
		u.TotalTokens = adapter.AddTokens(u.InputTokens, u.OutputTokens)
	}
	return u
}

// internID returns b as a string, reusing the previous id when equal.
func (s *chunkStream) internID(b []byte) string {
	if string(b) != s.id {
		s.id = string(b)
	}
	return s.id
}

// internModel returns b as a string, reusing the previous model when equal.
func (s *chunkStream) internModel(b []byte) string {
	if string(b) != s.model {
		s.model = string(b)
	}
	return s.model
}

// internFinish returns a finish_reason without allocating for the common words.
func internFinish(b []byte) string {
	switch string(b) {
	case "":
		return ""
	case "stop":
		return "stop"
	case "length":
		return "length"
	case "tool_calls":
		return "tool_calls"
	case "content_filter":
		return "content_filter"
	case "function_call":
		return "function_call"
	}
	return string(b)
}

// RateLimits returns the quota the stream's response headers reported (ParseRateLimits,
// reset times from now), nil when they carried none: llmclient.RateLimitedStream.
func (s *chunkStream) RateLimits() *ratelimit.Status { return ParseRateLimits(s.header, time.Now()) }
