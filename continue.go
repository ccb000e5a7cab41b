package llmclient

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/llmclient/llmclient/dialect"
	"github.com/llmclient/llmclient/event"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/finish"
)

// WithStreamContinuation sets whether Client.Stream continues a committed stream that
// breaks — cut, stalled past its idle timeout (WithIdleTimeout), or ended by an in-band
// error event — on its route, so that the caller's Stream goes on from where it stopped:
// one stream, and one final Response whose text is whole and whose usage and cost are
// summed over the attempts. Default true.
//
// The continuation is an attempt like any other: on the next upstream of the route (the
// same one when none is left), within the call's attempt caps, the upstream's retry
// budget for the same upstream, the stream's total timeout, the context's deadline and
// the cost rules; its trace entries and an event.Continuation show it. Where the target
// accepts a prefill (see Prefiller and WithPrefill) and the caller received text alone,
// the partial answer is sent as a trailing assistant message and the new text follows
// the old. Elsewhere — and always once the caller received a refusal or a tool call,
// which a prefill would not carry — the request is sent again as it was and the new
// answer is spliced: what the caller already received (text, refusal, the reasoning
// given after the answer began, tool calls) is skipped when the new answer begins with
// it (its reasoning before its first text, refusal or tool call is skipped without being
// matched: a model reasons anew); when it does not, or says something new before it has
// repeated all of it, the stream ends with a failure.StreamInterrupted error wrapping a
// *DivergedError, which says where, never with duplicated or mixed output. Tool calls
// keep their index and the first attempt's ID across the splice. A continuation that
// fails ends the stream as any call ends, with its last attempt's error (the
// continuation's class, such as failure.BudgetExceeded; failure.StreamInterrupted when it
// made no attempt, as under a spent retry budget), its cause joined with the original
// interruption, and Error.Partial holding what the caller received.
//
// The same continuation applies to the streams of a Transport (OpenAI chat completions and
// Anthropic messages), whose body goes on with the continuation's events; see Transport.
//
// Continuation needs the delivered content: with WithStreamAccumulate(false) it is off. A
// stream ended by the caller's context, by its total timeout, or after its finish reason
// is never continued.
func WithStreamContinuation(on bool) Option {
	return optionFunc(func(c *config) { c.stream.continuation = on })
}

// WithPrefill overrides, for every model of the named upstream, whether it accepts a
// prefill (see Prefiller). Default: the upstream's Provider says, or false.
func WithPrefill(upstream string, accepts bool) Option {
	return optionFunc(func(c *config) {
		if c.stream.prefill == nil {
			c.stream.prefill = make(map[string]bool)
		}
		c.stream.prefill[upstream] = accepts
	})
}

// ErrContinuationDiverged is matched by errors.Is for a stream whose restarted answer
// differs from what its caller already received; see DivergedError.
var ErrContinuationDiverged = errors.New("llmclient: the continued answer diverges from the text already delivered")

// DivergedError is the cause of a stream that ended because the restarted answer does not
// begin with what the caller already received. Delivered is that text (the caller has
// it), Restarted the new answer's text up to the point where it differed (inclusive of
// the differing part received). Its message holds neither.
//
// Part, Offset and ToolCall locate the divergence in the whole delivered answer (text,
// refusal, reasoning and tool calls): Part is the part of it the restart did not repeat
// — the one it differs from, or, where it said something new or ended early, the first
// part it had not repeated yet — and Offset the byte offset in that part where the
// restart stopped matching it: in Delivered for DivergedText (then Offset equals At), in
// Error.Partial.Refusal, in Error.Partial.Reasoning, or in the arguments of
// Error.Partial.ToolCalls[ToolCall].
type DivergedError struct {
	Delivered string
	Restarted string
	// At is the byte offset, in Delivered, of the first difference. A difference outside
	// the text (in the refusal, the reasoning or the tool calls, or new output where the
	// caller's goes on) is at the end of the text the restart repeated. Part and Offset
	// say where such a difference is.
	At int
	// Part is the delivered part where the restart stopped matching.
	Part DivergedPart
	// Offset is the byte offset in that part (see DivergedError).
	Offset int
	// ToolCall is the position in Error.Partial.ToolCalls of the call, for
	// DivergedToolCall; -1 otherwise.
	ToolCall int
}

// DivergedPart names a part of a delivered answer, for DivergedError.
type DivergedPart string

// The parts of a delivered answer a restart may fail to repeat.
const (
	DivergedText      DivergedPart = "text"
	DivergedRefusal   DivergedPart = "refusal"
	DivergedReasoning DivergedPart = "reasoning"
	// DivergedToolCall is a tool call that the restart did not begin (Offset 0), named
	// otherwise, or whose arguments it did not repeat.
	DivergedToolCall DivergedPart = "tool_call"
)

func (d *DivergedError) Error() string {
	switch d.Part {
	case DivergedRefusal, DivergedReasoning:
		return fmt.Sprintf("%s at byte %d of the %s", ErrContinuationDiverged.Error(), d.Offset, d.Part)
	case DivergedToolCall:
		return fmt.Sprintf("%s at byte %d of tool call %d's arguments", ErrContinuationDiverged.Error(), d.Offset, d.ToolCall)
	}
	return fmt.Sprintf("%s at byte %d", ErrContinuationDiverged.Error(), d.At)
}

// Unwrap returns ErrContinuationDiverged.
func (d *DivergedError) Unwrap() error { return ErrContinuationDiverged }

// streamLink is what a Stream's Close, its cleanup and its continuation share: the
// committed attempt being read, whether the caller closed the stream, and the cancel of
// the contexts the continuations run under.
type streamLink struct {
	mu     sync.Mutex
	cm     *committed
	closed bool
	cancel context.CancelFunc // the stream's total timeout and the continuations' context
	ctx    context.Context
}

func (l *streamLink) current() *committed {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cm
}

// swap makes cm the committed attempt being read, or reports false when the caller closed
// the stream meanwhile.
func (l *streamLink) swap(cm *committed) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	l.cm = cm
	return true
}

func (l *streamLink) isClosed() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.closed
}

// close is the caller's Close.
func (l *streamLink) close() {
	l.mu.Lock()
	l.closed = true
	cm := l.cm
	l.mu.Unlock()
	cm.close()
	cm.releaseCall(nil)
	l.cancel()
}

// abandon runs when the caller's handle became unreachable without Close.
func (l *streamLink) abandon() {
	l.mu.Lock()
	l.closed = true
	cm := l.cm
	l.mu.Unlock()
	cm.abandon()
	cm.releaseCall(nil)
	l.cancel()
}

// releaseCall tells the observer of the call's end that settle left to the Stream, with
// e instead of the attempt's own error when e is not nil. It does nothing when no call is
// held.
func (cm *committed) releaseCall(e *Error) {
	if !cm.callHeld.CompareAndSwap(true, false) {
		return
	}
	if e == nil {
		e = cm.err
	}
	cm.r.called(cm.summary(), e, cm)
}

// takeCall drops the call's end that settle left to the Stream: the call goes on.
func (cm *committed) takeCall() { cm.callHeld.Store(false) }

// resume continues the stream after its upstream read failed with err, when continuation
// is on and the break is one it continues. It reports true when a new attempt is being
// read; false leaves the stream to end, with s.err set when the continuation itself was
// tried and failed.
func (s *Stream) resume(err error) bool {
	cm := s.cm
	if s.link == nil || !s.keep || !cm.holdCall || cm.closed.Load() {
		return false
	}
	e := cm.finish(err)
	if e == nil || e.Class != failure.StreamInterrupted || errors.Is(e.Err, ErrStreamTimeout) ||
		s.acc.finish != finish.None || s.link.ctx.Err() != nil {
		return false
	}
	r, c := cm.r, cm.c
	partial := s.acc.response()
	a, prefill, xerr, ok := cm.continueCall(s.link.ctx, e, partial, func(on bool) {
		r.req = r.orig
		if on {
			pe := *e
			pe.Partial = partial
			r.req = ContinuationRequest(r.orig, &pe)
		}
	})
	if !ok {
		return false
	}
	s.prior = addUsage(s.prior, cm.final)
	if xerr != nil {
		// The call ends here, with its event, whether or not the caller closed the
		// stream meanwhile (then its Err stays nil).
		if fe := cm.failContinued(e, xerr, partial); !s.link.isClosed() {
			s.contErr = fe
		}
		return false
	}
	g := a.stream
	next := c.commit(r, a, g.ps, g.ctx, g.cancel, cm.caller, func() {}, true, cm, s.prior)
	if !s.link.swap(next) {
		next.close()
		return false
	}
	s.cm, s.continued = next, true
	s.pending, s.ended = g.pending, g.ended
	for i := range s.pending {
		next.note(&s.pending[i])
	}
	s.splice = nil
	if !prefill {
		s.splice = newSplicer(partial, &s.acc)
	}
	return true
}

// firstTokenAt is when the stream's first content token arrived, on its first committed
// attempt.
func (cm *committed) firstTokenAt() time.Time {
	if !cm.firstToken.IsZero() {
		return cm.firstToken
	}
	return cm.a.sent.Add(cm.a.ttft)
}

// callStats is what the call's end reports of its stream, over every committed attempt
// of a continued one: the time from start to its first token, the chunks received, the
// mean time between chunks (from the first to the last: a wait after it, such as the one
// an idle timeout ends, is no chunk's), and the usage (nil when none was settled).
func (cm *committed) callStats(start time.Time) (ttft time.Duration, chunks int, per time.Duration, usage *Usage) {
	first := cm.firstTokenAt()
	ttft = first.Sub(start)
	chunks = int(cm.priorChunks + cm.chunks.Load())
	if chunks > 1 {
		last := cm.a.end // not after the last chunk: a wait that ended the stream is no chunk's
		if n := cm.lastChunk.Load(); n > 0 {
			last = cm.a.sent.Add(time.Duration(n))
		}
		per = last.Sub(first) / time.Duration(chunks-1)
	}
	usage = cm.final
	if cm.prior != nil && usage != nil {
		sum := addUsage(*cm.prior, usage)
		usage = &sum
	}
	return ttft, chunks, per, usage
}

// continueCall runs the attempt that continues the committed attempt cm after its
// interruption e, where the decision for e's class allows: on the next upstream of the
// route, or the same one. partial is what the caller received; prefill arranges (on) or
// undoes (off) the request that sends it as a prefill, where the target accepts one. It
// reports the new attempt and whether it continues a prefill; ok is false when no
// continuation is allowed, xerr set when it was tried and failed. Client.Stream and the
// transport's bodies share it.
func (cm *committed) continueCall(ctx context.Context, e *Error, partial *Response,
	prefill func(on bool)) (a *attempt, pre bool, xerr error, ok bool) {
	r, c := cm.r, cm.c
	if !r.continueOn(r.decision(cm.a, e)) {
		return nil, false, nil, false
	}
	cm.takeCall()
	r.setLast(e)
	r.lastErr = e
	target := r.route[r.pos]
	model, found := target.model(r.orig.Model)
	if !found {
		model = r.orig.Model
	}
	// Only text is continued by a prefill: the request holds no refusal, and a refused
	// answer is not one to go on from as if it were text; a restart repeats the refusal
	// and its splice checks it, as it checks tool calls.
	pre = partial.Text != "" && partial.Refusal == "" && len(partial.ToolCalls) == 0 && c.acceptsPrefill(target, model)
	action := "restart"
	if pre {
		action = "prefill"
	}
	prefill(pre)
	r.observe(Event{Kind: event.Continuation, Upstream: cm.a.up.Name, Target: target.Name, Model: cm.a.call.Model,
		Class: e.Class, Err: e, Action: action})
	a, xerr = r.exec(ctx)
	if xerr != nil && pre {
		var pe *Error
		if errors.As(xerr, &pe) && pe.Class == failure.BadRequest && r.continueSame() && r.route[r.pos] == target {
			// The target rejected the prefill after all: restart there instead, so that its
			// 400 never stands for the stream's real failure.
			pre = false
			prefill(false)
			a, xerr = r.exec(ctx)
		}
	}
	prefill(false)
	return a, pre, xerr, true
}

// failContinued ends the call after the continuation of its interruption e failed with
// xerr, and returns the error the caller gets. As for any call, the final error is the
// last attempt's, with the trace of every attempt; its cause names the interruption too,
// and Partial holds what the caller received.
func (cm *committed) failContinued(e *Error, xerr error, partial *Response) *Error {
	r := cm.r
	final := r.final(xerr)
	if !errors.Is(final.Err, e) {
		final.Err = fmt.Errorf("%w; continuing a stream that broke: %w", final.Err, e)
	}
	final.Partial = partial
	cm.callHeld.Store(true)
	cm.releaseCall(final)
	return final
}

// continueOn moves the run to where a broken stream continues, as the decision for its
// class allows: the next upstream of the route (Failover), or the same one (Retry) when
// none is left that can serve (a drained upstream, an open breaker, every key out: as
// elsewhere judges for any failover) and its caps allow another call.
func (r *run) continueOn(d Decision) bool {
	r.hedgeSent = true // a continuation is not hedged
	r.renewBudget()
	if d.Failover && r.elsewhere(time.Now()) && r.advance() {
		return true
	}
	return d.Retry && r.continueSame()
}

// continueSame reports whether the caps allow another call on the current upstream.
func (r *run) continueSame() bool {
	return r.onUp < r.maxAttempts() && r.total < r.maxTotal()
}

// acceptsPrefill reports whether up's model accepts a prefill: WithPrefill, else the
// provider's Prefiller, else false.
func (c *Client) acceptsPrefill(up *upstream, model string) bool {
	if v, ok := c.cfg.stream.prefill[up.Name]; ok {
		return v
	}
	if p, ok := up.Provider.(dialect.Prefiller); ok {
		return p.AcceptsPrefill(model)
	}
	return false
}

// addUsage returns sum plus u (nil: nothing).
func addUsage(sum Usage, u *Usage) Usage {
	if u == nil {
		return sum
	}
	sum.InputTokens = satAdd(sum.InputTokens, u.InputTokens)
	sum.OutputTokens = satAdd(sum.OutputTokens, u.OutputTokens)
	sum.TotalTokens = satAdd(sum.TotalTokens, u.TotalTokens)
	sum.CachedInputTokens = satAdd(sum.CachedInputTokens, u.CachedInputTokens)
	sum.CacheWriteTokens = satAdd(sum.CacheWriteTokens, u.CacheWriteTokens)
	sum.ReasoningTokens = satAdd(sum.ReasoningTokens, u.ReasoningTokens)
	sum.Estimated = sum.Estimated || u.Estimated
	return sum
}

// splicer filters a restarted stream so that the caller receives only what follows what
// it already has: the text, the refusal, the reasoning of the answer and each tool call's
// arguments are matched against what was delivered and skipped while they agree; the
// restart's reasoning before its answer (its first text, refusal or tool call, that
// chunk's reasoning included) is skipped, as the delivered reasoning before the caller's
// answer is not matched: a model reasons anew each time; tool calls keep the first
// attempt's IDs and indexes. The restart diverges, with nothing of the chunk delivered,
// where it differs: other text, another refusal or other reasoning; text, a refusal or
// reasoning the caller has not received while anything it received is still unmatched
// (its refusal where text was delivered, its text where a refusal was, its text or
// reasoning within or before delivered tool calls); a tool call that begins while
// delivered text or refusal is unmatched, or the reasoning the caller received before
// that call; other arguments or another name for a delivered call; a finish reason while
// anything delivered is unmatched. Delivered text and refusal may be repeated in either
// order, and the reasoning of the answer in any order with them (the caller's order is
// not kept); tool calls follow them, and the reasoning the caller received between two
// calls is matched between them.
//
// The restart's tool calls are matched to the delivered ones by the order in which they
// begin, not by their index: vendors number them differently (OpenAI by call, Anthropic
// by content block, after any text or thinking block), so a restart on another vendor
// would otherwise start a second copy of a delivered call. A delta of a delivered call
// takes that call's index as the caller received it; a call the caller has not seen
// takes the next index past every delivered one, so that it never merges into one. A
// call begins with its first delta that carries an id, a name or arguments, as the
// accumulator keeps it (carriesCall); a delta that carries none of them is dropped. A
// delivered call is unmatched until the restart has begun it and repeated its arguments.
type splicer struct {
	have       string          // delivered text not yet matched by the restart
	refusal    string          // delivered refusal not yet matched by the restart
	reasoning  string          // delivered reasoning of the answer not yet matched by the restart
	delivered  string          // all the delivered text, for a DivergedError
	matched    int             // bytes of the delivered text matched
	refMatched int             // bytes of the delivered refusal matched
	reasonAt   int             // the offset of reasoning in the delivered reasoning
	got        strings.Builder // the restart's text, while matching
	started    bool            // the restart's answer began: its reasoning is matched from now on
	tools      []*toolSplice   // the delivered calls, in the order they began
	seen       map[int]int     // a restart's tool index → the order in which its call began
	nextIndex  int             // the index of the restart's first call the caller has not seen
}

type toolSplice struct {
	index    int // as the caller received it
	id, name string
	have     string // delivered arguments not yet matched by the restart
	matched  int    // bytes of the delivered arguments matched
	// reasoning is the length of the delivered reasoning when the call began: the
	// restart repeats it before it begins the call.
	reasoning int
}

// newSplicer is the splicer of a stream whose caller received p, as acc assembled it (the
// tool calls with the indexes the caller saw, where its answer began).
func newSplicer(p *Response, acc *accumulator) *splicer {
	pre := min(acc.answerReasoning(), len(p.Reasoning))
	sp := &splicer{have: p.Text, refusal: p.Refusal, delivered: p.Text, reasoning: p.Reasoning[pre:], reasonAt: pre}
	for _, tc := range acc.calls {
		sp.tools = append(sp.tools, &toolSplice{index: tc.index, id: tc.id, name: tc.name, have: tc.args.String(),
			reasoning: max(tc.reasoning, pre)})
		sp.nextIndex = max(sp.nextIndex, tc.index+1)
	}
	return sp
}

// filter returns what of ch the caller has not received yet, whether anything is left to
// deliver, and a *DivergedError when the restart differs from what was delivered. A
// chunk's parts are taken in the order a stream gives them: reasoning, then text and
// refusal, then tool calls.
func (sp *splicer) filter(ch Chunk) (Chunk, bool, error) {
	if ch.Reasoning != "" {
		if !sp.started {
			ch.Reasoning = "" // before the restart's answer: the caller has reasoning of its own
		} else {
			r := ch.Reasoning
			n := min(len(r), sp.reasonRoom())
			if i := firstDiff(r[:n], sp.reasoning[:n]); i >= 0 {
				return ch, false, sp.divergedAt(DivergedReasoning, -1, sp.reasonAt+i)
			}
			sp.reasoning, sp.reasonAt, ch.Reasoning = sp.reasoning[n:], sp.reasonAt+n, r[n:]
			if ch.Reasoning != "" && sp.pending() {
				return ch, false, sp.diverged() // reasoning where the caller's answer goes on otherwise
			}
		}
	}
	if ch.Text != "" || ch.Refusal != "" || carriesCalls(ch.ToolCalls) {
		sp.started = true
	}
	if ch.Text != "" {
		t := ch.Text
		n := min(len(t), len(sp.have))
		if i := firstDiff(t[:n], sp.have[:n]); i >= 0 {
			sp.got.WriteString(t)
			return ch, false, sp.divergedAt(DivergedText, -1, sp.matched+i)
		}
		sp.got.WriteString(t[:n])
		sp.have, sp.matched, ch.Text = sp.have[n:], sp.matched+n, t[n:]
		if ch.Text != "" && sp.pending() {
			sp.got.WriteString(ch.Text)
			return ch, false, sp.diverged() // new text where the caller's refusal, reasoning or tool calls go on
		}
	}
	if ch.Refusal != "" {
		r := ch.Refusal
		n := min(len(r), len(sp.refusal))
		if i := firstDiff(r[:n], sp.refusal[:n]); i >= 0 {
			return ch, false, sp.divergedAt(DivergedRefusal, -1, sp.refMatched+i)
		}
		sp.refusal, sp.refMatched, ch.Refusal = sp.refusal[n:], sp.refMatched+n, r[n:]
		if ch.Refusal != "" && sp.pending() {
			return ch, false, sp.diverged() // a new refusal where the caller's text, reasoning or tool calls go on
		}
	}
	if len(ch.ToolCalls) > 0 {
		out := ch.ToolCalls[:0:0]
		for _, d := range ch.ToolCalls {
			if !carriesCall(&d) {
				continue // the accumulator keeps nothing of it either
			}
			if sp.have != "" || sp.refusal != "" {
				return ch, false, sp.diverged() // a tool call where the delivered text or refusal goes on
			}
			ord, ok := sp.seen[d.Index]
			if !ok {
				// The call begins: the reasoning the caller received before it must be
				// repeated by now.
				if ord = len(sp.seen); ord < len(sp.tools) && sp.reasonAt < sp.tools[ord].reasoning ||
					ord >= len(sp.tools) && sp.reasoning != "" {
					return ch, false, sp.diverged()
				}
				if sp.seen == nil {
					sp.seen = make(map[int]int, len(sp.tools)+1)
				}
				sp.seen[d.Index] = ord
			}
			if ord >= len(sp.tools) {
				d.Index = sp.nextIndex + ord - len(sp.tools)
				out = append(out, d)
				continue
			}
			ts := sp.tools[ord]
			d.Index = ts.index
			if d.Name != "" && ts.name != "" && d.Name != ts.name {
				return ch, false, sp.divergedAt(DivergedToolCall, ord, ts.matched)
			}
			d.ID, d.Name = "", ""
			if ts.have != "" && d.Arguments != "" {
				n := min(len(d.Arguments), len(ts.have))
				if i := firstDiff(d.Arguments[:n], ts.have[:n]); i >= 0 {
					return ch, false, sp.divergedAt(DivergedToolCall, ord, ts.matched+i)
				}
				ts.have, ts.matched, d.Arguments = ts.have[n:], ts.matched+n, d.Arguments[n:]
			}
			if d.Arguments != "" {
				out = append(out, d)
			}
		}
		ch.ToolCalls = out
	}
	if ch.FinishReason != finish.None && sp.pending() {
		return ch, false, sp.diverged() // the restart ends short of what was delivered
	}
	keep := ch.HasContent() || ch.FinishReason != finish.None || ch.Usage != nil
	return ch, keep, nil
}

// reasonRoom returns how much of the delivered reasoning the restart may repeat now: up
// to what the caller received before the next delivered call the restart has not begun.
func (sp *splicer) reasonRoom() int {
	n := len(sp.reasoning)
	if k := len(sp.seen); k < len(sp.tools) {
		n = min(n, max(0, sp.tools[k].reasoning-sp.reasonAt))
	}
	return n
}

// pending reports whether delivered content is still unmatched: a restart that ends here
// is shorter than what the caller has, and one that says anything new here answers
// otherwise.
func (sp *splicer) pending() bool {
	if sp.have != "" || sp.refusal != "" || sp.reasoning != "" || len(sp.seen) < len(sp.tools) {
		return true // (the restart's calls begin in order: the first len(seen) delivered ones began)
	}
	for _, ts := range sp.tools {
		if ts.have != "" {
			return true
		}
	}
	return false
}

// diverged is the divergence of a restart that says something new, or ends, while
// delivered content is unmatched: at the first part of it not repeated yet (text, then
// refusal, then the reasoning and tool calls in the order the caller received them).
func (sp *splicer) diverged() *DivergedError {
	switch {
	case sp.have != "":
		return sp.divergedAt(DivergedText, -1, sp.matched)
	case sp.refusal != "":
		return sp.divergedAt(DivergedRefusal, -1, sp.refMatched)
	}
	for k, ts := range sp.tools {
		if sp.reasonAt < ts.reasoning {
			return sp.divergedAt(DivergedReasoning, -1, sp.reasonAt)
		}
		if k >= len(sp.seen) || ts.have != "" {
			return sp.divergedAt(DivergedToolCall, k, ts.matched)
		}
	}
	if sp.reasoning != "" {
		return sp.divergedAt(DivergedReasoning, -1, sp.reasonAt)
	}
	return sp.divergedAt(DivergedText, -1, sp.matched)
}

// divergedAt is the divergence at offset in part (the tool call at position call).
func (sp *splicer) divergedAt(part DivergedPart, call, offset int) *DivergedError {
	de := &DivergedError{Delivered: sp.delivered, Restarted: sp.got.String(), At: sp.matched, Part: part,
		Offset: offset, ToolCall: call}
	if part == DivergedText {
		de.At = offset
	}
	return de
}

// diverge ends the stream because the restart differs from what the caller has.
func (s *Stream) diverge(de *DivergedError) {
	s.contErr = s.cm.divergeCall(de, s.acc.response())
}

// divergeCall ends the call because the restart read by cm differs from what the caller
// has (partial): the restart's attempt is settled as canceled (its upstream did nothing
// wrong) and the call ends with the failure.StreamInterrupted error it returns, wrapping de.
func (cm *committed) divergeCall(de *DivergedError, partial *Response) *Error {
	a, r := cm.a, cm.r
	cm.quiet.Store(true)
	cm.settle(failure.Canceled, &Error{Class: failure.Canceled, Upstream: a.up.Name, Model: a.call.Model, Status: a.status,
		Err: de, Message: "the restarted answer was dropped"})
	e := &Error{Class: failure.StreamInterrupted, Upstream: a.up.Name, Model: a.call.Model, Status: a.status, Err: de,
		Message: "the stream broke and its restarted answer differs from the answer already delivered"}
	e.Attempts = r.trace
	if r.c.cost != nil {
		e.Cost = traceCost(r.trace)
	}
	e.Partial = partial
	cm.releaseCall(e)
	return e
}

// firstDiff returns the index of the first byte where a and b (of equal length) differ,
// or -1.
func firstDiff(a, b string) int {
	if a == b {
		return -1
	}
	for i := 0; i < len(a); i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}
