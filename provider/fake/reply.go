package fake

import (
	"context"
	"slices"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/dialect"
	"github.com/llmclient/llmclient/finish"
	"github.com/llmclient/llmclient/internal/adapter"
	"github.com/llmclient/llmclient/ratelimit"
)

// ReplyStep is a step that answers successfully. Build it with Reply.
//
// Played by Provider.Complete it returns a Response with the step's Text, Reasoning,
// Refusal, ToolCalls, FinishReason, Usage and RateLimits, ID "fake-<call number>" and the
// call's Model. Played by Provider.Stream it streams the same content as one chunk, then
// the final chunk with the finish reason and usage, then io.EOF.
type ReplyStep struct {
	text       string
	reasoning  string
	refusal    string
	toolCalls  []llmclient.ToolCall
	finish     finish.Reason
	usage      *llmclient.Usage
	rateLimits *ratelimit.Status
	latency    time.Duration
	times      int
	forever    bool
}

// Reply returns a step that answers with text. Reply("") answers with no content, as a
// filtered or empty generation does.
func Reply(text string) *ReplyStep {
	return &ReplyStep{text: text, times: 1}
}

// Reasoning sets the visible reasoning text. Default empty.
func (s *ReplyStep) Reasoning(text string) *ReplyStep { s.reasoning = text; return s }

// Refusal sets the model's refusal message. Default empty.
func (s *ReplyStep) Refusal(msg string) *ReplyStep { s.refusal = msg; return s }

// ToolCall adds a tool call with the given id, function name and JSON arguments. Calls
// accumulate in order.
func (s *ReplyStep) ToolCall(id, name, argsJSON string) *ReplyStep {
	s.toolCalls = append(s.toolCalls, llmclient.ToolCall{ID: id, Name: name, Arguments: argsJSON})
	return s
}

// Finish sets the finish reason. Default finish.Stop, or finish.ToolCalls
// when the reply has tool calls.
func (s *ReplyStep) Finish(r finish.Reason) *ReplyStep { s.finish = r; return s }

// ReportUsage sets the exact reported usage, with its cache and reasoning counts, as given
// (TotalTokens is not computed). It replaces Usage.
func (s *ReplyStep) ReportUsage(u llmclient.Usage) *ReplyStep { s.usage = &u; return s }

// Usage sets the reported token usage; TotalTokens is in+out, counted as the dialects
// count a vendor's report (a negative count adds as 0, the sum saturates at the largest
// int). Usage(0, 0) reports none.
// Default: see the package doc.
func (s *ReplyStep) Usage(in, out int) *ReplyStep {
	s.usage = &llmclient.Usage{InputTokens: in, OutputTokens: out, TotalTokens: adapter.AddTokens(in, out)}
	return s
}

// RateLimits sets the quota state reported with the response, as rate-limit headers would;
// played by Stream, the stream reports it as it opens (see StreamStep.RateLimits).
// Default nil.
func (s *ReplyStep) RateLimits(rl ratelimit.Status) *ReplyStep { s.rateLimits = &rl; return s }

// Latency makes the call wait d before answering (Stream: before returning), or until its
// context is done. Default 0.
func (s *ReplyStep) Latency(d time.Duration) *ReplyStep { s.latency = d; return s }

// Times makes the step serve n calls (default 1); n < 1 removes it from the script.
func (s *ReplyStep) Times(n int) *ReplyStep { s.times = n; return s }

// Forever makes the step serve every call from now on; steps after it are never reached.
func (s *ReplyStep) Forever() *ReplyStep { s.forever = true; return s }

func (s *ReplyStep) compile(dst []entry) []entry {
	if s == nil {
		return dst
	}
	return append(dst, entry{leaf: s.clone(), times: s.times, forever: s.forever})
}

func (s *ReplyStep) clone() leaf {
	c := *s
	c.toolCalls = slices.Clone(s.toolCalls)
	if s.usage != nil {
		u := *s.usage
		c.usage = &u
	}
	if s.rateLimits != nil {
		rl := *s.rateLimits
		c.rateLimits = &rl
	}
	return &c
}

func (s *ReplyStep) play(ctx context.Context, call *llmclient.Call, stream bool, n int) (*llmclient.Response, llmclient.ProviderStream, error) {
	return s.asStream().play(ctx, call, stream, n)
}

// asStream returns the stream step that plays the reply: its content as one chunk.
func (s *ReplyStep) asStream() *StreamStep {
	st := &StreamStep{
		finish:     s.finish,
		usage:      s.usage,
		rateLimits: s.rateLimits,
		latency:    s.latency,
	}
	c := llmclient.Chunk{Text: s.text, Reasoning: s.reasoning, Refusal: s.refusal}
	for i, tc := range s.toolCalls {
		c.ToolCalls = append(c.ToolCalls, dialect.ToolCallDelta{
			Index: i, ID: tc.ID, Name: tc.Name, Arguments: tc.Arguments,
		})
	}
	if c.HasContent() {
		st.chunks = []llmclient.Chunk{c}
	}
	return st
}
