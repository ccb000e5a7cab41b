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

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/internal/adapter"
	"github.com/llmclient/llmclient/internal/sse"
)

// responsesStream decodes a Responses API event stream for the transport's stream guard:
// "event: response.…" events whose data repeats the type. It does not rebuild the
// response; it reports what the guard needs:
//
//   - content: every "….delta" event (output text as Text, refusals as Refusal, reasoning
//     as Reasoning, function and custom tool arguments as ToolCalls; other deltas, such as
//     audio or code, as Text so that they count as content), and "response.output_item.added"
//     for a function call (ToolCalls with its id and name);
//   - an empty Chunk for every other event (created, in_progress, …done, tool progress), so
//     that each one counts as activity;
//   - Chunk{KeepAlive: true} for SSE comments;
//   - the usage and finish reason with "response.completed" or "response.incomplete", then
//     io.EOF;
//   - an *llmclient.Error for an "error" event or "response.failed" (classified like an
//     error body; server_error when nothing more is known);
//   - an error wrapping io.ErrUnexpectedEOF when the body ends before a terminal event.
//
// Recv is not safe for concurrent use with itself; Close may be called at any time.
type responsesStream struct {
	body   io.ReadCloser
	status int
	header http.Header
	dec    *sse.Decoder
	err    error // sticky

	closed    atomic.Bool
	closeOnce sync.Once
}

func newResponsesStream(resp *http.Response) *responsesStream {
	return &responsesStream{body: resp.Body, status: resp.StatusCode, header: resp.Header,
		dec: sse.NewDecoder(resp.Body, maxStreamEvent)}
}

// respEvent is the part of a Responses API event the guard reads.
type respEvent struct {
	Type        string          `json:"type"`
	Delta       json.RawMessage `json:"delta"`
	OutputIndex int             `json:"output_index"`
	Item        *struct {
		Type   string `json:"type"`
		CallID string `json:"call_id"`
		Name   string `json:"name"`
	} `json:"item"`
	Response *struct {
		ID                string          `json:"id"`
		Model             string          `json:"model"`
		Error             json.RawMessage `json:"error"`
		Usage             *respUsage      `json:"usage"`
		IncompleteDetails *struct {
			Reason string `json:"reason"`
		} `json:"incomplete_details"`
	} `json:"response"`
}

type respUsage struct {
	InputTokens        int `json:"input_tokens"`
	OutputTokens       int `json:"output_tokens"`
	TotalTokens        int `json:"total_tokens"`
	InputTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	OutputTokensDetails struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
}

// Recv returns the next event's chunk; see responsesStream.
func (s *responsesStream) Recv() (llmclient.Chunk, error) {
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
		data := bytes.TrimSpace(ev.Data)
		if len(data) == 0 {
			continue
		}
		if ev.Type == "ping" || ev.Type == "keepalive" {
			return llmclient.Chunk{KeepAlive: true}, nil
		}
		var e respEvent
		if err := json.Unmarshal(data, &e); err != nil {
			s.err = &llmclient.Error{Class: llmclient.ClassServerError, Status: s.status,
				Message: "openai: malformed stream event", RequestID: requestID(s.header), Err: err}
			return llmclient.Chunk{}, s.err
		}
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

// event interprets one event.
func (s *responsesStream) event(typ string, e *respEvent, data []byte) (llmclient.Chunk, error) {
	var c llmclient.Chunk
	switch {
	case typ == "error":
		return c, s.inBand(data)
	case typ == "response.failed":
		if e.Response != nil && len(bytes.TrimSpace(e.Response.Error)) > 0 && !bytes.Equal(bytes.TrimSpace(e.Response.Error), []byte("null")) {
			body := append(append([]byte(`{"error":`), e.Response.Error...), '}')
			return c, s.inBand(body)
		}
		return c, s.inBand([]byte(`{"error":{"message":"response failed"}}`))
	case typ == "response.completed", typ == "response.incomplete":
		s.err = io.EOF
		c.FinishReason, c.RawFinishReason = llmclient.FinishStop, "completed"
		if r := e.Response; r != nil {
			c.ID, c.Model = r.ID, r.Model
			if d := r.IncompleteDetails; d != nil && d.Reason != "" {
				c.RawFinishReason = d.Reason
				c.FinishReason = llmclient.FinishLength
				if d.Reason == "content_filter" {
					c.FinishReason = llmclient.FinishContentFilter
				}
			}
			if u := r.Usage; u != nil {
				c.Usage = &llmclient.Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens,
					TotalTokens: u.TotalTokens, CachedInputTokens: u.InputTokensDetails.CachedTokens,
					ReasoningTokens: u.OutputTokensDetails.ReasoningTokens}
			}
		}
		return c, nil
	case typ == "response.output_item.added":
		if it := e.Item; it != nil && (it.Type == "function_call" || it.Type == "custom_tool_call") {
			c.ToolCalls = []llmclient.ToolCallDelta{{Index: e.OutputIndex, ID: it.CallID, Name: it.Name}}
		}
		return c, nil
	case strings.HasSuffix(typ, ".delta"):
		var d string
		if json.Unmarshal(e.Delta, &d) != nil || d == "" {
			return c, nil
		}
		switch typ {
		case "response.refusal.delta":
			c.Refusal = d
		case "response.reasoning_text.delta", "response.reasoning_summary_text.delta":
			c.Reasoning = d
		case "response.function_call_arguments.delta", "response.custom_tool_call_input.delta":
			c.ToolCalls = []llmclient.ToolCallDelta{{Index: e.OutputIndex, Arguments: d}}
		default:
			c.Text = d
		}
	}
	return c, nil
}

// inBand classifies an error that arrived in the stream, after HTTP 200.
func (s *responsesStream) inBand(body []byte) error {
	e := errorFromBody(s.status, s.header, body)
	if e.Class == llmclient.ClassNone || e.Class == llmclient.ClassUnknown {
		e.Class = llmclient.ClassServerError
	}
	return e
}

func (s *responsesStream) readError(err error) error {
	switch {
	case s.closed.Load():
		return errStreamClosed
	case err == io.EOF:
		return fmt.Errorf("openai: responses stream ended before response.completed: %w", io.ErrUnexpectedEOF)
	case errors.Is(err, sse.ErrEventTooLarge):
		// An event over the size limit is the upstream's fault: retried, failed over.
		return &llmclient.Error{Class: llmclient.ClassServerError, Message: "openai: stream event too large", Err: err}
	}
	return &adapter.NetError{Pkg: "openai", Op: "reading stream", Err: err}
}

// Close closes the response body. It is idempotent and safe to call concurrently with Recv.
func (s *responsesStream) Close() error {
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		_ = s.body.Close()
	})
	return nil
}
