package conformance

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/finish"
)

// result is what one call produced, through the adapter or through a Client.
type result struct {
	resp     *llmclient.Response // the response; for a stream, what its chunks add up to
	chunks   []string            // a stream's content-chunk texts, in order
	err      error               // the call's error, from Complete, Stream, Recv or Err
	opened   bool                // Stream returned a stream
	content  bool                // the stream delivered content before err
	cleanEOF bool                // an adapter stream ended with io.EOF itself
}

// level says who made the call.
type level uint8

const (
	levelProvider level = iota // the adapter, directly
	levelClient                // an llmclient.Client over the adapter
)

// expect is a Want resolved for one call.
type expect struct {
	Want
	level  level
	stream bool
	// status is the HTTP status the failing answer came with: checked against
	// Error.Status, except -1: not checked (a filtered answer has no status of its own).
	status int
	// httpErr is true when the failure was a non-2xx response, which a stream must report
	// from Stream itself.
	httpErr  bool
	model    string
	key      string
	upstream string // client level: the upstream that must be named
	attempts int    // client level: the attempts the trace must hold
}

// problems collects failed expectations.
type problems []string

func (p *problems) add(format string, args ...any) { *p = append(*p, fmt.Sprintf(format, args...)) }

// check compares a call's result with what was expected.
func check(e *expect, r *result) []string {
	var p problems
	switch {
	case e.Class == failure.None:
		checkSuccess(&p, e, r)
	case e.level == levelProvider:
		checkProviderFailure(&p, e, r)
	default:
		checkClientFailure(&p, e, r)
	}
	p = append(p, leaks(r.err, e.key)...)
	return p
}

func checkSuccess(p *problems, e *expect, r *result) {
	if r.err != nil {
		p.add("unexpected error (class %s): %v", llmclient.ClassOf(r.err), r.err)
		return
	}
	if r.resp == nil {
		p.add("no response and no error")
		return
	}
	if e.stream {
		if e.Chunks != nil && !slices.Equal(r.chunks, e.Chunks) {
			p.add("stream chunk texts = %q, want %q", r.chunks, e.Chunks)
		}
		if e.level == levelProvider && !r.cleanEOF {
			p.add("stream did not end with io.EOF after its end marker")
		}
	}
	checkResponse(p, &e.Want, r.resp, e.model)
	if e.level == levelClient {
		if r.resp.Upstream != e.upstream {
			p.add("Response.Upstream = %q, want %q", r.resp.Upstream, e.upstream)
		}
		if len(r.resp.Attempts) != e.attempts {
			p.add("Response.Attempts has %d attempts, want %d", len(r.resp.Attempts), e.attempts)
		}
	}
}

// checkResponse compares a successful response with w.
func checkResponse(p *problems, w *Want, resp *llmclient.Response, model string) {
	if resp.Text != w.Text {
		p.add("Text = %q, want %q", resp.Text, w.Text)
	}
	if resp.FinishReason != w.Finish {
		p.add("FinishReason = %q (raw %q), want %q", resp.FinishReason, resp.RawFinishReason, w.Finish)
	}
	if w.Usage != nil && resp.Usage != *w.Usage {
		p.add("Usage = %+v, want %+v", resp.Usage, *w.Usage)
	}
	if resp.Model != model {
		p.add("Model = %q, want %q", resp.Model, model)
	}
	if resp.ID == "" {
		p.add("ID is empty")
	}
	checkToolCalls(p, "ToolCalls", resp.ToolCalls, w.ToolCalls, true)
}

// checkToolCalls compares tool calls by name and arguments (as JSON); ids must be set
// when needID.
func checkToolCalls(p *problems, what string, got, want []llmclient.ToolCall, needID bool) {
	if len(got) != len(want) {
		p.add("%s = %+v, want %d calls like %+v", what, got, len(want), want)
		return
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Name != w.Name {
			p.add("%s[%d].Name = %q, want %q", what, i, g.Name, w.Name)
		}
		if !sameJSON(g.Arguments, w.Arguments) {
			p.add("%s[%d].Arguments = %s, want %s", what, i, g.Arguments, w.Arguments)
		}
		if needID && g.ID == "" {
			p.add("%s[%d].ID is empty", what, i)
		}
	}
}

func checkProviderFailure(p *problems, e *expect, r *result) {
	if e.Class == failure.ContentFiltered && r.err == nil && r.resp != nil {
		// A filtered answer: the Client turns it into the error.
		if f := r.resp.FinishReason; f != finish.ContentFilter && f != finish.Refusal {
			p.add("filtered answer: FinishReason = %q (raw %q), want content_filter or refusal", f, r.resp.RawFinishReason)
		}
		if r.resp.Text != "" || len(r.resp.ToolCalls) > 0 {
			p.add("filtered answer carries content: %q %+v", r.resp.Text, r.resp.ToolCalls)
		}
		if e.stream && !r.cleanEOF {
			p.add("filtered stream did not end with io.EOF")
		}
		return
	}
	if r.err == nil {
		p.add("call succeeded (%s), want class %s", describe(r.resp), e.Class)
		return
	}
	if c := llmclient.ClassOf(r.err); c != e.Class {
		p.add("class = %s, want %s; error: %v", c, e.Class, r.err)
	}
	if e.Cut {
		if !errors.Is(r.err, io.ErrUnexpectedEOF) {
			p.add("a stream cut before its end marker must return an error wrapping io.ErrUnexpectedEOF; got %v", r.err)
		}
	} else {
		checkError(p, e, r.err, e.Class)
	}
	if e.stream {
		checkStreamFailure(p, e, r)
	}
}

func checkClientFailure(p *problems, e *expect, r *result) {
	class := e.Class
	if e.AfterFirstToken {
		class = failure.StreamInterrupted
	}
	if r.err == nil {
		p.add("call succeeded (%s), want class %s", describe(r.resp), class)
		return
	}
	ae := checkError(p, e, r.err, class)
	if ae == nil {
		return
	}
	if e.AfterFirstToken {
		if !errors.Is(r.err, llmclient.ErrStreamInterrupted) {
			p.add("errors.Is(err, ErrStreamInterrupted) = false for %v", r.err)
		}
		want := strings.Join(e.Chunks, "")
		switch {
		case ae.Partial == nil:
			p.add("interrupted stream's error has no Partial")
		case ae.Partial.Text != want:
			p.add("Partial.Text = %q, want %q", ae.Partial.Text, want)
		}
	}
	if ae.Upstream != e.upstream {
		p.add("Error.Upstream = %q, want %q", ae.Upstream, e.upstream)
	}
	if len(ae.Attempts) != e.attempts {
		p.add("Error.Attempts has %d attempts, want %d", len(ae.Attempts), e.attempts)
	}
	if e.stream {
		checkStreamFailure(p, e, r)
	}
}

// checkError checks the *llmclient.Error of a failure: class, status and Retry-After.
func checkError(p *problems, e *expect, err error, class failure.Class) *llmclient.Error {
	var ae *llmclient.Error
	if !errors.As(err, &ae) {
		p.add("error is %T (%v), want an *llmclient.Error", err, err)
		return nil
	}
	if ae.Class != class {
		p.add("Error.Class = %s, want %s; error: %v", ae.Class, class, err)
	}
	if e.status >= 0 && ae.Status != e.status {
		p.add("Error.Status = %d, want %d", ae.Status, e.status)
	}
	want := e.RetryAfter
	if class == failure.StreamInterrupted {
		want = 0
	}
	if ae.RetryAfter != want {
		p.add("Error.RetryAfter = %v, want %v", ae.RetryAfter, want)
	}
	return ae
}

// checkStreamFailure checks where in a stream a failure surfaced.
func checkStreamFailure(p *problems, e *expect, r *result) {
	switch {
	case e.AfterFirstToken && !r.opened:
		p.add("Stream failed before the first token; want the failure after %q", e.Chunks)
	case e.AfterFirstToken && !r.content:
		p.add("the stream's error came before any content; want it after %q", e.Chunks)
	case !e.AfterFirstToken && r.content:
		p.add("the stream delivered content %q before its error; want none", r.chunks)
	case !e.AfterFirstToken && e.level == levelClient && r.opened:
		p.add("Client.Stream returned a stream for a failure before the first token; want the error from Stream")
	case e.httpErr && r.opened:
		p.add("Stream returned a stream for an HTTP %d response; want the error from Stream itself", e.status)
	}
	if !slices.Equal(r.chunks, e.Chunks) && (len(r.chunks) > 0 || len(e.Chunks) > 0) {
		p.add("chunk texts before the error = %q, want %q", r.chunks, e.Chunks)
	}
}

// leaks reports every text of err that contains key.
func leaks(err error, key string) []string {
	if err == nil || key == "" {
		return nil
	}
	texts := []string{err.Error(), fmt.Sprintf("%+v", err)}
	for e := errors.Unwrap(err); e != nil; e = errors.Unwrap(e) {
		texts = append(texts, e.Error())
	}
	var ae *llmclient.Error
	if errors.As(err, &ae) {
		texts = append(texts, ae.Message, ae.Param, ae.Type, ae.Code, ae.RequestID)
		for _, a := range ae.Attempts {
			if a.Err != nil {
				texts = append(texts, a.Err.Error())
			}
		}
	}
	for _, s := range texts {
		if strings.Contains(s, key) {
			return []string{"the API key leaks into the error: " + strings.ReplaceAll(s, key, "<KEY>")}
		}
	}
	return nil
}

// checkSeen checks what the upstream received for one call.
func checkSeen(p *problems, s *Seen, req *llmclient.Request, key string) {
	if s == nil {
		p.add("the upstream could not decode the request")
		return
	}
	if s.Model != req.Model {
		p.add("request model = %q, want %q", s.Model, req.Model)
	}
	if s.APIKey != key {
		p.add("request credential = %q, want the configured key", redactKey(s.APIKey, key))
	}
	for _, t := range req.Tools {
		if !slices.Contains(s.Tools, t.Name) {
			p.add("request does not declare tool %q (declares %q)", t.Name, s.Tools)
		}
	}
}

// checkRoundTrip checks that a follow-up request replayed the assistant's tool calls and
// carried one result per call, each linked to its call.
func checkRoundTrip(p *problems, s *Seen, calls []llmclient.ToolCall, content string) {
	if s == nil {
		return
	}
	checkToolCalls(p, "replayed tool calls", s.ToolCalls, calls, false)
	if len(s.ToolResults) != len(calls) {
		p.add("request carries %d tool results, want %d", len(s.ToolResults), len(calls))
		return
	}
	for i, tr := range s.ToolResults {
		if !sameJSON(tr.Content, content) && tr.Content != content {
			p.add("tool result %d content = %q, want %q", i, tr.Content, content)
		}
		if !slices.ContainsFunc(s.ToolCalls, func(c llmclient.ToolCall) bool { return c.ID == tr.Ref }) {
			p.add("tool result %d refers to %q, which no replayed tool call has", i, tr.Ref)
		}
	}
}

// sameJSON reports whether a and b are equal JSON values.
func sameJSON(a, b string) bool {
	var va, vb any
	if json.Unmarshal([]byte(a), &va) != nil || json.Unmarshal([]byte(b), &vb) != nil {
		return false
	}
	ja, _ := json.Marshal(va)
	jb, _ := json.Marshal(vb)
	return bytes.Equal(ja, jb)
}

// describe summarizes a response for a failure message.
func describe(r *llmclient.Response) string {
	if r == nil {
		return "no response"
	}
	return fmt.Sprintf("text %q, finish %q, %d tool calls", r.Text, r.FinishReason, len(r.ToolCalls))
}

func redactKey(s, key string) string {
	if key == "" {
		return s
	}
	return strings.ReplaceAll(s, key, "<KEY>")
}

// accumulate assembles the response a provider stream's chunks add up to, as the Client
// does: text concatenated, tool-call deltas joined by index, the last finish reason, usage,
// id and model.
func accumulate(chunks []llmclient.Chunk) *llmclient.Response {
	r := &llmclient.Response{}
	var text, reasoning, refusal strings.Builder
	index := map[int]int{}
	for i := range chunks {
		c := &chunks[i]
		text.WriteString(c.Text)
		reasoning.WriteString(c.Reasoning)
		refusal.WriteString(c.Refusal)
		for _, d := range c.ToolCalls {
			j, ok := index[d.Index]
			if !ok {
				j = len(r.ToolCalls)
				index[d.Index] = j
				r.ToolCalls = append(r.ToolCalls, llmclient.ToolCall{})
			}
			tc := &r.ToolCalls[j]
			if d.ID != "" {
				tc.ID = d.ID
			}
			if d.Name != "" {
				tc.Name = d.Name
			}
			tc.Arguments += d.Arguments
		}
		if c.FinishReason != finish.None {
			r.FinishReason, r.RawFinishReason = c.FinishReason, c.RawFinishReason
		}
		if c.Usage != nil {
			r.Usage = *c.Usage
		}
		if c.ID != "" {
			r.ID = c.ID
		}
		if c.Model != "" {
			r.Model = c.Model
		}
	}
	r.Text, r.Reasoning, r.Refusal = text.String(), reasoning.String(), refusal.String()
	return r
}

// retryWaitBounds is the range the wait before the retry of w's failure must fall in:
// none for a class retried without a backoff (a timeout), else as waitBounds.
func retryWaitBounds(w *Want) (lo, hi time.Duration) {
	if llmclient.DefaultDecision(clientClass(w)).NoBackoff {
		return 0, 0
	}
	return waitBounds(w.RetryAfter)
}

// waitBounds returns the range an attempt's wait must fall in after an upstream asked for
// ra: the Client adds up to 10% jitter, at most a second. With no Retry-After the Client
// backs off by some positive amount.
func waitBounds(ra time.Duration) (lo, hi time.Duration) {
	if ra <= 0 {
		return time.Nanosecond, time.Minute
	}
	return ra, ra + min(ra/10, time.Second)
}
