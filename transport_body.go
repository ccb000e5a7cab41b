package llmclient

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/llmclient/llmclient/internal/httpx"
	"github.com/llmclient/llmclient/internal/sse"
)

// liveBody is the body of a response handed to the caller while its upstream is still
// sending: a committed stream, or a one-shot body larger than the replay limit. It first
// delivers what was read before the hand-over, then reads on. A guarded stream is read
// through its Dialect's decoder (the committed attempt's recv), which tells content from
// keep-alives for the idle timeout, sees the vendor's end marker and catches a cut; the
// bytes go to the caller unchanged. The committed attempt settles once: at the end, at
// Close (after the end marker: a success), at a timeout, or when the body is dropped.
//
// Read must not be called concurrently with itself; Close may be called at any time, from
// any goroutine, more than once.
type liveBody struct {
	raw io.ReadCloser // the upstream body
	rec *recorder     // what was read from raw and not yet delivered
	cm  *committed    // set once the call committed
	// decoding: the committed attempt's decoder reads raw through rec; after it saw the
	// end (or an in-band error event) the rest passes through.
	decoding bool
	// sawEnd: the decoder read the end marker or an in-band error event the caller reads,
	// and Close reads the body on to its end before closing it (httpx.CloseAfterEnd), so
	// that its connection can be reused.
	sawEnd bool
	after  httpx.AfterEnd // reads raw past the end marker
	err    error          // sticky: returned once everything read was delivered
	mu     sync.Mutex     // held by Read while it reads; Close parses what was read under it
	closed sync.Once
	// pre is what the decoder saw before the commit point, for the committed attempt;
	// endedEarly: the stream ended before any content.
	pre        Chunk
	endedEarly bool
	// ends follows the end of the bytes the decoder read: rec's, or, for a stream the
	// caller asked compressed, those decoded from them.
	ends *eventTail
	// cont is set for a stream the transport continues after a break
	// (transport_continue.go).
	cont *txCont
	// dropped settles the attempt of a body the caller drops without Close; Close stops
	// it, so that the attempt and the upstream body go with the body's own collection.
	dropped runtime.Cleanup
	// wantRead is set while the caller waits for mu, which stops readAhead; hand is how
	// it waits.
	wantRead atomic.Bool
	hand     handoff
}

func newLiveBody(raw io.ReadCloser, rec *recorder, decoding bool) *liveBody {
	if rec == nil {
		rec = &recorder{r: raw}
	}
	return &liveBody{raw: raw, rec: rec, decoding: decoding, ends: &rec.eventTail}
}

// Read delivers the bytes read so far, then reads on. A zero-length read returns at once.
func (b *liveBody) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	b.wantRead.Store(true)
	b.hand.lock(&b.mu)
	defer b.readDone()
	b.wantRead.Store(false)
	if b.cm != nil && b.cm.away.Load() {
		b.cm.away.Store(false) // the caller is back for what was read ahead
	}
	for {
		if n := b.rec.take(p); n > 0 {
			return n, nil
		}
		if c := b.cont; c != nil && len(c.out) > 0 {
			n := copy(p, c.out)
			c.out = c.out[n:]
			return n, nil
		}
		if b.err != nil {
			return 0, b.err
		}
		if b.decoding {
			b.decode(false)
			continue
		}
		n, err := b.readRaw(p)
		if err != nil {
			b.rawEnd(err)
		}
		if n > 0 || err == nil {
			return n, nil
		}
	}
}

// readDone ends a Read: the caller read now (the committed attempt's left), and is away
// until it reads again.
func (b *liveBody) readDone() {
	if cm := b.cm; cm != nil && cm.idle > 0 {
		cm.left.Store(int64(time.Since(cm.base)) + 1)
	}
	b.mu.Unlock()
}

// readAhead reads the upstream while the caller is away, into what the body holds for it,
// as a typed stream's read-ahead does: the idle timeout then times the upstream, a stream
// that ends settles and gives its leases back at once, and a continuation is made when
// the stream breaks. It stops when the caller reads again, at the body's end, or once
// the body holds maxAheadBytes the caller has not read. From its start the caller is
// away: once it has not read for the phase's idle limit, what the read-ahead reads ends
// the stream (and the attempt's watchdog ends it if nothing comes), however lively the
// upstream: bytes do not wait unread for longer than an idle period.
func (b *liveBody) readAhead() {
	for !b.wantRead.Load() {
		if !b.mu.TryLock() {
			return // the caller reads, or closes
		}
		cm := b.cm
		if b.err != nil || b.sawEnd || cm.settled.Load() && !(b.cont != nil && b.cont.active) {
			b.hand.unlock(&b.mu, &b.wantRead)
			return
		}
		if !cm.away.Load() {
			cm.away.Store(true)
		}
		held := len(b.rec.buf)
		if b.cont != nil {
			held += len(b.cont.out)
		}
		if held >= maxAheadBytes {
			b.hand.unlock(&b.mu, &b.wantRead)
			return // paused: the watchdog ends the stream if the caller stays away
		}
		if b.decoding {
			b.decode(true)
		} else {
			var p [16 << 10]byte
			n, err := b.readRaw(p[:])
			b.rec.buf = append(b.rec.buf, p[:n]...)
			if err != nil {
				b.rawEnd(err)
			}
		}
		b.hand.unlock(&b.mu, &b.wantRead)
	}
}

// readRaw reads the upstream body past what the decoder read. After the end marker (or
// an in-band error event) it reads within httpx.AfterEnd's bounds: the content is over,
// and an upstream that holds the body open must not hold the caller. Before it, in a body
// passed through raw, each read is a wait on the upstream, timed by the committed
// attempt's idle timeout until the attempt settles; any bytes are progress.
func (b *liveBody) readRaw(p []byte) (int, error) {
	if b.sawEnd {
		if b.after.Body == nil {
			b.after.Body = b.raw
		}
		return b.after.Read(p)
	}
	cm := b.cm
	if cm.idle <= 0 || cm.settled.Load() {
		return b.raw.Read(p)
	}
	cm.readAt.Store(int64(time.Since(cm.base)) + 1)
	n, err := b.raw.Read(p)
	cm.readAt.Store(0)
	return n, err
}

// decode reads one event through the decoder, which records its bytes for delivery;
// ahead when the read-ahead reads.
func (b *liveBody) decode(ahead bool) {
	c := b.cont
	if c != nil && c.active {
		b.relay()
		return
	}
	ch, err := b.cm.recv()
	if err == nil {
		if c != nil && !ch.KeepAlive && !b.rec.tail {
			c.acc.add(&ch)
		}
		return
	}
	if c != nil {
		if err != io.EOF && ahead && b.cm.unread.Load() {
			// Ended for a caller away too long: no continuation runs without it. Its next
			// Read reads the break (the closed upstream's) and decides.
			return
		}
		if err != io.EOF {
			var ve *Error
			inBand := errors.As(err, &ve) && !errors.Is(err, io.ErrUnexpectedEOF) && b.rec.bound == b.rec.passed
			ok, ferr := b.resume(err)
			if ok || ferr != nil {
				b.rec.drop(inBand) // the caller never sees the half event, nor the error event
				if ferr != nil {
					b.err = ferr
				}
				return
			}
			b.cm.releaseCall(nil) // not continued: the call ends here
		}
		b.rec.flush()
	}
	b.decoding = false
	var ve *Error
	switch {
	case err == io.EOF:
		b.sawEnd = true     // raw's end marker: a continuation's is read by relay
		b.cm.finish(io.EOF) // the end marker: what follows passes through
	case errors.As(err, &ve):
		// An in-band error event: the caller reads it from the bytes, as its SDK expects —
		// unless the attempt had ended otherwise first (a timeout expired it and the event
		// is what was cut), or the bytes stop inside an event (the upstream cut it): then
		// the SDK could not see an error, and Read reports the interruption.
		if e := b.cm.finish(err); e != nil && (!errors.Is(e, err) || !b.ends.atEventEnd()) {
			b.err = e
		} else {
			b.sawEnd = true // the upstream ends the body after the event: Close lets it
		}
	default:
		if e := b.cm.finish(err); e != nil {
			b.err = e
		} else {
			b.err = errBodyClosed
		}
	}
}

// inBandEnd reports whether err, the decoder's error on what was read, is a whole in-band
// error event: the upstream ends the body after it.
func (b *liveBody) inBandEnd(err error) bool {
	var ve *Error
	return errors.As(err, &ve) && !errors.Is(err, io.ErrUnexpectedEOF) &&
		!errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) && b.ends.atEventEnd()
}

// errBodyClosed is what Read returns after Close.
var errBodyClosed = errors.New("llmclient: read on closed response body")

// rawEnd settles a body read raw (a one-shot body, or the rest after the end marker).
// A read's end after the attempt settled is the settlement's answer: a clean EOF only
// when the decoder saw the end already (what follows it does not matter), the attempt's
// error when it ended otherwise first (a timeout, the caller's context: the body is cut,
// even when the base transport reports the cut as the body's end).
func (b *liveBody) rawEnd(err error) {
	if err == io.EOF && !b.sawEnd {
		if cause := context.Cause(b.cm.ctx); cause != nil {
			err = cause // the body ended because the attempt did: a cut, not its end
		}
	}
	switch {
	case err == io.EOF:
		b.err = io.EOF
		b.cm.finish(io.EOF)
	default:
		if e := b.cm.finish(err); e != nil {
			b.err = e
		} else if b.cm.closed.Load() {
			b.err = errBodyClosed
		} else {
			b.err = io.EOF // settled by the end marker
		}
	}
}

// Close releases the upstream connection and settles the attempt if it has not ended.
// Before it does, it parses what was already read from the upstream, without waiting for
// more: an SDK that stops reading at the end marker and closes has received a whole
// stream, which counts as a success. It is idempotent.
func (b *liveBody) Close() error {
	b.closed.Do(func() {
		if b.cm == nil {
			_ = b.raw.Close()
			return
		}
		if b.mu.TryLock() {
			if b.decoding && (b.cont == nil || !b.cont.active) {
				b.rec.r = eofReader{} // parse only what was read; never block on the network
				b.rec.pend, b.rec.poff, b.rec.perr = nil, 0, nil
				for {
					if _, err := b.cm.recv(); err != nil {
						b.sawEnd = err == io.EOF || b.inBandEnd(err)
						break
					}
				}
			}
			if b.sawEnd && b.err == nil {
				// The end marker was read and the body's end was not: read on to it (a
				// few bytes, bounded in size and time) before the attempt's context is
				// canceled, or net/http closes the connection instead of reusing it.
				_ = httpx.CloseAfterEnd(b.raw)
			}
			b.hand.unlock(&b.mu, &b.wantRead)
		}
		if c := b.cont; c != nil {
			c.link.close()
			c.closeRaws()
		} else {
			b.cm.close()
		}
		_ = b.raw.Close()
		b.dropped.Stop()
	})
	return nil
}

// abort releases a body whose attempt failed after all (its timer fired at the hand-over).
func (b *liveBody) abort(ps ProviderStream) {
	if ps != nil {
		_ = ps.Close()
	}
	_ = b.raw.Close()
}

// eofReader is a reader at its end.
type eofReader struct{}

func (eofReader) Read([]byte) (int, error) { return 0, io.EOF }

// recorder keeps what is read through it until it is delivered.
//
// A recorder in event mode (a stream the transport may continue, see txCont) hands its
// reader, the stream's decoder, one server-sent event at a time and delivers only the
// events handed over: at a break, the caller holds exactly what was decoded. The bytes
// past the last event the decoder took wait in pend.
type recorder struct {
	r   io.Reader
	buf []byte
	eventTail

	events bool
	w      eventWriter // told each whole event handed over, in event mode
	pend   []byte      // read from r; pend[poff:] is not yet handed to the decoder
	poff   int
	perr   error // r's error, returned once pend is handed over
	// Byte counts since the start: handed to the decoder, delivered to the caller, and
	// the ends of the last two events handed over.
	passed, out, bound, prevBound int
	lineStart, prevCR             bool // the scan's state: at a line's start, after a CR
	// tail: the bytes handed over last end without an event's end (the stream ended).
	tail bool
}

// maxHeld bounds what a recorder holds for the caller: the prefix before the commit point
// (maxStreamPrefix), a read-ahead (maxAheadBytes) and one event of the largest size the
// decoders take (sse.DefaultMaxEventSize). A decoder that reads past it without returning
// — events it drops, lines that never end an event — gets an error wrapping
// sse.ErrEventTooLarge, which fails the attempt as an event too large does.
const maxHeld = maxStreamPrefix + maxAheadBytes + sse.DefaultMaxEventSize

// errHeld is the recorder's read error past maxHeld.
var errHeld = fmt.Errorf("llmclient: the upstream sent more than %d bytes without an event to deliver: %w", maxHeld, sse.ErrEventTooLarge)

func (r *recorder) Read(p []byte) (int, error) {
	if r.events {
		return r.readEvent(p)
	}
	n, err := r.r.Read(p)
	r.buf = append(r.buf, p[:n]...)
	r.note(p[:n])
	if len(r.buf) > maxHeld {
		return n, errHeld
	}
	return n, err
}

// readEvent hands p the bytes up to the end of the next event.
func (r *recorder) readEvent(p []byte) (int, error) {
	var src []byte
	var err error
	fromPend := r.poff < len(r.pend)
	if fromPend {
		src = r.pend[r.poff:]
	} else {
		if r.perr != nil {
			return 0, r.perr
		}
		var n int
		n, err = r.r.Read(p)
		src = p[:n]
	}
	lim := min(len(src), len(p))
	cut, whole := r.scan(src[:lim])
	n := cut
	if fromPend {
		copy(p, src[:cut])
		r.poff += cut
		if r.poff == len(r.pend) {
			r.pend, r.poff = r.pend[:0], 0
			err, r.perr = r.perr, nil
		}
	} else if cut < len(src) {
		r.pend, r.poff = append(r.pend[:0], src[cut:]...), 0
		r.perr, err = err, nil
	}
	r.buf = append(r.buf, p[:n]...)
	r.passed += n
	r.note(p[:n])
	if len(r.buf) > maxHeld {
		return n, errHeld
	}
	if whole {
		r.prevBound, r.bound = r.bound, r.passed
		if r.w != nil {
			start := len(r.buf) - (r.bound - r.prevBound)
			r.w.event(r.buf[max(start, 0):])
		}
	} else if err != nil && n > 0 {
		r.tail = true
	}
	return n, err
}

// scan returns the length of p up to the end of the first event that ends in it (and
// true), or len(p). It reads no further than that end.
func (r *recorder) scan(p []byte) (int, bool) {
	i := 0
	for !r.prevCR && i < len(p) {
		// Line feeds only, the common case: jump from one to the next.
		j := bytes.IndexByte(p[i:], '\n')
		line := p[i:]
		if j >= 0 {
			line = p[i : i+j]
		}
		if bytes.IndexByte(line, '\r') >= 0 {
			break // carriage returns: byte by byte from here
		}
		if j < 0 {
			r.lineStart = r.lineStart && len(line) == 0
			return len(p), false
		}
		if j == 0 && r.lineStart {
			r.lineStart = false
			return i + 1, true
		}
		r.lineStart = true
		i += j + 1
	}
	for ; i < len(p); i++ {
		switch p[i] {
		case '\n':
			if r.prevCR {
				r.prevCR = false
				continue
			}
			if r.lineStart {
				r.lineStart = false
				return i + 1, true
			}
			r.lineStart = true
		case '\r':
			r.prevCR = true
			if r.lineStart {
				r.lineStart = false
				return i + 1, true
			}
			r.lineStart = true
		default:
			r.prevCR, r.lineStart = false, false
		}
	}
	return len(p), false
}

// flush makes everything read deliverable: the stream ended, or will not be continued.
func (r *recorder) flush() {
	rest := r.pend[r.poff:]
	r.buf = append(r.buf, rest...)
	r.passed += len(rest)
	r.pend, r.poff = nil, 0
	r.bound = r.passed
}

// drop forgets what was read and not delivered past the end of the last whole event, or
// of the one before it (last: the last event is an error event the caller must not see).
func (r *recorder) drop(last bool) {
	keep := r.bound
	if last {
		keep = r.prevBound
	}
	keep = max(keep, r.out)
	r.buf = r.buf[:keep-r.out]
	r.pend, r.poff, r.perr = nil, 0, nil
	r.passed, r.bound = keep, keep
}

// eventTail holds the last bytes read, for atEventEnd.
type eventTail struct{ tail [4]byte }

// note follows the bytes p, just read.
func (e *eventTail) note(p []byte) {
	n := len(p)
	if n >= len(e.tail) {
		copy(e.tail[:], p[n-len(e.tail):])
	} else if n > 0 {
		copy(e.tail[:], e.tail[n:])
		copy(e.tail[len(e.tail)-n:], p)
	}
}

// atEventEnd reports whether the bytes read so far end with the blank line that ends a
// server-sent event (LF LF, CR CR or CR LF CR LF).
func (e *eventTail) atEventEnd() bool {
	t := e.tail
	return t[3] == '\n' && (t[2] == '\n' || t[0] == '\r' && t[1] == '\n' && t[2] == '\r') || t[3] == '\r' && t[2] == '\r'
}

// tailReader is a reader that follows the end of what was read through it.
type tailReader struct {
	io.ReadCloser
	eventTail
}

func (r *tailReader) Read(p []byte) (int, error) {
	n, err := r.ReadCloser.Read(p)
	r.note(p[:n])
	return n, err
}

func (r *recorder) Close() error { return nil }

// take moves deliverable bytes into p and reports how many.
func (r *recorder) take(p []byte) int {
	avail := r.buf
	if r.events {
		avail = r.buf[:r.bound-r.out]
	}
	if len(avail) == 0 {
		return 0
	}
	n := copy(p, avail)
	r.out += n
	if n == len(r.buf) {
		r.buf = r.buf[:0]
	} else {
		r.buf = r.buf[n:]
	}
	return n
}
