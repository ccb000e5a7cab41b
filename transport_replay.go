package llmclient

import (
	"bytes"
	"errors"
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
}

// readReplayBody takes over req.Body: it buffers a body up to max bytes.
func readReplayBody(req *http.Request, max int64) (*replayBody, error) {
	b := &replayBody{size: 0}
	if req.Body == nil || req.Body == http.NoBody {
		return b, nil
	}
	b.orig = req.Body
	if req.ContentLength > max && req.GetBody != nil {
		b.get, b.size = req.GetBody, req.ContentLength
		return b, nil
	}
	data, err := io.ReadAll(io.LimitReader(req.Body, max+1))
	if err != nil {
		_ = req.Body.Close()
		return nil, err
	}
	switch {
	case int64(len(data)) <= max:
		b.buf, b.size = data, int64(len(data))
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
	return b, nil
}

// replayable reports whether the body can be sent more than once.
func (b *replayBody) replayable() bool { return b.once == nil }

// open returns the body for one attempt.
func (b *replayBody) open() (io.ReadCloser, int64, error) {
	switch {
	case b.buf != nil:
		if len(b.buf) == 0 {
			return http.NoBody, 0, nil
		}
		return io.NopCloser(bytes.NewReader(b.buf)), b.size, nil
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
		return func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b.buf)), nil }
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
