package llmclient

import (
	"context"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// liveBody is the body of a response handed to the caller while its upstream is still
// sending: a committed stream, or a one-shot body larger than the replay limit. It first
// delivers what was read before the hand-over, then reads on. A guarded stream is read
// through its Dialect's decoder, which tells content from keep-alives (for the idle
// timeout), sees the vendor's end marker and catches a cut; the bytes go to the caller
// unchanged. Closing it, or reaching its end, settles the attempt: limiter lease, key,
// breaker permit, trace and observer.
//
// Read must not be called concurrently with itself; Close may be called at any time, from
// any goroutine, more than once.
type liveBody struct {
	t   *Transport
	x   *txCall
	raw io.ReadCloser  // the upstream body
	ps  ProviderStream // the decoder of a guarded stream; nil passes bytes through
	rec *recorder      // what was read from raw and not yet delivered

	usage atomic.Pointer[Usage] // the last usage the stream reported
	ended bool                  // the decoder saw the end (or an in-band error): pass the rest through
	err   error                 // sticky: returned once everything read was delivered
	done  atomic.Bool           // the attempt is settled

	// Set once the call committed.
	r           *run
	a           *attempt
	actx        context.Context
	cancel      context.CancelCauseFunc
	cancelTotal context.CancelFunc
	idle        *time.Timer

	settleOnce sync.Once
	closeOnce  sync.Once
}

func newLiveBody(t *Transport, x *txCall, raw io.ReadCloser, ps ProviderStream, rec *recorder) *liveBody {
	if rec == nil {
		rec = &recorder{r: raw}
	}
	return &liveBody{t: t, x: x, raw: raw, ps: ps, rec: rec, ended: ps == nil}
}

// start runs once the call committed: the idle timer of a guarded stream, or the
// settlement of a stream that already ended.
func (b *liveBody) start() {
	if b.ps != nil && b.ended {
		b.settle(ClassNone, nil)
		return
	}
	if idle := b.t.c.cfg.stream.idle; idle > 0 && b.ps != nil {
		b.idle = time.AfterFunc(idle, func() {
			b.cancel(ErrIdleTimeout)
			_ = b.raw.Close()
		})
	}
}

// abort releases a body whose attempt failed after all (its timer fired at the hand-over).
func (b *liveBody) abort() {
	if b.ps != nil {
		_ = b.ps.Close()
	}
	_ = b.raw.Close()
}

// Read delivers the bytes read so far, then reads on.
func (b *liveBody) Read(p []byte) (int, error) {
	for {
		if n := b.rec.take(p); n > 0 {
			return n, nil
		}
		if b.err != nil {
			return 0, b.err
		}
		if !b.ended {
			b.next()
			continue
		}
		n, err := b.raw.Read(p)
		if n > 0 {
			b.touch(false)
		}
		switch {
		case err == io.EOF:
			b.err = io.EOF
			b.settle(ClassNone, nil)
		case err != nil && b.ps != nil:
			// The decoder saw the end already: what follows it does not matter.
			b.err = io.EOF
		case err != nil:
			e := b.interruption(err)
			b.err = e
			b.settle(e.Class, e)
		}
		if n > 0 {
			return n, nil
		}
	}
}

// next reads one event of a guarded stream through its decoder, which records its bytes.
func (b *liveBody) next() {
	ch, err := b.ps.Recv()
	if err == nil {
		if ch.Usage != nil {
			u := *ch.Usage
			b.usage.Store(&u)
		}
		b.touch(ch.KeepAlive)
		return
	}
	b.ended = true
	var ve *Error
	switch {
	case err == io.EOF:
		b.settle(ClassNone, nil)
	case errors.As(err, &ve):
		// An error event: the caller reads it from the bytes, as its SDK expects.
		e := b.interruption(err)
		b.settle(e.Class, e)
	default:
		e := b.interruption(err)
		b.err = e
		b.settle(e.Class, e)
	}
}

// touch resets the idle timer after data (and after keep-alives when they count).
func (b *liveBody) touch(keepAlive bool) {
	if b.idle != nil && !b.done.Load() && (!keepAlive || b.t.c.cfg.stream.keepAliveCounts) {
		b.idle.Reset(b.t.c.cfg.stream.idle)
	}
}

// interruption classifies a failure after the hand-over.
func (b *liveBody) interruption(err error) *Error {
	a := b.a
	e := &Error{Class: ClassStreamInterrupted, Upstream: a.up.Name, Model: a.call.Model, Err: err}
	cause := context.Cause(b.actx)
	switch {
	case errors.Is(cause, ErrStreamTimeout):
		e.Err = ErrStreamTimeout
	case b.x.req.Context().Err() != nil:
		e.Class, e.Err = ClassCanceled, b.x.req.Context().Err()
	case errors.Is(cause, ErrIdleTimeout):
		e.Err = ErrIdleTimeout
	}
	var ve *Error
	if errors.As(err, &ve) {
		e.Status, e.Type, e.Code, e.Message, e.RequestID = ve.Status, ve.Type, ve.Code, ve.Message, ve.RequestID
	}
	e.Redact(a.call.APIKey)
	return e
}

// settle records the committed attempt's outcome once and releases what it holds.
func (b *liveBody) settle(class Class, e *Error) {
	b.settleOnce.Do(func() {
		b.done.Store(true)
		if b.idle != nil {
			b.idle.Stop()
		}
		a := b.a
		a.latency = time.Since(a.start) - a.limiterWait
		if e == nil && class != ClassNone {
			e = &Error{Class: class, Upstream: a.up.Name, Model: a.call.Model}
		}
		usage := b.usage.Load()
		b.r.record(a, e, usage)
		a.settle(b.t.c, class, usage)
		b.r.releasePartition(usage)
		if e != nil {
			e.Attempts = b.r.trace
		}
	})
}

// Close releases the upstream connection and settles the attempt if it has not ended:
// a stream closed early counts as canceled by the caller. It is idempotent.
func (b *liveBody) Close() error {
	b.closeOnce.Do(func() {
		if b.cancel != nil {
			b.cancel(context.Canceled)
		}
		if b.ps != nil {
			_ = b.ps.Close()
		}
		_ = b.raw.Close()
		if b.r != nil {
			b.settle(ClassCanceled, nil)
			b.cancelTotal()
		}
	})
	return nil
}

// take moves buffered bytes into p and reports how many.
func (r *recorder) take(p []byte) int {
	if len(r.buf) == 0 {
		return 0
	}
	n := copy(p, r.buf)
	if n == len(r.buf) {
		r.buf = r.buf[:0]
	} else {
		r.buf = r.buf[n:]
	}
	return n
}
