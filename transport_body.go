package llmclient

import (
	"errors"
	"io"
	"sync"
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
	err      error      // sticky: returned once everything read was delivered
	mu       sync.Mutex // held by Read while it reads; Close parses what was read under it
	closed   sync.Once
	// pre is what the decoder saw before the commit point, for the committed attempt;
	// endedEarly: the stream ended before any content.
	pre        Chunk
	endedEarly bool
	// ends follows the end of the bytes the decoder read: rec's, or, for a stream the
	// caller asked compressed, those decoded from them.
	ends *eventTail
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
	b.mu.Lock()
	defer b.mu.Unlock()
	for {
		if n := b.rec.take(p); n > 0 {
			return n, nil
		}
		if b.err != nil {
			return 0, b.err
		}
		if b.decoding {
			b.decode()
			continue
		}
		n, err := b.raw.Read(p)
		if err != nil {
			b.rawEnd(err)
		}
		if n > 0 || err == nil {
			return n, nil
		}
	}
}

// decode reads one event through the decoder, which records its bytes for delivery.
func (b *liveBody) decode() {
	_, err := b.cm.recv()
	if err == nil {
		return
	}
	b.decoding = false
	var ve *Error
	switch {
	case err == io.EOF:
		b.cm.finish(io.EOF) // the end marker: what follows passes through
	case errors.As(err, &ve):
		// An in-band error event: the caller reads it from the bytes, as its SDK expects —
		// unless the attempt had ended otherwise first (a timeout expired it and the event
		// is what was cut), or the bytes stop inside an event (the upstream cut it): then
		// the SDK could not see an error, and Read reports the interruption.
		if e := b.cm.finish(err); e != nil && (!errors.Is(e, err) || !b.ends.atEventEnd()) {
			b.err = e
		}
	default:
		if e := b.cm.finish(err); e != nil {
			b.err = e
		} else {
			b.err = errBodyClosed
		}
	}
}

// errBodyClosed is what Read returns after Close.
var errBodyClosed = errors.New("llmclient: read on closed response body")

// rawEnd settles a body read raw (a one-shot body, or the rest after the end marker).
// A read failure after the attempt settled is the settlement's answer: a clean EOF only
// when the decoder saw the end already (what follows it does not matter), the attempt's
// error when it ended otherwise first (a timeout, the caller's context: the body is cut).
func (b *liveBody) rawEnd(err error) {
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
		if b.decoding && b.mu.TryLock() {
			b.rec.r = eofReader{} // parse only what was read; never block on the network
			for {
				if _, err := b.cm.recv(); err != nil {
					break
				}
			}
			b.mu.Unlock()
		}
		b.cm.close()
		_ = b.raw.Close()
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
type recorder struct {
	r   io.Reader
	buf []byte
	eventTail
}

func (r *recorder) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	r.buf = append(r.buf, p[:n]...)
	r.note(p[:n])
	return n, err
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
