package fake

import (
	"context"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/finish"
	"github.com/llmclient/llmclient/internal/adapter"
	"github.com/llmclient/llmclient/ratelimit"
)

// StreamStep is a step that answers with a stream of chunks. Build it with Stream or
// StreamChunks.
//
// Played by Provider.Stream, it returns once the "headers" arrive (after Latency), then
// Recv yields, in order: the chunks, each after its wait (StallFirst, StallAfter and
// ChunkDelay), with KeepAlive chunks during long waits; a final chunk carrying the
// FinishReason, Usage, ID ("fake-<call number>") and Model (the call's); then io.EOF.
// CutAfter, FailAfter and ErrorAfter replace everything from a given chunk on with an error.
//
// Played by Provider.Complete, the stream is read to its end, taking the same time, and
// the result returned as one Response: the text, reasoning and refusal concatenated, the
// tool-call deltas assembled; or the stream's error, if it has one.
type StreamStep struct {
	chunks     []llmclient.Chunk
	chunkDelay time.Duration
	stalls     map[int]time.Duration
	keepAlive  time.Duration
	end        endKind
	endAt      int
	endFail    *FailStep
	endErr     error
	finish     finish.Reason
	usage      *llmclient.Usage
	rateLimits *ratelimit.Status
	latency    time.Duration
	times      int
	forever    bool
}

// endKind says how a stream ends early.
type endKind uint8

const (
	endNormal endKind = iota // final chunk, then io.EOF
	endCut                   // io.ErrUnexpectedEOF
	endFail                  // an in-band *llmclient.Error
	endError                 // a given error
)

// Stream returns a step that streams each text as one chunk.
func Stream(texts ...string) *StreamStep {
	chunks := make([]llmclient.Chunk, len(texts))
	for i, t := range texts {
		chunks[i].Text = t
	}
	return &StreamStep{chunks: chunks, times: 1}
}

// StreamChunks returns a step that streams the given chunks as they are, for reasoning,
// refusal and tool-call deltas. The final chunk is still added after them.
func StreamChunks(chunks ...llmclient.Chunk) *StreamStep {
	return &StreamStep{chunks: slices.Clone(chunks), times: 1}
}

// ChunkDelay sets the wait before each chunk after the first. Default 0.
func (s *StreamStep) ChunkDelay(d time.Duration) *StreamStep { s.chunkDelay = d; return s }

// StallFirst sets a wait after the headers, before the first chunk (a queued request, or a
// slow first token). It is StallAfter(0, d).
func (s *StreamStep) StallFirst(d time.Duration) *StreamStep { return s.StallAfter(0, d) }

// StallAfter adds a wait of d after k chunks, on top of ChunkDelay: an idle stream.
// With k at or past the number of chunks, the wait comes before the final chunk (or the
// error that replaces it). Setting the same k again replaces its wait.
func (s *StreamStep) StallAfter(k int, d time.Duration) *StreamStep {
	if s.stalls == nil {
		s.stalls = make(map[int]time.Duration)
	}
	s.stalls[max(k, 0)] = d
	return s
}

// KeepAlive makes the stream send a keep-alive chunk (Chunk.KeepAlive, an SSE comment or
// ping on the wire) each time a wait inside the stream has lasted every, as vendors do
// while a request is queued. Default 0: none.
func (s *StreamStep) KeepAlive(every time.Duration) *StreamStep { s.keepAlive = every; return s }

// CutAfter makes the connection drop after k chunks: Recv then returns an error wrapping
// io.ErrUnexpectedEOF and no finish reason. With k at or past the number of chunks, all the
// text arrives but the end marker does not. The last of CutAfter, FailAfter and ErrorAfter
// wins.
func (s *StreamStep) CutAfter(k int) *StreamStep {
	s.end, s.endAt = endCut, max(k, 0)
	return s
}

// FailAfter makes the stream carry an error event after k chunks (k = 0: before the first
// token), as vendors do after HTTP 200 (Anthropic's overloaded_error event, an OpenAI
// data: {"error":...} line): Recv returns f's *llmclient.Error. Only f's error fields are
// used; its Latency, Times and Forever are ignored. The last of CutAfter, FailAfter and
// ErrorAfter wins.
func (s *StreamStep) FailAfter(k int, f *FailStep) *StreamStep {
	s.end, s.endAt, s.endFail = endFail, max(k, 0), f
	return s
}

// ErrorAfter makes Recv return err, as it is, after k chunks: a transport failure in the
// middle of the body, such as a connection reset. The last of CutAfter, FailAfter and
// ErrorAfter wins.
func (s *StreamStep) ErrorAfter(k int, err error) *StreamStep {
	s.end, s.endAt, s.endErr = endError, max(k, 0), err
	return s
}

// Finish sets the final chunk's finish reason. Default finish.Stop, or
// finish.ToolCalls when a chunk carries a tool call.
func (s *StreamStep) Finish(r finish.Reason) *StreamStep { s.finish = r; return s }

// ReportUsage sets the exact usage the final chunk reports, with its cache and reasoning
// counts, as given (TotalTokens is not computed). It replaces Usage.
func (s *StreamStep) ReportUsage(u llmclient.Usage) *StreamStep { s.usage = &u; return s }

// Usage sets the usage the final chunk reports; TotalTokens is in+out, counted as for
// ReplyStep.Usage. Default: see the package doc.
func (s *StreamStep) Usage(in, out int) *StreamStep {
	s.usage = &llmclient.Usage{InputTokens: in, OutputTokens: out, TotalTokens: adapter.AddTokens(in, out)}
	return s
}

// RateLimits sets the quota state the step reports, as rate-limit headers would: in the
// Response when it is played by Complete; when it is played by Stream, the stream reports
// it as it opens (llmclient.RateLimitedStream), as a vendor's stream headers do. Default
// nil: the Response has none, and the stream says nothing either way.
func (s *StreamStep) RateLimits(rl ratelimit.Status) *StreamStep { s.rateLimits = &rl; return s }

// Latency makes Stream wait d before returning (the time to the response headers), or
// until the call's context is done. Default 0.
func (s *StreamStep) Latency(d time.Duration) *StreamStep { s.latency = d; return s }

// Times makes the step serve n calls (default 1); n < 1 removes it from the script.
func (s *StreamStep) Times(n int) *StreamStep { s.times = n; return s }

// Forever makes the step serve every call from now on; steps after it are never reached.
func (s *StreamStep) Forever() *StreamStep { s.forever = true; return s }

func (s *StreamStep) compile(dst []entry) []entry {
	if s == nil {
		return dst
	}
	return append(dst, entry{leaf: s.clone(), times: s.times, forever: s.forever})
}

func (s *StreamStep) clone() leaf {
	c := *s
	c.chunks = make([]llmclient.Chunk, len(s.chunks))
	for i := range s.chunks {
		c.chunks[i] = cloneChunk(s.chunks[i])
	}
	c.stalls = maps.Clone(s.stalls)
	if s.endFail != nil {
		c.endFail = s.endFail.clone().(*FailStep)
	}
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

func (s *StreamStep) play(ctx context.Context, call *llmclient.Call, stream bool, n int) (*llmclient.Response, llmclient.ProviderStream, error) {
	if err := sleep(ctx, s.latency); err != nil {
		return nil, nil, err
	}
	st := newStream(ctx, s.items(call, n), s.keepAlive)
	if stream {
		if s.rateLimits != nil {
			rl := *s.rateLimits
			return nil, &reportingStream{stream: st, rl: &rl}, nil
		}
		return nil, st, nil
	}
	resp, err := collect(st)
	if err != nil {
		return nil, nil, err
	}
	if s.rateLimits != nil {
		rl := *s.rateLimits
		resp.RateLimits = &rl
	}
	return resp, nil, nil
}

// items lays out what the stream yields for call number n.
func (s *StreamStep) items(call *llmclient.Call, n int) []item {
	last := len(s.chunks)
	if s.end != endNormal && s.endAt < last {
		last = s.endAt
	}
	items := make([]item, 0, last+2)
	for i := range last {
		items = append(items, item{wait: s.waitBefore(i), chunk: cloneChunk(s.chunks[i])})
	}
	wait := s.finalWait(last)
	switch s.end {
	case endCut:
		err := fmt.Errorf("fake: stream cut after %d chunks: %w", last, io.ErrUnexpectedEOF)
		return append(items, item{wait: wait, err: err})
	case endFail:
		if s.endFail == nil {
			return append(items, item{wait: wait, err: misuse("fake: FailAfter with a nil step")})
		}
		return append(items, item{wait: wait, err: s.endFail.err()})
	case endError:
		if s.endErr == nil {
			return append(items, item{wait: wait, err: misuse("fake: ErrorAfter with a nil error")})
		}
		return append(items, item{wait: wait, err: s.endErr})
	}
	final := llmclient.Chunk{
		FinishReason: s.finishReason(),
		ID:           "fake-" + strconv.Itoa(n),
		Model:        call.Model,
	}
	final.RawFinishReason = string(final.FinishReason)
	if s.usage != nil {
		u := *s.usage
		final.Usage = &u
	} else {
		final.Usage = s.defaultUsage(call)
	}
	return append(items, item{wait: wait, chunk: final}, item{err: io.EOF})
}

// finalWait returns the wait before the final item, at position last (the final chunk, or
// the error that replaces it): its own, and the stalls set at or past the number of
// chunks (StallAfter), added.
func (s *StreamStep) finalWait(last int) time.Duration {
	d := s.waitBefore(last)
	for k, w := range s.stalls {
		if k >= len(s.chunks) && k != last && w > 0 {
			d = min(d, math.MaxInt64-w) + w // saturating
		}
	}
	return d
}

// waitBefore returns the wait before the item at position i.
func (s *StreamStep) waitBefore(i int) time.Duration {
	d := max(s.stalls[i], 0)
	if i > 0 && i < len(s.chunks) && s.chunkDelay > 0 {
		d = min(d, math.MaxInt64-s.chunkDelay) + s.chunkDelay // saturating: a huge stall stays huge
	}
	return d
}

func (s *StreamStep) finishReason() finish.Reason {
	if s.finish != finish.None {
		return s.finish
	}
	for i := range s.chunks {
		if len(s.chunks[i].ToolCalls) > 0 {
			return finish.ToolCalls
		}
	}
	return finish.Stop
}

// defaultUsage counts about one token per four bytes: of the request's message text for
// input, and of every chunk's text, reasoning, refusal and tool-call fragments for output.
func (s *StreamStep) defaultUsage(call *llmclient.Call) *llmclient.Usage {
	var in, out int
	if call.Request != nil {
		for i := range call.Request.Messages {
			m := &call.Request.Messages[i]
			for j := range m.Content {
				in += len(m.Content[j].Text)
			}
			for _, tc := range m.ToolCalls {
				in += len(tc.Name) + len(tc.Arguments)
			}
		}
	}
	for i := range s.chunks {
		c := &s.chunks[i]
		out += len(c.Text) + len(c.Reasoning) + len(c.Refusal)
		for _, tc := range c.ToolCalls {
			out += len(tc.Name) + len(tc.Arguments)
		}
	}
	in, out = tokens(in), tokens(out)
	return &llmclient.Usage{InputTokens: in, OutputTokens: out, TotalTokens: adapter.AddTokens(in, out)}
}

// tokens converts a byte count to tokens, rounding up.
func tokens(bytes int) int { return (bytes + 3) / 4 }

// cloneChunk copies c so that no two streams share its tool-call slice or usage.
func cloneChunk(c llmclient.Chunk) llmclient.Chunk {
	c.ToolCalls = slices.Clone(c.ToolCalls)
	if c.Usage != nil {
		u := *c.Usage
		c.Usage = &u
	}
	return c
}
