package llmclient

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"math"
	"net/http"
	"runtime"
	"sync"
	"time"

	"github.com/llmclient/llmclient/dialect"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/finish"
)

// Stream-guard defaults.
const (
	// defaultFirstTokenTimeout bounds the wait for a stream's first content token: a
	// silent upstream fails over after it, long before the vendor's own 10-minute limit.
	// Chat models start within seconds; a reasoning model that streams no reasoning and
	// thinks longer than this needs WithFirstTokenTimeout raised.
	defaultFirstTokenTimeout = time.Minute
	// defaultIdleTimeout bounds the upstream's silence once a stream is committed, while
	// its answer streams (the content phase), until the limit is learned.
	defaultIdleTimeout = time.Minute
	// defaultReasoningIdleTimeout bounds it after a reasoning delta (the reasoning phase:
	// between reasoning deltas and before the first content delta after them), until the
	// limit is learned: a reasoning model may think for a long time between the parts of
	// its reasoning it streams.
	defaultReasoningIdleTimeout = 2 * time.Minute
	// maxFloorTokensPerSecond and maxFloorWindow bound WithThroughputFloor's inputs.
	maxFloorTokensPerSecond = 100_000
	maxFloorWindow          = 2 * time.Minute
)

// ErrThroughputFloor is matched by errors.Is for an attempt whose stream produced fewer
// tokens in its first seconds than WithThroughputFloor asks: it was failed over before the
// caller saw any of it.
var ErrThroughputFloor = errors.New("llmclient: stream throughput below its floor")

// streamConfig holds the stream guard's settings.
type streamConfig struct {
	firstToken time.Duration
	// idle is the content phase's idle limit, reasoningIdle the reasoning phase's; both
	// are learned per upstream and model unless WithIdleTimeout fixed them (learnIdle).
	idle, reasoningIdle time.Duration
	learnIdle           bool
	// floorRate (tokens per second) over floorWindow: WithThroughputFloor; 0: off.
	floorRate       float64
	floorWindow     time.Duration
	total           time.Duration
	keepAliveCounts bool
	accumulate      bool
	// continuation: Client.Stream continues a broken committed stream (continue.go);
	// prefill overrides, per upstream name, whether its models accept a prefill.
	continuation bool
	prefill      map[string]bool
}

func defaultStreamConfig() streamConfig {
	return streamConfig{firstToken: defaultFirstTokenTimeout, idle: defaultIdleTimeout,
		reasoningIdle: defaultReasoningIdleTimeout, learnIdle: true, accumulate: true, continuation: true}
}

func (c *streamConfig) validate() error {
	if c.firstToken < 0 || c.idle < 0 || c.total < 0 {
		return errors.New("stream timeouts must not be negative")
	}
	r, w := c.floorRate, c.floorWindow
	switch {
	case math.IsNaN(r) || math.IsInf(r, 0) || r < 0 || r > maxFloorTokensPerSecond:
		return fmt.Errorf("WithThroughputFloor: tokens per second must be within [0, %d], got %v", maxFloorTokensPerSecond, r)
	case w < 0 || w > maxFloorWindow:
		return fmt.Errorf("WithThroughputFloor: the window must be within [0, %v], got %v", maxFloorWindow, w)
	case (r == 0) != (w == 0):
		return fmt.Errorf("WithThroughputFloor: tokens per second and the window are both 0 (off) or both positive, got %v over %v", r, w)
	}
	return nil
}

// WithFirstTokenTimeout bounds the wait from opening a stream to its first content token
// (text, reasoning, refusal or tool call; role-only chunks and keep-alives do not count).
// A stream that times out is retried or failed over like any failure before the first
// token. It applies with or without a context deadline (the earlier one wins). 0
// disables it; it must not be negative. Default: learned per upstream and model — four
// times the 95th percentile of the time to first token of that upstream's recent streams
// of that model, within [10s, 2m], once it has seen 20 — and 1m until then. Setting it
// turns the learning off: d applies to every stream.
func WithFirstTokenTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) { c.stream.firstToken, c.learnFirstToken = d, false })
}

// WithIdleTimeout bounds how long a committed stream may wait on its upstream for the
// next data event; a longer silence ends the stream with a failure.StreamInterrupted error
// wrapping ErrIdleTimeout (continued on the route, see WithStreamContinuation) and gives
// back every lease it holds, even when the caller is not reading: a stream whose caller
// is away for an idle period is read ahead in the background (at most 1 MiB or 4096
// chunks), so an upstream that stalls is cut and one that finishes settles at once. The
// read-ahead does not keep the stream for a caller that stopped reading, however lively
// the upstream: once the caller has not read (Next) for longer than the idle limit of
// the stream's phase while it is read ahead, the stream ends with the same error (the
// caller's next Next reports it, after what was read ahead). A caller that reads slowly
// but within the limit is unaffected. Otherwise only the waits on the upstream count,
// never the caller's own time between reads. Reasoning deltas are progress like content deltas, and so is a finish
// reason; keep-alives are not, nor are data events without content (an id, a model, a
// role or usage alone), see WithKeepAliveResetsIdle. It applies with or without a context
// deadline. In transport mode the same holds for a response body handed to the caller,
// read-ahead included (into the body's buffer, whose bytes the caller then reads
// unchanged; a Read is the caller's read); it also times a body passed through raw (a stream of a shape the Dialect
// does not know, a one-shot body larger than WithMaxReplayBody): any bytes are progress
// there, and the limit is the reasoning phase's, the phase being unknown.
//
// Default: a limit per phase, learned per upstream and model. In the content phase (the
// answer streams) it is 1m until learned, then four times the 95th percentile of the
// longest content-phase wait of that upstream's recent clean streams of that model, within
// [10s, 2m], once it has seen 20. In the reasoning phase (after a reasoning delta: between
// reasoning deltas, and before the first content delta after them) it is 2m until
// learned, then learned the same way within [30s, 5m]; it is never below the content
// phase's. Setting d fixes the limit of both phases at d and turns the learning off; 0
// disables the idle timeout (and the read-ahead). d must not be negative.
func WithIdleTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) { c.stream.idle, c.stream.reasoningIdle, c.stream.learnIdle = d, d, false })
}

// WithThroughputFloor fails over a stream that produces fewer than tokensPerSecond tokens
// per second over the first `over` of its answer, before its caller sees any of it. It is
// a guard before commit: once the first content token arrives, the stream's chunks are
// held back until it has produced tokensPerSecond × over tokens (the floor is then met
// whatever comes next), or ended; if `over` passes first, the attempt ends with a
// failure.Timeout error wrapping ErrThroughputFloor and the call moves on like after any
// failure before the first token — failover first, within the call's attempt caps, retry
// budget and time budget. The breaker counts such a cut as slow, not as a failure, and
// an upstream cut that way five times in a row is tried last for 30s (as after the
// Client's share of a call's time cut it). Tokens are estimated from the output's size
// (text, reasoning, refusal and tool-call arguments; 4 bytes a token, as usage
// estimates are), or the stream's own usage when it reports more.
//
// What it costs: with the floor on, the caller's first chunk arrives when the stream has
// produced tokensPerSecond × over tokens, or at its end: for a stream at R ≥
// tokensPerSecond tokens per second that is (tokensPerSecond/R) × over after its first
// token, at most over. The held chunks are then delivered at once. So that a stream
// that cannot be replaced is not held, the floor applies only while the call may still
// fail over — another upstream of its route can serve it and its attempt caps allow
// another attempt (the last upstream of a route is never cut) — and a held stream that
// reaches 1 MiB or 4096 chunks is committed at once. It applies to a continuation's
// attempt too (see WithStreamContinuation), whose chunks the caller has not seen either.
//
// Default 0, 0: off. tokensPerSecond must be within [0, 100000] and finite, over within
// [0, 2m], and both 0 or both positive; New fails otherwise.
func WithThroughputFloor(tokensPerSecond float64, over time.Duration) Option {
	return optionFunc(func(c *config) { c.stream.floorRate, c.stream.floorWindow = tokensPerSecond, over })
}

// WithStreamTimeout bounds a whole stream, retries before the first token included; when
// it fires, the stream ends with a failure.StreamInterrupted error wrapping ErrStreamTimeout
// (before commit: the call fails with failure.Timeout) and gives back every lease it holds,
// even when the caller is not reading. It must not be negative. Default 0: no bound but
// the context's deadline.
func WithStreamTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) { c.stream.total = d })
}

// WithKeepAliveResetsIdle makes keep-alives (SSE comments, Anthropic pings) and data
// events without content (an id, a model, a role or usage alone) reset the idle timer.
// Default false: some vendors keep a stalled or queued request open for many minutes with
// keep-alives alone. They never satisfy the first-token timeout.
func WithKeepAliveResetsIdle(on bool) Option {
	return optionFunc(func(c *config) { c.stream.keepAliveCounts = on })
}

// WithStreamAccumulate sets whether a Stream keeps the text, reasoning, refusal and tool
// calls it delivered, so that Stream.Response and an interruption's Error.Partial hold
// them (ContinuationRequest needs them). With false a Stream keeps nothing of its content
// beyond the current chunk: its memory does not grow with the stream, and Response and
// Partial carry only the finish reason, usage, id and model. Default true; the memory it
// keeps is the output itself (text, and each tool call's id, name and arguments, with
// about a hundred bytes of bookkeeping per call), never per-chunk overhead: a tool-call
// delta that carries none of these adds no call, whatever its index, and a call is kept,
// in order, from its first delta that carries one.
func WithStreamAccumulate(keep bool) Option {
	return optionFunc(func(c *config) { c.stream.accumulate = keep })
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
		if ft := a.limit(ctx, a.firstTokenLimit()); ft > 0 {
			t = time.AfterFunc(ft, func() { cancel(ErrFirstTokenTimeout) })
		}
		err := next(sctx, a)
		if t != nil && !t.Stop() && err == nil {
			// The timer fired as the first token arrived: the context is gone, so is the stream.
			a.stream.ps.Close()
			a.stream = nil
			err = &Error{Class: failure.Timeout, Upstream: a.up.Name, Model: a.call.Model, Err: ErrFirstTokenTimeout}
		}
		if err != nil {
			if errors.Is(context.Cause(sctx), ErrFirstTokenTimeout) && ctx.Err() == nil {
				e := err.(*Error)
				e.Class, e.Err = failure.Timeout, ErrFirstTokenTimeout
			}
			cancel(context.Canceled)
			return err
		}
		if err := c.holdFloor(ctx, sctx, cancel, a); err != nil {
			cancel(context.Canceled)
			return err
		}
		a.stream.ctx, a.stream.cancel = sctx, cancel
		return nil
	}
}

// holdFloor reads a stream past its first content token, holding its chunks back, until
// it meets the throughput floor (WithThroughputFloor): it has produced the floor's tokens,
// or ended, or holds as much as a read-ahead may. When the floor's window passes first it
// closes the stream and returns a failure.Timeout error wrapping ErrThroughputFloor, counted
// as a cut of the Client's choosing (slow for the breaker). It does nothing when the floor
// is off or the call has nowhere else to go. ctx is the attempt's context, sctx the
// stream's, which cancel ends.
func (c *Client) holdFloor(ctx, sctx context.Context, cancel context.CancelCauseFunc, a *attempt) error {
	sc, g := &c.cfg.stream, a.stream
	if sc.floorRate == 0 || g.ended || a.r.total+1 >= a.r.maxTotal() || !a.r.elsewhere(time.Now()) {
		return nil // (r.total counts the attempts before this one)
	}
	need := int64(math.Ceil(sc.floorRate * sc.floorWindow.Seconds()))
	t := time.AfterFunc(sc.floorWindow-(time.Since(a.sent)-a.ttft), func() { cancel(ErrThroughputFloor) })
	var held heldOutput
	for i := range g.pending {
		held.add(&g.pending[i])
	}
	for held.tokens() < need && held.bytes < maxAheadBytes && len(g.pending) < maxAheadChunks {
		ch, err := g.ps.Recv()
		if err == io.EOF {
			g.ended = true
			break
		}
		if err != nil {
			t.Stop()
			return c.floorFailed(ctx, sctx, a, err)
		}
		if !ch.KeepAlive {
			held.add(&ch)
			g.pending = append(g.pending, ch)
		}
	}
	if !t.Stop() {
		// The window passed as the floor was met: the stream's context is gone with it.
		return c.floorFailed(ctx, sctx, a, context.Cause(sctx))
	}
	return nil
}

// floorFailed ends an attempt whose stream failed with err while held by holdFloor.
func (c *Client) floorFailed(ctx, sctx context.Context, a *attempt, err error) *Error {
	a.stream.ps.Close()
	a.stream = nil
	a.latency = time.Since(a.sent)
	a.end = a.sent.Add(a.latency)
	if errors.Is(context.Cause(sctx), ErrThroughputFloor) && ctx.Err() == nil {
		a.shareBound = true // the Client's bound cut it: slow, not failed
		return &Error{Class: failure.Timeout, Upstream: a.up.Name, Model: a.call.Model, Status: a.status, Err: ErrThroughputFloor,
			Message: "the stream produced fewer tokens than its throughput floor"}
	}
	e := c.asError(ctx, err, a)
	if e.Status == 0 {
		e.Status = a.status
	}
	return e
}

// heldOutput is the size of the output a held stream produced.
type heldOutput struct {
	bytes int
	usage int64 // the output tokens the stream reported, if any
}

func (h *heldOutput) add(ch *Chunk) {
	h.bytes += len(ch.Text) + len(ch.Reasoning) + len(ch.Refusal)
	for i := range ch.ToolCalls {
		h.bytes += len(ch.ToolCalls[i].Arguments)
	}
	if ch.Usage != nil {
		if u := *ch.Usage; usageReported(&u) {
			h.usage = int64(u.OutputTokens)
		}
	}
}

// tokens estimates the output's tokens: the stream's usage, or 4 bytes a token if more.
func (h *heldOutput) tokens() int64 { return max(h.usage, int64(h.bytes+3)/4) }

// callStream opens the provider stream and reads to the first content token.
func (c *Client) callStream(ctx context.Context, a *attempt) error {
	ps, err := a.up.Provider.Stream(ctx, &a.call)
	if err != nil {
		return err
	}
	if ps == nil {
		return &Error{Class: failure.Unknown, Message: "provider returned neither a stream nor an error"}
	}
	a.status = http.StatusOK
	if rs, ok := ps.(RateLimitedStream); ok {
		if a.opened = rs.RateLimits(); a.opened != nil {
			a.syncLimits(a.opened, true)
		} else {
			a.unreported()
		}
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
		a.ttft = time.Since(a.sent)
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
	if ch.FinishReason != finish.None {
		head.FinishReason, head.RawFinishReason = ch.FinishReason, ch.RawFinishReason
	}
}

// stream is the streaming call path: retries and failover until the first token.
func (c *Client) stream(ctx context.Context, req *Request) (*Stream, error) {
	caller := ctx
	cancelTotal := context.CancelFunc(func() {})
	if t := c.cfg.stream.total; t > 0 {
		ctx, cancelTotal = context.WithTimeoutCause(ctx, t, ErrStreamTimeout)
	}
	// A continued stream's attempts run under one context, canceled at its end.
	cont := c.cfg.stream.continuation && c.cfg.stream.accumulate
	cancelCont := context.CancelFunc(func() {})
	if cont {
		ctx, cancelCont = context.WithCancel(ctx)
	}
	r := &run{}
	defer r.cleanup() // a panicking hook leaves nothing held
	route, pol := c.routeOf(req)
	if err := c.begin(ctx, r, req, route, pol, c.streamChain, true); err != nil {
		cancelCont()
		cancelTotal()
		return nil, err
	}
	a, err := r.exec(ctx)
	if err != nil {
		r.releasePartition(nil)
		resp, ferr := r.fail(ctx, err)
		cancelCont()
		cancelTotal()
		r.ended(resp, ferr, nil)
		if ferr != nil {
			return nil, ferr
		}
		return staticStream(resp), nil
	}
	g := a.stream
	s := &Stream{pending: g.pending, ended: g.ended, keep: c.cfg.stream.accumulate}
	cmTotal := cancelTotal
	if cont {
		cmTotal = func() {} // the stream's end stops it: a continuation runs under it
	}
	s.cm = c.commit(r, a, g.ps, g.ctx, g.cancel, caller, cmTotal, cont, nil, Usage{})
	for i := range s.pending {
		s.cm.note(&s.pending[i])
	}
	s.link = &streamLink{cm: s.cm, ctx: ctx, cancel: func() { cancelCont(); cancelTotal() }}
	s.dropped = runtime.AddCleanup(s, (*streamLink).abandon, s.link)
	return s, nil
}

// Stream is a committed streaming response. Read it with Next and Current (or All), then
// check Err; Close it when done. Next, Current, Err and Response must be called from one
// goroutine; Close may be called from any goroutine, at any time, more than once.
//
// A Stream holds its upstream connection and the leases of its attempt (a concurrency
// slot, a key, a partition's lease, a half-open breaker probe) until it ends, is closed,
// its idle or total timeout fires, its context ends, or it becomes unreachable: a stream
// the caller drops without Close gives everything back once the garbage collector finds
// it, and one it keeps but stops reading once it has not called Next for an idle period
// while the upstream goes on (see WithIdleTimeout). Its memory does not grow with the number of chunks; see WithStreamAccumulate.
type Stream struct {
	cm      *committed
	pending []Chunk // read before commit, delivered first
	ended   bool    // the stream ended before commit (an answer without content)
	keep    bool    // accumulate content
	acc     accumulator
	// answered, reasoned and refused record what content was delivered, for the checks
	// at the end when the content itself is not kept.
	answered, reasoned, refused bool

	cur    Chunk
	resp   *Response
	err    error
	done   bool
	static *Response // the response of a stream made by StreamOf

	taps    []streamTap
	tapOnce sync.Once

	// link is shared with Close and the cleanup (continue.go); splice filters a restarted
	// continuation; prior is the usage of the attempts before the one being read;
	// continued is set once a continuation is read; contErr is the error a failed
	// continuation or a divergence ended the stream with.
	link      *streamLink
	dropped   runtime.Cleanup // settles a stream dropped without Close; stopped by Close
	splice    *splicer
	prior     Usage
	continued bool
	contErr   *Error
}

// streamTap is a pair of Tap callbacks.
type streamTap struct {
	chunk func(Chunk)
	end   func(*Response, error)
}

// Next advances to the next chunk. It returns false at the end of the stream, on error or
// after Close; Err then tells which.
func (s *Stream) Next() bool {
	if len(s.taps) == 0 {
		return s.next()
	}
	// The stream's end reports the call (event.Call) from within next: an observer that
	// panics on it leaves the taps told of it as the panic passes.
	returned := false
	defer func() {
		if !returned {
			s.tapEnd(nil, ErrPanicked)
		}
	}()
	more := s.next()
	returned = true
	return more
}

// next is Next.
func (s *Stream) next() bool {
	for {
		if s.done {
			return false
		}
		if s.cm != nil && s.cm.closed.Load() {
			s.done = true
			return false
		}
		for len(s.pending) > 0 {
			ch := s.pending[0]
			s.pending = s.pending[1:]
			if s.static != nil || ch.HasContent() || ch.FinishReason != finish.None || ch.Usage != nil {
				if s.cm != nil {
					s.cm.touch()
				}
				if s.continued {
					if s.deliverContinued(ch) {
						return true
					}
					if s.done {
						return false
					}
					continue
				}
				s.deliver(ch)
				return true
			}
		}
		if s.ended || s.cm == nil {
			s.end(io.EOF)
			return false
		}
		ch, err := s.cm.recv()
		if err != nil {
			if s.resume(err) {
				continue
			}
			s.end(err)
			return false
		}
		if s.continued {
			if s.deliverContinued(ch) {
				return true
			}
			if s.done {
				return false
			}
			continue
		}
		s.deliver(ch)
		return true
	}
}

// deliverContinued delivers a continuation's chunk as adjust fits it, and reports whether
// anything was delivered. (Apart from Next, so that Next never takes a chunk's address:
// its reads of a stream that was not continued copy no chunk more.)
func (s *Stream) deliverContinued(ch Chunk) bool {
	if !s.adjust(&ch) {
		return false
	}
	s.deliver(ch)
	return true
}

// adjust fits a continuation's chunk to what the caller already has: spliced, with the
// usage summed over the attempts. It reports false for a chunk left with nothing to
// deliver; on a divergence it ends the stream.
func (s *Stream) adjust(ch *Chunk) bool {
	if s.splice != nil {
		out, keep, err := s.splice.filter(*ch)
		if err != nil {
			s.diverge(err.(*DivergedError))
			s.end(err)
			return false
		}
		if !keep {
			return false
		}
		*ch = out
	}
	if ch.Usage != nil {
		u := addUsage(s.prior, ch.Usage)
		ch.Usage = &u
	}
	return true
}

// deliver makes ch the current chunk and folds it into the response.
func (s *Stream) deliver(ch Chunk) {
	s.cur = ch
	for _, t := range s.taps {
		if t.chunk != nil {
			t.chunk(ch)
		}
	}
	if s.keep {
		s.acc.add(&s.cur)
		return
	}
	s.acc.meta(&s.cur)
	s.answered = s.answered || ch.Text != "" || carriesCalls(ch.ToolCalls)
	s.reasoned = s.reasoned || ch.Reasoning != ""
	s.refused = s.refused || ch.Refusal != ""
}

// outputError checks the finished response as checkOutput does; when the content was not
// kept, it judges from what was delivered.
func (s *Stream) outputError(resp *Response) *Error {
	if s.keep {
		return checkOutput(resp)
	}
	probe := *resp
	if s.answered {
		probe.Text = "…"
	}
	if s.reasoned {
		probe.Reasoning = "…"
	}
	if s.refused {
		probe.Refusal = "…"
	}
	e := checkOutput(&probe)
	if e != nil {
		e.Partial = resp
	}
	return e
}

// end finishes the stream after the upstream read failed with err (io.EOF: a clean end),
// then tells the taps.
func (s *Stream) end(err error) {
	s.done = true
	s.finish(err)
	if s.link != nil {
		s.link.cancel()
	}
	if len(s.taps) == 0 {
		return
	}
	if s.resp == nil && s.err == nil && s.cm != nil && s.cm.closed.Load() {
		// Close from another goroutine ended the read: the taps hear what Close tells
		// them, never a partial response posing as a clean end.
		s.tapEnd(nil, context.Canceled)
		return
	}
	s.tapEnd(s.Response(), s.err)
}

// tapEnd tells the taps, once, how the stream ended.
func (s *Stream) tapEnd(resp *Response, err error) {
	s.tapOnce.Do(func() {
		for _, t := range s.taps {
			if t.end != nil {
				t.end(resp, err)
			}
		}
	})
}

// finish settles the stream's end after err (io.EOF: a clean end).
func (s *Stream) finish(err error) {
	if s.cm == nil { // made by StreamOf
		return
	}
	if err == io.EOF && s.splice != nil && s.splice.pending() && s.contErr == nil {
		s.diverge(s.splice.diverged()) // the restarted answer is shorter than the one delivered
	}
	if s.contErr != nil {
		s.err = s.contErr
		return
	}
	resp := s.acc.response()
	if err == io.EOF {
		if e := s.outputError(resp); e != nil {
			e.Upstream, e.Model, e.Status = s.cm.a.up.Name, s.cm.a.call.Model, s.cm.a.status
			s.cm.settle(e.Class, e)
			if s.cm.err != e { // settled before, as the upstream's end was read ahead
				e.Attempts = s.cm.r.trace
				if s.cm.r.c.cost != nil {
					e.Cost = traceCost(e.Attempts)
				}
			}
			s.err = e
			return
		}
	}
	if e := s.cm.finish(err); e != nil {
		e.Partial = resp
		s.cm.releaseCall(nil)
		s.err = e
		return
	}
	if s.cm.closed.Load() {
		return
	}
	if s.cm.final != nil {
		resp.Usage = addUsage(s.prior, s.cm.final)
	}
	resp.Status = s.cm.a.status
	s.resp = s.cm.r.succeed(s.cm.a, resp)
	s.resp.RateLimits = s.cm.a.opened // fed to the limiter as the stream opened
}

// Current returns the chunk Next advanced to.
func (s *Stream) Current() Chunk { return s.cur }

// Err returns the error that ended the stream: nil after a clean end and after the
// caller's own Close. A stream cut after its first token is continued on its route by
// default (WithStreamContinuation); when it is not, or the continuation fails, it ends
// with an *Error (failure.StreamInterrupted, or the last attempt's class) whose Partial holds
// the output the caller received; ContinuationRequest builds a request that continues it.
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
// clean end it is the complete response, with Upstream, Attempts and Usage filled in.
func (s *Stream) Response() *Response {
	if s.static != nil {
		return s.static
	}
	if s.resp != nil {
		return s.resp
	}
	return s.acc.response()
}

// Close ends the stream and releases its connection, its limiter slot, its key and its
// breaker probe. A stream closed after its finish reason arrived counts as a success;
// before, as canceled by the caller (not a failure of the upstream). The usage received so
// far reconciles the limiter either way. It is idempotent, safe to call concurrently with
// Next, and always returns nil.
func (s *Stream) Close() error {
	if s.link != nil {
		closed := false
		if len(s.taps) > 0 {
			defer func() {
				if !closed { // an observer panicked on the end Close reported
					s.tapEnd(nil, ErrPanicked)
				}
			}()
		}
		s.link.close()
		closed = true
		// Closed, the stream needs no cleanup; one left waiting would hold the attempt,
		// and its buffers, for a collection after the stream's own.
		s.dropped.Stop()
	}
	if len(s.taps) > 0 && !s.cmEnded() {
		s.tapEnd(nil, context.Canceled)
	}
	return nil
}

// cmEnded reports whether the stream's attempt had settled with a result the reader saw:
// a Close after it tells the taps nothing new.
func (s *Stream) cmEnded() bool {
	if s.link == nil {
		return false
	}
	cm := s.link.current()
	return cm.settled.Load() && !cm.closed.Load()
}

// Tap registers callbacks for middleware that watches a stream pass (a cache, a logger):
// chunk is called from Next for every chunk the stream delivers, in order, on the
// reader's goroutine; end is called once when the stream ends, with the response (the
// complete one after a clean end, the partial one after an error) and the error (nil
// after a clean end). A stream closed before its end calls end with a nil response and
// context.Canceled, from Close; an end interrupted by a panic (an observer's) calls it
// with a nil response and ErrPanicked as the panic passes. Either callback may be nil.
// Tap must be called before the first Next, and returns s, so that middleware can write
// return next.Stream(ctx, req).Tap(...) after checking the error.
func (s *Stream) Tap(chunk func(Chunk), end func(*Response, error)) *Stream {
	s.taps = append(s.taps, streamTap{chunk: chunk, end: end})
	return s
}

// StreamOf returns a Stream that delivers chunks in order and then ends cleanly, for
// middleware that answers a call from elsewhere than an upstream (a cache replaying a
// stream it recorded). Its Response is resp, or, when resp is nil, the response
// accumulated from the chunks. It holds no connection or lease; Close is a no-op. The
// chunks are not copied and must not be modified afterwards.
func StreamOf(chunks []Chunk, resp *Response) *Stream {
	s := &Stream{pending: chunks, ended: true, keep: true}
	if resp == nil {
		resp = accumulate(chunks)
	}
	s.static = resp
	return s
}

// staticStream delivers a whole response, from the fallback function, as one chunk.
func staticStream(resp *Response) *Stream {
	ch := Chunk{Text: resp.Text, Reasoning: resp.Reasoning, FinishReason: resp.FinishReason,
		RawFinishReason: resp.RawFinishReason, ID: resp.ID, Model: resp.Model}
	u := resp.Usage
	ch.Usage = &u
	for i, tc := range resp.ToolCalls {
		ch.ToolCalls = append(ch.ToolCalls, dialect.ToolCallDelta{Index: i, ID: tc.ID, Name: tc.Name, Arguments: tc.Arguments})
	}
	return StreamOf([]Chunk{ch}, resp)
}
