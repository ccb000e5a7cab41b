package llmclient

import (
	"context"
	"errors"
	"io"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"weak"

	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/finish"
)

// committed is an attempt past its commit point: a stream whose first content token has
// arrived (Client.Stream), or a transport response handed to its caller while the upstream
// is still sending (liveBody). It is the one place that times the upstream, classifies a
// break, settles the attempt and gives back every lease it holds — limiter slot and
// tokens, key, partition, breaker permit — exactly once, whichever comes first: the end of
// the stream, the caller's Close, the idle or total timeout, the caller's context, or the
// caller dropping the stream without closing it.
//
// The idle timeout counts only the time spent waiting on the upstream, never the caller's
// own time between reads. Its limit depends on the stream's phase: after a reasoning delta
// (the reasoning phase) a longer silence is allowed than while the answer streams (the
// content phase); see WithIdleTimeout. The longest wait of each phase is noted, and a
// stream that ends cleanly teaches its upstream's learned idle limits (learned.go). While
// the caller is away from a typed stream for a whole idle period, the committed attempt
// reads ahead in the background (readAhead), so the upstream's silence is timed whether
// or not the caller reads: an upstream that stalls is cut, one that finishes is settled
// and gives its leases back. The read-ahead reads for a caller that is away, not in its
// place: once the caller has not read for longer than the idle limit of the stream's
// phase (counted from its last read, left) while the read-ahead holds or reads for it
// (away), the stream ends, however lively its upstream. The timers settle in the
// background, so a stream the caller stops reading still frees its leases when they fire.
//
// recv and readRaw must not be called concurrently with each other; the other methods are
// safe for concurrent use.
type committed struct {
	c  *Client
	r  *run
	a  *attempt
	ps ProviderStream // the decoder; nil for a body passed through raw
	// ctx is the attempt's context, canceled with a cause by the timers; caller is the
	// caller's own context, below any stream timeout.
	ctx, caller context.Context
	cancel      context.CancelCauseFunc
	cancelTotal context.CancelFunc

	// mu guards the two callbacks' handles: the callbacks may run before commit returns.
	mu        sync.Mutex
	watchdog  *time.Timer
	watcher   *idleWatch
	stopWatch func() bool // stops the context.AfterFunc

	// idle and idleReasoning are the idle limits of the content and reasoning phases
	// (idleReasoning >= idle); thinking is set while the stream is in its reasoning
	// phase: its last data chunk carried reasoning and no content.
	idle, idleReasoning time.Duration
	thinking            atomic.Bool
	// learnGaps: the longest waits of each phase (gapContent, gapReasoning, in
	// nanoseconds) teach the upstream's learned idle limits.
	learnGaps                bool
	gapContent, gapReasoning atomic.Int64
	keepAliveIdle            bool
	// keepAlives makes recv return keep-alives too: the transport's body delivers their
	// bytes as they come.
	keepAlives bool
	base       time.Time
	// readAt is 1 + the nanoseconds since base at which the wait for the upstream's next
	// data event began; 0 when no such wait is under way.
	readAt atomic.Int64
	// waited is how long the reads since the last data event waited for the upstream, when
	// recv returned keep-alives to the transport's body: the next read's wait starts that
	// much earlier, so that keep-alives do not restart it (unless WithKeepAliveResetsIdle)
	// and the caller's own time between reads does not count. Guarded by readMu.
	waited int64

	// readMu is held by whoever reads the upstream: the caller's recv or readAhead.
	// ahead holds what readAhead read and the caller has not yet received (aheadBytes of
	// output, aheadEnd once it holds the stream's end); both are guarded by readMu.
	readMu     sync.Mutex
	ahead      []aheadItem
	aheadBytes int
	aheadEnd   bool
	// reading: readAhead runs; wantRead: the caller waits for readMu.
	reading, wantRead atomic.Bool
	hand              handoff
	// left is 1 + the nanoseconds since base at which the caller last read (a chunk
	// handed to it, the end of a transport body's Read). away is set while the read-ahead
	// reads or holds for a caller that is away, cleared when the caller reads again (a
	// typed stream's under readMu, a transport body's under its mu): the stream then ends
	// once left is older than the phase's idle limit. sentOff turns lastChunk into left
	// without a clock read: 1 + a.sent's nanoseconds since base.
	left    atomic.Int64
	away    atomic.Bool
	sentOff int64
	// unread: the watchdog ended the attempt because its caller was away too long; a
	// transport body's read-ahead then leaves the break to the caller's next Read (and
	// its continuation), as it would a full buffer.
	unread atomic.Bool
	// body is a transport body's, whose upstream liveBody.readAhead reads while its
	// caller is away, as readAhead does a typed stream's. Weak: the attempt must not keep
	// a body its caller dropped from being collected (and settled by its cleanup). Set
	// under mu.
	body weak.Pointer[liveBody]
	// holdCall: an interruption's event.Call is left to the Stream, which may continue
	// the call on another attempt; callHeld is set while one is held.
	holdCall bool
	callHeld atomic.Bool
	// quiet: the attempt's end, whatever its class, is not the call's (see Stream.diverge).
	quiet atomic.Bool

	usage    atomic.Pointer[Usage] // the last usage the upstream reported
	ended    atomic.Bool           // the vendor's end marker or a finish reason arrived
	outBytes atomic.Int64          // output text received, for an estimate without usage
	chunks   atomic.Int64          // data chunks received
	// lastChunk is when the last data chunk arrived, in nanoseconds after the attempt was
	// sent (a.sent); 0 before the first.
	lastChunk atomic.Int64
	// finish and model are the last finish reason and model the stream named.
	finishReason, model atomic.Pointer[string]

	// prior, priorChunks and firstToken are, for a continuation (continue.go), the usage
	// and chunks of the stream's committed attempts before this one and when the first
	// of them got its first token; nil, 0 and zero for a stream's first attempt. They are
	// set under mu before any timer can settle the attempt.
	prior       *Usage
	priorChunks int64
	firstToken  time.Time

	settleOnce sync.Once
	settled    atomic.Bool
	closed     atomic.Bool // the caller closed it
	// err is the error the attempt ended with (nil for a clean end or the caller's
	// close), final the usage it was settled with; both are set by settle.
	err   *Error
	final *Usage
}

// commit makes a the committed attempt of r. ps is its decoder (nil for a raw body);
// ctx and cancel are the attempt's context; caller is the caller's context and
// cancelTotal stops the stream's total timeout (a no-op without one). hold keeps the call
// open when the attempt breaks, for a continuation; prev, when set, is the committed
// attempt this one continues, whose stream's usage so far is prior. All of it is set
// before any timer or the context's end can settle the attempt.
func (c *Client) commit(r *run, a *attempt, ps ProviderStream, ctx context.Context, cancel context.CancelCauseFunc,
	caller context.Context, cancelTotal context.CancelFunc, hold bool, prev *committed, prior Usage) *committed {
	cm := &committed{c: c, r: r, a: a, ps: ps, ctx: ctx, caller: caller, cancel: cancel, holdCall: hold,
		cancelTotal: cancelTotal, keepAliveIdle: c.cfg.stream.keepAliveCounts, keepAlives: r.tx != nil}
	r.cur, r.handedOver = nil, true
	cm.mu.Lock()
	defer cm.mu.Unlock()
	if prev != nil {
		cm.prior = &prior
		cm.priorChunks = prev.priorChunks + prev.chunks.Load()
		cm.firstToken = prev.firstTokenAt()
	}
	if idle, reasoning := a.idleLimits(); idle > 0 {
		if ps == nil {
			// A body passed through raw is timed too: its reads (liveBody.readRaw) are its
			// waits on the upstream, and any bytes are progress. Its phase is unknown: it
			// gets the longer limit, the reasoning phase's.
			idle = reasoning
		}
		cm.idle, cm.idleReasoning, cm.base = idle, reasoning, time.Now()
		cm.left.Store(1) // the stream is handed over now
		cm.sentOff = int64(a.sent.Sub(cm.base)) + 1
		cm.learnGaps = c.cfg.stream.learnIdle && ps != nil
		cm.watcher = &idleWatch{}
		cm.watcher.cm.Store(cm)
		cm.watchdog = time.AfterFunc(idle, cm.watcher.fire)
	}
	cm.stopWatch = context.AfterFunc(ctx, cm.ctxDone)
	return cm
}

// recv reads the next chunk from the upstream, timing the wait for the idle timeout: the
// wait for a data event starts when recv is called and ends when one arrives; keep-alives
// extend it unless WithKeepAliveResetsIdle. It notes usage, finish reasons, the end marker
// and the output's size; the caller decides what the chunk or error means to its reader.
func (cm *committed) recv() (Chunk, error) {
	timed := cm.idle > 0
	if timed {
		cm.wantRead.Store(true)
		cm.hand.lock(&cm.readMu) // unlocked at each return: a defer costs every chunk
		cm.wantRead.Store(false)
		if cm.away.Load() && !cm.keepAlives {
			cm.away.Store(false) // the caller is back (a transport body's Read notes its own)
		}
		if len(cm.ahead) > 0 {
			it := cm.ahead[0]
			cm.ahead[0] = aheadItem{}
			cm.ahead = cm.ahead[1:]
			cm.aheadBytes -= it.size
			cm.left.Store(int64(time.Since(cm.base)) + 1)
			cm.readMu.Unlock()
			return it.ch, it.err
		}
		if cm.aheadEnd {
			cm.readMu.Unlock()
			return Chunk{}, io.EOF // unreachable: the end is the last item ahead
		}
		if cm.readAt.Load() == 0 {
			cm.readAt.Store(int64(time.Since(cm.base)) + 1 - cm.waited)
		}
	}
	for {
		ch, err := cm.ps.Recv()
		if err == nil && !ch.KeepAlive { // the common case, without a call
			cm.note(&ch)
		} else if cm.noteRead(&ch, err, timed) {
			continue
		}
		if timed {
			cm.endWait(&ch, err)
			if err == nil && !cm.keepAlives {
				// A data chunk the caller reads as it arrives (note timed it): a transport
				// body notes its caller's reads itself.
				cm.left.Store(cm.lastChunk.Load() + cm.sentOff)
			}
			cm.readMu.Unlock()
		}
		return ch, err
	}
}

// endWait ends the wait for the upstream that a read began (readAt), under readMu. A
// chunk that is not progress — a keep-alive, or a data event without content or a finish
// reason (an id, a model, a role, usage alone) — does not end it unless
// WithKeepAliveResetsIdle: the time it waited carries over to the next read (waited).
func (cm *committed) endWait(ch *Chunk, err error) {
	cm.waited = 0
	if err == nil && !cm.keepAliveIdle && !ch.HasContent() && ch.FinishReason == finish.None {
		cm.waited = int64(time.Since(cm.base)) + 1 - cm.readAt.Load()
	}
	cm.readAt.Store(0)
}

// noteRead records what a read from the upstream returned; it reports true for a
// keep-alive its reader skips.
func (cm *committed) noteRead(ch *Chunk, err error, timed bool) (skip bool) {
	switch {
	case err == io.EOF:
		cm.ended.Store(true)
	case err != nil:
	case ch.KeepAlive:
		if timed && cm.keepAliveIdle {
			cm.readAt.Store(int64(time.Since(cm.base)) + 1)
		}
		return !cm.keepAlives // the transport's body delivers their bytes; the wait goes on
	default:
		cm.note(ch)
	}
	return false
}

// idleLimit is the idle limit of the stream's current phase.
func (cm *committed) idleLimit() time.Duration {
	if cm.thinking.Load() {
		return cm.idleReasoning
	}
	return cm.idle
}

// skipper is what a ProviderStream that skips malformed events reports: how many it
// skipped. The count goes to the attempt's Notes (Attempt.Notes, event.Attempt).
type skipper interface{ SkippedEvents() int }

// aheadItem is a read made by readAhead, waiting for the caller.
type aheadItem struct {
	ch   Chunk
	err  error
	size int
}

// Read-ahead bounds: what a stream the caller does not read may hold for it.
const (
	maxAheadBytes  = 1 << 20
	maxAheadChunks = 4096
)

// readAhead reads the upstream while the caller is away, so that the idle timeout times
// the upstream and a stream that ends settles at once. It stops when the caller comes
// back to recv, at the stream's end, or on a full buffer. From its start the caller is
// away (see left): once it has not read for the phase's idle limit, a data chunk read
// ahead ends the stream, as the watchdog does. It runs for typed streams with an idle
// timeout only.
func (cm *committed) readAhead() {
	defer cm.reading.Store(false)
	for !cm.wantRead.Load() && !cm.settled.Load() {
		if !cm.readMu.TryLock() {
			return // the caller reads
		}
		if cm.aheadEnd {
			cm.hand.unlock(&cm.readMu, &cm.wantRead)
			return
		}
		if !cm.away.Load() {
			cm.away.Store(true)
		}
		if cm.aheadBytes >= maxAheadBytes || len(cm.ahead) >= maxAheadChunks {
			cm.hand.unlock(&cm.readMu, &cm.wantRead)
			return // paused: the watchdog ends the stream if the caller stays away
		}
		if cm.readAt.Load() == 0 { // a keep-alive before does not restart the wait
			cm.readAt.Store(int64(time.Since(cm.base)) + 1 - cm.waited)
		}
		ch, err := cm.ps.Recv()
		skip := cm.noteRead(&ch, err, true)
		if !skip {
			cm.endWait(&ch, err)
			size := len(ch.Text) + len(ch.Reasoning) + len(ch.Refusal) + 64
			for i := range ch.ToolCalls {
				size += len(ch.ToolCalls[i].Arguments)
			}
			cm.ahead = append(cm.ahead, aheadItem{ch: ch, err: err, size: size})
			cm.aheadBytes += size
			cm.aheadEnd = err != nil
		}
		cm.hand.unlock(&cm.readMu, &cm.wantRead)
		if err != nil {
			cm.settleAhead(err)
			return
		}
	}
}

// touch notes a read of the caller's that did not go through recv (a chunk read before
// the commit point).
func (cm *committed) touch() {
	if cm.idle > 0 {
		cm.left.Store(int64(time.Since(cm.base)) + 1)
	}
}

// settleAhead settles the attempt when readAhead read its end: the caller receives the
// chunks and the end later, the Client gets its leases back now.
func (cm *committed) settleAhead(err error) {
	if err != io.EOF {
		cm.finish(err)
		return
	}
	if f := cm.finishReason.Load(); f != nil && (finish.Reason(*f) == finish.ContentFilter || finish.Reason(*f) == finish.Refusal) {
		cm.settle(failure.ContentFiltered, &Error{Class: failure.ContentFiltered, Upstream: cm.a.up.Name, Model: cm.a.call.Model,
			Status: cm.a.status, Message: "response blocked by the vendor's content policy"})
		return
	}
	cm.settle(failure.None, nil)
}

// note records what a data chunk says about the attempt: when it arrived from the
// upstream (readAt is then the start of the wait for it), the wait is one of the phase
// the stream was in, and the chunk may change the phase.
func (cm *committed) note(ch *Chunk) {
	cm.chunks.Add(1)
	cm.lastChunk.Store(int64(time.Since(cm.a.sent)))
	thinking := cm.thinking.Load()
	if at := cm.readAt.Load(); at != 0 && cm.learnGaps {
		gap := int64(time.Since(cm.base)) - (at - 1)
		longest := &cm.gapContent
		if thinking {
			longest = &cm.gapReasoning
		}
		if gap > longest.Load() {
			longest.Store(gap) // one reader writes them
		}
	}
	if ch.Text != "" || ch.Refusal != "" || len(ch.ToolCalls) > 0 {
		if thinking {
			cm.thinking.Store(false)
		}
	} else if ch.Reasoning != "" && !thinking {
		cm.thinking.Store(true)
	}
	if ch.Usage != nil {
		if u := *ch.Usage; usageReported(&u) {
			cm.usage.Store(&u)
			if u != *ch.Usage { // parts not reported, now 0: the caller sees them so too
				c := u
				ch.Usage = &c
			}
		} else if u.InputTokens != 0 || u.OutputTokens != 0 || u.TotalTokens != 0 {
			// An impossible report voids what the stream reported before: the attempt is
			// the Client's estimate (settle), and the caller is not handed the counts.
			cm.usage.Store(nil)
			ch.Usage = nil
		}
	}
	if ch.FinishReason != finish.None {
		cm.ended.Store(true)
		f := string(ch.FinishReason)
		cm.finishReason.Store(&f)
	}
	if ch.Model != "" {
		if p := cm.model.Load(); p == nil || *p != ch.Model { // chunks repeat it: store it once
			m := ch.Model
			cm.model.Store(&m)
		}
	}
	if n := len(ch.Text) + len(ch.Reasoning) + len(ch.Refusal); n > 0 {
		cm.outBytes.Add(int64(n))
	}
	for i := range ch.ToolCalls {
		cm.outBytes.Add(int64(len(ch.ToolCalls[i].Arguments)))
	}
}

// handoff is how a reader waits for a lock the read-ahead holds while it waits on the
// upstream: on a condition the read-ahead signals when it lets go, rather than on the
// lock itself, so that the wait is like the read-ahead's own, a durable one (it is
// blocked on the upstream, not on a lock) for testing/synctest's virtual time.
type handoff struct {
	mu   sync.Mutex
	cond sync.Cond
}

// lock locks l, waiting for the read-ahead to let go of it (unlock) if need be.
func (h *handoff) lock(l *sync.Mutex) {
	if l.TryLock() {
		return
	}
	h.mu.Lock()
	if h.cond.L == nil {
		h.cond.L = &h.mu
	}
	for !l.TryLock() {
		h.cond.Wait()
	}
	h.mu.Unlock()
}

// unlock unlocks l and wakes a reader waiting for it (want).
func (h *handoff) unlock(l *sync.Mutex, want *atomic.Bool) {
	l.Unlock()
	if want.Load() {
		h.mu.Lock()
		h.cond.Broadcast()
		h.mu.Unlock()
	}
}

// idleWatch is what the idle timer holds. A stopped timer can stay in the runtime's timer
// heap until that heap is next tidied; settle empties it, so that a settled attempt, with
// its upstream stream and buffers, is not kept alive there.
type idleWatch struct{ cm atomic.Pointer[committed] }

func (w *idleWatch) fire() {
	if cm := w.cm.Load(); cm != nil {
		cm.watch()
	}
}

// watch is the idle watchdog: it fires at least every content-phase idle period and
// expires the attempt when a read from the upstream has been under way for the whole idle
// limit of the stream's phase, or when the caller has not read for that long while the
// read-ahead reads or holds for it (away; keep-alives are not the caller's reads).
func (cm *committed) watch() {
	cm.mu.Lock()
	if cm.settled.Load() {
		cm.mu.Unlock()
		return
	}
	next := cm.idle
	now := time.Since(cm.base)
	limit := cm.idleLimit()
	b := cm.body.Value()
	at := cm.readAt.Load()
	if at != 0 {
		next = time.Duration(at-1) + limit - now
	}
	var away func()
	if cm.away.Load() {
		// The read-ahead reads or holds for a caller that is away; one that waits to read
		// again (wantRead) is not.
		if !cm.wantRead.Load() && (b == nil || !b.wantRead.Load()) {
			if d := time.Duration(cm.left.Load()-1) + limit - now; d <= 0 {
				cm.unread.Store(true)
				next = d
			} else {
				next = min(next, d)
			}
		}
	} else if at == 0 {
		if cm.ps != nil && !cm.keepAlives {
			away = cm.readAhead
		} else if b != nil {
			away = func() {
				defer cm.reading.Store(false)
				b.readAhead()
			}
		}
		if d := time.Duration(cm.left.Load()-1) + limit - now; away != nil && d > 0 {
			next = min(next, d) // look again when the caller has been away too long
		}
	}
	if next > 0 {
		cm.watchdog.Reset(min(next, cm.idle)) // a phase may end: look again within idle
	}
	cm.mu.Unlock()
	if next <= 0 {
		cm.expire(ErrIdleTimeout)
		return
	}
	if away != nil && cm.reading.CompareAndSwap(false, true) {
		go away() // nobody waits on the upstream: time it without the caller
	}
}

// setBody makes b the transport body whose upstream is read while its caller is away.
func (cm *committed) setBody(b *liveBody) {
	cm.mu.Lock()
	if cm.watchdog != nil {
		cm.body = weak.Make(b)
	}
	cm.mu.Unlock()
}

// ctxDone runs when the attempt's context ends: the caller canceled, its deadline passed,
// the stream's total timeout fired, or the attempt was settled (then it does nothing).
func (cm *committed) ctxDone() {
	if !cm.settled.Load() {
		cm.expire(context.Cause(cm.ctx))
	}
}

// expire ends the attempt from a timer or a cleanup: it cancels its context with cause,
// closes the upstream stream (which unblocks a reader) and settles it as interrupted (or
// canceled, when the caller's context ended), in the background.
func (cm *committed) expire(cause error) {
	cm.cancel(cause)
	cm.closeUpstream()
	cm.finish(cause)
}

// closeUpstream releases the connection.
func (cm *committed) closeUpstream() {
	if cm.ps != nil {
		_ = cm.ps.Close()
	}
}

// finish settles the attempt after the upstream read failed with err (io.EOF: a clean
// end) and returns the error the reader reports: nil after a clean end or the caller's
// close. After the first call it returns the same answer.
func (cm *committed) finish(err error) *Error {
	if err == io.EOF || err == nil {
		cm.settle(failure.None, nil)
	} else {
		e := cm.interruption(err)
		cm.settle(e.Class, e)
	}
	if cm.closed.Load() {
		return nil
	}
	return cm.err
}

// close is the caller's Close: a stream that already saw its end marker (or finish
// reason) is a success, any other is canceled by the caller. It releases the connection
// and the attempt's contexts.
func (cm *committed) close() {
	cm.closed.Store(true)
	if cm.ended.Load() {
		cm.settle(failure.None, nil)
	} else {
		cm.settle(failure.Canceled, &Error{Class: failure.Canceled, Upstream: cm.a.up.Name, Model: cm.a.call.Model,
			Err: context.Canceled, Message: "the caller closed the stream before its end"})
	}
	cm.cancel(context.Canceled)
	cm.cancelTotal()
	cm.closeUpstream()
}

// summary is the response the observer's event.Call reports for a successful stream.
func (cm *committed) summary() *Response {
	resp := &Response{Upstream: cm.a.up.Name, Status: cm.a.status, Model: cm.a.call.Model}
	if f := cm.finishReason.Load(); f != nil {
		resp.FinishReason = finish.Reason(*f)
	}
	if m := cm.model.Load(); m != nil {
		resp.Model = *m
	}
	return resp
}

// abandon runs when the caller's handle became unreachable without Close.
func (cm *committed) abandon() {
	cm.closed.Store(true)
	cm.settle(failure.Canceled, &Error{Class: failure.Canceled, Upstream: cm.a.up.Name, Model: cm.a.call.Model,
		Err: context.Canceled, Message: "the stream was dropped without Close"})
	cm.cancel(context.Canceled)
	cm.cancelTotal()
	cm.closeUpstream()
}

// interruption classifies a failure after the commit point.
func (cm *committed) interruption(err error) *Error {
	a := cm.a
	e := &Error{Class: failure.StreamInterrupted, Upstream: a.up.Name, Model: a.call.Model, Status: a.status, Err: err}
	cause := context.Cause(cm.ctx)
	switch {
	case errors.Is(cause, ErrStreamTimeout) || errors.Is(err, ErrStreamTimeout):
		e.Err = ErrStreamTimeout
	case errors.Is(cause, ErrIdleTimeout) || errors.Is(err, ErrIdleTimeout):
		e.Err = ErrIdleTimeout
	case cm.caller.Err() != nil:
		e.Class, e.Err = failure.Canceled, cm.caller.Err()
		if errors.Is(e.Err, context.DeadlineExceeded) {
			e.Class = failure.Timeout
		}
	}
	var ve *Error
	if errors.As(err, &ve) {
		e.Status, e.Type, e.Code, e.Message, e.RequestID = ve.Status, ve.Type, ve.Code, ve.Message, ve.RequestID
		e.RetryAfter, e.RateLimits = ve.RetryAfter, ve.RateLimits
	}
	e.Redact(a.secret())
	return e
}

// settle records the attempt's outcome once: the Client's state first (timers, leases,
// key, breaker, partition), then the trace and, last, the observer.
func (cm *committed) settle(class failure.Class, e *Error) {
	cm.settleOnce.Do(func() {
		cm.mu.Lock()
		if cm.watchdog != nil {
			cm.watchdog.Stop()
			cm.watcher.cm.Store(nil)
		}
		cm.stopWatch()
		cm.mu.Unlock()
		a, r := cm.a, cm.r
		a.end = time.Now()
		a.latency = a.end.Sub(a.sent)
		usage := cm.usage.Load()
		if usage == nil {
			u := cm.c.estimatedUsage(r, int(cm.outBytes.Load()))
			usage = &u
		}
		if m := cm.model.Load(); m != nil {
			a.bill.model = *m // the model the stream named, for its price
		}
		// The upstream request ends before its slot is given back: another call admitted
		// on that slot never finds more requests open upstream than the limit.
		cm.closeUpstream()
		a.settle(class, usage)
		r.releasePartition(usage)
		if class == failure.None && cm.learnGaps {
			a.up.learned.recordGaps(a.call.Model, time.Duration(cm.gapContent.Load()), time.Duration(cm.gapReasoning.Load()))
		}
		if !cm.keepAlives {
			// A typed stream is done with its contexts. A transport body keeps them until
			// the caller closes it: the bytes after the end marker still come through them.
			cm.cancel(context.Canceled)
			cm.cancelTotal()
		}
		cm.err = e
		cm.settled.Store(true)
		cm.final = usage
		if sk, ok := cm.ps.(skipper); ok {
			if n := sk.SkippedEvents(); n > 0 {
				a.call.Notes = append(a.call.Notes, "skipped "+strconv.Itoa(n)+" malformed stream events")
			}
		}
		r.record(a, e, usage)
		if e != nil {
			e.Attempts = r.trace
			if r.c.cost != nil {
				e.Cost = traceCost(r.trace)
			}
		}
		if cm.holdCall && e != nil && (e.Class == failure.StreamInterrupted || cm.quiet.Load()) {
			cm.callHeld.Store(true) // the Stream may continue the call
			return
		}
		r.called(cm.summary(), e, cm)
	})
}
