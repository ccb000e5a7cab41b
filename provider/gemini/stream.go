package gemini

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/dialect"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/internal/adapter"
	"github.com/llmclient/llmclient/internal/httpx"
	"github.com/llmclient/llmclient/internal/sse"
)

// errMalformedJSON marks a JSON-mode body that is not a JSON array of responses.
var errMalformedJSON = errors.New("malformed JSON stream")

// errClosed is returned by Recv after Close.
var errClosed = fmt.Errorf("gemini: stream closed: %w", net.ErrClosed)

// stream reads streamGenerateContent?alt=sse: "data: {GenerateContentResponse}" events
// with no event names and no end marker. The generation is complete once a chunk carried
// a finishReason; the usage of the last chunk that has usageMetadata is reported. A
// response that is JSON rather than an event stream (a proxy that ignored alt=sse sends a
// JSON array of responses) is read whole and replayed.
type stream struct {
	body   io.ReadCloser
	cancel context.CancelFunc
	dec    *sse.Decoder      // nil in JSON mode
	queue  []json.RawMessage // JSON mode: the responses not yet returned
	loaded bool              // JSON mode: the body was read
	key    string
	status int

	finished bool // a finishReason was seen
	sentID   bool // the id and model were returned
	calls    int  // function calls so far
	idBase   int  // the request history's tool calls: made-up IDs are numbered after them
	usage    wireUsage
	hasUsage bool
	skips    adapter.Skips // malformed events skipped, once a good chunk was read
	event    bool          // the data being handled is a "data:" event's (not a bare JSON value)

	err    error // sticky
	closed atomic.Bool
	once   sync.Once
}

func newStream(resp *http.Response, cancel context.CancelFunc, key string) *stream {
	s := &stream{body: resp.Body, cancel: cancel, key: key, status: resp.StatusCode}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "application/json" {
		s.dec = sse.NewDecoder(resp.Body, 0)
		// Gemini sends an error inside the event stream as a bare JSON line, without
		// "data:" (go-genai reads it the same way).
		s.dec.AcceptRawJSON()
	} // else JSON mode: the body is read on the first Recv
	return s
}

// loadJSON reads a non-SSE body: a JSON array of responses or one object.
func (s *stream) loadJSON() error {
	data, err := httpx.ReadLimited(s.body, httpx.MaxResponseBody)
	if err != nil {
		return err
	}
	data = bytes.TrimSpace(data)
	if len(data) > 0 && data[0] == '[' {
		if err := json.Unmarshal(data, &s.queue); err != nil {
			return fmt.Errorf("%w: %w", errMalformedJSON, err)
		}
		return nil
	}
	s.queue = []json.RawMessage{data}
	return nil
}

// Format prints the stream as "gemini.stream{Status: <code>}" for every verb, so that no
// verb prints the key it holds for redaction.
func (s *stream) Format(f fmt.State, _ rune) {
	_, _ = fmt.Fprintf(f, "gemini.stream{Status: %d}", s.status)
}

// Recv returns the next chunk: text, reasoning (thought parts), complete function calls,
// the finish reason, and usage with the finish reason or after it. It returns io.EOF at the
// end of a stream that carried a finishReason, an error wrapping io.ErrUnexpectedEOF at the
// end of one that did not, an *llmclient.Error for an error line (classified like an error
// response; server_error when it says nothing known) or a blocked prompt
// (content_filtered), and an *llmclient.Error of class server_error for a chunk that is not
// valid JSON or a JSON-mode body over 32 MiB. Once a good chunk was read, an event whose
// data ("data:" lines; not a bare JSON value, the form of an in-band error) starts as a
// JSON object but does not parse (a proxy or CDN rewrote it) is skipped
// instead, up to adapter.MaxSkippedEvents (8) per stream (SkippedEvents counts them); the
// next one fails the stream, its message saying how many were skipped. A skipped event
// never hides the end: without a finish reason the stream is still cut. Errors are
// sticky. Recv is not safe for concurrent use with itself; Close may be called at any
// time.
func (s *stream) Recv() (llmclient.Chunk, error) {
	for s.err == nil {
		data, comment, err := s.next()
		if err != nil {
			s.err = s.endError(err)
			break
		}
		if comment {
			return llmclient.Chunk{KeepAlive: true}, nil
		}
		if len(bytes.TrimSpace(data)) == 0 {
			continue
		}
		c, err := s.handle(data)
		if errors.Is(err, errSkipped) {
			continue // a proxy or CDN rewrote it: the stream goes on
		}
		if err != nil {
			s.err = err
			break
		}
		if c.HasContent() || c.FinishReason != "" || c.Usage != nil || c.ID != "" || c.Model != "" {
			return c, nil
		}
	}
	return llmclient.Chunk{}, s.err
}

// next returns the next data payload, or a comment.
func (s *stream) next() (data []byte, comment bool, err error) {
	s.event = false
	if s.dec != nil && len(s.queue) > 0 { // the elements of a bare JSON array
		data, s.queue = s.queue[0], s.queue[1:]
		return data, false, nil
	}
	if s.dec == nil {
		if !s.loaded {
			s.loaded = true
			if err := s.loadJSON(); err != nil {
				return nil, false, err
			}
		}
		if len(s.queue) == 0 {
			return nil, false, io.EOF
		}
		data, s.queue = s.queue[0], s.queue[1:]
		return data, false, nil
	}
	ev, err := s.dec.Next()
	if err == nil && ev.Raw && ev.Data[0] == '[' {
		// [{"error":…}]: the form of a JSON-mode body, inside the stream.
		if json.Unmarshal(ev.Data, &s.queue) != nil || len(s.queue) == 0 {
			s.queue = nil
			return ev.Data, false, nil // not an array of objects: malformed, reported by handle
		}
		data, s.queue = s.queue[0], s.queue[1:]
		return data, false, nil
	}
	s.event = err == nil && !ev.Raw
	return ev.Data, ev.Comment, err
}

func (s *stream) endError(err error) error {
	switch {
	case s.closed.Load():
		return errClosed
	case err == io.EOF && s.finished:
		return io.EOF
	case err == io.EOF:
		return fmt.Errorf("gemini: stream ended without a finish reason: %w", io.ErrUnexpectedEOF)
	case errors.Is(err, sse.ErrEventTooLarge):
		// An event over the size limit is the upstream's fault: retried, failed over.
		return &llmclient.Error{Class: failure.ServerError, Message: "gemini: stream event too large", Err: err}
	case errors.Is(err, errMalformedJSON), errors.Is(err, httpx.ErrTooLarge):
		// A JSON-mode body over httpx.MaxResponseBody is the upstream's fault, as it is for a
		// one-shot body (Sender.ReadBody): retried, failed over.
		return malformed(s.status, nil, err)
	}
	return &adapter.NetError{Pkg: "gemini", Op: "reading stream", Err: err}
}

// handle turns one GenerateContentResponse (or error line) into a chunk.
func (s *stream) handle(data []byte) (llmclient.Chunk, error) {
	var c llmclient.Chunk
	var w wireResponse
	if err := json.Unmarshal(data, &w); err != nil {
		if s.event && adapter.StartsObject(data) && s.skips.Skip() {
			return c, errSkipped
		}
		e := malformed(s.status, data, fmt.Errorf("malformed stream chunk: %w", err))
		e.Redact(s.key) // the message quotes the start of the chunk
		return c, s.skips.Note(e)
	}
	if w.Error != nil {
		e := inBandError(s.status, w.Error)
		e.Redact(s.key)
		return c, e
	}
	s.skips.Good()
	if !s.sentID && (w.ResponseID != "" || w.ModelVersion != "") {
		c.ID, c.Model, s.sentID = w.ResponseID, w.ModelVersion, true
	}
	if w.UsageMetadata != nil {
		s.usage, s.hasUsage = *w.UsageMetadata, true
	}
	if len(w.Candidates) == 0 {
		partial := &llmclient.Response{ID: w.ResponseID, Model: w.ModelVersion}
		if s.hasUsage {
			partial.Usage = usage(&s.usage)
		}
		if e := blocked(&w, partial); e != nil {
			return c, e
		}
	} else {
		s.candidate(&w.Candidates[0], &c)
	}
	if s.hasUsage && s.finished && (c.FinishReason != "" || w.UsageMetadata != nil) {
		u := usage(&s.usage)
		c.Usage = &u
	}
	return c, nil
}

// candidate copies the first candidate's parts and finish reason into c.
func (s *stream) candidate(cand *wireCandidate, c *llmclient.Chunk) {
	if cand.Content != nil {
		var text, reasoning strings.Builder
		for i := range cand.Content.Parts {
			p := &cand.Content.Parts[i]
			switch {
			case p.FunctionCall != nil:
				tc := toolCall(p, s.idBase+s.calls)
				c.ToolCalls = append(c.ToolCalls, dialect.ToolCallDelta{
					Index: s.calls, ID: tc.ID, Name: tc.Name, Arguments: tc.Arguments,
				})
				s.calls++
			case p.Thought:
				reasoning.WriteString(p.Text)
			default:
				text.WriteString(p.Text)
			}
		}
		c.Text, c.Reasoning = text.String(), reasoning.String()
	}
	if cand.FinishReason != "" {
		c.RawFinishReason = cand.FinishReason
		c.FinishReason = finishReason(cand.FinishReason, s.calls > 0)
		s.finished = true
	}
}

// errSkipped is handle's answer to a malformed event that Recv skips.
var errSkipped = errors.New("gemini: malformed event skipped")

// SkippedEvents returns the number of malformed events skipped so far. It is safe for
// concurrent use.
func (s *stream) SkippedEvents() int { return s.skips.Count() }

// Close releases the connection. It is idempotent and unblocks a concurrent Recv.
func (s *stream) Close() error {
	s.once.Do(func() {
		s.closed.Store(true)
		s.cancel()
		_ = s.body.Close()
	})
	return nil
}
