package llmclient

import (
	"bytes"
	"context"
	"errors"
	"io"
	"mime"
	"net/http"
	"strconv"
	"time"

	"github.com/llmclient/llmclient/internal/httpx"
)

// maxStreamPrefix bounds the bytes of a stream kept before its first content event, for
// replay to the caller: a stream that sends more than this without content is still
// served, but a failure before its first content is then reported as an *Error rather than
// replayed.
const maxStreamPrefix = 1 << 20

// guard bounds one attempt: a streaming call by the first-token timeout, a one-shot call
// by the upstream's attempt timeout. The attempt's context outlives the layer when the
// response body is still being read from the upstream; the body then owns its cancel.
func (t *Transport) guard(next attemptFunc) attemptFunc {
	return func(ctx context.Context, a *attempt) error {
		x := a.tx
		limit, cause := a.up.timeout, ErrAttemptTimeout
		if x.call.Stream {
			limit, cause = t.c.cfg.stream.firstToken, ErrFirstTokenTimeout
		}
		if dl, ok := ctx.Deadline(); ok && limit > 0 && dl.Sub(a.start) <= limit {
			limit = 0 // the caller's deadline comes first: no timer needed
		}
		actx, cancel := context.WithCancelCause(ctx)
		var timer *time.Timer
		if limit > 0 {
			timer = time.AfterFunc(limit, func() { cancel(cause) })
		}
		err := next(actx, a)
		fired := timer != nil && !timer.Stop()
		if err == nil && fired && x.live != nil {
			// The timer fired as the attempt succeeded: its context, and so its body, is gone.
			x.live.abort()
			x.live, x.resp = nil, nil
			err = &Error{Class: ClassTimeout, Upstream: a.up.Name, Model: a.call.Model, Err: cause}
		}
		if err != nil {
			if errors.Is(context.Cause(actx), cause) && ctx.Err() == nil {
				e := err.(*Error)
				e.Class, e.Err = ClassTimeout, cause
			}
			cancel(context.Canceled)
			return err
		}
		if x.live != nil {
			x.live.actx, x.live.cancel = actx, cancel
		} else {
			cancel(context.Canceled)
		}
		return nil
	}
}

// send is the innermost step of a transport attempt: one HTTP round trip to the attempt's
// upstream, its error response classified by the upstream's Dialect, its stream read up
// to the first content event.
func (t *Transport) send(ctx context.Context, a *attempt) error {
	x := a.tx
	x.resp, x.live = nil, nil
	tu := t.byUp[a.up]
	out := x.req.Clone(ctx)
	out.URL = target(x.req.URL, x.match, tu)
	out.Host = ""
	body, size, err := x.body.open()
	if err != nil {
		return &Error{Class: ClassBadRequest, Message: "reopening the request body", Err: err}
	}
	out.Body, out.ContentLength, out.GetBody = body, size, x.body.getBody()
	if body == nil {
		out.Body = nil
	}
	if a.call.APIKey != "" || tu != x.match {
		tu.d.Authorize(out.Header, a.call.APIKey)
	} else {
		a.call.APIKey = x.sdkKey // the caller's key goes out: redact it like a pool key
	}
	resp, err := t.base.RoundTrip(out)
	if err != nil {
		if errors.Is(err, io.EOF) {
			// The connection closed before the response: a network failure, retried.
			return &Error{Class: ClassNetwork, Err: err}
		}
		return err
	}
	if resp.StatusCode >= 400 {
		return t.errorResponse(a, tu, resp)
	}
	if isEventStream(resp.Header) {
		if x.known && x.call.Stream {
			return t.openStream(ctx, a, tu, resp)
		}
		resp.Request = x.req
		x.resp = resp
		x.live = newLiveBody(t, x, resp.Body, nil, nil)
		resp.Body = x.live
		return nil
	}
	return t.readResponse(a, resp)
}

// errorResponse reads, closes and classifies an error response, keeping a replayable copy
// for the caller in case it is the last one.
func (t *Transport) errorResponse(a *attempt, tu *txUpstream, resp *http.Response) error {
	x := a.tx
	data, rerr := httpx.ReadLimited(resp.Body, httpx.MaxErrorBody)
	httpx.DrainClose(resp.Body)
	e := tu.d.ClassifyError(resp.StatusCode, resp.Header, data)
	if e == nil {
		e = &Error{Class: ClassUnknown, Status: resp.StatusCode}
	}
	if e.Status == 0 {
		e.Status = resp.StatusCode
	}
	if rerr != nil && !errors.Is(rerr, httpx.ErrTooLarge) {
		e.Err = rerr
	}
	x.keep(a, resp, data)
	return e
}

// keep stores a failed attempt's response, its body replaced by data with the attempt's
// key redacted, as the answer to the caller should the call end with it.
func (x *txCall) keep(a *attempt, resp *http.Response, data []byte) {
	if key := a.call.APIKey; key != "" && bytes.Contains(data, []byte(key)) {
		data = bytes.ReplaceAll(data, []byte(key), []byte("[REDACTED]"))
	}
	cp := *resp
	cp.Header = resp.Header.Clone()
	cp.Header.Del("Content-Encoding")
	cp.Uncompressed = resp.Uncompressed || resp.Header.Get("Content-Encoding") != ""
	cp.Header.Set("Content-Length", strconv.Itoa(len(data)))
	cp.ContentLength = int64(len(data))
	cp.TransferEncoding = nil
	cp.Body = io.NopCloser(bytes.NewReader(data))
	cp.Request = x.req
	x.failed, x.failedNum = &cp, a.number
}

// readResponse reads a one-shot response whole, up to the replay limit, so that the
// attempt is settled, and a body cut short is retried, before the caller sees it. A larger
// body is handed over with its remainder still on the wire.
func (t *Transport) readResponse(a *attempt, resp *http.Response) error {
	x := a.tx
	max := t.cfg.maxBody
	data, err := io.ReadAll(io.LimitReader(resp.Body, max+1))
	if err != nil {
		httpx.DrainClose(resp.Body)
		return err
	}
	resp.Request = x.req
	if int64(len(data)) > max {
		rest := resp.Body
		x.live = newLiveBody(t, x, rest, nil, nil)
		x.live.rec.buf = data
		resp.Body = x.live
		x.resp = resp
		return nil
	}
	_ = resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(data))
	resp.ContentLength = int64(len(data))
	x.resp = resp
	return nil
}

// openStream reads a streaming response up to its first content event. Failures before it
// are the attempt's failures; at it, the response is committed and handed over with the
// events read so far replayed in front of the rest.
func (t *Transport) openStream(ctx context.Context, a *attempt, tu *txUpstream, resp *http.Response) error {
	x := a.tx
	rec := &recorder{r: resp.Body}
	view := *resp
	view.Body = rec
	ps := tu.d.NewStream(x.call.Shape, &view)
	lb := newLiveBody(t, x, resp.Body, ps, rec)
	for {
		ch, err := ps.Recv()
		if err == nil {
			if ch.Usage != nil {
				u := *ch.Usage
				lb.usage.Store(&u)
			}
			if !ch.HasContent() {
				continue
			}
		}
		switch {
		case err == nil:
			// committed at the first content event
		case err == io.EOF:
			// an answer without content: the caller sees it whole
			lb.ended = true
		default:
			_ = ps.Close()
			_ = resp.Body.Close()
			var e *Error
			if errors.As(err, &e) && len(rec.buf) <= maxStreamPrefix {
				// An in-band error event: should it end the call, the caller reads it.
				x.keep(a, resp, rec.buf)
			}
			return err
		}
		resp.Request = x.req
		resp.Body = lb
		x.resp, x.live = resp, lb
		return nil
	}
}

// isEventStream reports whether a response is a server-sent event stream.
func isEventStream(h http.Header) bool {
	mt, _, err := mime.ParseMediaType(h.Get("Content-Type"))
	return err == nil && mt == "text/event-stream"
}

// recorder keeps what is read through it until it is delivered.
type recorder struct {
	r   io.Reader
	buf []byte
}

func (r *recorder) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	r.buf = append(r.buf, p[:n]...)
	return n, err
}

func (r *recorder) Close() error { return nil }
