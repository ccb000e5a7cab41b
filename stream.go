package llmclient

import (
	"context"
	"errors"
	"io"
	"iter"
	"sync"
	"time"
)

// Stream-guard defaults.
const (
	// DefaultFirstTokenTimeout bounds the wait for a stream's first content token. Reasoning
	// models that stream no reasoning can think for minutes before their first token; lower
	// it for chat-style models.
	DefaultFirstTokenTimeout = 2 * time.Minute
	// DefaultIdleTimeout bounds the gap between data events once a stream is committed.
	DefaultIdleTimeout = time.Minute
)

// streamConfig holds the stream guard's settings.
type streamConfig struct {
	firstToken      time.Duration
	idle            time.Duration
	total           time.Duration
	keepAliveCounts bool
}

func defaultStreamConfig() streamConfig {
	return streamConfig{firstToken: DefaultFirstTokenTimeout, idle: DefaultIdleTimeout}
}

func (c *streamConfig) validate() error {
	if c.firstToken < 0 || c.idle < 0 || c.total < 0 {
		return errors.New("stream timeouts must not be negative")
	}
	return nil
}

// WithFirstTokenTimeout bounds the wait from opening a stream to its first content token
// (text, reasoning, refusal or tool call; role-only chunks and keep-alives do not count).
// A stream that times out is retried or failed over like any failure before the first
// token. Default DefaultFirstTokenTimeout (2m); 0 disables it.
func WithFirstTokenTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) { c.stream.firstToken = d })
}

// WithIdleTimeout bounds the gap between data events after the first token; a stream that
// goes quiet longer ends with a ClassStreamInterrupted error wrapping ErrIdleTimeout.
// Default DefaultIdleTimeout (1m); 0 disables it.
func WithIdleTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) { c.stream.idle = d })
}

// WithStreamTimeout bounds a whole stream, retries before the first token included.
// Default 0: no bound.
func WithStreamTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) { c.stream.total = d })
}

// WithKeepAliveResetsIdle makes keep-alives (SSE comments, Anthropic pings) reset the idle
// timer. Default false: some vendors keep a stalled or queued request open for many minutes
// with keep-alives alone. Keep-alives never satisfy the first-token timeout.
func WithKeepAliveResetsIdle(on bool) Option {
	return optionFunc(func(c *config) { c.stream.keepAliveCounts = on })
}

// guard is an opened provider stream waiting for, or past, its first content token.
type guard struct {
	ps     ProviderStream
	ctx    context.Context
	cancel context.CancelCauseFunc
	// pending holds the chunks read before commit: a merged header chunk (id, model) and
	// the first content chunk, or, for a stream that ended without content, its end.
	pending []Chunk
	ended   bool
}

// guardLayer runs the stream's opening under the first-token timeout. On success the
// attempt's guard keeps the stream context's cancel func for the committed stream.
func (c *Client) guardLayer(next attemptFunc) attemptFunc {
	return func(ctx context.Context, a *attempt) error {
		sctx, cancel := context.WithCancelCause(ctx)
		var t *time.Timer
		if ft := c.cfg.stream.firstToken; ft > 0 {
			t = time.AfterFunc(ft, func() { cancel(ErrFirstTokenTimeout) })
		}
		err := next(sctx, a)
		if t != nil && !t.Stop() && err == nil {
			// The timer fired as the first token arrived: the context is gone, so is the stream.
			a.stream.ps.Close()
			a.stream = nil
			err = &Error{Class: ClassTimeout, Upstream: a.up.Name, Model: a.call.Model, Err: ErrFirstTokenTimeout}
		}
		if err != nil {
			if errors.Is(context.Cause(sctx), ErrFirstTokenTimeout) && ctx.Err() == nil {
				e := err.(*Error)
				e.Class, e.Err = ClassTimeout, ErrFirstTokenTimeout
			}
			cancel(context.Canceled)
			return err
		}
		a.stream.ctx, a.stream.cancel = sctx, cancel
		return nil
	}
}

// callStream opens the provider stream and reads to the first content token.
func (c *Client) callStream(ctx context.Context, a *attempt) error {
	ps, err := a.up.Provider.Stream(ctx, &a.call)
	if err != nil {
		return err
	}
	if ps == nil {
		return &Error{Class: ClassUnknown, Message: "provider returned neither a stream nor an error"}
	}
	g := &guard{ps: ps}
	var head Chunk
	for {
		ch, err := ps.Recv()
		if err == io.EOF {
			// The stream ended without content: an empty answer, a filter, or reasoning only.
			resp := accumulate(append(g.pending, head))
			if e := checkOutput(resp); e != nil {
				ps.Close()
				return e
			}
			g.pending, g.ended = append(g.pending, head), true
			a.stream = g
			return nil
		}
		if err != nil {
			ps.Close()
			return err
		}
		if ch.KeepAlive {
			continue
		}
		if !ch.HasContent() {
			mergeHeader(&head, &ch)
			continue
		}
		if ch.ID == "" {
			ch.ID = head.ID
		}
		if ch.Model == "" {
			ch.Model = head.Model
		}
		if head.Usage != nil && ch.Usage == nil {
			ch.Usage = head.Usage
		}
		g.pending = append(g.pending, ch)
		a.stream = g
		return nil
	}
}

// mergeHeader folds a chunk without content into the header kept before commit.
func mergeHeader(head, ch *Chunk) {
	if ch.ID != "" {
		head.ID = ch.ID
	}
	if ch.Model != "" {
		head.Model = ch.Model
	}
	if ch.Usage != nil {
		head.Usage = ch.Usage
	}
	if ch.FinishReason != FinishNone {
		head.FinishReason, head.RawFinishReason = ch.FinishReason, ch.RawFinishReason
	}
}

// stream is the streaming call path: retries and failover until the first token.
func (c *Client) stream(ctx context.Context, req *Request) (*Stream, error) {
	if err := checkRequest(req); err != nil {
		return nil, err
	}
	var cancelTotal context.CancelFunc = func() {}
	if t := c.cfg.stream.total; t > 0 {
		ctx, cancelTotal = context.WithTimeoutCause(ctx, t, ErrStreamTimeout)
	}
	r := c.newRun(req)
	if err := r.admitPartition(ctx); err != nil {
		cancelTotal()
		return nil, err
	}
	a, err := r.exec(ctx, c.route(req.Model), c.streamChain, true)
	if err != nil {
		r.releasePartition(nil)
		cancelTotal()
		resp, ferr := r.fail(ctx, err)
		if ferr != nil {
			return nil, ferr
		}
		return staticStream(resp), nil
	}
	s := &Stream{c: c, ctx: ctx, r: r, a: a, g: a.stream, cancelTotal: cancelTotal}
	if idle := c.cfg.stream.idle; idle > 0 && !a.stream.ended {
		s.idle = time.AfterFunc(idle, func() {
			s.g.cancel(ErrIdleTimeout)
			s.g.ps.Close()
		})
	}
	return s, nil
}

// Stream is a committed streaming response. Read it with Next and Current (or All), then
// check Err; always Close it. Next, Current and Err must be called from one goroutine;
// Close may be called from any goroutine, at any time, more than once.
type Stream struct {
	c           *Client
	ctx         context.Context
	r           *run
	a           *attempt
	g           *guard
	idle        *time.Timer
	cancelTotal context.CancelFunc

	cur     Chunk
	chunks  []Chunk // everything delivered, for the accumulated response
	resp    *Response
	err     error
	done    bool
	settle  sync.Once
	closeMu sync.Once
}

// Next advances to the next chunk. It returns false at the end of the stream or on error;
// Err then tells which.
func (s *Stream) Next() bool {
	if s.done {
		return false
	}
	if len(s.g.pending) > 0 {
		s.cur = s.g.pending[0]
		s.g.pending = s.g.pending[1:]
		if s.cur.HasContent() || s.cur.FinishReason != FinishNone || s.cur.Usage != nil {
			s.chunks = append(s.chunks, s.cur)
			return true
		}
		return s.Next()
	}
	if s.g.ended || s.g.ps == nil {
		s.finish(nil)
		return false
	}
	for {
		ch, err := s.g.ps.Recv()
		if err != nil {
			s.finish(err)
			return false
		}
		if ch.KeepAlive {
			if s.c.cfg.stream.keepAliveCounts && s.idle != nil {
				s.idle.Reset(s.c.cfg.stream.idle)
			}
			continue
		}
		if s.idle != nil {
			s.idle.Reset(s.c.cfg.stream.idle)
		}
		s.cur = ch
		s.chunks = append(s.chunks, ch)
		return true
	}
}

// Current returns the chunk Next advanced to.
func (s *Stream) Current() Chunk { return s.cur }

// Err returns the error that ended the stream, nil after a clean end. A stream cut after
// its first token ends with a ClassStreamInterrupted *Error whose Partial holds the output
// so far; ContinuationRequest builds the request that continues it.
func (s *Stream) Err() error { return s.err }

// All returns an iterator over the remaining chunks; a final non-nil error, if any, is
// yielded once with a zero Chunk.
func (s *Stream) All() iter.Seq2[Chunk, error] {
	return func(yield func(Chunk, error) bool) {
		for s.Next() {
			if !yield(s.cur, nil) {
				return
			}
		}
		if s.err != nil {
			yield(Chunk{}, s.err)
		}
	}
}

// Response returns the response accumulated from the chunks delivered so far; after a
// clean end it is the complete response, with Upstream and Attempts filled in.
func (s *Stream) Response() *Response {
	if s.resp != nil {
		return s.resp
	}
	return accumulate(s.chunks)
}

// Close ends the stream and releases its connection, its limiter slot and its breaker
// probe. It is idempotent and safe to call concurrently with Next.
func (s *Stream) Close() error {
	s.closeMu.Do(func() {
		if s.g.ps != nil {
			s.g.cancel(context.Canceled)
			s.g.ps.Close()
		}
		s.settleOnce(ClassCanceled, nil)
	})
	return nil
}

// finish ends the stream after a provider error or EOF.
func (s *Stream) finish(err error) {
	s.done = true
	if s.r == nil { // a static stream from the fallback function
		return
	}
	if s.idle != nil {
		s.idle.Stop()
	}
	resp := accumulate(s.chunks)
	switch {
	case err == nil || err == io.EOF:
		if e := checkOutput(resp); e != nil && len(s.chunks) > 0 {
			s.fail(e)
			break
		}
		s.settleOnce(ClassNone, &resp.Usage)
		s.resp = s.r.succeed(s.a, resp)
	default:
		s.fail(s.interruption(err, resp))
	}
	if s.g.ps != nil {
		s.g.ps.Close()
		s.g.cancel(context.Canceled)
	}
	s.cancelTotal()
}

// interruption classifies an error after the first token.
func (s *Stream) interruption(err error, partial *Response) *Error {
	cause := context.Cause(s.g.ctx)
	e := &Error{Class: ClassStreamInterrupted, Upstream: s.a.up.Name, Model: s.a.call.Model, Partial: partial, Err: err}
	switch {
	case s.ctx.Err() != nil && errors.Is(context.Cause(s.ctx), ErrStreamTimeout):
		e.Err = ErrStreamTimeout
	case s.ctx.Err() != nil:
		e.Class, e.Err = ClassCanceled, s.ctx.Err()
	case errors.Is(cause, ErrIdleTimeout):
		e.Err = ErrIdleTimeout
	}
	var ve *Error
	if errors.As(err, &ve) {
		e.Status, e.Type, e.Code, e.Message, e.RequestID = ve.Status, ve.Type, ve.Code, ve.Message, ve.RequestID
	}
	e.Redact(s.a.call.APIKey)
	return e
}

func (s *Stream) fail(e *Error) {
	s.settleOnce(e.Class, &e.Partial.Usage)
	e.Attempts = s.r.trace
	s.err = e
}

// settleOnce records the committed attempt's outcome and releases what it holds.
func (s *Stream) settleOnce(class Class, usage *Usage) {
	s.settle.Do(func() {
		s.a.end = time.Now()
		s.a.latency = s.a.end.Sub(s.a.start) - s.a.limiterWait
		var e *Error
		if class != ClassNone {
			e = &Error{Class: class, Upstream: s.a.up.Name, Model: s.a.call.Model}
		}
		s.r.record(s.a, e, usage)
		s.a.settle(s.c, class, usage)
		s.r.releasePartition(usage)
	})
}

// staticStream delivers a whole response, from the fallback function, as one chunk.
func staticStream(resp *Response) *Stream {
	ch := Chunk{Text: resp.Text, Reasoning: resp.Reasoning, FinishReason: resp.FinishReason,
		RawFinishReason: resp.RawFinishReason, ID: resp.ID, Model: resp.Model}
	u := resp.Usage
	ch.Usage = &u
	for i, tc := range resp.ToolCalls {
		ch.ToolCalls = append(ch.ToolCalls, ToolCallDelta{Index: i, ID: tc.ID, Name: tc.Name, Arguments: tc.Arguments})
	}
	s := &Stream{g: &guard{pending: []Chunk{ch}, ended: true}, resp: resp, cancelTotal: func() {}}
	s.settle.Do(func() {})
	return s
}
