package llmclient

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
)

// replayBody is a request body that attempts can send again.
type replayBody struct {
	buf  []byte                        // the whole body, when it fit
	get  func() (io.ReadCloser, error) // the request's GetBody, for a body too large to buffer
	once io.ReadCloser                 // a body too large that cannot be recreated: one attempt
	size int64                         // ContentLength of what is sent; -1 unknown
	used bool
	orig io.ReadCloser // the caller's body, closed once the call is done
	// first is the first attempt's reader of buf, allocated with it (readUpTo), or nil.
	first *bufferedBody
	// reopenFunc is b.reopen as a func value, made on first use and kept while b is reused
	// (a pooled call's body): binding the method value allocates.
	reopenFunc func() (io.ReadCloser, error)
}

// readReplayBody takes over req.Body into b: it buffers a body up to max bytes. When the
// request's context ends during the read of a body without GetBody (http.NewRequest sets
// one only for a body in memory, which cannot block), it closes the body, which ends a
// read blocked on it (a pipe, a connection), and returns the context's error, as
// net/http's Transport returns when the context ends. A body whose Read does not return
// on Close still holds it.
func readReplayBody(req *http.Request, max int64, b *replayBody) error {
	*b = replayBody{reopenFunc: b.reopenFunc}
	if req.Body == nil || req.Body == http.NoBody {
		return nil
	}
	b.orig = req.Body
	if req.ContentLength > max && req.GetBody != nil {
		b.get, b.size = req.GetBody, req.ContentLength
		return nil
	}
	var data []byte
	var held *bufferedBody
	var err error
	if ctx := req.Context(); ctx.Done() == nil || req.GetBody != nil {
		// Nothing can cancel the read, or the body is in memory (http.NewRequest sets
		// GetBody for a bytes.Buffer, bytes.Reader or strings.Reader only): a read that
		// cannot block needs no watch.
		data, held, err = readUpTo(req.Body, req.ContentLength, max)
	} else {
		stop := context.AfterFunc(ctx, func() { _ = req.Body.Close() })
		data, held, err = readUpTo(req.Body, req.ContentLength, max)
		if !stop() {
			if cerr := ctx.Err(); cerr != nil {
				b.orig = nil // closed
				return cerr
			}
		}
	}
	if err != nil {
		_ = req.Body.Close()
		b.orig = nil
		return err
	}
	switch {
	case int64(len(data)) <= max:
		b.buf, b.size, b.first = data, int64(len(data)), held
		if b.buf == nil {
			b.buf = []byte{}
		}
		_ = req.Body.Close()
		b.orig = nil
	case req.GetBody != nil:
		b.get, b.size = req.GetBody, req.ContentLength
	default:
		// Too large to buffer and no way to recreate it: one attempt, sending what was
		// read in front of the rest.
		b.once = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(data), req.Body), req.Body}
		b.size = req.ContentLength
	}
	return nil
}

// replayable reports whether the body can be sent more than once.
func (b *replayBody) replayable() bool { return b.once == nil }

// unread reports whether the body was too large to buffer, so that the Dialect could not
// inspect it.
func (b *replayBody) unread() bool { return b.once != nil || b.get != nil }

// open returns the body for one attempt.
func (b *replayBody) open() (io.ReadCloser, int64, error) {
	switch {
	case b.buf != nil:
		if len(b.buf) == 0 {
			return http.NoBody, 0, nil
		}
		if r := b.first; r != nil {
			b.first = nil
			r.Reset(b.buf)
			return r, b.size, nil
		}
		return newBufferedBody(b.buf), b.size, nil
	case b.get != nil:
		rc, err := b.get()
		return rc, b.size, err
	case b.once != nil:
		if b.used {
			return nil, 0, errors.New("llmclient: request body already sent")
		}
		b.used = true
		b.orig = nil // the base transport closes it now
		return b.once, b.size, nil
	}
	return nil, 0, nil
}

// getBody returns a GetBody for an attempt's request, so that the base transport can
// resend it on a connection that turns out dead; nil when the body cannot be recreated.
func (b *replayBody) getBody() func() (io.ReadCloser, error) {
	switch {
	case b.buf != nil && len(b.buf) > 0:
		if b.reopenFunc == nil {
			b.reopenFunc = b.reopen
		}
		return b.reopenFunc
	case b.get != nil:
		return b.get
	}
	return nil
}

// close closes the caller's body, when the transport still holds it.
func (b *replayBody) close() {
	if b.orig != nil {
		_ = b.orig.Close()
		b.orig = nil
	}
}

// reopen is GetBody for a buffered body.
func (b *replayBody) reopen() (io.ReadCloser, error) {
	return newBufferedBody(b.buf), nil
}

// readUpTo reads r whole when it holds at most max bytes, and otherwise returns max+1
// bytes of it. size is the length the request declares (-1 or 0 when unknown): with it,
// the body is read into one buffer of the right size, allocated together with a
// bufferedBody for it (held, not yet reading anything) when it is small (newHeld): a
// caller that hands the bytes on as a body uses held instead of allocating one.
//
// r is an io.ReadCloser, as both callers hold their body, and is read as one: converting
// it to an io.Reader would cost a method table look-up per call.
func readUpTo(r io.ReadCloser, size, max int64) (data []byte, held *bufferedBody, err error) {
	if size <= 0 || size > max {
		data, err = io.ReadAll(io.LimitReader(r, max+1))
		return data, nil, err
	}
	held, buf := newHeld(size)
	if err := readFull(r, buf); err != nil {
		if err == io.ErrUnexpectedEOF {
			return nil, nil, fmt.Errorf("llmclient: body shorter than its ContentLength %d: %w", size, err)
		}
		return nil, nil, err
	}
	// One byte more, into the room buf has for it (a local array would escape to the heap).
	n, err := r.Read(buf[size : size+1])
	if n > 0 { // longer than declared: read on, up to the limit
		rest, err := io.ReadAll(io.LimitReader(r, max-size))
		return append(buf[:size+1], rest...), held, err
	}
	if err != nil && err != io.EOF {
		return nil, nil, err
	}
	return buf, held, nil
}

// readFull is io.ReadFull(r, buf), returning its error only.
func readFull(r io.ReadCloser, buf []byte) error {
	n := 0
	var err error
	for n < len(buf) && err == nil {
		var nn int
		nn, err = r.Read(buf[n:])
		n += nn
	}
	switch {
	case n >= len(buf):
		return nil
	case n > 0 && err == io.EOF:
		return io.ErrUnexpectedEOF
	}
	return err
}

// newHeld returns a buffer of length size with room for one byte more and, for a size
// below 4 KiB, a bufferedBody in the same allocation (the smallest of a few sizes that
// holds it, at most twice the size), else nil.
func newHeld(size int64) (*bufferedBody, []byte) {
	switch {
	case size < 128:
		h := new(struct {
			bufferedBody
			data [128]byte
		})
		return &h.bufferedBody, h.data[:size]
	case size < 256:
		h := new(struct {
			bufferedBody
			data [256]byte
		})
		return &h.bufferedBody, h.data[:size]
	case size < 512:
		h := new(struct {
			bufferedBody
			data [512]byte
		})
		return &h.bufferedBody, h.data[:size]
	case size < 1024:
		h := new(struct {
			bufferedBody
			data [1024]byte
		})
		return &h.bufferedBody, h.data[:size]
	case size < 2048:
		h := new(struct {
			bufferedBody
			data [2048]byte
		})
		return &h.bufferedBody, h.data[:size]
	case size < 4096:
		h := new(struct {
			bufferedBody
			data [4096]byte
		})
		return &h.bufferedBody, h.data[:size]
	}
	return nil, make([]byte, size, size+1)
}
