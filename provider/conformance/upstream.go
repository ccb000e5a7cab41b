package conformance

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
)

// maxRequestBody bounds a request body the upstream reads: far above any scenario's.
const maxRequestBody = 8 << 20

// exchange is one call an upstream served.
type exchange struct {
	seen   *Seen
	reply  *Reply // nil when the case had no reply left
	status int    // the HTTP status the reply was sent with
}

// upstream is the scripted vendor one case runs against. It hands out the case's replies
// in order, logs each exchange and counts response bodies not yet closed. It is safe for
// concurrent use.
type upstream struct {
	target *Target
	stream bool // the case streams: what Seen.Stream must say

	// custom, when set, answers every request instead of the Wire (RunEmbed).
	custom func(*http.Request) *WireResponse

	mu       sync.Mutex
	replies  []Reply
	log      []exchange
	problems []string
	open     int
}

func newUpstream(target *Target, stream bool, replies []Reply) *upstream {
	return &upstream{target: target, stream: stream, replies: replies}
}

// problem records a failure of the adapter that no call's result shows.
func (u *upstream) problem(format string, args ...any) {
	u.mu.Lock()
	u.problems = append(u.problems, fmt.Sprintf(format, args...))
	u.mu.Unlock()
}

// take logs a call and returns its reply, or nil when the case has none left.
func (u *upstream) take(seen *Seen) (*Reply, int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	n := len(u.log)
	var r *Reply
	if n < len(u.replies) {
		r = &u.replies[n]
	} else {
		u.problems = append(u.problems, fmt.Sprintf("upstream received call %d; the case scripts %d", n+1, len(u.replies)))
	}
	u.log = append(u.log, exchange{seen: seen, reply: r})
	return r, n
}

// setStatus records the status exchange n was answered with.
func (u *upstream) setStatus(n, status int) {
	u.mu.Lock()
	u.log[n].status = status
	u.mu.Unlock()
}

// exchanges returns a copy of the log.
func (u *upstream) exchanges() []exchange {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]exchange(nil), u.log...)
}

// report returns the problems recorded so far and, when bodies is set, one for every
// response body the adapter left open.
func (u *upstream) report(bodies bool) []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	out := append([]string(nil), u.problems...)
	if bodies && u.open != 0 {
		out = append(out, fmt.Sprintf("%d response bodies left open: the adapter must close every body it receives", u.open))
	}
	return out
}

// serve is the Script side of the upstream: it takes the reply for a call.
func (u *upstream) serve(seen *Seen) (*Reply, error) {
	if seen == nil {
		seen = &Seen{}
	}
	seen.Stream = u.stream
	r, n := u.take(seen)
	if r == nil {
		return nil, errors.New("conformance: the case has no reply left for this call")
	}
	status, err := u.target.Script.Render(r, seen)
	if err != nil {
		u.problem("Script.Render: %v", err)
		return nil, err
	}
	u.setStatus(n, status)
	return r, nil
}

// respond is the Wire side of the upstream: it answers one HTTP request.
func (u *upstream) respond(req *http.Request) *WireResponse {
	if u.custom != nil {
		return u.custom(req)
	}
	body, err := io.ReadAll(io.LimitReader(req.Body, maxRequestBody))
	if err != nil {
		u.problem("reading the request body: %v", err)
	}
	seen, err := u.target.Wire.Decode(req, body)
	if err != nil {
		u.problem("request not in the vendor's format: %v", err)
	}
	if seen != nil && seen.Stream != u.stream {
		u.problem("request asked for stream=%t, want %t", seen.Stream, u.stream)
	}
	if seen == nil {
		seen = &Seen{Stream: u.stream}
	}
	r, n := u.take(seen)
	if r == nil {
		return harnessError("the case has no reply left for this call")
	}
	wr, err := u.target.Wire.Render(r, seen)
	if err != nil || wr == nil {
		u.problem("Wire.Render: %v", err)
		return harnessError("Wire.Render failed")
	}
	u.setStatus(n, wr.Status)
	return wr
}

// harnessError is the answer to a call the case cannot serve.
func harnessError(msg string) *WireResponse {
	return &WireResponse{Status: http.StatusTeapot, Header: http.Header{"Content-Type": {"text/plain"}},
		Body: []byte("conformance: " + msg)}
}

// memTransport answers requests in memory, with the same bytes a server would send. It
// starts no goroutine, so it works inside a testing/synctest bubble.
type memTransport struct{ up *upstream }

func (m memTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		defer req.Body.Close()
	}
	if err := req.Context().Err(); err != nil {
		return nil, err
	}
	wr := m.up.respond(req)
	status := wr.Status
	if status == 0 {
		status = http.StatusOK
	}
	h := wr.Header.Clone()
	if h == nil {
		h = http.Header{}
	}
	return &http.Response{
		Status:        strconv.Itoa(status) + " " + http.StatusText(status),
		StatusCode:    status,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        h,
		Body:          &memBody{r: bytes.NewReader(wr.Body)},
		ContentLength: int64(len(wr.Body)),
		Request:       req,
	}, nil
}

// memBody is an in-memory response body. Close may be called concurrently with Read.
type memBody struct {
	r      *bytes.Reader
	closed atomic.Bool
}

var errBodyClosed = errors.New("conformance: read on closed body")

func (b *memBody) Read(p []byte) (int, error) {
	if b.closed.Load() {
		return 0, errBodyClosed
	}
	return b.r.Read(p)
}

func (b *memBody) Close() error { b.closed.Store(true); return nil }

// handler serves the upstream over real HTTP.
func (u *upstream) handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		wr := u.respond(r)
		for k, v := range wr.Header {
			w.Header()[k] = v
		}
		status := wr.Status
		if status == 0 {
			status = http.StatusOK
		}
		w.WriteHeader(status)
		_, _ = w.Write(wr.Body)
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
	})
}

// tracker wraps a transport and counts the response bodies not yet closed.
type tracker struct {
	base http.RoundTripper
	up   *upstream
}

func (t *tracker) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err != nil || resp == nil || resp.Body == nil {
		return resp, err
	}
	t.up.mu.Lock()
	t.up.open++
	t.up.mu.Unlock()
	resp.Body = &trackedBody{ReadCloser: resp.Body, up: t.up}
	return resp, nil
}

// trackedBody reports its first Close to the upstream.
type trackedBody struct {
	io.ReadCloser
	up   *upstream
	once sync.Once
}

func (b *trackedBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(func() {
		b.up.mu.Lock()
		b.up.open--
		b.up.mu.Unlock()
	})
	return err
}
